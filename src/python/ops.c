/* ops.c: the collectives of dtrain.torch on libdt (hvd.h): torch tensors as dt_tensors, the
 * operations started through libdt's named asynchronous calls, their handles, and synchronize.
 *
 * A collective turns each torch tensor into a dt_tensor (its data pointer, dtype, shape, device and,
 * on CUDA, torch's current stream on that device), starts libdt's operation and files a record of it
 * under a new int handle (hvd_g.ops). A non-contiguous tensor is first copied into a contiguous one;
 * in-place operations copy the result back at synchronize. The record holds every Python object the
 * operation touches (the caller's tensors, the copies, the outputs) and the dt_tensor structs until
 * synchronize, so nothing libdt reads or writes is freed under it. synchronize waits with the GIL
 * released; a failed operation raises HorovodInternalError with libdt's one line, which for a
 * mismatch across ranks names the tensor and what each rank gave. */
#include "hvd.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct hvd_globals hvd_g;
/* torch's names of dt_dtype's values, in dt_dtype's order */
const char *const hvd_dtype_names[HVD_N_DTYPES] = {"float32", "float16", "bfloat16", "float64",
                                                   "int32",   "int64",   "uint8",    "int8"};
static long long g_next_handle = 1;

/* ---- small helpers ------------------------------------------------------------------------------ */

int hvd_require_init(void)
{
    if (dt_is_initialized())
        return 0;
    PyErr_SetString(PyExc_ValueError, "dtrain.torch has not been initialized; call hvd.init() first");
    return -1;
}

/* "allreduce of 'x'" or "allreduce": how messages name the operation */
static void describe(char *buf, size_t n, const char *kind, const char *name)
{
    if (name && *name)
        snprintf(buf, n, "%s of '%s'", kind, name);
    else
        snprintf(buf, n, "%s", kind);
}

/* The operation's name: NULL for None (libdt then numbers it), else the str's UTF-8. */
static int parse_name(PyObject *name, const char *kind, const char **out)
{
    *out = NULL;
    if (!name || name == Py_None)
        return 0;
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: name must be a str or None, not %s", kind,
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(name);
    return *out ? 0 : -1;
}

static PyObject *shape_tuple(const int64_t *shape, int ndim)
{
    PyObject *t = PyTuple_New(ndim);
    if (!t)
        return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *d = PyLong_FromLongLong(shape[i]);
        if (!d) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* A new uninitialized tensor of like's dtype and device with the given shape. */
static PyObject *new_empty(PyObject *like, const int64_t *shape, int ndim)
{
    PyObject *s = shape_tuple(shape, ndim);
    if (!s)
        return NULL;
    PyObject *t = PyObject_CallMethod(like, "new_empty", "(O)", s);
    Py_DECREF(s);
    return t;
}

static int data_ptr(PyObject *t, void **p)
{
    PyObject *v = PyObject_CallMethod(t, "data_ptr", NULL);
    if (!v)
        return -1;
    *p = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    return *p == NULL && PyErr_Occurred() ? -1 : 0;
}

/* ---- tensors ------------------------------------------------------------------------------------ */

/* The device of t into dt (DT_HOST, or the CUDA index with torch's current stream on it). */
static int tensor_device(PyObject *t, const char *what, dt_tensor *dt)
{
    PyObject *dev = PyObject_GetAttrString(t, "device");
    if (!dev)
        return -1;
    PyObject *type = PyObject_GetAttrString(dev, "type");
    const char *ts = type ? PyUnicode_AsUTF8(type) : NULL;
    int rc = -1;
    if (!ts)
        goto out;
    if (strcmp(ts, "cpu") == 0) {
        dt->device = DT_HOST;
        dt->stream = NULL;
        rc = 0;
    } else if (strcmp(ts, "cuda") == 0) {
        PyObject *idx = PyObject_GetAttrString(dev, "index");
        if (!idx)
            goto out;
        long i = idx == Py_None ? 0 : PyLong_AsLong(idx);
        Py_DECREF(idx);
        if (i == -1 && PyErr_Occurred())
            goto out;
        /* the stream torch queues this tensor's work on: libdt waits for it, and what is queued on
         * it after synchronize sees the result */
        PyObject *cuda = PyObject_GetAttrString(hvd_g.torch, "cuda");
        if (!cuda)
            goto out;
        PyObject *stream = PyObject_CallMethod(cuda, "current_stream", "(O)", dev);
        Py_DECREF(cuda);
        if (!stream)
            goto out;
        PyObject *handle = PyObject_GetAttrString(stream, "cuda_stream");
        Py_DECREF(stream);
        if (!handle)
            goto out;
        dt->stream = PyLong_AsVoidPtr(handle);
        Py_DECREF(handle);
        if (dt->stream == NULL && PyErr_Occurred())
            goto out;
        dt->device = (int)i;
        rc = 0;
    } else {
        PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: tensors on device type '%s' are not supported (cpu or cuda)",
                     what, ts);
    }
out:
    Py_XDECREF(type);
    Py_DECREF(dev);
    return rc;
}

/* Fills dt from the torch tensor t; *contig is t itself, or a contiguous copy of it when t is not
 * contiguous (a new reference either way; dt describes *contig). 0, or -1 with an exception set;
 * what names the operation and tensor for the messages. */
static int tensor_view(PyObject *t, const char *what, dt_tensor *dt, PyObject **contig)
{
    *contig = NULL;
    memset(dt, 0, sizeof *dt);
    int is = PyObject_IsInstance(t, hvd_g.tensor_type);
    if (is < 0)
        return -1;
    if (!is) {
        PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: expected a torch.Tensor, not %s", what, Py_TYPE(t)->tp_name);
        return -1;
    }
    PyObject *dtype = PyObject_GetAttrString(t, "dtype");
    if (!dtype)
        return -1;
    int type = -1;
    for (int i = 0; i < HVD_N_DTYPES; i++)
        if (dtype == hvd_g.dtypes[i])
            type = i;
    if (type < 0) {
        PyErr_Format(PyExc_TypeError,
                     "dtrain.torch: %s: dtype %S is not supported (float32, float16, bfloat16, float64, int32, "
                     "int64, uint8 or int8)",
                     what, dtype);
        Py_DECREF(dtype);
        return -1;
    }
    Py_DECREF(dtype);
    dt->type = (dt_dtype)type;
    PyObject *layout = PyObject_GetAttrString(t, "layout");
    if (!layout)
        return -1;
    if (layout != hvd_g.strided) {
        PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: layout %S is not supported (dense tensors only)", what,
                     layout);
        Py_DECREF(layout);
        return -1;
    }
    Py_DECREF(layout);
    if (tensor_device(t, what, dt) < 0)
        return -1;

    PyObject *isc = PyObject_CallMethod(t, "is_contiguous", NULL);
    if (!isc)
        return -1;
    int contiguous = PyObject_IsTrue(isc);
    Py_DECREF(isc);
    if (contiguous < 0)
        return -1;
    PyObject *c;
    if (contiguous) {
        Py_INCREF(t);
        c = t;
    } else if (!(c = PyObject_CallMethod(t, "contiguous", NULL))) {
        return -1;
    }
    PyObject *size = PyObject_CallMethod(c, "size", NULL);
    PyObject *dims = size ? PySequence_Fast(size, "size() is not a sequence") : NULL;
    Py_XDECREF(size);
    if (!dims)
        goto fail;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(dims);
    if (nd > DT_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: %zd dimensions, libdt takes at most %d", what, nd,
                     DT_MAX_DIMS);
        Py_DECREF(dims);
        goto fail;
    }
    dt->ndim = (int)nd;
    for (Py_ssize_t i = 0; i < nd; i++) {
        dt->shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(dims, i));
        if (dt->shape[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(dims);
            goto fail;
        }
    }
    Py_DECREF(dims);
    if (data_ptr(c, &dt->data) < 0)
        goto fail;
    *contig = c;
    return 0;
fail:
    Py_DECREF(c);
    return -1;
}

/* ---- operations and their handles ---------------------------------------------------------------- */

/* One started operation, from its start to synchronize. */
struct hvd_op {
    dt_handle *h;
    enum hvd_kind kind;
    int n;                  /* tensors (a grouped all-reduce: the group's size; else 1) */
    dt_tensor *in, *out;    /* n each: libdt reads them until the operation is done */
    int64_t *splits;        /* all-to-all's splits (dt_size() values), or NULL */
    PyObject *keep;         /* list of every tensor involved: the caller's, contiguous copies, outputs */
    PyObject *result;       /* all-reduce, broadcast: what synchronize returns (a tensor, or a list) */
    PyObject *copyback;     /* in-place operations on non-contiguous tensors: [(caller's, copy), ...] */
    PyObject *like;         /* all-gather, all-to-all, reduce-scatter: the input (result's dtype, device) */
    PyObject *splits_dtype; /* all-to-all: dtype of the received splits' tensor */
};

static void op_free(struct hvd_op *op)
{
    if (!op)
        return;
    if (op->h) {
        /* waits if it still runs: the tensors below must outlive it */
        Py_BEGIN_ALLOW_THREADS
        dt_handle_free(op->h);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(op->keep);
    Py_XDECREF(op->result);
    Py_XDECREF(op->copyback);
    Py_XDECREF(op->like);
    Py_XDECREF(op->splits_dtype);
    PyMem_Free(op->in);
    PyMem_Free(op->out);
    PyMem_Free(op->splits);
    PyMem_Free(op);
}

static void op_capsule_free(PyObject *cap)
{
    op_free(PyCapsule_GetPointer(cap, "dtrain.torch.op"));
}

static struct hvd_op *op_new(enum hvd_kind kind, int n)
{
    struct hvd_op *op = PyMem_Calloc(1, sizeof *op);
    if (!op)
        return (struct hvd_op *)PyErr_NoMemory();
    op->kind = kind;
    op->n = n;
    op->in = PyMem_Calloc((size_t)n, sizeof *op->in);
    op->out = PyMem_Calloc((size_t)n, sizeof *op->out);
    op->keep = PyList_New(0);
    if (!op->in || !op->out || !op->keep) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        op_free(op);
        return NULL;
    }
    return op;
}

/* Files op (started: op->h set) under a new handle; consumes op. The handle, or NULL. */
static PyObject *op_register(struct hvd_op *op)
{
    PyObject *cap = PyCapsule_New(op, "dtrain.torch.op", op_capsule_free);
    if (!cap) {
        op_free(op);
        return NULL;
    }
    PyObject *handle = PyLong_FromLongLong(g_next_handle++);
    if (!handle || PyDict_SetItem(hvd_g.ops, handle, cap) < 0) {
        Py_XDECREF(handle);
        Py_DECREF(cap);
        return NULL;
    }
    Py_DECREF(cap);
    return handle;
}

/* HorovodInternalError with the line of a failed operation (op->h, when libdt made it), else one
 * of ours naming the operation */
static void raise_failed(dt_handle *h, int st, const char *what)
{
    const char *line = h ? dt_handle_error(h) : NULL;
    char buf[1024];
    if (line)
        snprintf(buf, sizeof buf, "%s", line);
    else
        snprintf(buf, sizeof buf, "dtrain.torch: %s failed (libdt status %d; its line above says why)", what, st);
    size_t len = strlen(buf);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        buf[--len] = '\0';
    PyErr_SetString(hvd_g.error, buf);
}

/* libdt refused to start op (its handle, when made, is failed and holds the line; op_free frees it) */
static void start_failed(struct hvd_op *op, int st, const char *what)
{
    raise_failed(op->h, st, what);
}

/* The view of tensor t (index i of op), kept by op. inplace: the result goes to t (through a copy
 * when t is not contiguous); else a new tensor, appended to results when results is not NULL. */
static int op_add_tensor(struct hvd_op *op, int i, PyObject *t, const char *what, int inplace, int with_output,
                         PyObject *results)
{
    PyObject *c;
    if (tensor_view(t, what, &op->in[i], &c) < 0)
        return -1;
    int rc = -1;
    PyObject *o = NULL;
    if (PyList_Append(op->keep, t) < 0 || PyList_Append(op->keep, c) < 0)
        goto out;
    op->out[i] = op->in[i];
    if (!with_output) { /* libdt makes the result: it takes c's dtype and device */
        Py_INCREF(c);
        op->like = c;
        rc = 0;
        goto out;
    }
    if (inplace) {
        if (c != t) {
            if (!op->copyback && !(op->copyback = PyList_New(0)))
                goto out;
            PyObject *pair = PyTuple_Pack(2, t, c);
            if (!pair)
                goto out;
            int r = PyList_Append(op->copyback, pair);
            Py_DECREF(pair);
            if (r < 0)
                goto out;
        }
        Py_INCREF(t);
        o = t;
    } else {
        if (!(o = new_empty(c, op->in[i].shape, op->in[i].ndim)))
            goto out;
        if (PyList_Append(op->keep, o) < 0 || data_ptr(o, &op->out[i].data) < 0)
            goto out;
    }
    if (results) {
        if (PyList_Append(results, o) < 0)
            goto out;
    } else {
        Py_INCREF(o);
        op->result = o;
    }
    rc = 0;
out:
    Py_XDECREF(o);
    Py_DECREF(c);
    return rc;
}

/* An all-reduce of one tensor (tensors not a list: grouped 0) or of a list (grouped 1). */
PyObject *hvd_start_allreduce(PyObject *tensors, int grouped, int inplace, PyObject *name_obj, dt_redop op_, double pre,
                              double post)
{
    const char *kind = grouped ? "grouped_allreduce" : "allreduce", *name;
    char what[320];
    if (hvd_require_init() < 0 || parse_name(name_obj, kind, &name) < 0)
        return NULL;
    describe(what, sizeof what, kind, name);
    PyObject *seq = NULL, *results = NULL;
    Py_ssize_t n = 1;
    if (grouped) {
        if (!(seq = PySequence_Fast(tensors, "grouped_allreduce takes a list of tensors")))
            return NULL;
        n = PySequence_Fast_GET_SIZE(seq);
        if (n == 0 || n > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: an empty list of tensors", what);
            Py_DECREF(seq);
            return NULL;
        }
    }
    struct hvd_op *op = op_new(HVD_OP_ALLREDUCE, (int)n);
    if (!op)
        goto fail;
    if (grouped && !(results = op->result = PyList_New(0)))
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = grouped ? PySequence_Fast_GET_ITEM(seq, i) : tensors;
        char twhat[360];
        if (grouped)
            snprintf(twhat, sizeof twhat, "%s, tensor %zd", what, i);
        else
            snprintf(twhat, sizeof twhat, "%s", what);
        if (op_add_tensor(op, (int)i, t, twhat, inplace, 1, results) < 0)
            goto fail;
        if (op_ == DT_AVG && op->in[i].type >= DT_INT32) {
            PyErr_Format(PyExc_ValueError,
                         "dtrain.torch: %s: op=hvd.Average is not defined for integer tensors (torch.%s); use "
                         "hvd.Sum",
                         twhat, hvd_dtype_names[op->in[i].type]);
            goto fail;
        }
    }
    int st = grouped ? dt_grouped_allreduce_async(name, op->n, op->in, op->out, op_, pre, post, &op->h)
                     : dt_allreduce_async(name, op->in, op->out, op_, pre, post, &op->h);
    if (st != 0) {
        start_failed(op, st, what);
        goto fail;
    }
    Py_XDECREF(seq);
    return op_register(op);
fail:
    op_free(op);
    Py_XDECREF(seq);
    return NULL;
}

PyObject *hvd_start_broadcast(PyObject *tensor, int root, int inplace, PyObject *name_obj)
{
    const char *name;
    char what[320];
    if (hvd_require_init() < 0 || parse_name(name_obj, "broadcast", &name) < 0)
        return NULL;
    describe(what, sizeof what, "broadcast", name);
    if (root < 0 || root >= dt_size()) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: root_rank %d is not a rank (0 .. %d)", what, root,
                     dt_size() - 1);
        return NULL;
    }
    struct hvd_op *op = op_new(HVD_OP_BROADCAST, 1);
    if (!op)
        return NULL;
    if (op_add_tensor(op, 0, tensor, what, inplace, 1, NULL) < 0)
        goto fail;
    int st = dt_broadcast_async(name, op->in, op->out, root, &op->h);
    if (st != 0) {
        start_failed(op, st, what);
        goto fail;
    }
    return op_register(op);
fail:
    op_free(op);
    return NULL;
}

/* all-to-all's splits: None, a list or tuple of ints, or a tensor of them; dt_size() values, none
 * negative, summing to the tensor's first dimension. */
static int parse_splits(PyObject *splits, const dt_tensor *in, const char *what, struct hvd_op *op)
{
    int size = dt_size();
    PyObject *list = NULL;
    int is_tensor = PyObject_IsInstance(splits, hvd_g.tensor_type);
    if (is_tensor < 0)
        return -1;
    if (is_tensor) {
        if (!(op->splits_dtype = PyObject_GetAttrString(splits, "dtype")))
            return -1;
        if (!(list = PyObject_CallMethod(splits, "tolist", NULL)))
            return -1;
        splits = list;
    }
    PyObject *seq = PySequence_Fast(splits, "splits must be a list of ints or a tensor");
    Py_XDECREF(list);
    if (!seq)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != size) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: %zd splits for %d ranks", what, PySequence_Fast_GET_SIZE(seq),
                     size);
        goto out;
    }
    if (!(op->splits = PyMem_Calloc((size_t)size, sizeof *op->splits))) {
        PyErr_NoMemory();
        goto out;
    }
    int64_t sum = 0;
    for (int r = 0; r < size; r++) {
        op->splits[r] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, r));
        if (op->splits[r] == -1 && PyErr_Occurred())
            goto out;
        if (op->splits[r] < 0) {
            PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: splits[%d] is negative (%lld)", what, r,
                         (long long)op->splits[r]);
            goto out;
        }
        sum += op->splits[r];
    }
    if (in->ndim == 0 || sum != in->shape[0]) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: the splits sum to %lld, the tensor has %lld rows", what,
                     (long long)sum, in->ndim ? (long long)in->shape[0] : 0LL);
        goto out;
    }
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

/* all-gather, all-to-all, reduce-scatter: operations whose result libdt allocates. */
PyObject *hvd_start_gathering(enum hvd_kind kind, PyObject *tensor, PyObject *name_obj, PyObject *splits, dt_redop op_,
                              double pre, double post)
{
    const char *kname = kind == HVD_OP_ALLGATHER ? "allgather" : kind == HVD_OP_ALLTOALL ? "alltoall" : "reducescatter";
    const char *name;
    char what[320];
    if (hvd_require_init() < 0 || parse_name(name_obj, kname, &name) < 0)
        return NULL;
    describe(what, sizeof what, kname, name);
    struct hvd_op *op = op_new(kind, 1);
    if (!op)
        return NULL;
    if (op_add_tensor(op, 0, tensor, what, 0, 0, NULL) < 0)
        goto fail;
    if (op->in[0].ndim == 0) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: a scalar has no first dimension to split or concatenate",
                     what);
        goto fail;
    }
    int st;
    if (kind == HVD_OP_ALLGATHER) {
        st = dt_allgather_async(name, op->in, &op->h);
    } else if (kind == HVD_OP_ALLTOALL) {
        if (splits && splits != Py_None && parse_splits(splits, op->in, what, op) < 0)
            goto fail;
        if (!op->splits_dtype) {
            Py_INCREF(hvd_g.dtypes[DT_INT32]);
            op->splits_dtype = hvd_g.dtypes[DT_INT32];
        }
        st = dt_alltoall_async(name, op->in, op->splits, &op->h);
    } else {
        if (op_ == DT_AVG && op->in[0].type >= DT_INT32) {
            PyErr_Format(PyExc_ValueError,
                         "dtrain.torch: %s: op=hvd.Average is not defined for integer tensors (torch.%s); use hvd.Sum",
                         what, hvd_dtype_names[op->in[0].type]);
            goto fail;
        }
        st = dt_reducescatter_async(name, op->in, op_, pre, post, &op->h);
    }
    if (st != 0) {
        start_failed(op, st, what);
        goto fail;
    }
    return op_register(op);
fail:
    op_free(op);
    return NULL;
}

/* The result of a done operation whose result is libdt's: a new tensor of its shape. */
static PyObject *libdt_output(struct hvd_op *op)
{
    dt_tensor o;
    if (dt_output(op->h, &o) != 0)
        return PyErr_Format(hvd_g.error, "dtrain.torch: libdt has no output for this handle");
    PyObject *t = new_empty(op->like, o.shape, o.ndim);
    if (!t)
        return NULL;
    if (dt_tensor_count(&o) > 0) {
        void *p;
        if (data_ptr(t, &p) < 0)
            goto fail;
        if (dt_output_copy(op->h, p) != 0) {
            PyErr_SetString(hvd_g.error, "dtrain.torch: copying libdt's output failed (its line above says why)");
            goto fail;
        }
    }
    if (op->kind != HVD_OP_ALLTOALL)
        return t;
    int size = dt_size();
    int64_t *rs = PyMem_Calloc((size_t)size, sizeof *rs);
    if (!rs) {
        PyErr_NoMemory();
        goto fail;
    }
    if (dt_received_splits(op->h, rs) != 0) {
        PyErr_SetString(hvd_g.error, "dtrain.torch: alltoall: libdt has no received splits");
        PyMem_Free(rs);
        goto fail;
    }
    PyObject *list = PyList_New(size);
    for (int r = 0; list && r < size; r++) {
        PyObject *v = PyLong_FromLongLong(rs[r]);
        if (!v)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, r, v);
    }
    PyMem_Free(rs);
    if (!list)
        goto fail;
    PyObject *kw = Py_BuildValue("{s:O}", "dtype", op->splits_dtype);
    PyObject *args = kw ? PyTuple_Pack(1, list) : NULL;
    PyObject *tensor_fn = args ? PyObject_GetAttrString(hvd_g.torch, "tensor") : NULL;
    PyObject *rst = tensor_fn ? PyObject_Call(tensor_fn, args, kw) : NULL;
    Py_XDECREF(tensor_fn);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(list);
    if (!rst)
        goto fail;
    PyObject *pair = PyTuple_Pack(2, t, rst);
    Py_DECREF(rst);
    Py_DECREF(t);
    return pair;
fail:
    Py_DECREF(t);
    return NULL;
}

/* synchronize: waits for the handle's operation (GIL released) and returns its result; None for a
 * handle it does not know (Horovod's). */
PyObject *hvd_synchronize(PyObject *handle)
{
    PyObject *cap = PyDict_GetItemWithError(hvd_g.ops, handle);
    if (!cap) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    /* out of the table first: a second synchronize of it (another thread) returns None */
    Py_INCREF(cap);
    if (PyDict_DelItem(hvd_g.ops, handle) < 0) {
        Py_DECREF(cap);
        return NULL;
    }
    struct hvd_op *op = PyCapsule_GetPointer(cap, "dtrain.torch.op");
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = dt_wait(op->h);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (st != 0) {
        raise_failed(op->h, st, "the operation");
    } else if (op->kind == HVD_OP_ALLREDUCE || op->kind == HVD_OP_BROADCAST) {
        Py_ssize_t n = op->copyback ? PyList_GET_SIZE(op->copyback) : 0;
        int ok = 1;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            PyObject *pair = PyList_GET_ITEM(op->copyback, i);
            PyObject *d = PyObject_CallMethod(PyTuple_GET_ITEM(pair, 0), "detach", NULL);
            PyObject *r = d ? PyObject_CallMethod(d, "copy_", "(O)", PyTuple_GET_ITEM(pair, 1)) : NULL;
            ok = r != NULL;
            Py_XDECREF(r);
            Py_XDECREF(d);
        }
        if (ok) {
            Py_INCREF(op->result);
            result = op->result;
        }
    } else {
        result = libdt_output(op);
    }
    Py_DECREF(cap);
    return result;
}

PyObject *hvd_poll(PyObject *handle)
{
    PyObject *cap = PyDict_GetItemWithError(hvd_g.ops, handle);
    if (!cap) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "dtrain.torch: poll: %R is not a handle of an operation in flight", handle);
        return NULL;
    }
    struct hvd_op *op = PyCapsule_GetPointer(cap, "dtrain.torch.op");
    return PyBool_FromLong(dt_poll(op->h));
}
