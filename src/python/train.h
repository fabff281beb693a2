/* train.h: the training helpers of dtrain.torch, Horovod's broadcast_parameters,
 * broadcast_object, allgather_object, Compression (train.c), broadcast_optimizer_state
 * (optstate.c), DistributedOptimizer (optim.c, optim_names.c) and SyncBatchNorm (syncbn.c),
 * written against CPython's C API.
 *
 * They reach the collectives only through the module's own Python-level functions
 * (allreduce_async_, synchronize, broadcast_, allgather, ...), looked up by name at each call, so
 * that they depend on nothing of the module's C internals (torch.c). Internal to the package. */
#ifndef DT_PY_TRAIN_H
#define DT_PY_TRAIN_H

#include "python/hvd.h" /* Python.h first; hvd_train_init, called at the end of the module's init */

/* ---- shared by train.c, optim.c and syncbn.c (train.c) ---- */

/* The module (a strong reference taken by hvd_train_init) and torch. Borrowed. */
PyObject *hvd_tr_module(void);
PyObject *hvd_tr_torch(void);
/* The module's attribute name (a new reference), or NULL with AttributeError naming it. */
PyObject *hvd_tr_fn(const char *name);
/* module.name(*args, **kwargs): a new reference, or NULL. args is a tuple; kwargs may be NULL. */
PyObject *hvd_tr_call(const char *name, PyObject *args, PyObject *kwargs);
/* module.size() and module.rank(): -1 with an exception set on failure. */
int hvd_tr_size(void);
int hvd_tr_rank(void);
/* torch.name (a new reference) */
PyObject *hvd_tr_torch_attr(const char *name);
/* An instance method (bound to the instance when looked up through it) calling def's C function
 * with the instance as args[0]: for the classes built with type() from C. def must be static. */
PyObject *hvd_tr_method(PyMethodDef *def);
/* broadcast_object(obj, root, name): root's object on every rank (a new reference), or NULL. */
PyObject *hvd_tr_broadcast_object(PyObject *obj, int root, PyObject *name);
/* allgather_object(obj, name): the list of every rank's object (a new reference), or NULL. */
PyObject *hvd_tr_allgather_object(PyObject *obj, PyObject *name);
/* Broadcasts each (name, tensor) of pairs (a list) from root, in place: 0, or -1 with an exception. */
int hvd_tr_broadcast_pairs(PyObject *pairs, int root);

/* ---- DistributedOptimizer's parameters (optim_names.c) ---- */
/* named_parameters as a checked list of (name, tensor); None: "allreduce.noname.<i>" over groups */
PyObject *hvd_opt_named_list(PyObject *named, PyObject *groups);
/* ValueError unless every parameter of groups (param_groups) is a key of names */
int hvd_opt_check_all_named(PyObject *groups, PyObject *names);
/* ValueError unless groups is None, an int > 0 or a list of lists of distinct tensors */
int hvd_opt_check_groups(PyObject *groups);
/* the grouped all-reduces' groups of plist (the parameters needing gradients) in self's
 * _p_to_group and _group_counts, in rank 0's order */
int hvd_opt_form_groups(PyObject *self, PyObject *plist, PyObject *groups);

/* ---- each file's part of hvd_train_init: 0, or -1 with an exception set ---- */
int hvd_optstate_init(PyObject *module);
int hvd_optim_init(PyObject *module);
int hvd_syncbn_init(PyObject *module);

#endif
