/* hvd.h: the internal interface between the C files of the Python extension dtrain.torch
 * (src/python/), which gives Horovod's PyTorch API on libdt (dt.h).
 *
 *   torch.c  the module: init, basics, the collectives' Python-level functions (PyInit_torch)
 *   ops.c    the collectives on libdt: tensors, operations, handles, synchronize
 *   train.c  the training helpers: Compression, DistributedOptimizer, broadcast_parameters,
 *            broadcast_optimizer_state, broadcast_object, allgather_object, SyncBatchNorm
 *   autograd.c the out-of-place collectives as autograd Functions (gradients flow, as Horovod's)
 *
 * train.c calls the collectives through the module's Python-level functions (allreduce_async_,
 * synchronize, broadcast_, allgather, ...), exactly as a user's script does, so there is one path
 * from Python to libdt and one set of argument checks. Include this header first in every file of
 * the extension: Python.h must come before any system header. */
#ifndef DT_PYTHON_HVD_H
#define DT_PYTHON_HVD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "libdt/dt.h"

/* ---- torch.c and ops.c ----------------------------------------------------------------------------- */

#define HVD_N_DTYPES 8
/* The module's objects: strong references taken once by its init (torch.c). */
struct hvd_globals {
    PyObject *module;               /* dtrain.torch itself */
    PyObject *torch;                /* the torch module */
    PyObject *tensor_type;          /* torch.Tensor */
    PyObject *strided;              /* torch.strided, the only layout libdt reads */
    PyObject *dtypes[HVD_N_DTYPES]; /* torch.float32 ... in dt_dtype's order */
    PyObject *error;                /* HorovodInternalError (a RuntimeError, as Horovod's) */
    PyObject *ops;                  /* the operations in flight: handle (int) -> ops.c's record */
    PyObject *global_set;           /* global_process_set */
};
extern struct hvd_globals hvd_g;
/* torch's names of dt_dtype's values ("float32", ...) */
extern const char *const hvd_dtype_names[HVD_N_DTYPES];

enum hvd_kind { HVD_OP_ALLREDUCE, HVD_OP_BROADCAST, HVD_OP_ALLGATHER, HVD_OP_ALLTOALL, HVD_OP_REDUCESCATTER };

/* 0 once hvd.init() has run, else -1 with ValueError (Horovod's). */
int hvd_require_init(void);
/* 0 for process_set None, hvd.global_process_set or a set whose process_set_id is 0; else -1 with
 * NotImplementedError naming the function kind (dtrain.torch has only the global set) */
int hvd_check_process_set(PyObject *ps, const char *kind);
/* ops.c's collectives: each starts libdt's operation and returns its handle (a new int), or NULL
 * with an exception set. name is None or a str. */
/* tensors: one tensor, or (grouped) a sequence of them; inplace: the result goes to them */
PyObject *hvd_start_allreduce(PyObject *tensors, int grouped, int inplace, PyObject *name, dt_redop op, double prescale,
                              double postscale);
PyObject *hvd_start_broadcast(PyObject *tensor, int root, int inplace, PyObject *name);
/* HVD_OP_ALLGATHER, HVD_OP_ALLTOALL (splits: NULL, None, a sequence or a tensor) or
 * HVD_OP_REDUCESCATTER (op and the scale factors) */
PyObject *hvd_start_gathering(enum hvd_kind kind, PyObject *tensor, PyObject *name, PyObject *splits, dt_redop op,
                              double prescale, double postscale);
/* poll(handle) -> bool; ValueError for a handle not in flight */
PyObject *hvd_poll(PyObject *handle);
/* synchronize(handle): waits (GIL released) and returns the result: the output tensor (all-reduce,
 * broadcast: the caller's tensor when in place), a list (grouped), a new tensor (all-gather,
 * reduce-scatter), (tensor, received splits) (all-to-all); None for a handle not in flight. */
PyObject *hvd_synchronize(PyObject *handle);

/* ---- train.c ---------------------------------------------------------------------------------------- */

/* Adds train.c's names to module (the module dtrain.torch, every collective already in it). Called
 * last by the module's init. Returns 0, or -1 with a Python exception set (the import then fails
 * with that exception). */
int hvd_train_init(PyObject *module);

/* ---- autograd.c ------------------------------------------------------------------------------------- */

/* Makes allreduce, allgather, broadcast, alltoall and reducescatter of module differentiable (autograd
 * Functions, as Horovod's) in place of torch.c's functions, which it keeps for the calls that need no
 * gradient. Called after hvd_train_init (it uses train.h's helpers). Returns 0, or -1 with a Python
 * exception set. */
int hvd_autograd_init(PyObject *module);

#endif
