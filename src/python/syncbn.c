/* syncbn.c: dtrain.torch's SyncBatchNorm (Horovod's horovod/torch/sync_batch_norm.py): batch norm
 * whose training statistics are those of the whole batch over all ranks.
 *
 * SyncBatchNorm is a subclass of torch.nn.modules.batchnorm._BatchNorm (its __init__, parameters
 * and buffers); its forward, in training with more than one rank, goes through
 * _SyncBatchNormFunction, a torch.autograd.Function subclass whose forward and backward are C
 * functions (staticmethods of a class made with type()):
 *
 *   forward:  per channel c, this rank's count n_r, mean m_r and biased variance v_r are
 *             all-gathered ((size, 1 + 2C)); the whole batch's mean and biased variance follow
 *             exactly (Chan's combination, no E[x^2] - E[x]^2 cancellation):
 *               N = sum n_r,  mean = sum n_r m_r / N,  var = sum n_r (v_r + (m_r - mean)^2) / N;
 *             y = (x - mean) / sqrt(var + eps) * weight + bias; the running mean and the
 *             unbiased running variance (var N / (N - 1)) move as torch's BatchNorm moves them.
 *   backward: the per-channel sums of dy and dy (x - mean) are all-reduced (summed), and
 *             dx = (dy - sum dy / N - (x - mean) invstd^2 sum(dy (x - mean)) / N) invstd weight;
 *             the weight's and bias's gradients stay this rank's share (DistributedOptimizer
 *             reduces them with the other gradients).
 * In eval mode with running statistics, or with one rank, it is _BatchNorm's own forward. Inputs
 * are (N, C, ...); half inputs have their statistics computed in float32. */
#include "python/train.h"

static PyObject *bn_base;  /* torch.nn.modules.batchnorm._BatchNorm */
static PyObject *fn_class; /* _SyncBatchNormFunction */

/* temporaries released together: K(var, expr) keeps expr's new reference or jumps to fail */
#define SC_MAX 96
typedef struct {
    PyObject *t[SC_MAX];
    int n;
} scope;

static PyObject *keep(scope *s, PyObject *o)
{
    if (!o) return NULL;
    if (s->n == SC_MAX) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_SystemError, "syncbn: too many temporaries");
        return NULL;
    }
    s->t[s->n++] = o;
    return o;
}

static void release(scope *s)
{
    while (s->n > 0) Py_DECREF(s->t[--s->n]);
}

#define K(var, expr)                                                                                                   \
    do {                                                                                                               \
        if (!((var) = keep(&sc, (expr)))) goto fail;                                                                  \
    } while (0)

/* [0, 2, 3, ..., ndim - 1]: the dimensions reduced per channel, and [1, C, 1, ...]: a channel
 * vector's shape against (N, C, ...) */
static int channel_dims(scope *s, long ndim, long c, PyObject **dims, PyObject **shape)
{
    if (!(*dims = keep(s, PyList_New(0))) || !(*shape = keep(s, PyList_New(0)))) return -1;
    for (long d = 0; d < ndim; d++) {
        PyObject *v = PyLong_FromLong(d), *w = PyLong_FromLong(d == 1 ? c : 1);
        int e = !v || !w || (d != 1 && PyList_Append(*dims, v) < 0) || PyList_Append(*shape, w) < 0;
        Py_XDECREF(v);
        Py_XDECREF(w);
        if (e) return -1;
    }
    return 0;
}

static long as_long(PyObject *o)
{
    if (!o) return -1;
    return PyLong_AsLong(o);
}

/* the dtype the statistics are computed in: float32 for half inputs, the input's otherwise */
static PyObject *stat_dtype(PyObject *dtype)
{
    PyObject *h = hvd_tr_torch_attr("float16"), *b = hvd_tr_torch_attr("bfloat16"), *r = NULL;
    if (h && b) r = (dtype == h || dtype == b) ? hvd_tr_torch_attr("float32") : (Py_INCREF(dtype), dtype);
    Py_XDECREF(h);
    Py_XDECREF(b);
    return r;
}

/* t.to(dtype) */
static PyObject *to(PyObject *t, PyObject *dtype) { return PyObject_CallMethod(t, "to", "(O)", dtype); }

/* a * x.view(shape) where x may be None (then a itself) */
static PyObject *mul_view(PyObject *a, PyObject *x, PyObject *shape)
{
    if (x == Py_None) {
        Py_INCREF(a);
        return a;
    }
    PyObject *v = PyObject_CallMethod(x, "view", "(O)", shape);
    if (!v) return NULL;
    PyObject *r = PyNumber_Multiply(a, v);
    Py_DECREF(v);
    return r;
}

/* forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum) */
static PyObject *fn_forward(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *ctx, *input, *weight, *bias, *rmean, *rvar, *ret = NULL;
    double eps, momentum;
    if (!PyArg_ParseTuple(args, "OOOOOOdd:_SyncBatchNormFunction.forward", &ctx, &input, &weight, &bias, &rmean,
                          &rvar, &eps, &momentum))
        return NULL;
    scope sc = {{NULL}, 0};
    PyObject *x, *in_dtype, *sdt, *xs, *dims, *shape, *vm, *numel, *packed, *list, *cat, *all, *counts, *means;
    PyObject *vars, *N, *mean, *dev, *dev2, *var, *invstd, *mb, *ib, *y, *tmp, *kw, *tensor_fn, *name, *gargs;
    K(x, PyObject_CallMethod(input, "contiguous", NULL));
    long ndim = as_long(keep(&sc, PyObject_CallMethod(x, "dim", NULL)));
    if (ndim < 0 && PyErr_Occurred()) goto fail;
    K(tmp, PyObject_GetAttrString(x, "shape"));
    long c = as_long(keep(&sc, PySequence_GetItem(tmp, 1)));
    if (c < 0) goto fail;
    if (channel_dims(&sc, ndim, c, &dims, &shape) < 0) goto fail;
    K(in_dtype, PyObject_GetAttrString(x, "dtype"));
    K(sdt, stat_dtype(in_dtype));
    K(xs, to(x, sdt));
    /* this rank's count, mean and biased variance per channel, as one row */
    K(kw, Py_BuildValue("{sO}", "unbiased", Py_False));
    K(tmp, hvd_tr_torch_attr("var_mean"));
    K(gargs, Py_BuildValue("(OO)", xs, dims));
    K(vm, PyObject_Call(tmp, gargs, kw));
    long n = as_long(keep(&sc, PyObject_CallMethod(x, "numel", NULL)));
    if (n < 0 && PyErr_Occurred()) goto fail;
    n /= c;
    K(tensor_fn, hvd_tr_torch_attr("tensor"));
    K(kw, Py_BuildValue("{sOsO}", "dtype", sdt, "device", keep(&sc, PyObject_GetAttrString(x, "device"))));
    K(gargs, Py_BuildValue("([d])", (double)n));
    K(numel, PyObject_Call(tensor_fn, gargs, kw));
    K(list, PyTuple_Pack(3, numel, PyTuple_GET_ITEM(vm, 1), PyTuple_GET_ITEM(vm, 0)));
    K(cat, PyObject_CallMethod(hvd_tr_torch(), "cat", "(O)", list));
    K(packed, PyObject_CallMethod(cat, "unsqueeze", "i", 0));
    /* every rank's row: (size, 1 + 2C) */
    K(name, PyUnicode_FromString("sync_batch_norm.stats"));
    K(gargs, PyTuple_Pack(1, packed));
    K(kw, Py_BuildValue("{sO}", "name", name));
    K(all, hvd_tr_call("allgather", gargs, kw));
    K(counts, PyObject_CallMethod(all, "narrow", "iii", 1, 0, 1));
    K(means, PyObject_CallMethod(all, "narrow", "iil", 1, 1, c));
    K(vars, PyObject_CallMethod(all, "narrow", "iil", 1, 1 + c, c));
    K(N, PyObject_CallMethod(counts, "sum", NULL));
    double total = PyFloat_AsDouble(keep(&sc, PyObject_CallMethod(N, "item", NULL)));
    if (total == -1.0 && PyErr_Occurred()) goto fail;
    if (total <= 1.0) {
        PyErr_Format(PyExc_ValueError,
                     "Expected more than 1 value per channel when training, got %.0f over all ranks (input shape %S "
                     "on this rank)",
                     total, keep(&sc, PyObject_GetAttrString(x, "shape")));
        goto fail;
    }
    K(tmp, PyNumber_Multiply(counts, means));
    K(tmp, PyObject_CallMethod(tmp, "sum", "i", 0));
    K(mean, PyNumber_TrueDivide(tmp, N));
    K(dev, PyNumber_Subtract(means, mean));
    K(dev2, PyNumber_Multiply(dev, dev));
    K(tmp, PyNumber_Add(vars, dev2));
    K(tmp, PyNumber_Multiply(counts, tmp));
    K(tmp, PyObject_CallMethod(tmp, "sum", "i", 0));
    K(var, PyNumber_TrueDivide(tmp, N));
    K(tmp, PyObject_CallMethod(var, "add", "d", eps));
    K(invstd, PyObject_CallMethod(tmp, "rsqrt", NULL));
    /* running statistics, as torch's BatchNorm: the unbiased variance, momentum the weight of the new */
    if (rmean != Py_None && rvar != Py_None) {
        PyObject *rdt, *nm, *nv, *a, *b, *keepw, *neww, *unb, *m;
        K(rdt, PyObject_GetAttrString(rmean, "dtype"));
        K(keepw, PyFloat_FromDouble(1.0 - momentum));
        K(neww, PyFloat_FromDouble(momentum));
        K(unb, PyFloat_FromDouble(momentum * total / (total - 1.0)));
        K(a, PyNumber_Multiply(rmean, keepw));
        K(m, to(mean, rdt));
        K(b, PyNumber_Multiply(m, neww));
        K(nm, PyNumber_Add(a, b));
        K(a, PyNumber_Multiply(rvar, keepw));
        K(m, to(var, rdt));
        K(b, PyNumber_Multiply(m, unb));
        K(nv, PyNumber_Add(a, b));
        K(tmp, PyObject_CallMethod(rmean, "copy_", "(O)", nm));
        K(tmp, PyObject_CallMethod(rvar, "copy_", "(O)", nv));
    }
    K(mb, PyObject_CallMethod(mean, "view", "(O)", shape));
    K(ib, PyObject_CallMethod(invstd, "view", "(O)", shape));
    K(tmp, PyNumber_Subtract(xs, mb));
    K(y, PyNumber_Multiply(tmp, ib));
    K(y, mul_view(y, weight, shape));
    if (bias != Py_None) {
        K(tmp, PyObject_CallMethod(bias, "view", "(O)", shape));
        K(y, PyNumber_Add(y, tmp));
    }
    K(y, to(y, in_dtype));
    K(tmp, PyObject_CallMethod(ctx, "save_for_backward", "OOOO", xs, weight, mean, invstd));
    if (PyObject_SetAttrString(ctx, "dt_total", keep(&sc, PyFloat_FromDouble(total))) < 0 ||
        PyObject_SetAttrString(ctx, "dt_in_dtype", in_dtype) < 0)
        goto fail;
    Py_INCREF(y);
    ret = y;
fail:
    release(&sc);
    return ret;
}

/* backward(ctx, dy) -> (dx, dweight, dbias, None, None, None, None) */
static PyObject *fn_backward(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *ctx, *grad_out, *ret = NULL;
    if (!PyArg_ParseTuple(args, "OO:_SyncBatchNormFunction.backward", &ctx, &grad_out)) return NULL;
    scope sc = {{NULL}, 0};
    PyObject *saved, *xs, *weight, *mean, *invstd, *dy, *dims, *shape, *xmu, *sum_dy, *sum_dy_xmu, *tmp, *needs;
    PyObject *gw = Py_None, *gb = Py_None, *dx = Py_None, *packed, *red, *kw, *gargs, *op, *mdy, *mdyx, *sdt, *list;
    K(saved, PyObject_GetAttrString(ctx, "saved_tensors"));
    if (!PyTuple_Check(saved) || PyTuple_GET_SIZE(saved) != 4) {
        PyErr_SetString(PyExc_RuntimeError, "_SyncBatchNormFunction: saved tensors lost");
        goto fail;
    }
    xs = PyTuple_GET_ITEM(saved, 0);
    weight = PyTuple_GET_ITEM(saved, 1);
    mean = PyTuple_GET_ITEM(saved, 2);
    invstd = PyTuple_GET_ITEM(saved, 3);
    double total = PyFloat_AsDouble(keep(&sc, PyObject_GetAttrString(ctx, "dt_total")));
    if (total == -1.0 && PyErr_Occurred()) goto fail;
    K(sdt, PyObject_GetAttrString(xs, "dtype"));
    K(dy, PyObject_CallMethod(grad_out, "contiguous", NULL));
    K(dy, to(dy, sdt));
    long ndim = as_long(keep(&sc, PyObject_CallMethod(xs, "dim", NULL)));
    long c = as_long(keep(&sc, PySequence_GetItem(keep(&sc, PyObject_GetAttrString(xs, "shape")), 1)));
    if (PyErr_Occurred() || channel_dims(&sc, ndim, c, &dims, &shape) < 0) goto fail;
    K(tmp, PyObject_CallMethod(mean, "view", "(O)", shape));
    K(xmu, PyNumber_Subtract(xs, tmp));
    K(sum_dy, PyObject_CallMethod(dy, "sum", "(O)", dims));
    K(tmp, PyNumber_Multiply(dy, xmu));
    K(sum_dy_xmu, PyObject_CallMethod(tmp, "sum", "(O)", dims));
    K(needs, PyObject_GetAttrString(ctx, "needs_input_grad"));
    int need_x = PyObject_IsTrue(PyTuple_GET_ITEM(needs, 0)), need_w = PyObject_IsTrue(PyTuple_GET_ITEM(needs, 1)),
        need_b = PyObject_IsTrue(PyTuple_GET_ITEM(needs, 2));
    if (need_x < 0 || need_w < 0 || need_b < 0) goto fail;
    if (weight != Py_None && need_w) {
        K(gw, PyNumber_Multiply(sum_dy_xmu, invstd));
        K(gw, to(gw, keep(&sc, PyObject_GetAttrString(weight, "dtype"))));
    }
    if (need_b) gb = sum_dy;
    /* every rank all-reduces, whether it needs dx or not: the ranks' collectives stay the same */
    K(list, PyTuple_Pack(2, sum_dy, sum_dy_xmu));
    K(packed, PyObject_CallMethod(hvd_tr_torch(), "cat", "(O)", list));
    K(op, hvd_tr_fn("Sum"));
    K(kw, Py_BuildValue("{sssO}", "name", "sync_batch_norm.sum_dy", "op", op));
    K(gargs, PyTuple_Pack(1, packed));
    K(red, hvd_tr_call("allreduce", gargs, kw));
    if (need_x) {
        PyObject *t1, *t2, *scale, *nt, *v, *idt;
        K(nt, PyFloat_FromDouble(total));
        K(mdy, PyObject_CallMethod(red, "narrow", "iil", 0, 0, c));
        K(mdyx, PyObject_CallMethod(red, "narrow", "iil", 0, c, c));
        K(mdy, PyNumber_TrueDivide(mdy, nt));
        K(mdyx, PyNumber_TrueDivide(mdyx, nt));
        /* dx = (dy - mean_dy - xmu invstd^2 mean_dy_xmu) invstd weight */
        K(v, PyObject_CallMethod(mdy, "view", "(O)", shape));
        K(t1, PyNumber_Subtract(dy, v));
        K(scale, PyNumber_Multiply(invstd, invstd));
        K(scale, PyNumber_Multiply(scale, mdyx));
        K(v, PyObject_CallMethod(scale, "view", "(O)", shape));
        K(t2, PyNumber_Multiply(xmu, v));
        K(t1, PyNumber_Subtract(t1, t2));
        K(v, PyObject_CallMethod(invstd, "view", "(O)", shape));
        K(dx, PyNumber_Multiply(t1, v));
        K(dx, mul_view(dx, weight, shape));
        K(idt, PyObject_GetAttrString(ctx, "dt_in_dtype"));
        K(dx, to(dx, idt));
    }
    ret = Py_BuildValue("(OOOOOOO)", dx, gw, gb, Py_None, Py_None, Py_None, Py_None);
fail:
    release(&sc);
    return ret;
}

/* SyncBatchNorm methods: args[0] is the module */

static PyObject *m_check_input_dim(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self, *input;
    if (!PyArg_ParseTuple(args, "OO:_check_input_dim", &self, &input)) return NULL;
    PyObject *d = PyObject_CallMethod(input, "dim", NULL);
    long nd = as_long(d);
    Py_XDECREF(d);
    if (nd == -1 && PyErr_Occurred()) return NULL;
    if (nd < 2) {
        PyErr_Format(PyExc_ValueError, "expected at least 2D input (got %ldD input)", nd);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int attr_true(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static PyObject *m_forward(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *self, *input, *ret = NULL;
    if (!PyArg_ParseTuple(args, "OO:forward", &self, &input)) return NULL;
    scope sc = {{NULL}, 0};
    PyObject *tmp, *rmean = Py_None, *rvar = Py_None, *mom, *w, *b, *eps;
    K(tmp, PyObject_CallMethod(self, "_check_input_dim", "(O)", input));
    int size = hvd_tr_size(), training = attr_true(self, "training"), trs = attr_true(self, "track_running_stats");
    if (size < 0 || training < 0 || trs < 0) goto fail;
    if (size == 1 || (!training && trs)) {
        /* one rank, or eval with running statistics: plain batch norm */
        K(tmp, PyObject_GetAttrString(bn_base, "forward"));
        K(ret, PyObject_CallFunctionObjArgs(tmp, self, input, NULL));
        Py_INCREF(ret);
        goto fail;
    }
    double factor = 0.0;
    if (training && trs) {
        PyObject *nbt;
        K(nbt, PyObject_GetAttrString(self, "num_batches_tracked"));
        if (nbt != Py_None) K(tmp, PyObject_CallMethod(nbt, "add_", "i", 1));
        K(mom, PyObject_GetAttrString(self, "momentum"));
        if (mom == Py_None) { /* a cumulative moving average */
            double k = nbt == Py_None ? 1.0 : PyFloat_AsDouble(keep(&sc, PyObject_CallMethod(nbt, "item", NULL)));
            if (k == -1.0 && PyErr_Occurred()) goto fail;
            factor = 1.0 / k;
        } else if ((factor = PyFloat_AsDouble(mom)) == -1.0 && PyErr_Occurred()) {
            goto fail;
        }
        K(rmean, PyObject_GetAttrString(self, "running_mean"));
        K(rvar, PyObject_GetAttrString(self, "running_var"));
    }
    K(w, PyObject_GetAttrString(self, "weight"));
    K(b, PyObject_GetAttrString(self, "bias"));
    K(eps, PyObject_GetAttrString(self, "eps"));
    K(tmp, PyObject_GetAttrString(fn_class, "apply"));
    K(ret, PyObject_CallFunction(tmp, "OOOOOOd", input, w, b, rmean, rvar, eps, factor));
    Py_INCREF(ret);
fail:
    release(&sc);
    return ret;
}

static PyMethodDef fn_defs[] = {{"forward", fn_forward, METH_VARARGS, NULL},
                                {"backward", fn_backward, METH_VARARGS, NULL},
                                {NULL, NULL, 0, NULL}};
static PyMethodDef bn_defs[] = {{"_check_input_dim", m_check_input_dim, METH_VARARGS, NULL},
                                {"forward", m_forward, METH_VARARGS, NULL},
                                {NULL, NULL, 0, NULL}};

static const char syncbn_doc[] =
    "SyncBatchNorm(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)\n\n"
    "Batch norm over (N, C, ...) inputs whose training statistics (mean and variance per channel) are those "
    "of the batches of all ranks together, and whose input gradient is that of the whole batch; the running "
    "statistics move as torch's BatchNorm moves them. In eval mode (with running statistics) or on one rank, "
    "plain batch norm.";

int hvd_syncbn_init(PyObject *module)
{
    PyObject *bnmod = NULL, *autograd = NULL, *fn_base = NULL, *dict = NULL, *cls = NULL;
    int rc = -1;
    if (!(bnmod = PyImport_ImportModule("torch.nn.modules.batchnorm")) ||
        !(bn_base = PyObject_GetAttrString(bnmod, "_BatchNorm")) ||
        !(autograd = PyImport_ImportModule("torch.autograd")) || !(fn_base = PyObject_GetAttrString(autograd, "Function")))
        goto done;
    if (!(dict = Py_BuildValue("{ss}", "__module__", "dtrain.torch"))) goto done;
    for (PyMethodDef *d = fn_defs; d->ml_name; d++) {
        PyObject *f = PyCFunction_NewEx(d, NULL, NULL), *sm = f ? PyStaticMethod_New(f) : NULL;
        int e = !sm || PyDict_SetItemString(dict, d->ml_name, sm) < 0;
        Py_XDECREF(f);
        Py_XDECREF(sm);
        if (e) goto done;
    }
    if (!(fn_class = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O)O", "_SyncBatchNormFunction", fn_base, dict)))
        goto done;
    Py_SETREF(dict, Py_BuildValue("{ssss}", "__module__", "dtrain.torch", "__doc__", syncbn_doc));
    if (!dict) goto done;
    for (PyMethodDef *d = bn_defs; d->ml_name; d++) {
        PyObject *m = hvd_tr_method(d);
        int e = !m || PyDict_SetItemString(dict, d->ml_name, m) < 0;
        Py_XDECREF(m);
        if (e) goto done;
    }
    if (!(cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O)O", "SyncBatchNorm", bn_base, dict))) goto done;
    if (PyModule_AddObjectRef(module, "SyncBatchNorm", cls) < 0) goto done;
    rc = 0;
done:
    Py_XDECREF(bnmod);
    Py_XDECREF(autograd);
    Py_XDECREF(fn_base);
    Py_XDECREF(dict);
    Py_XDECREF(cls);
    return rc;
}
