/* torch.c: the module dtrain.torch, Horovod's PyTorch API (horovod.torch) on libdt (dt.h).
 *
 *   import dtrain.torch as hvd          (or dtrain.torch.horovod, as AIACC spells it: the same module)
 *   hvd.init(); h = hvd.allreduce_async_(grad, name="w"); ...; hvd.synchronize(h)
 *
 * Names, arguments, defaults and return values are Horovod's (horovod/torch/mpi_ops.py). This file
 * holds the module's init, the basics and the Python-level functions of the collectives (their
 * arguments); ops.c runs the collectives and their handles, train.c and the files it names the
 * training helpers (hvd.h).
 *
 * Not supported, refused with one clear error: Adasum, process sets other than the global one,
 * init(comm=...). autograd.c makes the out-of-place allreduce, allgather, broadcast, alltoall and
 * reducescatter autograd functions, as Horovod's. */
#include "config.h"
#include "hvd.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Horovod's reduction constants (horovod.common.basics: Average 0, Sum 1, Adasum 2, Min 3, Max 4,
 * Product 5): scripts compare and pass these values. */
enum { HVD_AVERAGE = 0, HVD_SUM = 1, HVD_ADASUM = 2, HVD_MIN = 3, HVD_MAX = 4, HVD_PRODUCT = 5 };

/* ---- small helpers ------------------------------------------------------------------------------ */

/* PyModule_AddObject that keeps the caller's reference (it steals one only on success). */
static int add_ref(PyObject *m, const char *name, PyObject *o)
{
    Py_INCREF(o);
    if (PyModule_AddObject(m, name, o) < 0) {
        Py_DECREF(o);
        return -1;
    }
    return 0;
}

/* Only the global process set (or None) is accepted: libdt has one communicator per stream over
 * all ranks. */
int hvd_check_process_set(PyObject *ps, const char *kind)
{
    if (!ps || ps == Py_None || ps == hvd_g.global_set)
        return 0;
    PyObject *id = PyObject_GetAttrString(ps, "process_set_id");
    if (!id)
        PyErr_Clear();
    long v = id && PyLong_Check(id) ? PyLong_AsLong(id) : -1;
    Py_XDECREF(id);
    if (v == 0)
        return 0;
    PyErr_Format(PyExc_NotImplementedError,
                 "dtrain.torch: %s: only the global process set is supported (process_set=None or "
                 "hvd.global_process_set)",
                 kind);
    return -1;
}

/* Horovod's reduction argument: op, or the deprecated average (True: Average, False: Sum), Average
 * when both are None. Adasum is refused. */
static int parse_op(PyObject *op, PyObject *average, const char *kind, dt_redop *out)
{
    long v = HVD_AVERAGE;
    if (op && op != Py_None && average && average != Py_None) {
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: give op or the deprecated average, not both", kind);
        return -1;
    }
    if (average && average != Py_None) {
        if (PyErr_WarnEx(PyExc_DeprecationWarning, "hvd: the average argument is deprecated; use op", 1) < 0)
            return -1;
        int t = PyObject_IsTrue(average);
        if (t < 0)
            return -1;
        v = t ? HVD_AVERAGE : HVD_SUM;
    } else if (op && op != Py_None) {
        v = PyLong_AsLong(op);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "dtrain.torch: %s: op must be hvd.Average, Sum, Min, Max or Product", kind);
            return -1;
        }
    }
    switch (v) {
    case HVD_AVERAGE:
        *out = DT_AVG;
        return 0;
    case HVD_SUM:
        *out = DT_SUM;
        return 0;
    case HVD_MIN:
        *out = DT_MIN;
        return 0;
    case HVD_MAX:
        *out = DT_MAX;
        return 0;
    case HVD_PRODUCT:
        *out = DT_PRODUCT;
        return 0;
    case HVD_ADASUM:
        PyErr_Format(PyExc_NotImplementedError,
                     "dtrain.torch: %s: op=hvd.Adasum is not supported; use hvd.Average or hvd.Sum", kind);
        return -1;
    default:
        PyErr_Format(PyExc_ValueError, "dtrain.torch: %s: unknown op %ld (hvd.Average, Sum, Min, Max or Product)", kind,
                     v);
        return -1;
    }
}

/* ---- Python-level functions: basics --------------------------------------------------------------- */

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"comm", "process_sets", NULL};
    PyObject *comm = Py_None, *sets = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:init", kwlist, &comm, &sets))
        return NULL;
    if (comm != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "dtrain.torch: init(comm=...) is not supported: the ranks come from the launch (mpirun, srun, "
                        "torchrun)");
        return NULL;
    }
    if (sets != Py_None) {
        int t = PyObject_IsTrue(sets);
        if (t < 0)
            return NULL;
        if (t) {
            PyErr_SetString(PyExc_NotImplementedError, "dtrain.torch: process sets are not supported");
            return NULL;
        }
    }
    if (dt_is_initialized())
        Py_RETURN_NONE;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = dt_init();
    Py_END_ALLOW_THREADS
    if (st != 0)
        return PyErr_Format(hvd_g.error, "dtrain.torch: init failed (libdt status %d; its line above says why)", st);
    Py_RETURN_NONE;
}

static PyObject *py_shutdown(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    if (!dt_is_initialized())
        Py_RETURN_NONE;
    int st;
    /* operations not yet run fail (dt_finalize); their handles are then freed with the table */
    Py_BEGIN_ALLOW_THREADS
    st = dt_finalize();
    Py_END_ALLOW_THREADS
    PyDict_Clear(hvd_g.ops);
    if (st != 0)
        return PyErr_Format(hvd_g.error, "dtrain.torch: shutdown failed (libdt status %d)", st);
    Py_RETURN_NONE;
}

static PyObject *py_is_initialized(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyBool_FromLong(dt_is_initialized());
}

#define RANK_FN(pyname, call)                                                                                          \
    static PyObject *pyname(PyObject *self, PyObject *unused)                                                          \
    {                                                                                                                  \
        (void)self, (void)unused;                                                                                      \
        if (hvd_require_init() < 0)                                                                                    \
            return NULL;                                                                                               \
        return PyLong_FromLong(call());                                                                                \
    }
RANK_FN(py_size, dt_size)
RANK_FN(py_rank, dt_rank)
RANK_FN(py_local_size, dt_local_size)
RANK_FN(py_local_rank, dt_local_rank)
RANK_FN(py_cross_size, dt_cross_size)
RANK_FN(py_cross_rank, dt_cross_rank)

static PyObject *py_is_homogeneous(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    if (hvd_require_init() < 0)
        return NULL;
    return PyBool_FromLong(dt_local_size() * dt_cross_size() == dt_size());
}

/* libdt takes operations from any thread (its background thread does the communication) */
static PyObject *py_mpi_threads_supported(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    if (hvd_require_init() < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *py_mpi_enabled(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyBool_FromLong(dt_is_initialized() && strcmp(dt_launch_name(), "MPI") == 0);
}

#ifdef HAVE_MPI
#define DT_MPI_BUILT 1
#else
#define DT_MPI_BUILT 0
#endif
#ifdef HAVE_CUDA
#define DT_CUDA_BUILT 1 /* libdt's NCCL comes with its CUDA (comm_nccl.c) */
#else
#define DT_CUDA_BUILT 0
#endif
#define BUILT_FN(pyname, value)                                                                                        \
    static PyObject *pyname(PyObject *self, PyObject *unused)                                                          \
    {                                                                                                                  \
        (void)self, (void)unused;                                                                                      \
        return PyBool_FromLong(value);                                                                                 \
    }
BUILT_FN(py_mpi_built, DT_MPI_BUILT)
BUILT_FN(py_nccl_built, DT_CUDA_BUILT)
BUILT_FN(py_cuda_built, DT_CUDA_BUILT)
BUILT_FN(py_gloo_built, 0)
BUILT_FN(py_gloo_enabled, 0)
BUILT_FN(py_rocm_built, 0)
BUILT_FN(py_ddl_built, 0)
BUILT_FN(py_ccl_built, 0)

/* ---- Python-level functions: collectives ----------------------------------------------------------- */

/* compression None or Compression.none: nothing to do */
static int no_compression(PyObject *c)
{
    if (!c || c == Py_None)
        return 1;
    PyObject *cls = PyObject_GetAttrString(hvd_g.module, "Compression");
    PyObject *none = cls ? PyObject_GetAttrString(cls, "none") : NULL;
    Py_XDECREF(cls);
    PyErr_Clear();
    int same = none == c;
    Py_XDECREF(none);
    return same;
}

/* allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
 * process_set=global_process_set), and allreduce_async_, grouped_allreduce_async(_), and the blocking
 * allreduce_ and grouped_allreduce_ (the same arguments) */
static PyObject *allreduce_entry(PyObject *args, PyObject *kw, int grouped, int inplace, int wait, const char *fmt)
{
    static char *kwlist[] = {"tensor",          "average",          "name",        "op",
                             "prescale_factor", "postscale_factor", "process_set", NULL};
    static char *kwlist_grouped[] = {"tensors",         "average",          "name",        "op",
                                     "prescale_factor", "postscale_factor", "process_set", NULL};
    PyObject *t, *average = Py_None, *name = Py_None, *opo = Py_None, *ps = Py_None;
    double pre = 1.0, post = 1.0;
    dt_redop op;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, grouped ? kwlist_grouped : kwlist, &t, &average, &name, &opo, &pre,
                                     &post, &ps))
        return NULL;
    const char *kind = grouped ? "grouped_allreduce" : "allreduce";
    if (hvd_check_process_set(ps, kind) < 0 || parse_op(opo, average, kind, &op) < 0)
        return NULL;
    PyObject *h = hvd_start_allreduce(t, grouped, inplace, name, op, pre, post);
    if (!h || !wait)
        return h;
    PyObject *r = hvd_synchronize(h);
    Py_DECREF(h);
    return r;
}

static PyObject *py_allreduce_async(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 0, 0, 0, "O|OOOddO:allreduce_async");
}
static PyObject *py_allreduce_async_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 0, 1, 0, "O|OOOddO:allreduce_async_");
}
static PyObject *py_allreduce_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 0, 1, 1, "O|OOOddO:allreduce_");
}
static PyObject *py_grouped_allreduce_async(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 1, 0, 0, "O|OOOddO:grouped_allreduce_async");
}
static PyObject *py_grouped_allreduce_async_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 1, 1, 0, "O|OOOddO:grouped_allreduce_async_");
}
static PyObject *py_grouped_allreduce_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_entry(a, k, 1, 1, 1, "O|OOOddO:grouped_allreduce_");
}

/* compression.compress(t) -> (t', ctx) */
static int compress(PyObject *c, PyObject *t, PyObject **ct, PyObject **ctx)
{
    PyObject *r = PyObject_CallMethod(c, "compress", "(O)", t);
    if (!r)
        return -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "dtrain.torch: compression.compress must return (tensor, ctx)");
        return -1;
    }
    *ct = PyTuple_GET_ITEM(r, 0);
    *ctx = PyTuple_GET_ITEM(r, 1);
    Py_INCREF(*ct);
    Py_INCREF(*ctx);
    Py_DECREF(r);
    return 0;
}

/* allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
 * prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set), and
 * grouped_allreduce(tensors, ...) */
static PyObject *allreduce_compressed(PyObject *args, PyObject *kw, int grouped, const char *fmt)
{
    static char *kwlist[] = {"tensor",          "average",          "name",        "compression", "op",
                             "prescale_factor", "postscale_factor", "process_set", NULL};
    static char *kwlist_grouped[] = {"tensors",         "average",          "name",        "compression", "op",
                                     "prescale_factor", "postscale_factor", "process_set", NULL};
    PyObject *t, *average = Py_None, *name = Py_None, *comp = Py_None, *opo = Py_None, *ps = Py_None;
    double pre = 1.0, post = 1.0;
    dt_redop op;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, grouped ? kwlist_grouped : kwlist, &t, &average, &name, &comp, &opo,
                                     &pre, &post, &ps))
        return NULL;
    const char *kind = grouped ? "grouped_allreduce" : "allreduce";
    if (hvd_check_process_set(ps, kind) < 0 || parse_op(opo, average, kind, &op) < 0)
        return NULL;
    if (no_compression(comp)) {
        PyObject *h = hvd_start_allreduce(t, grouped, 0, name, op, pre, post);
        if (!h)
            return NULL;
        PyObject *r = hvd_synchronize(h);
        Py_DECREF(h);
        return r;
    }
    /* compress each tensor, reduce the compressed ones, decompress each result */
    PyObject *seq = grouped ? PySequence_Fast(t, "grouped_allreduce takes a list of tensors") : PyTuple_Pack(1, t);
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *cts = PyList_New(n), *ctxs = PyList_New(n), *res = NULL, *h = NULL, *out = NULL;
    if (!cts || !ctxs)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ct, *ctx;
        if (compress(comp, PySequence_Fast_GET_ITEM(seq, i), &ct, &ctx) < 0)
            goto done;
        PyList_SET_ITEM(cts, i, ct);
        PyList_SET_ITEM(ctxs, i, ctx);
    }
    if (!(h = hvd_start_allreduce(grouped ? cts : PyList_GET_ITEM(cts, 0), grouped, 0, name, op, pre, post)))
        goto done;
    if (!(res = hvd_synchronize(h)))
        goto done;
    if (!grouped) {
        out = PyObject_CallMethod(comp, "decompress", "(OO)", res, PyList_GET_ITEM(ctxs, 0));
        goto done;
    }
    PyObject *list = PyList_New(n);
    if (!list)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d =
            PyObject_CallMethod(comp, "decompress", "(OO)", PyList_GET_ITEM(res, i), PyList_GET_ITEM(ctxs, i));
        if (!d) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, d);
    }
    out = list;
done:
    Py_XDECREF(res);
    Py_XDECREF(h);
    Py_XDECREF(cts);
    Py_XDECREF(ctxs);
    Py_DECREF(seq);
    return out;
}

static PyObject *py_allreduce(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_compressed(a, k, 0, "O|OOOOddO:allreduce");
}
static PyObject *py_grouped_allreduce(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allreduce_compressed(a, k, 1, "O|OOOOddO:grouped_allreduce");
}

/* broadcast(tensor, root_rank, name=None, process_set=global_process_set) and its kin */
static PyObject *broadcast_entry(PyObject *args, PyObject *kw, int inplace, int wait, const char *fmt)
{
    static char *kwlist[] = {"tensor", "root_rank", "name", "process_set", NULL};
    PyObject *t, *name = Py_None, *ps = Py_None;
    int root;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &t, &root, &name, &ps))
        return NULL;
    if (hvd_check_process_set(ps, "broadcast") < 0)
        return NULL;
    PyObject *h = hvd_start_broadcast(t, root, inplace, name);
    if (!h || !wait)
        return h;
    PyObject *r = hvd_synchronize(h);
    Py_DECREF(h);
    return r;
}
static PyObject *py_broadcast_async(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return broadcast_entry(a, k, 0, 0, "Oi|OO:broadcast_async");
}
static PyObject *py_broadcast_async_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return broadcast_entry(a, k, 1, 0, "Oi|OO:broadcast_async_");
}
static PyObject *py_broadcast(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return broadcast_entry(a, k, 0, 1, "Oi|OO:broadcast");
}
static PyObject *py_broadcast_(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return broadcast_entry(a, k, 1, 1, "Oi|OO:broadcast_");
}

/* allgather(tensor, name=None, process_set=global_process_set) */
static PyObject *allgather_entry(PyObject *args, PyObject *kw, int wait, const char *fmt)
{
    static char *kwlist[] = {"tensor", "name", "process_set", NULL};
    PyObject *t, *name = Py_None, *ps = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &t, &name, &ps))
        return NULL;
    if (hvd_check_process_set(ps, "allgather") < 0)
        return NULL;
    PyObject *h = hvd_start_gathering(HVD_OP_ALLGATHER, t, name, NULL, DT_SUM, 1.0, 1.0);
    if (!h || !wait)
        return h;
    PyObject *r = hvd_synchronize(h);
    Py_DECREF(h);
    return r;
}
static PyObject *py_allgather_async(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allgather_entry(a, k, 0, "O|OO:allgather_async");
}
static PyObject *py_allgather(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return allgather_entry(a, k, 1, "O|OO:allgather");
}

/* alltoall(tensor, splits=None, name=None, process_set=global_process_set): the received tensor,
 * and with splits given also the received splits (Horovod's); synchronize of alltoall_async's
 * handle gives both. */
static PyObject *alltoall_entry(PyObject *args, PyObject *kw, int wait, const char *fmt)
{
    static char *kwlist[] = {"tensor", "splits", "name", "process_set", NULL};
    PyObject *t, *splits = Py_None, *name = Py_None, *ps = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &t, &splits, &name, &ps))
        return NULL;
    if (hvd_check_process_set(ps, "alltoall") < 0)
        return NULL;
    PyObject *h = hvd_start_gathering(HVD_OP_ALLTOALL, t, name, splits, DT_SUM, 1.0, 1.0);
    if (!h || !wait)
        return h;
    PyObject *r = hvd_synchronize(h);
    Py_DECREF(h);
    if (!r || splits != Py_None)
        return r;
    PyObject *out = PyTuple_GET_ITEM(r, 0);
    Py_INCREF(out);
    Py_DECREF(r);
    return out;
}
static PyObject *py_alltoall_async(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return alltoall_entry(a, k, 0, "O|OOO:alltoall_async");
}
static PyObject *py_alltoall(PyObject *s, PyObject *a, PyObject *k)
{
    (void)s;
    return alltoall_entry(a, k, 1, "O|OOO:alltoall");
}

/* reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
 * prescale_factor=1.0, postscale_factor=1.0) */
static PyObject *py_reducescatter_async(PyObject *s, PyObject *args, PyObject *kw)
{
    (void)s;
    static char *kwlist[] = {"tensor", "name", "op", "process_set", "prescale_factor", "postscale_factor", NULL};
    PyObject *t, *name = Py_None, *opo = Py_None, *ps = Py_None;
    double pre = 1.0, post = 1.0;
    dt_redop op;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOdd:reducescatter_async", kwlist, &t, &name, &opo, &ps, &pre,
                                     &post))
        return NULL;
    if (hvd_check_process_set(ps, "reducescatter") < 0 || parse_op(opo, NULL, "reducescatter", &op) < 0)
        return NULL;
    return hvd_start_gathering(HVD_OP_REDUCESCATTER, t, name, NULL, op, pre, post);
}

/* reducescatter(tensor, name=None, compression=Compression.none, op=Average,
 * process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0) */
static PyObject *py_reducescatter(PyObject *s, PyObject *args, PyObject *kw)
{
    (void)s;
    static char *kwlist[] = {"tensor",           "name", "compression", "op", "process_set", "prescale_factor",
                             "postscale_factor", NULL};
    PyObject *t, *name = Py_None, *comp = Py_None, *opo = Py_None, *ps = Py_None, *ct = NULL, *ctx = NULL;
    double pre = 1.0, post = 1.0;
    dt_redop op;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOdd:reducescatter", kwlist, &t, &name, &comp, &opo, &ps, &pre,
                                     &post))
        return NULL;
    if (hvd_check_process_set(ps, "reducescatter") < 0 || parse_op(opo, NULL, "reducescatter", &op) < 0)
        return NULL;
    int none = no_compression(comp);
    if (!none && compress(comp, t, &ct, &ctx) < 0)
        return NULL;
    PyObject *h = hvd_start_gathering(HVD_OP_REDUCESCATTER, none ? t : ct, name, NULL, op, pre, post);
    PyObject *r = h ? hvd_synchronize(h) : NULL, *out = r;
    if (r && !none) {
        out = PyObject_CallMethod(comp, "decompress", "(OO)", r, ctx);
        Py_DECREF(r);
    }
    Py_XDECREF(h);
    Py_XDECREF(ct);
    Py_XDECREF(ctx);
    return out;
}

static PyObject *py_poll(PyObject *self, PyObject *handle)
{
    (void)self;
    return hvd_poll(handle);
}

static PyObject *py_synchronize(PyObject *self, PyObject *handle)
{
    (void)self;
    return hvd_synchronize(handle);
}

/* join(device=-1): the rank that joined last. device is where Horovod makes its zeros; libdt makes
 * them itself. */
static PyObject *py_join(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"device", NULL};
    int device = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:join", kwlist, &device))
        return NULL;
    if (hvd_require_init() < 0)
        return NULL;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = dt_join();
    Py_END_ALLOW_THREADS
    if (r < 0)
        return PyErr_Format(hvd_g.error, "dtrain.torch: join failed (libdt status %d; its line above says why)", r);
    return PyLong_FromLong(r);
}

static PyObject *py_barrier(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"process_set", NULL};
    PyObject *ps = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:barrier", kwlist, &ps))
        return NULL;
    if (hvd_check_process_set(ps, "barrier") < 0 || hvd_require_init() < 0)
        return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = dt_barrier();
    Py_END_ALLOW_THREADS
    if (st != 0)
        return PyErr_Format(hvd_g.error, "dtrain.torch: barrier failed (libdt status %d; its line above says why)", st);
    Py_RETURN_NONE;
}

/* ---- the module ------------------------------------------------------------------------------------ */

#define KW(name, fn, doc)                                                                                              \
    {                                                                                                                  \
        name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc                                       \
    }
#define NOARG(name, fn, doc)                                                                                           \
    {                                                                                                                  \
        name, fn, METH_NOARGS, doc                                                                                     \
    }
static PyMethodDef g_methods[] = {
    KW("init", py_init, "init(comm=None, process_sets=None): start libdt (ranks from the launch)."),
    NOARG("shutdown", py_shutdown, "shutdown(): stop libdt; operations not yet run fail."),
    NOARG("is_initialized", py_is_initialized, "is_initialized() -> bool"),
    NOARG("size", py_size, "size() -> the number of ranks"),
    NOARG("rank", py_rank, "rank() -> this rank, 0 .. size() - 1"),
    NOARG("local_size", py_local_size, "local_size() -> the number of ranks on this node"),
    NOARG("local_rank", py_local_rank, "local_rank() -> this rank among those on this node"),
    NOARG("cross_size", py_cross_size, "cross_size() -> the number of ranks with this local rank"),
    NOARG("cross_rank", py_cross_rank, "cross_rank() -> this rank among those with its local rank"),
    NOARG("is_homogeneous", py_is_homogeneous, "is_homogeneous() -> whether every node has as many ranks"),
    NOARG("mpi_threads_supported", py_mpi_threads_supported, "mpi_threads_supported() -> True: any thread may call"),
    NOARG("mpi_enabled", py_mpi_enabled, "mpi_enabled() -> whether the ranks were started by MPI"),
    NOARG("mpi_built", py_mpi_built, "mpi_built() -> whether libdt was built with MPI"),
    NOARG("nccl_built", py_nccl_built, "nccl_built() -> whether libdt was built with NCCL"),
    NOARG("cuda_built", py_cuda_built, "cuda_built() -> whether libdt was built with CUDA"),
    NOARG("gloo_built", py_gloo_built, "gloo_built() -> False"),
    NOARG("gloo_enabled", py_gloo_enabled, "gloo_enabled() -> False"),
    NOARG("rocm_built", py_rocm_built, "rocm_built() -> False"),
    NOARG("ddl_built", py_ddl_built, "ddl_built() -> False"),
    NOARG("ccl_built", py_ccl_built, "ccl_built() -> False"),
    KW("allreduce", py_allreduce,
       "allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0, "
       "postscale_factor=1.0, process_set=global_process_set) -> a new tensor: op over the ranks"),
    KW("allreduce_", py_allreduce_, "allreduce_(tensor, ...) -> tensor, reduced in place"),
    KW("allreduce_async", py_allreduce_async, "allreduce_async(tensor, ...) -> handle"),
    KW("allreduce_async_", py_allreduce_async_, "allreduce_async_(tensor, ...) -> handle (in place)"),
    KW("grouped_allreduce", py_grouped_allreduce, "grouped_allreduce(tensors, ...) -> a list of new tensors"),
    KW("grouped_allreduce_", py_grouped_allreduce_, "grouped_allreduce_(tensors, ...) -> tensors, reduced in place"),
    KW("grouped_allreduce_async", py_grouped_allreduce_async, "grouped_allreduce_async(tensors, ...) -> handle"),
    KW("grouped_allreduce_async_", py_grouped_allreduce_async_,
       "grouped_allreduce_async_(tensors, ...) -> handle (in place)"),
    KW("allgather", py_allgather,
       "allgather(tensor, name=None, process_set=global_process_set) -> the ranks' tensors concatenated along "
       "dimension 0"),
    KW("allgather_async", py_allgather_async, "allgather_async(tensor, name=None, ...) -> handle"),
    KW("broadcast", py_broadcast, "broadcast(tensor, root_rank, name=None, ...) -> a new tensor, root's value"),
    KW("broadcast_", py_broadcast_, "broadcast_(tensor, root_rank, name=None, ...) -> tensor, set to root's value"),
    KW("broadcast_async", py_broadcast_async, "broadcast_async(tensor, root_rank, name=None, ...) -> handle"),
    KW("broadcast_async_", py_broadcast_async_, "broadcast_async_(tensor, root_rank, ...) -> handle (in place)"),
    KW("alltoall", py_alltoall,
       "alltoall(tensor, splits=None, name=None, ...) -> received tensor, or (tensor, received splits) when "
       "splits is given"),
    KW("alltoall_async", py_alltoall_async, "alltoall_async(tensor, splits=None, name=None, ...) -> handle"),
    KW("reducescatter", py_reducescatter,
       "reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=..., "
       "prescale_factor=1.0, postscale_factor=1.0) -> this rank's rows of the reduction"),
    KW("reducescatter_async", py_reducescatter_async,
       "reducescatter_async(tensor, name=None, op=Average, ...) -> handle"),
    {"poll", py_poll, METH_O, "poll(handle) -> whether the operation is done"},
    {"synchronize", py_synchronize, METH_O, "synchronize(handle) -> the operation's result, once done"},
    KW("join", py_join, "join(device=-1) -> the rank that joined last"),
    KW("barrier", py_barrier, "barrier(process_set=global_process_set): wait for every rank"),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef g_def = {
    PyModuleDef_HEAD_INIT,
    "dtrain.torch",
    "Horovod's PyTorch API on dtrain's libdt: import dtrain.torch as hvd (or dtrain.torch.horovod).",
    -1,
    g_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int module_setup(PyObject *m)
{
    if (!(hvd_g.torch = PyImport_ImportModule("torch")))
        return -1;
    if (!(hvd_g.tensor_type = PyObject_GetAttrString(hvd_g.torch, "Tensor")))
        return -1;
    if (!(hvd_g.strided = PyObject_GetAttrString(hvd_g.torch, "strided")))
        return -1;
    for (int i = 0; i < HVD_N_DTYPES; i++)
        if (!(hvd_g.dtypes[i] = PyObject_GetAttrString(hvd_g.torch, hvd_dtype_names[i])))
            return -1;
    if (!(hvd_g.ops = PyDict_New()))
        return -1;
    hvd_g.error = PyErr_NewExceptionWithDoc("dtrain.torch.HorovodInternalError",
                                            "A collective failed (on every rank that took part; the message is libdt's "
                                            "line). A RuntimeError, as Horovod's.",
                                            PyExc_RuntimeError, NULL);
    if (!hvd_g.error || add_ref(m, "HorovodInternalError", hvd_g.error) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "Average", HVD_AVERAGE) < 0 || PyModule_AddIntConstant(m, "Sum", HVD_SUM) < 0 ||
        PyModule_AddIntConstant(m, "Adasum", HVD_ADASUM) < 0 || PyModule_AddIntConstant(m, "Min", HVD_MIN) < 0 ||
        PyModule_AddIntConstant(m, "Max", HVD_MAX) < 0 || PyModule_AddIntConstant(m, "Product", HVD_PRODUCT) < 0 ||
        PyModule_AddStringConstant(m, "__version__", PACKAGE_VERSION) < 0)
        return -1;
    /* the global process set: an object with process_set_id 0, as Horovod's, for scripts that pass it */
    PyObject *types = PyImport_ImportModule("types");
    PyObject *ns = types ? PyObject_GetAttrString(types, "SimpleNamespace") : NULL;
    Py_XDECREF(types);
    if (!ns)
        return -1;
    PyObject *kw = Py_BuildValue("{s:i}", "process_set_id", 0);
    PyObject *noargs = PyTuple_New(0);
    hvd_g.global_set = kw && noargs ? PyObject_Call(ns, noargs, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(noargs);
    Py_DECREF(ns);
    if (!hvd_g.global_set || add_ref(m, "global_process_set", hvd_g.global_set) < 0)
        return -1;
    /* dtrain.torch.horovod (AIACC's spelling) is this module: an attribute and a sys.modules entry,
     * so that import dtrain.torch.horovod finds it after importing dtrain.torch */
    if (add_ref(m, "horovod", m) < 0)
        return -1;
    PyObject *modules = PyImport_GetModuleDict();
    if (PyDict_SetItemString(modules, "dtrain.torch.horovod", m) < 0)
        return -1;
    /* shut down at exit, as Horovod does: MPI wants its finalize */
    PyObject *atexit = PyImport_ImportModule("atexit");
    PyObject *shutdown = atexit ? PyObject_GetAttrString(m, "shutdown") : NULL;
    PyObject *r = shutdown ? PyObject_CallMethod(atexit, "register", "(O)", shutdown) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(shutdown);
    Py_XDECREF(atexit);
    if (!r)
        return -1;
    Py_INCREF(m);
    hvd_g.module = m;
    return hvd_train_init(m) < 0 ? -1 : hvd_autograd_init(m);
}

PyMODINIT_FUNC PyInit_torch(void);
PyMODINIT_FUNC PyInit_torch(void)
{
    PyObject *m = PyModule_Create(&g_def);
    if (!m)
        return NULL;
    if (module_setup(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
