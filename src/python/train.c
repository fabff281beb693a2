/* train.c: dtrain.torch's training helpers, first part (Horovod's horovod/torch/functions.py and
 * compression.py): Compression, broadcast_parameters, broadcast_object, allgather_object; the
 * helpers the other parts share (train.h); and hvd_train_init, which adds all of it (with
 * optstate.c's broadcast_optimizer_state, optim.c's DistributedOptimizer and syncbn.c's
 * SyncBatchNorm) to the module.
 *
 * Every collective goes through the module's Python-level functions (broadcast_async_,
 * synchronize, allgather, ...); of torch.c it uses only hvd.h's references and its process-set check. */
#include "python/train.h"

#include <stdio.h>

/* the module and torch: torch.c's references (hvd_g), set before hvd_train_init runs */
PyObject *hvd_tr_module(void) { return hvd_g.module; }
PyObject *hvd_tr_torch(void) { return hvd_g.torch; }

PyObject *hvd_tr_fn(const char *name)
{
    PyObject *f = PyObject_GetAttrString(hvd_g.module, name);
    if (!f) {
        PyErr_Clear();
        PyErr_Format(PyExc_AttributeError, "dtrain.torch has no %s (needed by its training helpers)", name);
    }
    return f;
}

PyObject *hvd_tr_call(const char *name, PyObject *args, PyObject *kwargs)
{
    PyObject *f = hvd_tr_fn(name);
    if (!f) return NULL;
    PyObject *r = PyObject_Call(f, args, kwargs);
    Py_DECREF(f);
    return r;
}

static int call_int(const char *name)
{
    PyObject *args = PyTuple_New(0);
    if (!args) return -1;
    PyObject *r = hvd_tr_call(name, args, NULL);
    Py_DECREF(args);
    if (!r) return -1;
    long v = PyLong_AsLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) return -1;
    return (int)v;
}

int hvd_tr_size(void) { return call_int("size"); }
int hvd_tr_rank(void) { return call_int("rank"); }

PyObject *hvd_tr_torch_attr(const char *name) { return PyObject_GetAttrString(hvd_g.torch, name); }

PyObject *hvd_tr_method(PyMethodDef *def)
{
    PyObject *f = PyCFunction_NewEx(def, NULL, NULL);
    if (!f) return NULL;
    PyObject *m = PyInstanceMethod_New(f);
    Py_DECREF(f);
    return m;
}

/* ---- Compression ------------------------------------------------------------------------------ */
/* Horovod's compressors are classes used without instances: Compression.fp16.compress(t) gives
 * (compressed, ctx), and decompress(compressed, ctx) gives back a tensor of the original type. */

static PyObject *compressor_abstract(PyObject *unused, PyObject *args)
{
    (void)unused;
    (void)args;
    PyErr_SetString(PyExc_NotImplementedError, "Compressor is abstract: use Compression.none or Compression.fp16, "
                                               "or a subclass that defines compress and decompress");
    return NULL;
}

static PyObject *none_compress(PyObject *unused, PyObject *tensor)
{
    (void)unused;
    return PyTuple_Pack(2, tensor, Py_None);
}

static PyObject *none_decompress(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *t, *ctx;
    if (!PyArg_ParseTuple(args, "OO:decompress", &t, &ctx)) return NULL;
    Py_INCREF(t);
    return t;
}

/* dtype.is_floating_point: 1, 0, or -1 with an exception */
static int dtype_is_float(PyObject *dtype)
{
    PyObject *v = PyObject_GetAttrString(dtype, "is_floating_point");
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* tensor.type(dtype) */
static PyObject *tensor_cast(PyObject *tensor, PyObject *dtype)
{
    return PyObject_CallMethod(tensor, "type", "(O)", dtype);
}

/* floating tensors (fp32, fp64, bf16, fp16) go as fp16; the context is the original dtype */
static PyObject *fp16_compress(PyObject *unused, PyObject *tensor)
{
    (void)unused;
    PyObject *dtype = PyObject_GetAttrString(tensor, "dtype"), *out = NULL, *half = NULL, *c = NULL;
    if (!dtype) return NULL;
    int fl = dtype_is_float(dtype);
    if (fl < 0) goto done;
    if (fl) {
        if (!(half = hvd_tr_torch_attr("float16")) || !(c = tensor_cast(tensor, half))) goto done;
    } else {
        c = tensor;
        Py_INCREF(c);
    }
    out = PyTuple_Pack(2, c, dtype);
done:
    Py_XDECREF(c);
    Py_XDECREF(half);
    Py_DECREF(dtype);
    return out;
}

static PyObject *fp16_decompress(PyObject *unused, PyObject *args)
{
    (void)unused;
    PyObject *t, *ctx;
    if (!PyArg_ParseTuple(args, "OO:decompress", &t, &ctx)) return NULL;
    if (ctx != Py_None) {
        int fl = dtype_is_float(ctx);
        if (fl < 0) return NULL;
        if (fl) return tensor_cast(t, ctx);
    }
    Py_INCREF(t);
    return t;
}

static PyMethodDef compressor_methods[] = {
    {"compress", compressor_abstract, METH_VARARGS | METH_STATIC, "compress(tensor) -> (compressed, ctx)"},
    {"decompress", compressor_abstract, METH_VARARGS | METH_STATIC, "decompress(tensor, ctx) -> tensor"},
    {NULL, NULL, 0, NULL}};
static PyMethodDef none_methods[] = {
    {"compress", none_compress, METH_O | METH_STATIC, "compress(tensor) -> (tensor, None): unchanged"},
    {"decompress", none_decompress, METH_VARARGS | METH_STATIC, "decompress(tensor, ctx) -> tensor: unchanged"},
    {NULL, NULL, 0, NULL}};
static PyMethodDef fp16_methods[] = {
    {"compress", fp16_compress, METH_O | METH_STATIC,
     "compress(tensor) -> (tensor cast to float16 when floating, its original dtype)"},
    {"decompress", fp16_decompress, METH_VARARGS | METH_STATIC,
     "decompress(tensor, dtype) -> tensor cast back to dtype when floating"},
    {NULL, NULL, 0, NULL}};

static PyObject *compressor_type(const char *name, const char *doc, PyMethodDef *methods, PyObject *base)
{
    PyType_Slot slots[] = {{Py_tp_methods, methods}, {Py_tp_doc, (void *)(uintptr_t)doc}, {0, NULL}};
    PyType_Spec spec = {name, (int)sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
    return base ? PyType_FromSpecWithBases(&spec, base) : PyType_FromSpec(&spec);
}

static int add_compression(PyObject *module)
{
    PyObject *base = NULL, *none = NULL, *fp16 = NULL, *dict = NULL, *cls = NULL;
    int rc = -1;
    if (!(base = compressor_type("dtrain.torch.Compressor",
                                 "Interface of a gradient compression: static compress(tensor) -> (tensor, ctx) and "
                                 "decompress(tensor, ctx) -> tensor.",
                                 compressor_methods, NULL)))
        goto done;
    if (!(none = compressor_type("dtrain.torch.NoneCompressor", "No compression: tensors go unchanged.", none_methods,
                                 base)) ||
        !(fp16 = compressor_type("dtrain.torch.FP16Compressor",
                                 "Floating tensors go as float16 and come back in their own dtype.", fp16_methods,
                                 base)))
        goto done;
    dict = Py_BuildValue("{sOsOssss}", "none", none, "fp16", fp16, "__module__", "dtrain.torch", "__doc__",
                         "Gradient compressions for DistributedOptimizer and allreduce: Compression.none (the "
                         "default) and Compression.fp16.");
    if (!dict) goto done;
    if (!(cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s()O", "Compression", dict))) goto done;
    if (PyModule_AddObjectRef(module, "Compressor", base) < 0 ||
        PyModule_AddObjectRef(module, "NoneCompressor", none) < 0 ||
        PyModule_AddObjectRef(module, "FP16Compressor", fp16) < 0 ||
        PyModule_AddObjectRef(module, "Compression", cls) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(base);
    Py_XDECREF(none);
    Py_XDECREF(fp16);
    Py_XDECREF(dict);
    Py_XDECREF(cls);
    return rc;
}

/* ---- broadcast_object, allgather_object -------------------------------------------------------- */
/* An object travels as its pickle in a uint8 tensor, its size in an int64 tensor ahead of it (a
 * rank that receives must allocate before the bytes arrive). */

static PyObject *pickle_call(const char *fn, PyObject *arg)
{
    PyObject *pk = PyImport_ImportModule("pickle");
    if (!pk) return NULL;
    PyObject *r = PyObject_CallMethod(pk, fn, "(O)", arg);
    Py_DECREF(pk);
    return r;
}

/* torch.tensor([v], dtype=torch.int64) */
static PyObject *int64_tensor1(long long v)
{
    PyObject *i64 = hvd_tr_torch_attr("int64"), *fn = hvd_tr_torch_attr("tensor"), *r = NULL;
    if (i64 && fn) {
        PyObject *args = Py_BuildValue("([L])", v), *kw = Py_BuildValue("{sO}", "dtype", i64);
        if (args && kw) r = PyObject_Call(fn, args, kw);
        Py_XDECREF(args);
        Py_XDECREF(kw);
    }
    Py_XDECREF(i64);
    Py_XDECREF(fn);
    return r;
}

/* a uint8 tensor over buf's bytes (buf, a bytearray, must outlive it) */
static PyObject *bytes_tensor(PyObject *buf)
{
    PyObject *u8 = hvd_tr_torch_attr("uint8"), *fn = hvd_tr_torch_attr("frombuffer"), *r = NULL;
    if (u8 && fn) {
        PyObject *args = PyTuple_Pack(1, buf), *kw = Py_BuildValue("{sO}", "dtype", u8);
        if (args && kw) r = PyObject_Call(fn, args, kw);
        Py_XDECREF(args);
        Py_XDECREF(kw);
    }
    Py_XDECREF(u8);
    Py_XDECREF(fn);
    return r;
}

/* module.fn(tensor, root, name=name): the blocking broadcast in place */
static int broadcast_inplace(PyObject *tensor, int root, PyObject *name)
{
    PyObject *args = Py_BuildValue("(Oi)", tensor, root), *kw = Py_BuildValue("{sO}", "name", name), *r = NULL;
    if (args && kw) r = hvd_tr_call("broadcast_", args, kw);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* a tensor's bytes as a bytes object (tensor.numpy().tobytes()) */
static PyObject *tensor_bytes(PyObject *t)
{
    PyObject *np = PyObject_CallMethod(t, "numpy", NULL);
    if (!np) return NULL;
    PyObject *b = PyObject_CallMethod(np, "tobytes", NULL);
    Py_DECREF(np);
    return b;
}

/* name, or the function's name where it is None: not the object's type as Horovod's, which differs
 * between ranks in the common broadcast_object(state if rank == 0 else None) and then names
 * different operations on root and the others */
static PyObject *default_name(const char *fn, PyObject *name)
{
    if (name && name != Py_None) {
        if (!PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "%s: name must be a str or None", fn);
            return NULL;
        }
        Py_INCREF(name);
        return name;
    }
    return PyUnicode_FromString(fn);
}

PyObject *hvd_tr_broadcast_object(PyObject *obj, int root, PyObject *name_in)
{
    PyObject *name = NULL, *nsz = NULL, *nt = NULL, *pick = NULL, *buf = NULL, *t = NULL, *sz = NULL, *out = NULL;
    int rank = hvd_tr_rank();
    if (rank < 0) return NULL;
    if (!(name = default_name("broadcast_object", name_in))) return NULL;
    if (!(nsz = PyUnicode_FromFormat("%U.sz", name)) || !(nt = PyUnicode_FromFormat("%U.t", name))) goto done;
    if (rank == root) {
        if (!(pick = pickle_call("dumps", obj)) || !(buf = PyByteArray_FromObject(pick)) || !(t = bytes_tensor(buf)) ||
            !(sz = int64_tensor1((long long)PyByteArray_GET_SIZE(buf))))
            goto done;
        if (broadcast_inplace(sz, root, nsz) < 0 || broadcast_inplace(t, root, nt) < 0) goto done;
        Py_INCREF(obj);
        out = obj;
    } else {
        if (!(sz = int64_tensor1(0)) || broadcast_inplace(sz, root, nsz) < 0) goto done;
        PyObject *n = PyObject_CallMethod(sz, "item", NULL);
        if (!n) goto done;
        long long len = PyLong_AsLongLong(n);
        Py_DECREF(n);
        if (len <= 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "broadcast_object %U: root rank %d sent a size of %lld bytes", name,
                             root, len);
            goto done;
        }
        PyObject *empty = hvd_tr_torch_attr("empty"), *u8 = hvd_tr_torch_attr("uint8");
        if (empty && u8) {
            PyObject *args = Py_BuildValue("(L)", len), *kw = Py_BuildValue("{sO}", "dtype", u8);
            if (args && kw) t = PyObject_Call(empty, args, kw);
            Py_XDECREF(args);
            Py_XDECREF(kw);
        }
        Py_XDECREF(empty);
        Py_XDECREF(u8);
        if (!t || broadcast_inplace(t, root, nt) < 0) goto done;
        if (!(pick = tensor_bytes(t))) goto done;
        out = pickle_call("loads", pick);
    }
done:
    Py_XDECREF(name);
    Py_XDECREF(nsz);
    Py_XDECREF(nt);
    Py_XDECREF(pick);
    Py_XDECREF(buf);
    Py_XDECREF(t);
    Py_XDECREF(sz);
    return out;
}

static PyObject *py_broadcast_object(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"obj", "root_rank", "name", "process_set", NULL};
    PyObject *obj, *name = Py_None, *pset = Py_None;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iOO:broadcast_object", kwlist, &obj, &root, &name, &pset) ||
        hvd_check_process_set(pset, "broadcast_object") < 0)
        return NULL;
    return hvd_tr_broadcast_object(obj, root, name);
}

/* module.allgather(tensor, name=name) */
static PyObject *allgather_named(PyObject *tensor, PyObject *name)
{
    PyObject *args = PyTuple_Pack(1, tensor), *kw = Py_BuildValue("{sO}", "name", name), *r = NULL;
    if (args && kw) r = hvd_tr_call("allgather", args, kw);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

PyObject *hvd_tr_allgather_object(PyObject *obj, PyObject *name_in)
{
    PyObject *name = NULL, *nsz = NULL, *nt = NULL, *pick = NULL, *buf = NULL, *t = NULL, *sz = NULL;
    PyObject *sizes = NULL, *all = NULL, *bytes = NULL, *out = NULL, *list = NULL;
    int size = hvd_tr_size();
    if (size < 0) return NULL;
    if (!(name = default_name("allgather_object", name_in))) return NULL;
    if (!(nsz = PyUnicode_FromFormat("%U.sz", name)) || !(nt = PyUnicode_FromFormat("%U.t", name))) goto done;
    if (!(pick = pickle_call("dumps", obj)) || !(buf = PyByteArray_FromObject(pick)) || !(t = bytes_tensor(buf)) ||
        !(sz = int64_tensor1((long long)PyByteArray_GET_SIZE(buf))))
        goto done;
    PyObject *g = allgather_named(sz, nsz);
    if (!g) goto done;
    sizes = PyObject_CallMethod(g, "tolist", NULL);
    Py_DECREF(g);
    if (!sizes) goto done;
    if (!PyList_Check(sizes) || PyList_GET_SIZE(sizes) != size) {
        PyErr_Format(PyExc_RuntimeError, "allgather_object %U: allgather gave %zd sizes for %d ranks", name,
                     PyList_Check(sizes) ? PyList_GET_SIZE(sizes) : (Py_ssize_t)-1, size);
        goto done;
    }
    if (!(all = allgather_named(t, nt)) || !(bytes = tensor_bytes(all))) goto done;
    if (!(list = PyList_New(size))) goto done;
    Py_ssize_t off = 0, total = PyBytes_GET_SIZE(bytes);
    for (int r = 0; r < size; r++) {
        Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, r));
        if (n < 0 && PyErr_Occurred()) goto done;
        if (n <= 0 || off + n > total) {
            PyErr_Format(PyExc_RuntimeError, "allgather_object %U: rank %d's %zd bytes do not fit the %zd gathered",
                         name, r, n, total);
            goto done;
        }
        PyObject *piece = PyBytes_FromStringAndSize(PyBytes_AS_STRING(bytes) + off, n);
        if (!piece) goto done;
        PyObject *o = pickle_call("loads", piece);
        Py_DECREF(piece);
        if (!o) goto done;
        PyList_SET_ITEM(list, r, o);
        off += n;
    }
    out = list;
    list = NULL;
done:
    Py_XDECREF(name);
    Py_XDECREF(nsz);
    Py_XDECREF(nt);
    Py_XDECREF(pick);
    Py_XDECREF(buf);
    Py_XDECREF(t);
    Py_XDECREF(sz);
    Py_XDECREF(sizes);
    Py_XDECREF(all);
    Py_XDECREF(bytes);
    Py_XDECREF(list);
    return out;
}

static PyObject *py_allgather_object(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"obj", "name", "process_set", NULL};
    PyObject *obj, *name = Py_None, *pset = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:allgather_object", kwlist, &obj, &name, &pset) ||
        hvd_check_process_set(pset, "allgather_object") < 0)
        return NULL;
    return hvd_tr_allgather_object(obj, name);
}

/* ---- broadcast_parameters --------------------------------------------------------------------- */

/* tensor, or tensor.detach() when it requires grad: the same memory, written in place without
 * autograd's refusal of in-place operations on leaves that require grad */
static PyObject *detached(PyObject *t)
{
    PyObject *rg = PyObject_GetAttrString(t, "requires_grad");
    if (!rg) return NULL;
    int req = PyObject_IsTrue(rg);
    Py_DECREF(rg);
    if (req < 0) return NULL;
    if (req) return PyObject_CallMethod(t, "detach", NULL);
    Py_INCREF(t);
    return t;
}

/* Broadcasts each (name, tensor) of pairs (a list) from root, in place: all started, then all
 * waited for (through broadcast_async_ and synchronize; broadcast_ one at a time where the module
 * has no broadcast_async_). 0, or -1 with an exception. */
int hvd_tr_broadcast_pairs(PyObject *pairs, int root)
{
    PyObject *bcast = PyObject_GetAttrString(hvd_g.module, "broadcast_async_"), *sync = NULL, *handles = NULL;
    int async = bcast != NULL, rc = -1;
    if (!async) {
        PyErr_Clear();
        if (!(bcast = hvd_tr_fn("broadcast_"))) return -1;
    } else if (!(sync = hvd_tr_fn("synchronize"))) {
        goto done;
    }
    if (!(handles = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pairs); i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyObject *t = detached(PyTuple_GET_ITEM(pair, 1));
        if (!t) goto done;
        PyObject *h = PyObject_CallFunction(bcast, "OiO", t, root, PyTuple_GET_ITEM(pair, 0));
        Py_DECREF(t);
        if (!h) goto done;
        int e = PyList_Append(handles, h);
        Py_DECREF(h);
        if (e < 0) goto done;
    }
    if (async) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++) {
            PyObject *r = PyObject_CallOneArg(sync, PyList_GET_ITEM(handles, i));
            if (!r) goto done;
            Py_DECREF(r);
        }
    }
    rc = 0;
done:
    Py_XDECREF(bcast);
    Py_XDECREF(sync);
    Py_XDECREF(handles);
    return rc;
}

/* params as a list of (name or None, tensor): a dict (a state_dict) sorted by name as Horovod
 * does; a list or any other iterable (named_parameters(), parameters()) in its order */
static PyObject *param_pairs(PyObject *params)
{
    PyObject *list;
    if (PyDict_Check(params)) {
        if (!(list = PyDict_Items(params))) return NULL;
        if (PyList_Sort(list) < 0) {
            Py_DECREF(list);
            return NULL;
        }
        return list;
    }
    if (PyUnicode_Check(params) || PyBytes_Check(params) || !(list = PySequence_List(params))) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "broadcast_parameters: invalid params of type %s (a state_dict, named_parameters() or a "
                     "list of tensors or of (name, tensor) pairs)",
                     Py_TYPE(params)->tp_name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *it = PyList_GET_ITEM(list, i), *pair;
        if (PyTuple_Check(it)) {
            if (PyTuple_GET_SIZE(it) != 2) {
                PyErr_Format(PyExc_ValueError, "broadcast_parameters: params[%zd] is a tuple of %zd, not (name, tensor)",
                             i, PyTuple_GET_SIZE(it));
                Py_DECREF(list);
                return NULL;
            }
            continue;
        }
        if (!(pair = PyTuple_Pack(2, Py_None, it))) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, i, pair); /* steals pair, drops it */
    }
    return list;
}

static PyObject *py_broadcast_parameters(PyObject *unused, PyObject *args, PyObject *kw)
{
    (void)unused;
    static char *kwlist[] = {"params", "root_rank", "process_set", NULL};
    PyObject *params, *pset = Py_None;
    int root;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|O:broadcast_parameters", kwlist, &params, &root, &pset) ||
        hvd_check_process_set(pset, "broadcast_parameters") < 0)
        return NULL;
    PyObject *pairs = param_pairs(params);
    if (!pairs) return NULL;
    int rc = hvd_tr_broadcast_pairs(pairs, root);
    Py_DECREF(pairs);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* ---- the module ------------------------------------------------------------------------------- */

static PyMethodDef train_functions[] = {
    {"broadcast_parameters", (PyCFunction)(void (*)(void))py_broadcast_parameters, METH_VARARGS | METH_KEYWORDS,
     "broadcast_parameters(params, root_rank, process_set=None): root's tensors on every rank, in place. params: a state_dict "
     "(sorted by name), named_parameters(), parameters(), or a list of tensors or (name, tensor) pairs."},
    {"broadcast_object", (PyCFunction)(void (*)(void))py_broadcast_object, METH_VARARGS | METH_KEYWORDS,
     "broadcast_object(obj, root_rank=0, name=None, process_set=None): root's object (pickled) on every rank; returns it."},
    {"allgather_object", (PyCFunction)(void (*)(void))py_allgather_object, METH_VARARGS | METH_KEYWORDS,
     "allgather_object(obj, name=None, process_set=None): the list of every rank's object (pickled), in rank order."},
    {NULL, NULL, 0, NULL}};

int hvd_train_init(PyObject *module)
{
    PyObject *modname = PyModule_GetNameObject(module);
    if (!modname) return -1;
    for (PyMethodDef *d = train_functions; d->ml_name; d++) {
        PyObject *f = PyCFunction_NewEx(d, NULL, modname);
        if (!f || PyModule_AddObject(module, d->ml_name, f) < 0) {
            Py_XDECREF(f);
            Py_DECREF(modname);
            return -1;
        }
    }
    Py_DECREF(modname);
    if (add_compression(module) < 0 || hvd_optstate_init(module) < 0 || hvd_optim_init(module) < 0 ||
        hvd_syncbn_init(module) < 0)
        return -1;
    return 0;
}
