/* optstate.c: dtrain.torch's broadcast_optimizer_state (Horovod's horovod/torch/functions.py): root's
 * optimizer state on every rank, in place: its state tensors (momentum buffers, Adam's moments and
 * step) broadcast, and its other state values and every param group's options (lr, momentum, betas,
 * ...) written over this rank's. */
#include "python/train.h"

/* The step that creates a new optimizer's state (momentum buffers, Adam's moments and step):
 * with zero gradients, through the base class's step for a DistributedOptimizer (its own would
 * all-reduce, and only this rank may be here). The parameters and gradients are put back as they
 * were: the step must not move the weights (weight decay would, with zero gradients). */
static int init_state(PyObject *opt, PyObject *params)
{
    PyObject *saved = NULL, *zeros_like = hvd_tr_torch_attr("zeros_like"), *step = NULL, *r = NULL;
    PyObject *no_grad = NULL, *ctx = NULL;
    int rc = -1;
    if (!zeros_like || !(saved = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(params); i++) {
        PyObject *p = PyList_GET_ITEM(params, i);
        PyObject *rg = PyObject_GetAttrString(p, "requires_grad");
        if (!rg) goto done;
        int req = PyObject_IsTrue(rg);
        Py_DECREF(rg);
        if (req < 0) goto done;
        if (!req) continue;
        PyObject *grad = PyObject_GetAttrString(p, "grad"), *d = NULL, *copy = NULL, *z = NULL, *item = NULL;
        if (grad && (d = PyObject_CallMethod(p, "detach", NULL)) && (copy = PyObject_CallMethod(d, "clone", NULL)) &&
            (z = PyObject_CallOneArg(zeros_like, d)) && (item = PyTuple_Pack(3, p, grad, copy)) &&
            PyList_Append(saved, item) == 0 && PyObject_SetAttrString(p, "grad", z) == 0)
            rc = 0;
        Py_XDECREF(grad);
        Py_XDECREF(d);
        Py_XDECREF(copy);
        Py_XDECREF(z);
        Py_XDECREF(item);
        if (rc < 0) goto restore;
        rc = -1;
    }
    PyObject *base = PyObject_GetAttrString((PyObject *)Py_TYPE(opt), "_dt_base_class");
    if (base) {
        step = PyObject_GetAttrString(base, "step");
        Py_DECREF(base);
        if (step) r = PyObject_CallOneArg(step, opt);
    } else {
        PyErr_Clear();
        r = PyObject_CallMethod(opt, "step", NULL);
    }
    if (r) rc = 0;
restore:;
    /* put back the weights and gradients, also after a failed step (its exception kept) */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if ((no_grad = hvd_tr_torch_attr("no_grad")) && (ctx = PyObject_CallNoArgs(no_grad))) {
        PyObject *e = PyObject_CallMethod(ctx, "__enter__", NULL);
        Py_XDECREF(e);
        for (Py_ssize_t i = 0; saved && i < PyList_GET_SIZE(saved); i++) {
            PyObject *item = PyList_GET_ITEM(saved, i), *p = PyTuple_GET_ITEM(item, 0);
            PyObject *c = PyObject_CallMethod(p, "copy_", "(O)", PyTuple_GET_ITEM(item, 2));
            if (!c || PyObject_SetAttrString(p, "grad", PyTuple_GET_ITEM(item, 1)) < 0) rc = -1;
            Py_XDECREF(c);
        }
        e = PyObject_CallMethod(ctx, "__exit__", "OOO", Py_None, Py_None, Py_None);
        Py_XDECREF(e);
    } else {
        rc = -1;
    }
    if (et) {
        PyErr_Restore(et, ev, tb);
        rc = -1;
    }
done:
    Py_XDECREF(saved);
    Py_XDECREF(zeros_like);
    Py_XDECREF(step);
    Py_XDECREF(r);
    Py_XDECREF(no_grad);
    Py_XDECREF(ctx);
    return rc;
}

/* The optimizer's parameters in state_dict's order (group by group). */
static PyObject *opt_params(PyObject *groups)
{
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *ps = PyDict_GetItemString(PyList_GET_ITEM(groups, g), "params");
        PyObject *seq = ps ? PySequence_Fast(ps, "param_groups' params must be a sequence") : NULL;
        if (!seq) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "param_groups[%zd] has no 'params'", g);
            Py_DECREF(list);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
            if (PyList_Append(list, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
                Py_DECREF(seq);
                Py_DECREF(list);
                return NULL;
            }
        Py_DECREF(seq);
    }
    return list;
}

/* This rank's view of the optimizer, as lists:
 *   layout:   (groups, [(key, shape, dtype) per state tensor], [key per other state value])
 *   options:  [each group's options but 'params']
 *   values:   [each other state value (Adam's step where it is a number, None buffers)]
 *   tensors:  [(key, tensor)]  (not sent; broadcast in place)
 *   slots:    [(state dict, name)] for values, to write root's into */
typedef struct opt_view {
    PyObject *layout, *options, *values, *tensors, *slots;
} opt_view;

static void view_free(opt_view *v)
{
    Py_CLEAR(v->layout);
    Py_CLEAR(v->options);
    Py_CLEAR(v->values);
    Py_CLEAR(v->tensors);
    Py_CLEAR(v->slots);
}

static int view_build(PyObject *groups, PyObject *params, PyObject *state, opt_view *v)
{
    PyObject *tlayout = PyList_New(0), *vlayout = PyList_New(0);
    v->options = PyList_New(0);
    v->values = PyList_New(0);
    v->tensors = PyList_New(0);
    v->slots = PyList_New(0);
    PyObject *is_tensor = hvd_tr_torch_attr("is_tensor");
    int rc = -1;
    if (!tlayout || !vlayout || !v->options || !v->values || !v->tensors || !v->slots || !is_tensor) goto done;
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *opts = PyDict_Copy(PyList_GET_ITEM(groups, g));
        if (!opts) goto done;
        if (PyDict_DelItemString(opts, "params") < 0) PyErr_Clear();
        int e = PyList_Append(v->options, opts);
        Py_DECREF(opts);
        if (e < 0) goto done;
    }
    for (Py_ssize_t pid = 0; pid < PyList_GET_SIZE(params); pid++) {
        PyObject *st = PyObject_GetItem(state, PyList_GET_ITEM(params, pid));
        if (!st) { /* no state for this parameter (it never had a gradient) */
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto done;
            PyErr_Clear();
            continue;
        }
        if (!PyDict_Check(st)) {
            PyErr_Format(PyExc_ValueError, "broadcast_optimizer_state: the state of parameter %zd is a %s, not a dict",
                         pid, Py_TYPE(st)->tp_name);
            Py_DECREF(st);
            goto done;
        }
        PyObject *k, *val;
        Py_ssize_t pos = 0;
        while (PyDict_Next(st, &pos, &k, &val)) {
            PyObject *key = PyUnicode_FromFormat("%zd.%S", pid, k), *it = NULL;
            if (!key) break;
            PyObject *ist = PyObject_CallOneArg(is_tensor, val);
            int tensor = ist ? PyObject_IsTrue(ist) : -1;
            Py_XDECREF(ist);
            if (tensor == 1) {
                PyObject *shape = PyObject_GetAttrString(val, "shape"), *dtype = PyObject_GetAttrString(val, "dtype");
                PyObject *sh = shape ? PySequence_Tuple(shape) : NULL, *ds = dtype ? PyObject_Str(dtype) : NULL;
                it = (sh && ds) ? PyTuple_Pack(3, key, sh, ds) : NULL;
                if (it && PyList_Append(tlayout, it) == 0) {
                    Py_DECREF(it);
                    it = PyTuple_Pack(2, key, val);
                    if (it && PyList_Append(v->tensors, it) < 0) Py_CLEAR(it);
                } else {
                    Py_CLEAR(it);
                }
                Py_XDECREF(shape);
                Py_XDECREF(dtype);
                Py_XDECREF(sh);
                Py_XDECREF(ds);
            } else if (tensor == 0) {
                if (PyList_Append(vlayout, key) == 0 && PyList_Append(v->values, val) == 0 &&
                    (it = PyTuple_Pack(2, st, k)) && PyList_Append(v->slots, it) < 0)
                    Py_CLEAR(it);
            }
            Py_DECREF(key);
            if (!it) break;
            Py_DECREF(it);
        }
        Py_DECREF(st);
        if (PyErr_Occurred()) goto done;
    }
    v->layout = Py_BuildValue("(nOO)", PyList_GET_SIZE(groups), tlayout, vlayout);
    rc = v->layout ? 0 : -1;
done:
    Py_XDECREF(tlayout);
    Py_XDECREF(vlayout);
    Py_XDECREF(is_tensor);
    if (rc < 0) view_free(v);
    return rc;
}

/* Every rank sends its layout (and its options and values: small) to every other, so that a rank
 * whose optimizer differs from root's is an error on every rank, never a broadcast that waits for
 * a tensor the others do not have. Then root's tensors are broadcast in place and its options and
 * other values written over this rank's. */
static PyObject *broadcast_optimizer_state(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"optimizer", "root_rank", "process_set", NULL};
    PyObject *opt, *groups = NULL, *params = NULL, *state = NULL, *lbfgs = NULL, *payload = NULL, *all = NULL;
    PyObject *name = NULL, *out = NULL;
    opt_view v = {NULL, NULL, NULL, NULL, NULL};
    int root;
    PyObject *pset = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|O:broadcast_optimizer_state", kwlist, &opt, &root, &pset) ||
        hvd_check_process_set(pset, "broadcast_optimizer_state") < 0)
        return NULL;
    int size = hvd_tr_size(), rank = hvd_tr_rank();
    if (size < 0 || rank < 0) return NULL;
    if (root < 0 || root >= size) {
        PyErr_Format(PyExc_ValueError, "broadcast_optimizer_state: root_rank %d is not a rank (size %d)", root, size);
        return NULL;
    }
    PyObject *optim = hvd_tr_torch_attr("optim");
    if (optim) {
        lbfgs = PyObject_GetAttrString(optim, "LBFGS");
        Py_DECREF(optim);
    }
    if (!lbfgs) return NULL;
    int is_lbfgs = PyObject_IsInstance(opt, lbfgs);
    if (is_lbfgs) {
        if (is_lbfgs > 0) PyErr_SetString(PyExc_ValueError, "cannot broadcast torch.optim.LBFGS state");
        goto done;
    }
    if (!(groups = PyObject_GetAttrString(opt, "param_groups")) || !(state = PyObject_GetAttrString(opt, "state")))
        goto done;
    if (!PyList_Check(groups)) {
        PyErr_SetString(PyExc_TypeError, "broadcast_optimizer_state: optimizer.param_groups is not a list");
        goto done;
    }
    if (!(params = opt_params(groups))) goto done;
    Py_ssize_t nstate = PyObject_Length(state);
    if (nstate < 0) goto done;
    if (nstate == 0) {
        if (init_state(opt, params) < 0) goto done;
        Py_SETREF(state, PyObject_GetAttrString(opt, "state"));
        if (!state || (nstate = PyObject_Length(state)) < 0) goto done;
    }
    /* a stateless optimizer (plain SGD): nothing but the options to send, as Horovod returns here */
    if (nstate == 0) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    if (view_build(groups, params, state, &v) < 0) goto done;
    if (!(payload = PyTuple_Pack(3, v.layout, v.options, v.values))) goto done;
    if (!(name = PyUnicode_FromString("broadcast_optimizer_state.layout")) || !(all = hvd_tr_allgather_object(payload, name)))
        goto done;
    PyObject *root_payload = PyList_GET_ITEM(all, root), *root_layout = PyTuple_GET_ITEM(root_payload, 0);
    for (int r = 0; r < size; r++) {
        PyObject *lay = PyTuple_GET_ITEM(PyList_GET_ITEM(all, r), 0);
        int eq = PyObject_RichCompareBool(lay, root_layout, Py_EQ);
        if (eq < 0) goto done;
        if (!eq) {
            PyErr_Format(PyExc_ValueError,
                         "broadcast_optimizer_state: rank %d's optimizer state differs from root rank %d's (%zd param "
                         "groups and %zd state tensors against %zd and %zd): every rank needs the same optimizer over "
                         "the same parameters",
                         r, root, PyLong_AsSsize_t(PyTuple_GET_ITEM(lay, 0)),
                         PyList_GET_SIZE(PyTuple_GET_ITEM(lay, 1)), PyLong_AsSsize_t(PyTuple_GET_ITEM(root_layout, 0)),
                         PyList_GET_SIZE(PyTuple_GET_ITEM(root_layout, 1)));
            goto done;
        }
    }
    /* the state tensors, named by parameter index and state name */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v.tensors); i++) {
        PyObject *pair = PyList_GET_ITEM(v.tensors, i);
        PyObject *n = PyUnicode_FromFormat("broadcast_optimizer_state.%U", PyTuple_GET_ITEM(pair, 0));
        if (!n) goto done;
        PyObject *np = PyTuple_Pack(2, n, PyTuple_GET_ITEM(pair, 1));
        Py_DECREF(n);
        if (!np) goto done;
        PyList_SET_ITEM(v.tensors, i, np);
        Py_DECREF(pair);
    }
    if (hvd_tr_broadcast_pairs(v.tensors, root) < 0) goto done;
    if (rank != root) {
        PyObject *ropts = PyTuple_GET_ITEM(root_payload, 1), *rvals = PyTuple_GET_ITEM(root_payload, 2);
        for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
            PyObject *k, *val, *dst = PyList_GET_ITEM(groups, g);
            Py_ssize_t pos = 0;
            while (PyDict_Next(PyList_GET_ITEM(ropts, g), &pos, &k, &val))
                if (PyObject_SetItem(dst, k, val) < 0) goto done;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v.slots); i++) {
            PyObject *slot = PyList_GET_ITEM(v.slots, i);
            if (PyObject_SetItem(PyTuple_GET_ITEM(slot, 0), PyTuple_GET_ITEM(slot, 1), PyList_GET_ITEM(rvals, i)) < 0)
                goto done;
        }
    }
    out = Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(groups);
    Py_XDECREF(params);
    Py_XDECREF(state);
    Py_XDECREF(lbfgs);
    Py_XDECREF(payload);
    Py_XDECREF(all);
    Py_XDECREF(name);
    view_free(&v);
    return out;
}

static PyMethodDef bos_def = {"broadcast_optimizer_state", (PyCFunction)(void (*)(void))broadcast_optimizer_state,
     METH_VARARGS | METH_KEYWORDS,
     "broadcast_optimizer_state(optimizer, root_rank, process_set=None): root's optimizer state (state tensors and values, and "
     "every param group's options such as lr) on every rank. A new optimizer's state is created first with a "
     "step on zero gradients, the weights left as they were."};

int hvd_optstate_init(PyObject *module)
{
    PyObject *modname = PyModule_GetNameObject(module);
    if (!modname) return -1;
    PyObject *f = PyCFunction_NewEx(&bos_def, NULL, modname);
    Py_DECREF(modname);
    if (!f || PyModule_AddObject(module, bos_def.ml_name, f) < 0) {
        Py_XDECREF(f);
        return -1;
    }
    return 0;
}
