/* autograd.c: dtrain.torch's out-of-place collectives as autograd functions, as Horovod's
 * (horovod/torch/mpi_ops.py: HorovodAllreduce, HorovodAllgather, HorovodBroadcast,
 * HorovodAlltoall, HorovodReducescatter), so that gradients flow back through
 *
 *   hvd.allreduce, hvd.allgather, hvd.broadcast, hvd.alltoall, hvd.reducescatter.
 *
 * hvd_autograd_init replaces these five module functions (torch.c's, kept here as the "direct"
 * functions) with wrappers. A wrapper whose tensor does not require grad, or that runs with grad
 * mode off, calls the direct function at once: no autograd cost where no gradient is wanted. Else
 * it calls Fn.apply(tensor, kw) of a torch.autograd.Function subclass built with type() (as
 * syncbn.c builds its own), kw being the call's other arguments by name. Its forward calls the
 * direct function with kw; its backward calls the module's own Python-level functions, with the
 * forward's name followed by ".grad" (None stays None: libdt numbers unnamed operations in
 * submission order, the same on every rank), so that the gradients' collectives match across ranks:
 *
 *   allreduce      allreduce of the gradient with the same op, average and scale factors.
 *   allgather      allreduce (Average, as Horovod since process sets) of the gradient, then this
 *                  rank's rows (their offset from an allgather of every rank's row count, name
 *                  "<name>.grad.rows").
 *   broadcast      allreduce (Average, as Horovod) of the gradient on the root; zeros elsewhere.
 *   alltoall       alltoall of the gradient back with the received splits.
 *   reducescatter  allgather of the gradient times prescale * postscale, times size() for op=Sum
 *                  (Horovod's scaling: the Average gradient is the plain allgather).
 *
 * Compression (allreduce, reducescatter) is applied outside the Function, as Horovod does, so its
 * casts are differentiable torch operations. The async and in-place calls stay non-differentiable
 * (Horovod's are too). */
#include "python/train.h"

enum ag_kind { AG_ALLREDUCE, AG_ALLGATHER, AG_BROADCAST, AG_ALLTOALL, AG_REDUCESCATTER, AG_N };

/* The arguments of each replaced function, in torch.c's positional order (its kwlists). */
static const char *const kw_allreduce[] = {"tensor",          "average",          "name",        "compression", "op",
                                           "prescale_factor", "postscale_factor", "process_set", NULL};
static const char *const kw_allgather[] = {"tensor", "name", "process_set", NULL};
static const char *const kw_broadcast[] = {"tensor", "root_rank", "name", "process_set", NULL};
static const char *const kw_alltoall[] = {"tensor", "splits", "name", "process_set", NULL};
static const char *const kw_reducescatter[] = {"tensor", "name",           "compression",      "op",
                                               "process_set", "prescale_factor", "postscale_factor", NULL};

struct ag_op {
    const char *name;          /* the module function replaced */
    const char *cls;           /* the autograd Function's class name */
    const char *const *kwlist; /* its arguments */
    PyObject *direct;          /* torch.c's function (a strong reference) */
    PyObject *apply;           /* the Function's apply (a strong reference) */
    PyObject *doc;             /* the wrapper's docstring (kept: ml_doc points into it) */
};
static struct ag_op ag_ops[AG_N] = {
    [AG_ALLREDUCE] = {"allreduce", "HorovodAllreduce", kw_allreduce, NULL, NULL, NULL},
    [AG_ALLGATHER] = {"allgather", "HorovodAllgather", kw_allgather, NULL, NULL, NULL},
    [AG_BROADCAST] = {"broadcast", "HorovodBroadcast", kw_broadcast, NULL, NULL, NULL},
    [AG_ALLTOALL] = {"alltoall", "HorovodAlltoall", kw_alltoall, NULL, NULL, NULL},
    [AG_REDUCESCATTER] = {"reducescatter", "HorovodReducescatter", kw_reducescatter, NULL, NULL, NULL},
};
static PyObject *grad_enabled; /* torch.is_grad_enabled */

/* Horovod's reduction constants, as torch.c defines them */
enum { AG_AVERAGE = 0, AG_SUM = 1 };

/* ---- the wrappers ------------------------------------------------------------------------------- */

/* 1 when t requires grad and grad mode is on, else 0 (also for what is not a tensor: the direct
 * function then says what is wrong); -1 with an exception set on failure. */
static int wants_grad(PyObject *t)
{
    PyObject *rg = PyObject_GetAttrString(t, "requires_grad");
    if (!rg) {
        PyErr_Clear();
        return 0;
    }
    int r = rg == Py_True;
    Py_DECREF(rg);
    if (!r)
        return 0;
    PyObject *on = PyObject_CallNoArgs(grad_enabled);
    if (!on)
        return -1;
    r = PyObject_IsTrue(on);
    Py_DECREF(on);
    return r;
}

/* The call's arguments other than the tensor, by name (a new dict), with the tensor in *tensor (a
 * new reference). NULL without an exception when the arguments do not fit the function's list
 * (too many, one given twice, an unknown name, no tensor): the direct function then raises its
 * own TypeError. NULL with an exception on failure. */
static PyObject *by_name(const struct ag_op *op, PyObject *args, PyObject *kw, PyObject **tensor)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), nkw = 0, pos = 0;
    PyObject *key, *val;
    while (op->kwlist[nkw])
        nkw++;
    if (nargs > nkw)
        return NULL;
    PyObject *d = kw ? PyDict_Copy(kw) : PyDict_New();
    if (!d)
        return NULL;
    while (PyDict_Next(d, &pos, &key, &val)) {
        int known = 0;
        for (Py_ssize_t j = 0; PyUnicode_Check(key) && j < nkw && !known; j++)
            known = PyUnicode_CompareWithASCIIString(key, op->kwlist[j]) == 0;
        if (!known)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (PyDict_GetItemString(d, op->kwlist[i]) ||
            PyDict_SetItemString(d, op->kwlist[i], PyTuple_GET_ITEM(args, i)) < 0)
            goto fail;
    if (!(*tensor = PyDict_GetItemString(d, "tensor")))
        goto fail;
    Py_INCREF(*tensor);
    if (PyDict_DelItemString(d, "tensor") < 0) {
        Py_CLEAR(*tensor);
        goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* hvd.allreduce and the others: self is the ag_kind (an int). */
static PyObject *ag_call(PyObject *self, PyObject *args, PyObject *kw)
{
    long k = PyLong_AsLong(self);
    const struct ag_op *op = &ag_ops[k];
    PyObject *t = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0)
                  : kw                       ? PyDict_GetItemString(kw, "tensor")
                                             : NULL;
    int g = t ? wants_grad(t) : 0;
    if (g < 0)
        return NULL;
    if (!g)
        return PyObject_Call(op->direct, args, kw);
    PyObject *tensor = NULL, *comp = NULL, *out = NULL;
    PyObject *d = by_name(op, args, kw, &tensor);
    if (!d)
        return PyErr_Occurred() ? NULL : PyObject_Call(op->direct, args, kw);
    if (k == AG_ALLREDUCE || k == AG_REDUCESCATTER) {
        /* compression goes around the Function, as Horovod's: its casts are differentiable */
        comp = PyDict_GetItemString(d, "compression");
        Py_XINCREF(comp);
        if (comp && PyDict_DelItemString(d, "compression") < 0)
            goto done;
    }
    if (!comp || comp == Py_None) {
        out = PyObject_CallFunctionObjArgs(op->apply, tensor, d, NULL);
        goto done;
    }
    PyObject *c = PyObject_CallMethod(comp, "compress", "(O)", tensor);
    if (!c)
        goto done;
    if (PyTuple_Check(c) && PyTuple_GET_SIZE(c) == 2) {
        PyObject *y = PyObject_CallFunctionObjArgs(op->apply, PyTuple_GET_ITEM(c, 0), d, NULL);
        out = y ? PyObject_CallMethod(comp, "decompress", "(OO)", y, PyTuple_GET_ITEM(c, 1)) : NULL;
        Py_XDECREF(y);
    } else {
        PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: compression.compress must return (tensor, ctx)", op->name);
    }
    Py_DECREF(c);
done:
    Py_XDECREF(comp);
    Py_DECREF(tensor);
    Py_DECREF(d);
    return out;
}

/* ---- the Functions' forward and backward --------------------------------------------------------------- */

/* forward(ctx, tensor, kw): the direct function's result; kw (and what backward needs) go on ctx.
 * self is the ag_kind. */
static PyObject *fn_forward(PyObject *self, PyObject *args)
{
    long k = PyLong_AsLong(self);
    PyObject *ctx, *t, *kw, *targs, *out = NULL;
    if (!PyArg_ParseTuple(args, "OOO!:forward", &ctx, &t, &PyDict_Type, &kw))
        return NULL;
    if (PyObject_SetAttrString(ctx, "hvd_kw", kw) < 0 || !(targs = PyTuple_Pack(1, t)))
        return NULL;
    if (k != AG_ALLTOALL) {
        out = PyObject_Call(ag_ops[k].direct, targs, kw);
        if (out && k == AG_ALLGATHER) {
            /* this rank's row count: the gradient's rows to keep */
            PyObject *rows = PyObject_CallMethod(t, "size", "(i)", 0);
            if (!rows || PyObject_SetAttrString(ctx, "hvd_rows", rows) < 0)
                Py_CLEAR(out);
            Py_XDECREF(rows);
        }
        Py_DECREF(targs);
        return out;
    }
    /* alltoall: synchronize of alltoall_async's handle gives the received splits too, which the
     * gradient goes back with */
    PyObject *h = hvd_tr_call("alltoall_async", targs, kw), *r = NULL, *splits;
    Py_DECREF(targs);
    if (!h || !(targs = PyTuple_Pack(1, h)))
        goto done;
    r = hvd_tr_call("synchronize", targs, NULL);
    Py_DECREF(targs);
    if (!r)
        goto done;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        PyErr_SetString(PyExc_SystemError, "dtrain.torch: alltoall: synchronize gave no (tensor, splits)");
        goto done;
    }
    splits = PyTuple_GET_ITEM(r, 1);
    if (PyObject_SetAttrString(ctx, "hvd_splits", splits) < 0)
        goto done;
    PyObject *given = PyDict_GetItemString(kw, "splits");
    if (!given || given == Py_None) {
        out = PyTuple_GET_ITEM(r, 0);
        Py_INCREF(out);
        goto done;
    }
    /* Horovod's: (tensor, received splits) when splits are given; the splits take no gradient */
    PyObject *m = PyObject_CallMethod(ctx, "mark_non_differentiable", "(O)", splits);
    if (!m)
        goto done;
    Py_DECREF(m);
    out = r;
    r = NULL;
done:
    Py_XDECREF(h);
    Py_XDECREF(r);
    return out;
}

/* the gradient's operation name: "<name>.grad<more>", or None for an unnamed forward */
static PyObject *grad_name(PyObject *kw, const char *more)
{
    PyObject *name = PyDict_GetItemString(kw, "name");
    if (name && PyUnicode_Check(name))
        return PyUnicode_FromFormat("%U.grad%s", name, more);
    Py_RETURN_NONE;
}

/* module.fn(t, name=name, op=op) (op < 0: not given) */
static PyObject *call_named(const char *fn, PyObject *t, PyObject *name, int op)
{
    PyObject *args = PyTuple_Pack(1, t), *kw = op < 0 ? Py_BuildValue("{sO}", "name", name)
                                                       : Py_BuildValue("{sOsi}", "name", name, "op", op);
    PyObject *r = args && kw ? hvd_tr_call(fn, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

/* a double from kw's key, def when absent or None; -1 with an exception */
static int kw_double(PyObject *kw, const char *key, double def, double *out)
{
    PyObject *v = PyDict_GetItemString(kw, key);
    *out = v && v != Py_None ? PyFloat_AsDouble(v) : def;
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* allgather's gradient: the average of every rank's gradient, this rank's rows of it */
static PyObject *allgather_grad(PyObject *ctx, PyObject *g, PyObject *kw)
{
    PyObject *name = grad_name(kw, ""), *rows_name = grad_name(kw, ".rows"), *sum = NULL, *rows = NULL;
    PyObject *rows_t = NULL, *all = NULL, *list = NULL, *out = NULL;
    int rank = hvd_tr_rank();
    if (!name || !rows_name || rank < 0 || !(sum = call_named("allreduce", g, name, AG_AVERAGE)))
        goto done;
    if (!(rows = PyObject_GetAttrString(ctx, "hvd_rows")) ||
        !(rows_t = PyObject_CallMethod(hvd_tr_torch(), "tensor", "([O])", rows)) ||
        !(all = call_named("allgather", rows_t, rows_name, -1)) || !(list = PyObject_CallMethod(all, "tolist", NULL)))
        goto done;
    long long offset = 0;
    for (int r = 0; r < rank && r < PyList_GET_SIZE(list); r++) {
        offset += PyLong_AsLongLong(PyList_GET_ITEM(list, r));
        if (PyErr_Occurred())
            goto done;
    }
    out = PyObject_CallMethod(sum, "narrow", "(iLO)", 0, offset, rows);
done:
    Py_XDECREF(name);
    Py_XDECREF(rows_name);
    Py_XDECREF(sum);
    Py_XDECREF(rows);
    Py_XDECREF(rows_t);
    Py_XDECREF(all);
    Py_XDECREF(list);
    return out;
}

/* broadcast's gradient: the average of every rank's gradient on the root, zeros elsewhere */
static PyObject *broadcast_grad(PyObject *g, PyObject *kw)
{
    PyObject *name = grad_name(kw, ""), *sum = NULL, *out = NULL;
    PyObject *root_o = PyDict_GetItemString(kw, "root_rank");
    long root = root_o ? PyLong_AsLong(root_o) : -1;
    int rank = hvd_tr_rank();
    if (!name || (root == -1 && PyErr_Occurred()) || rank < 0 || !(sum = call_named("allreduce", g, name, AG_AVERAGE)))
        goto done;
    if (rank == root) {
        out = sum;
        sum = NULL;
    } else {
        out = PyObject_CallMethod(hvd_tr_torch(), "zeros_like", "(O)", sum);
    }
done:
    Py_XDECREF(name);
    Py_XDECREF(sum);
    return out;
}

/* alltoall's gradient: sent back with the received splits */
static PyObject *alltoall_grad(PyObject *ctx, PyObject *g, PyObject *kw)
{
    PyObject *name = grad_name(kw, ""), *splits = PyObject_GetAttrString(ctx, "hvd_splits");
    PyObject *args = PyTuple_Pack(1, g), *ckw = NULL, *r = NULL, *out = NULL;
    if (!name || !splits || !args || !(ckw = Py_BuildValue("{sOsO}", "splits", splits, "name", name)) ||
        !(r = hvd_tr_call("alltoall", args, ckw)))
        goto done;
    if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
        out = PyTuple_GET_ITEM(r, 0);
        Py_INCREF(out);
    } else {
        PyErr_SetString(PyExc_SystemError, "dtrain.torch: alltoall with splits gave no (tensor, splits)");
    }
done:
    Py_XDECREF(name);
    Py_XDECREF(splits);
    Py_XDECREF(args);
    Py_XDECREF(ckw);
    Py_XDECREF(r);
    return out;
}

/* reducescatter's gradient: every rank's gradient gathered, times Horovod's factor */
static PyObject *reducescatter_grad(PyObject *g, PyObject *kw)
{
    double pre, post;
    if (kw_double(kw, "prescale_factor", 1.0, &pre) < 0 || kw_double(kw, "postscale_factor", 1.0, &post) < 0)
        return NULL;
    double scale = pre * post;
    PyObject *op = PyDict_GetItemString(kw, "op"); /* None: Average, reducescatter's default */
    long v = op && op != Py_None ? PyLong_AsLong(op) : AG_AVERAGE;
    if (v == -1 && PyErr_Occurred())
        return NULL;
    if (v == AG_SUM) {
        int size = hvd_tr_size();
        if (size < 0)
            return NULL;
        scale *= size;
    }
    PyObject *name = grad_name(kw, ""), *scaled = NULL, *out = NULL;
    if (!name)
        return NULL;
    if (scale != 1.0) {
        PyObject *s = PyFloat_FromDouble(scale);
        scaled = s ? PyNumber_Multiply(g, s) : NULL;
        Py_XDECREF(s);
    } else {
        scaled = g;
        Py_INCREF(g);
    }
    if (scaled)
        out = call_named("allgather", scaled, name, -1);
    Py_XDECREF(scaled);
    Py_DECREF(name);
    return out;
}

/* backward(ctx, grad, *the gradients of outputs that take none): (the input's gradient, None).
 * self is the ag_kind. */
static PyObject *fn_backward(PyObject *self, PyObject *args)
{
    long k = PyLong_AsLong(self);
    if (PyTuple_GET_SIZE(args) < 2) {
        PyErr_SetString(PyExc_TypeError, "dtrain.torch: backward takes ctx and a gradient");
        return NULL;
    }
    PyObject *ctx = PyTuple_GET_ITEM(args, 0), *kw = PyObject_GetAttrString(ctx, "hvd_kw"), *in = NULL, *r = NULL;
    /* libdt reads dense tensors: autograd's gradients may be expanded views */
    PyObject *g = kw ? PyObject_CallMethod(PyTuple_GET_ITEM(args, 1), "contiguous", NULL) : NULL;
    if (!g)
        goto done;
    if (!PyDict_Check(kw)) {
        PyErr_SetString(PyExc_SystemError, "dtrain.torch: backward without its forward's arguments");
        goto done;
    }
    switch (k) {
    case AG_ALLREDUCE: {
        /* the same op, average and scale factors; the gradient's name */
        PyObject *ckw = PyDict_Copy(kw), *name = grad_name(kw, ""), *targs = PyTuple_Pack(1, g);
        if (ckw && name && targs && PyDict_SetItemString(ckw, "name", name) == 0)
            in = hvd_tr_call("allreduce", targs, ckw);
        Py_XDECREF(ckw);
        Py_XDECREF(name);
        Py_XDECREF(targs);
        break;
    }
    case AG_ALLGATHER:
        in = allgather_grad(ctx, g, kw);
        break;
    case AG_BROADCAST:
        in = broadcast_grad(g, kw);
        break;
    case AG_ALLTOALL:
        in = alltoall_grad(ctx, g, kw);
        break;
    default:
        in = reducescatter_grad(g, kw);
        break;
    }
    if (in)
        r = PyTuple_Pack(2, in, Py_None);
done:
    Py_XDECREF(kw);
    Py_XDECREF(g);
    Py_XDECREF(in);
    return r;
}

/* ---- init ----------------------------------------------------------------------------------------- */

static PyMethodDef fn_forward_def = {"forward", fn_forward, METH_VARARGS, NULL};
static PyMethodDef fn_backward_def = {"backward", fn_backward, METH_VARARGS, NULL};
static PyMethodDef ag_defs[AG_N];

/* staticmethod(def bound to self) into dict[def->ml_name] */
static int add_static(PyObject *dict, PyMethodDef *def, PyObject *self)
{
    PyObject *f = PyCFunction_NewEx(def, self, NULL), *sm = f ? PyStaticMethod_New(f) : NULL;
    int rc = sm ? PyDict_SetItemString(dict, def->ml_name, sm) : -1;
    Py_XDECREF(f);
    Py_XDECREF(sm);
    return rc;
}

/* one kind: its Function class and its wrapper in place of torch.c's function */
static int add_kind(PyObject *module, PyObject *fn_base, PyObject *modname, int k)
{
    struct ag_op *op = &ag_ops[k];
    PyObject *kind = PyLong_FromLong(k), *dict = NULL, *cls = NULL, *doc = NULL, *wrapper = NULL;
    int rc = -1;
    if (!kind || !(op->direct = PyObject_GetAttrString(module, op->name)))
        goto done;
    if (!(dict = Py_BuildValue("{sssO}", "__module__", "dtrain.torch", "__doc__", Py_None)) ||
        add_static(dict, &fn_forward_def, kind) < 0 || add_static(dict, &fn_backward_def, kind) < 0)
        goto done;
    if (!(cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O)O", op->cls, fn_base, dict)) ||
        !(op->apply = PyObject_GetAttrString(cls, "apply")))
        goto done;
    /* the wrapper's doc: the direct function's, and how gradients flow */
    if (!(doc = PyObject_GetAttrString(op->direct, "__doc__")))
        goto done;
    op->doc = PyUnicode_FromFormat("%S\n\nDifferentiable when the tensor requires grad (and grad mode is on): "
                                   "the gradient goes back through the matching collective, as Horovod's %s.",
                                   doc, op->cls);
    if (!op->doc)
        goto done;
    ag_defs[k] = (PyMethodDef){op->name, (PyCFunction)(void (*)(void))ag_call, METH_VARARGS | METH_KEYWORDS,
                               PyUnicode_AsUTF8(op->doc)};
    if (!ag_defs[k].ml_doc || !(wrapper = PyCFunction_NewEx(&ag_defs[k], kind, modname)))
        goto done;
    rc = PyModule_AddObjectRef(module, op->name, wrapper);
done:
    Py_XDECREF(kind);
    Py_XDECREF(dict);
    Py_XDECREF(cls);
    Py_XDECREF(doc);
    Py_XDECREF(wrapper);
    return rc;
}

int hvd_autograd_init(PyObject *module)
{
    PyObject *autograd = NULL, *fn_base = NULL, *modname = NULL;
    int rc = -1;
    if (!(grad_enabled = hvd_tr_torch_attr("is_grad_enabled")) ||
        !(autograd = PyImport_ImportModule("torch.autograd")) ||
        !(fn_base = PyObject_GetAttrString(autograd, "Function")) || !(modname = PyModule_GetNameObject(module)))
        goto done;
    for (int k = 0; k < AG_N; k++)
        if (add_kind(module, fn_base, modname, k) < 0)
            goto done;
    rc = 0;
done:
    Py_XDECREF(autograd);
    Py_XDECREF(fn_base);
    Py_XDECREF(modname);
    return rc;
}
