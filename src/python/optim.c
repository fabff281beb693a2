/* optim.c: dtrain.torch's DistributedOptimizer (Horovod's horovod/torch/optimizer.py).
 *
 * DistributedOptimizer(optimizer, ...) returns an instance of a class made for it at the call,
 * type(<the optimizer's class name>, (optimizer.__class__,), {step, synchronize, ...}), built on the
 * same param_groups (the same dicts) and sharing the optimizer's state and defaults. With more than
 * one rank, a hook on each parameter's gradient accumulator (the AccumulateGrad node behind
 * p.expand_as(p)) starts an all-reduce of p.grad as soon as backward has produced it (after
 * backward_passes_per_step passes: the gradients of the passes in between accumulate locally), so
 * that the reductions overlap the rest of backward; step() (or synchronize()) waits for each,
 * writes the result into p.grad and then runs the base class's step.
 *
 * named_parameters' checks and the groups of groups=... are optim_names.c's.
 *
 * The instance's bookkeeping lives in attributes with Horovod's names (_handles, _allreduce_delay,
 * _parameter_names, ...). The methods are C functions bound as instance methods (hvd_tr_method):
 * args[0] is the optimizer. */
#include "python/train.h"

static PyObject *hook_fn;    /* grad_hook as a function, partial()-ed per parameter */
static PyObject *partial_fn; /* functools.partial */
static PyTypeObject *skip_type;

static const char too_many_passes[] =
    "Gradients were computed more than backward_passes_per_step times before call to step(). Increase "
    "backward_passes_per_step to accumulate gradients locally.";

/* the module's constant name (Average, Sum, Adasum), or NULL without an exception where it lacks it */
static PyObject *op_const(const char *name)
{
    PyObject *v = PyObject_GetAttrString(hvd_tr_module(), name);
    if (!v) PyErr_Clear();
    return v;
}

/* 1 when op is the module's constant name, 0 when not (or the module has no such constant), -1 */
static int op_is(PyObject *op, const char *name)
{
    PyObject *c = op_const(name);
    if (!c) return 0;
    int r = PyObject_RichCompareBool(op, c, Py_EQ);
    Py_DECREF(c);
    return r;
}

/* base.name(self, *args, **kw), base being the optimizer's own class */
static PyObject *call_base(PyObject *self, const char *name, PyObject *args, PyObject *kw)
{
    PyObject *base = PyObject_GetAttrString(self, "_dt_base_class"), *fn = NULL, *all = NULL, *r = NULL;
    if (!base) return NULL;
    if (!(fn = PyObject_GetAttrString(base, name))) goto done;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    if (!(all = PyTuple_New(n + 1))) goto done;
    Py_INCREF(self);
    PyTuple_SET_ITEM(all, 0, self);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(PyTuple_GET_ITEM(args, i));
        PyTuple_SET_ITEM(all, i + 1, PyTuple_GET_ITEM(args, i));
    }
    r = PyObject_Call(fn, all, kw);
done:
    Py_XDECREF(base);
    Py_XDECREF(fn);
    Py_XDECREF(all);
    return r;
}

static int set_bool(PyObject *o, const char *name, int v) { return PyObject_SetAttrString(o, name, v ? Py_True : Py_False); }

static int get_bool(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* delay[p] = bpps for every key of delay */
static int reset_delays(PyObject *self)
{
    PyObject *delay = PyObject_GetAttrString(self, "_allreduce_delay");
    PyObject *bpps = PyObject_GetAttrString(self, "backward_passes_per_step");
    int rc = -1;
    if (delay && bpps && PyDict_Check(delay)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        rc = 0;
        while (PyDict_Next(delay, &pos, &k, &v)) /* only values change: allowed while iterating */
            if (PyDict_SetItem(delay, k, bpps) < 0) {
                rc = -1;
                break;
            }
    }
    Py_XDECREF(delay);
    Py_XDECREF(bpps);
    return rc;
}

/* ---- starting the all-reduces ------------------------------------------------------------------ */

/* module.allreduce_async_(tensor, name=name, op=op[, prescale_factor, postscale_factor]) with
 * the optimizer's op; with Average, 1/f before the sum and f after it (the 1/size is the op's) */
static PyObject *start_allreduce(PyObject *self, const char *fn, PyObject *tensor, PyObject *name)
{
    PyObject *op = PyObject_GetAttrString(self, "op"), *f = NULL, *kw = NULL, *args = NULL, *h = NULL;
    if (!op) return NULL;
    if (!(f = PyObject_GetAttrString(self, "gradient_predivide_factor"))) goto done;
    double pre = PyFloat_AsDouble(f);
    if (pre == -1.0 && PyErr_Occurred()) goto done;
    if (!(kw = Py_BuildValue("{sOsO}", "name", name, "op", op))) goto done;
    int avg = op_is(op, "Average");
    if (avg < 0) goto done;
    if (avg && pre != 1.0) {
        PyObject *a = PyFloat_FromDouble(1.0 / pre), *b = PyFloat_FromDouble(pre);
        int e = !a || !b || PyDict_SetItemString(kw, "prescale_factor", a) < 0 ||
                PyDict_SetItemString(kw, "postscale_factor", b) < 0;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (e) goto done;
    }
    if (!(args = PyTuple_Pack(1, tensor))) goto done;
    h = hvd_tr_call(fn, args, kw);
done:
    Py_XDECREF(op);
    Py_XDECREF(f);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    return h;
}

/* p.grad, made zeros where backward gave none (this rank's graph did not reach p, another's may
 * have: every rank must still submit it) */
static PyObject *grad_of(PyObject *p)
{
    PyObject *g = PyObject_GetAttrString(p, "grad");
    if (!g || g != Py_None) return g;
    Py_DECREF(g);
    PyObject *zl = hvd_tr_torch_attr("zeros_like"), *d = NULL;
    if (zl && (d = PyObject_CallMethod(p, "detach", NULL)) && (g = PyObject_CallOneArg(zl, d)) &&
        PyObject_SetAttrString(p, "grad", g) < 0)
        Py_CLEAR(g);
    Py_XDECREF(zl);
    Py_XDECREF(d);
    return g;
}

/* (compressed, ctx) of p's gradient; *name_out set to p's name (new references) */
static PyObject *compressed_grad(PyObject *self, PyObject *p, PyObject **name_out)
{
    PyObject *names = NULL, *name = NULL, *grad = NULL, *tensor = NULL, *comp = NULL, *r = NULL;
    if (!(names = PyObject_GetAttrString(self, "_parameter_names")) || !(name = PyObject_GetItem(names, p)) ||
        !(grad = grad_of(p)))
        goto done;
    int sparse = get_bool(grad, "is_sparse");
    if (sparse < 0) goto done;
    if (sparse) {
        int dense = get_bool(self, "sparse_as_dense");
        if (dense < 0) goto done;
        if (!dense) {
            PyErr_Format(PyExc_NotImplementedError,
                         "DistributedOptimizer: the gradient of %S is sparse; dtrain.torch all-reduces dense "
                         "gradients only: pass sparse_as_dense=True",
                         name);
            goto done;
        }
        if (!(tensor = PyObject_CallMethod(grad, "to_dense", NULL))) goto done;
    } else {
        tensor = grad;
        Py_INCREF(tensor);
    }
    if (!(comp = PyObject_GetAttrString(self, "_compression"))) goto done;
    r = PyObject_CallMethod(comp, "compress", "(O)", tensor);
    if (r && (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2)) {
        PyErr_SetString(PyExc_TypeError, "DistributedOptimizer: compression.compress must return (tensor, ctx)");
        Py_CLEAR(r);
    }
done:
    if (r) {
        *name_out = name;
        name = NULL;
    }
    Py_XDECREF(names);
    Py_XDECREF(name);
    Py_XDECREF(grad);
    Py_XDECREF(tensor);
    Py_XDECREF(comp);
    return r;
}

/* (handle, ctx) of p's gradient all-reduce, started */
static PyObject *allreduce_grad_async(PyObject *self, PyObject *p)
{
    PyObject *name = NULL, *c = compressed_grad(self, p, &name), *h = NULL, *r = NULL;
    if (!c) return NULL;
    if ((h = start_allreduce(self, "allreduce_async_", PyTuple_GET_ITEM(c, 0), name)))
        r = PyTuple_Pack(2, h, PyTuple_GET_ITEM(c, 1));
    Py_DECREF(c);
    Py_XDECREF(name);
    Py_XDECREF(h);
    return r;
}

/* (handle, (ctx, ...)) of one grouped all-reduce of the gradients of ps (a tuple), named after
 * its first parameter */
static PyObject *grouped_allreduce_grad_async(PyObject *self, PyObject *ps)
{
    Py_ssize_t n = PyTuple_GET_SIZE(ps);
    PyObject *tensors = PyList_New(n), *ctxs = PyTuple_New(n), *name0 = NULL, *h = NULL, *r = NULL;
    if (!tensors || !ctxs) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = NULL, *c = compressed_grad(self, PyTuple_GET_ITEM(ps, i), &name);
        if (!c) goto done;
        if (i == 0) name0 = name;
        else Py_DECREF(name);
        Py_INCREF(PyTuple_GET_ITEM(c, 0));
        PyList_SET_ITEM(tensors, i, PyTuple_GET_ITEM(c, 0));
        Py_INCREF(PyTuple_GET_ITEM(c, 1));
        PyTuple_SET_ITEM(ctxs, i, PyTuple_GET_ITEM(c, 1));
        Py_DECREF(c);
    }
    if ((h = start_allreduce(self, "grouped_allreduce_async_", tensors, name0))) r = PyTuple_Pack(2, h, ctxs);
done:
    Py_XDECREF(tensors);
    Py_XDECREF(ctxs);
    Py_XDECREF(name0);
    Py_XDECREF(h);
    return r;
}

/* ---- the hook -------------------------------------------------------------------------------- */

/* partial(grad_hook, weakref(optimizer), p)(*what autograd passes): runs after p's gradient has
 * been accumulated. The optimizer is held weakly: its hooks live in nodes it holds itself. */
static PyObject *grad_hook(PyObject *unused, PyObject *args)
{
    (void)unused;
    if (PyTuple_GET_SIZE(args) < 2) {
        PyErr_SetString(PyExc_TypeError, "DistributedOptimizer hook: called without its optimizer and parameter");
        return NULL;
    }
    PyObject *self = PyWeakref_GetObject(PyTuple_GET_ITEM(args, 0)), *p = PyTuple_GET_ITEM(args, 1);
    if (!self) return NULL;
    if (self == Py_None) Py_RETURN_NONE; /* the optimizer is gone */
    Py_INCREF(self);
    PyObject *handles = NULL, *delay = NULL, *groups = NULL, *pair = NULL, *out = NULL, *dv = NULL, *nd = NULL;
    if (!(handles = PyObject_GetAttrString(self, "_handles")) || !(delay = PyObject_GetAttrString(self, "_allreduce_delay")) ||
        !(groups = PyObject_GetAttrString(self, "_groups")) || !(dv = PyObject_GetItem(delay, p)))
        goto done;
    long d = PyLong_AsLong(dv);
    if (d == -1 && PyErr_Occurred()) goto done;
    if (d <= 0) { /* Horovod: this message when a handle is pending, an assertion otherwise: one message */
        PyErr_SetString(PyExc_AssertionError, too_many_passes);
        goto done;
    }
    d--;
    if (!(nd = PyLong_FromLong(d)) || PyObject_SetItem(delay, p, nd) < 0) goto done;
    if (d == 0) {
        if (groups != Py_None) {
            PyObject *p2g = PyObject_GetAttrString(self, "_p_to_group"), *counts = NULL, *group = NULL, *cnt = NULL;
            int ok = 0;
            if (p2g && (counts = PyObject_GetAttrString(self, "_group_counts")) && (group = PyObject_GetItem(p2g, p)) &&
                (cnt = PyObject_GetItem(counts, group))) {
                long c = PyLong_AsLong(cnt) + 1;
                PyObject *cv = PyLong_FromLong(c);
                if (cv && PyObject_SetItem(counts, group, cv) == 0) ok = 1;
                Py_XDECREF(cv);
                if (ok && c == PyTuple_GET_SIZE(group)) {
                    /* the group's last gradient: one grouped all-reduce for all of them */
                    ok = 0;
                    PyObject *hc = grouped_allreduce_grad_async(self, group), *zero = PyLong_FromLong(0);
                    if (hc && zero && PyObject_SetItem(handles, group, hc) == 0 &&
                        PyObject_SetItem(counts, group, zero) == 0) {
                        ok = 2;
                        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(group); i++) {
                            PyObject *gone = PyObject_CallMethod(handles, "pop", "OO", PyTuple_GET_ITEM(group, i), Py_None);
                            if (!gone) {
                                ok = 0;
                                break;
                            }
                            Py_DECREF(gone);
                        }
                    }
                    Py_XDECREF(hc);
                    Py_XDECREF(zero);
                }
            }
            Py_XDECREF(p2g);
            Py_XDECREF(counts);
            Py_XDECREF(group);
            Py_XDECREF(cnt);
            if (!ok) goto done;
            if (ok == 2) {
                out = Py_None;
                Py_INCREF(out);
                goto done;
            }
            pair = PyTuple_Pack(2, Py_None, Py_None);
        } else {
            pair = allreduce_grad_async(self, p);
        }
    } else {
        pair = PyTuple_Pack(2, Py_None, Py_None);
    }
    if (!pair || PyObject_SetItem(handles, p, pair) < 0) goto done;
    out = Py_None;
    Py_INCREF(out);
done:
    Py_DECREF(self);
    Py_XDECREF(handles);
    Py_XDECREF(delay);
    Py_XDECREF(groups);
    Py_XDECREF(pair);
    Py_XDECREF(dv);
    Py_XDECREF(nd);
    return out;
}

/* ---- synchronize, step ------------------------------------------------------------------------ */

/* p.grad = decompress(output, ctx), in p.grad itself (set_), or added into a sparse gradient */
static int write_grad(PyObject *self, PyObject *p, PyObject *output, PyObject *ctx)
{
    PyObject *comp = PyObject_GetAttrString(self, "_compression"), *agg = NULL, *grad = NULL, *r = NULL;
    int rc = -1;
    if (!comp || !(agg = PyObject_CallMethod(comp, "decompress", "OO", output, ctx)) ||
        !(grad = PyObject_GetAttrString(p, "grad")))
        goto done;
    int sparse = get_bool(grad, "is_sparse");
    if (sparse < 0) goto done;
    if (sparse) {
        int asp = get_bool(agg, "is_sparse");
        if (asp < 0) goto done;
        if (!asp) Py_SETREF(agg, PyObject_CallMethod(agg, "to_sparse", NULL));
        PyObject *z = agg ? PyObject_CallMethod(grad, "zero_", NULL) : NULL;
        if (z) r = PyObject_CallMethod(z, "add_", "(O)", agg);
        Py_XDECREF(z);
    } else {
        r = PyObject_CallMethod(grad, "set_", "(O)", agg);
    }
    if (r) rc = 0;
done:
    Py_XDECREF(comp);
    Py_XDECREF(agg);
    Py_XDECREF(grad);
    Py_XDECREF(r);
    return rc;
}

/* the group of p, its count set back to 0 (a group whose all-reduce a step() started piecemeal) */
static int reset_group_count(PyObject *self, PyObject *key)
{
    PyObject *groups = PyObject_GetAttrString(self, "_groups"), *p2g = NULL, *counts = NULL, *group = NULL, *zero = NULL;
    int rc = -1;
    if (!groups) return -1;
    if (groups == Py_None) {
        rc = 0;
        goto done;
    }
    if (!(counts = PyObject_GetAttrString(self, "_group_counts")) || !(zero = PyLong_FromLong(0))) goto done;
    if (PyTuple_Check(key)) {
        group = key;
        Py_INCREF(group);
    } else if (!(p2g = PyObject_GetAttrString(self, "_p_to_group")) || !(group = PyObject_GetItem(p2g, key))) {
        goto done;
    }
    rc = PyObject_SetItem(counts, group, zero);
done:
    Py_XDECREF(groups);
    Py_XDECREF(p2g);
    Py_XDECREF(counts);
    Py_XDECREF(group);
    Py_XDECREF(zero);
    return rc;
}

static PyObject *m_synchronize(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self;
    if (!PyArg_ParseTuple(args, "O:synchronize", &self)) return NULL;
    PyObject *handles = NULL, *req = NULL, *done_set = NULL, *keys = NULL, *sync = NULL, *bpps = NULL, *delay = NULL;
    PyObject *out = NULL;
    if (!(handles = PyObject_GetAttrString(self, "_handles")) || !PyDict_Check(handles) ||
        !(req = PyObject_GetAttrString(self, "_requires_update")) || !(done_set = PySet_New(NULL)) ||
        !(sync = hvd_tr_fn("synchronize")) || !(bpps = PyObject_GetAttrString(self, "backward_passes_per_step")) ||
        !(delay = PyObject_GetAttrString(self, "_allreduce_delay"))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "DistributedOptimizer: _handles is not a dict");
        goto done;
    }
    /* the parameters whose hook never ran (no gradient on this rank, or fewer passes than
     * backward_passes_per_step), and those whose passes are not complete: started now */
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(handles, &pos, &k, &v)) {
        if (PyTuple_Check(k)) {
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(k); i++)
                if (PySet_Add(done_set, PyTuple_GET_ITEM(k, i)) < 0) goto done;
        } else if (PySet_Add(done_set, k) < 0) {
            goto done;
        }
    }
    PyObject *it = PyObject_GetIter(req), *p;
    if (!it) goto done;
    while ((p = PyIter_Next(it))) {
        int in = PySet_Contains(done_set, p);
        PyObject *hc = in == 0 ? allreduce_grad_async(self, p) : NULL;
        int e = in < 0 || (in == 0 && (!hc || PyDict_SetItem(handles, p, hc) < 0));
        Py_XDECREF(hc);
        Py_DECREF(p);
        if (e) break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto done;
    if (!(keys = PyDict_Keys(handles))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *hc = PyDict_GetItemWithError(handles, key);
        if (!hc) goto done;
        if (PyTuple_GET_ITEM(hc, 0) == Py_None) {
            PyObject *nh = allreduce_grad_async(self, key);
            int e = !nh || PyDict_SetItem(handles, key, nh) < 0;
            Py_XDECREF(nh);
            if (e) goto done;
        }
    }
    /* wait for each, write the results into the gradients */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *hc = PyDict_GetItemWithError(handles, key);
        if (!hc) goto done;
        PyObject *output = PyObject_CallOneArg(sync, PyTuple_GET_ITEM(hc, 0));
        if (!output) goto done;
        int e = 0;
        if (PyTuple_Check(key)) {
            PyObject *outs = PySequence_Fast(output, "grouped all-reduce: synchronize did not return a sequence");
            PyObject *ctxs = PyTuple_GET_ITEM(hc, 1);
            if (!outs || PySequence_Fast_GET_SIZE(outs) != PyTuple_GET_SIZE(key)) {
                if (outs)
                    PyErr_Format(PyExc_RuntimeError, "grouped all-reduce: %zd results for %zd gradients",
                                 PySequence_Fast_GET_SIZE(outs), PyTuple_GET_SIZE(key));
                e = 1;
            }
            for (Py_ssize_t j = 0; !e && j < PyTuple_GET_SIZE(key); j++) {
                PyObject *gp = PyTuple_GET_ITEM(key, j);
                e = PyObject_SetItem(delay, gp, bpps) < 0 ||
                    write_grad(self, gp, PySequence_Fast_GET_ITEM(outs, j), PyTuple_GET_ITEM(ctxs, j)) < 0;
            }
            Py_XDECREF(outs);
        } else {
            e = PyObject_SetItem(delay, key, bpps) < 0 || write_grad(self, key, output, PyTuple_GET_ITEM(hc, 1)) < 0;
        }
        Py_DECREF(output);
        if (e || reset_group_count(self, key) < 0) goto done;
    }
    PyDict_Clear(handles);
    if (set_bool(self, "_synchronized", 1) < 0) goto done;
    out = Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(handles);
    Py_XDECREF(req);
    Py_XDECREF(done_set);
    Py_XDECREF(keys);
    Py_XDECREF(sync);
    Py_XDECREF(bpps);
    Py_XDECREF(delay);
    return out;
}

static PyObject *m_step(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"self", "closure", NULL};
    PyObject *self, *closure = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:step", kwlist, &self, &closure)) return NULL;
    int should = get_bool(self, "_should_synchronize");
    if (should < 0) return NULL;
    if (should) {
        int synced = get_bool(self, "_synchronized");
        if (synced < 0) return NULL;
        if (synced && PyErr_WarnEx(PyExc_UserWarning,
                                   "optimizer.step() called without optimizer.skip_synchronize() context after "
                                   "optimizer.synchronize(). This can cause training slowdown. You may want to "
                                   "consider using optimizer.skip_synchronize() context if you use "
                                   "optimizer.synchronize() in your code.",
                                   1) < 0)
            return NULL;
        PyObject *r = PyObject_CallMethod(self, "synchronize", NULL);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    if (set_bool(self, "_synchronized", 0) < 0) return NULL;
    PyObject *a = PyTuple_Pack(1, closure);
    if (!a) return NULL;
    PyObject *r = call_base(self, "step", a, NULL);
    Py_DECREF(a);
    return r;
}

static PyObject *m_zero_grad(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    if (PyTuple_GET_SIZE(args) < 1) {
        PyErr_SetString(PyExc_TypeError, "zero_grad: no optimizer");
        return NULL;
    }
    PyObject *self = PyTuple_GET_ITEM(args, 0), *handles = PyObject_GetAttrString(self, "_handles");
    if (!handles) return NULL;
    int pending = PyObject_IsTrue(handles);
    Py_DECREF(handles);
    if (pending < 0) return NULL;
    if (pending) {
        PyErr_SetString(PyExc_AssertionError, "optimizer.zero_grad() was called after loss.backward() but before "
                                              "optimizer.step() or optimizer.synchronize(). This is prohibited as "
                                              "it can cause a race condition.");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (!rest) return NULL;
    PyObject *r = call_base(self, "zero_grad", rest, kw);
    Py_DECREF(rest);
    return r;
}

static PyObject *m_load_state_dict(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    if (PyTuple_GET_SIZE(args) < 1) {
        PyErr_SetString(PyExc_TypeError, "load_state_dict: no optimizer");
        return NULL;
    }
    PyObject *self = PyTuple_GET_ITEM(args, 0), *h = PyDict_New();
    int e = !h || PyObject_SetAttrString(self, "_handles", h) < 0 || set_bool(self, "_synchronized", 0) < 0 ||
            set_bool(self, "_should_synchronize", 1) < 0 || reset_delays(self) < 0;
    Py_XDECREF(h);
    if (e) return NULL;
    PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (!rest) return NULL;
    PyObject *r = call_base(self, "load_state_dict", rest, kw);
    Py_DECREF(rest);
    return r;
}

static PyObject *m_set_bpps(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self;
    int passes;
    if (!PyArg_ParseTuple(args, "Oi:set_backward_passes_per_step", &self, &passes)) return NULL;
    if (passes < 1) {
        PyErr_Format(PyExc_ValueError, "backward_passes_per_step must be at least 1, not %d", passes);
        return NULL;
    }
    PyObject *v = PyLong_FromLong(passes);
    int e = !v || PyObject_SetAttrString(self, "backward_passes_per_step", v) < 0 || reset_delays(self) < 0;
    Py_XDECREF(v);
    if (e) return NULL;
    Py_RETURN_NONE;
}

static PyObject *m_allreduce_grad_async(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self, *p;
    if (!PyArg_ParseTuple(args, "OO:_allreduce_grad_async", &self, &p)) return NULL;
    return allreduce_grad_async(self, p);
}

/* ---- skip_synchronize: a context manager ---------------------------------------------------- */

typedef struct {
    PyObject_HEAD PyObject *opt;
} skip_obj;

static void skip_dealloc(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    Py_XDECREF(((skip_obj *)o)->opt);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyObject *skip_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    if (set_bool(((skip_obj *)o)->opt, "_should_synchronize", 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *skip_exit(PyObject *o, PyObject *args)
{
    (void)args;
    if (set_bool(((skip_obj *)o)->opt, "_should_synchronize", 1) < 0) return NULL;
    Py_RETURN_FALSE;
}

static PyMethodDef skip_methods[] = {{"__enter__", skip_enter, METH_NOARGS, NULL},
                                     {"__exit__", skip_exit, METH_VARARGS, NULL},
                                     {NULL, NULL, 0, NULL}};

static PyObject *m_skip_synchronize(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self;
    if (!PyArg_ParseTuple(args, "O:skip_synchronize", &self)) return NULL;
    skip_obj *o = PyObject_New(skip_obj, skip_type);
    if (!o) return NULL;
    Py_INCREF(self);
    o->opt = self;
    return (PyObject *)o;
}

/* ---- the class and DistributedOptimizer() ------------------------------------------------------ */

static PyMethodDef method_defs[] = {
    {"step", (PyCFunction)(void (*)(void))m_step, METH_VARARGS | METH_KEYWORDS,
     "step(closure=None): waits for the gradients' all-reduces (synchronize(), unless inside "
     "skip_synchronize()), then the wrapped optimizer's step."},
    {"synchronize", m_synchronize, METH_VARARGS,
     "synchronize(): starts the all-reduces not started yet, waits for all, writes the results into the "
     "gradients."},
    {"skip_synchronize", m_skip_synchronize, METH_VARARGS,
     "skip_synchronize(): a context manager in which step() does not synchronize (after an explicit "
     "synchronize(), e.g. to clip the reduced gradients)."},
    {"zero_grad", (PyCFunction)(void (*)(void))m_zero_grad, METH_VARARGS | METH_KEYWORDS,
     "zero_grad(...): refused while gradients are being all-reduced; otherwise the wrapped optimizer's."},
    {"load_state_dict", (PyCFunction)(void (*)(void))m_load_state_dict, METH_VARARGS | METH_KEYWORDS,
     "load_state_dict(state_dict): forgets pending all-reduces, then the wrapped optimizer's."},
    {"set_backward_passes_per_step", m_set_bpps, METH_VARARGS,
     "set_backward_passes_per_step(passes): backward passes accumulated locally before each all-reduce."},
    {"_allreduce_grad_async", m_allreduce_grad_async, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyMethodDef hook_def = {"_dt_grad_hook", grad_hook, METH_VARARGS, NULL};

/* the class: type(name, (base,), {methods, _dt_base_class: base}) */
static PyObject *make_class(PyObject *base)
{
    PyObject *dict = PyDict_New(), *name = NULL, *cls = NULL;
    if (!dict) return NULL;
    for (PyMethodDef *d = method_defs; d->ml_name; d++) {
        PyObject *m = hvd_tr_method(d);
        if (!m || PyDict_SetItemString(dict, d->ml_name, m) < 0) {
            Py_XDECREF(m);
            goto done;
        }
        Py_DECREF(m);
    }
    PyObject *mod = PyUnicode_FromString("dtrain.torch");
    int e = !mod || PyDict_SetItemString(dict, "__module__", mod) < 0 ||
            PyDict_SetItemString(dict, "_dt_base_class", base) < 0;
    Py_XDECREF(mod);
    if (e || !(name = PyObject_GetAttrString(base, "__name__"))) goto done;
    cls = PyObject_CallFunction((PyObject *)&PyType_Type, "O(O)O", name, base, dict);
done:
    Py_DECREF(dict);
    Py_XDECREF(name);
    return cls;
}

/* a hook on the gradient accumulator of every parameter that needs a gradient */
static int register_hooks(PyObject *self, PyObject *groups)
{
    PyObject *pgroups = PyObject_GetAttrString(self, "param_groups"), *req = NULL, *accs = NULL, *ref = NULL;
    PyObject *plist = NULL;
    int rc = -1;
    if (!pgroups || !(req = PyObject_GetAttrString(self, "_requires_update")) ||
        !(accs = PyObject_GetAttrString(self, "_grad_accs")) || !(ref = PyWeakref_NewRef(self, NULL)) ||
        !(plist = PyList_New(0)))
        goto done;
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(pgroups); g++) {
        PyObject *ps = PyDict_GetItemString(PyList_GET_ITEM(pgroups, g), "params");
        PyObject *seq = ps ? PySequence_Fast(ps, "params") : NULL;
        if (!seq) goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
            int rg = get_bool(p, "requires_grad");
            if (rg < 0 || (rg && PyList_Append(plist, p) < 0)) {
                Py_DECREF(seq);
                goto done;
            }
        }
        Py_DECREF(seq);
    }
    if (groups != Py_None && hvd_opt_form_groups(self, plist, groups) < 0) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plist); i++) {
        PyObject *p = PyList_GET_ITEM(plist, i), *tmp = NULL, *fn = NULL, *next = NULL, *acc = NULL, *hook = NULL,
                 *r = NULL;
        int ok = PySet_Add(req, p) == 0 && (tmp = PyObject_CallMethod(p, "expand_as", "(O)", p)) &&
                 (fn = PyObject_GetAttrString(tmp, "grad_fn")) && (next = PyObject_GetAttrString(fn, "next_functions"));
        if (ok) {
            /* next_functions[0][0]: the AccumulateGrad node of p */
            PyObject *first = PySequence_GetItem(next, 0);
            acc = first ? PySequence_GetItem(first, 0) : NULL;
            Py_XDECREF(first);
            ok = acc && (hook = PyObject_CallFunctionObjArgs(partial_fn, hook_fn, ref, p, NULL)) &&
                 (r = PyObject_CallMethod(acc, "register_hook", "(O)", hook)) && PyList_Append(accs, acc) == 0;
        }
        Py_XDECREF(tmp);
        Py_XDECREF(fn);
        Py_XDECREF(next);
        Py_XDECREF(acc);
        Py_XDECREF(hook);
        Py_XDECREF(r);
        if (!ok) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(pgroups);
    Py_XDECREF(req);
    Py_XDECREF(accs);
    Py_XDECREF(ref);
    Py_XDECREF(plist);
    return rc;
}

static PyObject *dist_optimizer(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"optimizer", "named_parameters", "compression", "backward_passes_per_step", "op",
                             "gradient_predivide_factor", "num_groups", "groups", "sparse_as_dense", "process_set",
                             NULL};
    PyObject *opt, *named = Py_None, *compression = NULL, *op = NULL, *groups = Py_None, *pset = Py_None;
    int bpps = 1, num_groups = 0, sparse_as_dense = 0;
    double pre = 1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOiOdiOpO:DistributedOptimizer", kwlist, &opt, &named, &compression,
                                     &bpps, &op, &pre, &num_groups, &groups, &sparse_as_dense, &pset))
        return NULL;
    PyObject *comp = NULL, *opv = NULL, *cls = NULL, *inst = NULL, *pgroups = NULL, *list = NULL, *names = NULL;
    PyObject *delay = NULL, *bppsv = NULL, *out = NULL, *grp = NULL, *tmp = NULL;
    if (bpps < 1) {
        PyErr_Format(PyExc_ValueError, "DistributedOptimizer: backward_passes_per_step must be at least 1, not %d", bpps);
        return NULL;
    }
    if (compression) {
        comp = compression;
        Py_INCREF(comp);
    } else {
        PyObject *c = hvd_tr_fn("Compression");
        if (!c) return NULL;
        comp = PyObject_GetAttrString(c, "none");
        Py_DECREF(c);
        if (!comp) return NULL;
    }
    if (op && op != Py_None) {
        opv = op;
        Py_INCREF(opv);
    } else if (!(opv = hvd_tr_fn("Average"))) {
        goto done;
    }
    int is_avg = op_is(opv, "Average"), is_adasum = op_is(opv, "Adasum");
    if (is_avg < 0 || is_adasum < 0) goto done;
    if (is_adasum) {
        PyErr_SetString(PyExc_NotImplementedError, "DistributedOptimizer: op=Adasum is not supported by dtrain.torch: "
                                                   "use op=hvd.Average (the default) or op=hvd.Sum");
        goto done;
    }
    if (pre != 1.0 && !is_avg) {
        PyErr_SetString(PyExc_ValueError, "gradient_predivide_factor not supported with op != Average");
        goto done;
    }
    if (!(pre > 0.0)) {
        PyErr_Format(PyExc_ValueError, "DistributedOptimizer: gradient_predivide_factor must be positive, not %g", pre);
        goto done;
    }
    if (hvd_check_process_set(pset, "DistributedOptimizer") < 0) goto done;
    if (num_groups != 0) {
        if (PyErr_WarnEx(PyExc_DeprecationWarning,
                         "Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.", 1) < 0)
            goto done;
        if (groups == Py_None && num_groups > 0) {
            grp = PyLong_FromLong(num_groups);
            if (!grp) goto done;
            groups = grp;
        }
    }
    if (hvd_opt_check_groups(groups) < 0) goto done;

    if (!(cls = make_class((PyObject *)Py_TYPE(opt))) || !(pgroups = PyObject_GetAttrString(opt, "param_groups")) ||
        !(inst = PyObject_CallOneArg(cls, pgroups)))
        goto done;
    /* the same state and defaults as the optimizer it wraps (its param groups are the same dicts) */
    if (!(tmp = PyObject_GetAttrString(opt, "state")) || PyObject_SetAttrString(inst, "state", tmp) < 0) goto done;
    Py_CLEAR(tmp);
    if (!(tmp = PyObject_GetAttrString(opt, "defaults")) || PyObject_SetAttrString(inst, "defaults", tmp) < 0) goto done;
    Py_CLEAR(tmp);
    Py_SETREF(pgroups, PyObject_GetAttrString(inst, "param_groups"));
    if (!pgroups || !PyList_Check(pgroups)) {
        if (pgroups) PyErr_SetString(PyExc_TypeError, "DistributedOptimizer: param_groups is not a list");
        goto done;
    }
    if (!(list = hvd_opt_named_list(named, pgroups)) || !(names = PyDict_New()) || !(delay = PyDict_New()) ||
        !(bppsv = PyLong_FromLong(bpps)))
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *it = PyList_GET_ITEM(list, i);
        if (PyDict_SetItem(names, PyTuple_GET_ITEM(it, 1), PyTuple_GET_ITEM(it, 0)) < 0 ||
            PyDict_SetItem(delay, PyTuple_GET_ITEM(it, 1), bppsv) < 0)
            goto done;
    }
    if (hvd_opt_check_all_named(pgroups, names) < 0) goto done;
    PyObject *h = PyDict_New(), *accs = PyList_New(0), *req = PySet_New(NULL), *p2g = PyDict_New(), *cnt = PyDict_New();
    PyObject *pref = PyFloat_FromDouble(pre);
    int e = !h || !accs || !req || !p2g || !cnt || !pref || PyObject_SetAttrString(inst, "_compression", comp) < 0 ||
            PyObject_SetAttrString(inst, "_parameter_names", names) < 0 ||
            PyObject_SetAttrString(inst, "backward_passes_per_step", bppsv) < 0 ||
            PyObject_SetAttrString(inst, "_allreduce_delay", delay) < 0 || PyObject_SetAttrString(inst, "op", opv) < 0 ||
            PyObject_SetAttrString(inst, "gradient_predivide_factor", pref) < 0 ||
            set_bool(inst, "sparse_as_dense", sparse_as_dense) < 0 ||
            PyObject_SetAttrString(inst, "process_set", pset) < 0 || PyObject_SetAttrString(inst, "_handles", h) < 0 ||
            PyObject_SetAttrString(inst, "_grad_accs", accs) < 0 ||
            PyObject_SetAttrString(inst, "_requires_update", req) < 0 || set_bool(inst, "_synchronized", 0) < 0 ||
            set_bool(inst, "_should_synchronize", 1) < 0 || PyObject_SetAttrString(inst, "_groups", groups) < 0 ||
            PyObject_SetAttrString(inst, "_p_to_group", p2g) < 0 || PyObject_SetAttrString(inst, "_group_counts", cnt) < 0;
    Py_XDECREF(h);
    Py_XDECREF(accs);
    Py_XDECREF(req);
    Py_XDECREF(p2g);
    Py_XDECREF(cnt);
    Py_XDECREF(pref);
    if (e) goto done;
    /* one rank: nothing to reduce, step() is the optimizer's own (as Horovod) */
    int size = hvd_tr_size();
    if (size < 0 || (size > 1 && register_hooks(inst, groups) < 0)) goto done;
    out = inst;
    inst = NULL;
done:
    Py_XDECREF(comp);
    Py_XDECREF(opv);
    Py_XDECREF(cls);
    Py_XDECREF(inst);
    Py_XDECREF(pgroups);
    Py_XDECREF(list);
    Py_XDECREF(names);
    Py_XDECREF(delay);
    Py_XDECREF(bppsv);
    Py_XDECREF(grp);
    Py_XDECREF(tmp);
    return out;
}

static PyMethodDef dist_def = {
    "DistributedOptimizer", (PyCFunction)(void (*)(void))dist_optimizer, METH_VARARGS | METH_KEYWORDS,
    "DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, "
    "backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None, "
    "sparse_as_dense=False, process_set=None)\n\n"
    "Wraps optimizer: each gradient is all-reduced (op over the ranks, Average by default) as backward produces "
    "it, and step() waits for them before the optimizer's own step. See Horovod's documentation."};

int hvd_optim_init(PyObject *module)
{
    PyType_Slot slots[] = {{Py_tp_dealloc, (void *)skip_dealloc}, {Py_tp_methods, skip_methods}, {0, NULL}};
    PyType_Spec spec = {"dtrain.torch._SkipSynchronize", (int)sizeof(skip_obj), 0, Py_TPFLAGS_DEFAULT, slots};
    if (!skip_type && !(skip_type = (PyTypeObject *)PyType_FromSpec(&spec))) return -1;
    if (!hook_fn && !(hook_fn = PyCFunction_NewEx(&hook_def, NULL, NULL))) return -1;
    if (!partial_fn) {
        PyObject *ft = PyImport_ImportModule("functools");
        if (!ft) return -1;
        partial_fn = PyObject_GetAttrString(ft, "partial");
        Py_DECREF(ft);
        if (!partial_fn) return -1;
    }
    PyObject *modname = PyModule_GetNameObject(module);
    if (!modname) return -1;
    PyObject *f = PyCFunction_NewEx(&dist_def, NULL, modname);
    Py_DECREF(modname);
    if (!f || PyModule_AddObject(module, "DistributedOptimizer", f) < 0) {
        Py_XDECREF(f);
        return -1;
    }
    return 0;
}
