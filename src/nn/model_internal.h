/* model_internal.h: what nn/model.c (planning, forward, backward) and nn/precision.c (mixed
 * precision) share about a planned model; not for other modules (they use model.h). */
#ifndef DT_NN_MODEL_INTERNAL_H
#define DT_NN_MODEL_INTERNAL_H

#include <stdint.h>

#include "nn/model.h"
#include "util/arena.h"

/* graph.c: every parameter's boff and the sizes of weights/grads and buffers from the parameters'
 * dtypes; new (zeroed) storage of those sizes, or DT_ERR_NOMEM after one line */
void dt_param_layout(dt_model *m);
int dt_param_storage(dt_model *m, void **weights, void **grads, void **buffers);

/* n values of type t at src (backend memory) as fp32 to host (graph.c) */
void dt_get_f32(const dt_backend *be, dt_dtype t, const void *src, size_t n, float *host);

/* bytes per element of a storage type */
static inline size_t dtype_bytes(dt_dtype t)
{
    return t == DT_FLOAT32 ? 4 : 2;
}

/* elements of value v for a batch of n */
static inline int64_t value_numel(const dt_value *v, int n)
{
    return (int64_t)n * v->height * v->width * v->channels;
}

/* the rows and features a linear node nd computes for a batch of n: n and everything flattened, or
 * (pointwise) every position of the batch and its channels */
static inline void linear_shape(const dt_model *m, const dt_node *nd, int n, int *rows, int *in)
{
    const dt_value *x = &m->values[nd->in0];
    *rows = nd->attr.pointwise ? n * x->height * x->width : n;
    *in = nd->attr.pointwise ? x->channels : x->channels * x->height * x->width;
}

/* the activation of value v, of type m->values[v].dtype (the model's input is the caller's memory,
 * fp32, read but never written) */
static inline void *act_of(const dt_model *m, int v)
{
    if (v == m->input)
        return (void *)(uintptr_t)m->input_data;
    return dt_arena_at(&m->act, m->values[v].act_off);
}

/* the gradient of value v (its type too) */
static inline void *grad_of(const dt_model *m, int v)
{
    return dt_arena_at(&m->grad, m->values[v].grad_off);
}

static inline dt_dtype vtype(const dt_model *m, int v)
{
    return m->values[v].dtype;
}

/* a node's state saved by forward for backward (BN statistics, max pool argmax, dropout mask) */
static inline void *saved_of(const dt_model *m, const dt_node *nd)
{
    return dt_arena_at(&m->act, nd->save_off);
}

/* data and gradient of parameter idx (a dt_node.param[] entry): NULL when idx < 0 */
static inline void *param_of(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_data(m, &m->params[idx]);
}

static inline void *param_grad_of(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_grad(m, &m->params[idx]);
}

/* the storage type of parameter idx (fp32 when idx < 0) */
static inline dt_dtype ptype(const dt_model *m, int idx)
{
    return idx < 0 ? DT_FLOAT32 : m->params[idx].dtype;
}

/* Backward's write to value v's gradient: 0 for the first write of this pass (overwrite), 1 after
 * (add); marks the gradient written. */
static inline int grad_accumulate(dt_model *m, int v)
{
    int acc = m->values[v].grad_ready;
    m->values[v].grad_ready = 1;
    return acc;
}

/* --- mixed precision (nn/precision.c), used by planning, forward and backward --- */

/* the types of every value (m->values[].reduced, .dtype) at the model's opt level; breaks a shared
 * gradient between values of different types (they get copies) */
void dt_amp_value_types(dt_model *m);
/* emulation: rounds n values of a reduced value or parameter stored as fp32, in place; real storage
 * (or nothing reduced): nothing to do */
void dt_amp_round_value(const dt_model *m, int v, void *x, int64_t n);
/* emulation: parameter idx's data or gradient x (idx < 0: nothing) rounded when it is reduced */
void dt_amp_round_param(const dt_model *m, int idx, void *x);
/* the type a conv or linear node computes in: the reduced type under O1-O3 stored for real, else fp32 */
dt_dtype dt_amp_compute_type(const dt_model *m);
/* bytes of m->amp_scratch for a batch of n */
size_t dt_amp_scratch_bytes(const dt_model *m, int n);
/* the operands a conv/linear node computes with: x, w and b replaced by copies in the compute type
 * where they are stored otherwise (O1's casts; the model's fp32 input under O2/O3), rounded when
 * emulated */
void dt_amp_operands(dt_model *m, const dt_node *nd, int n, const void **x, const void **w, const void **b);
/* conv and linear backward under mixed precision */
void dt_amp_conv_bwd(dt_model *m, const dt_node *nd, int n, const dt_conv_desc *d, const void *xin, void *dy,
                     int need_dx, int accumulate, void *ws);
void dt_amp_linear_bwd(dt_model *m, const dt_node *nd, int n, const void *xin, void *dy, int need_dx, int accumulate);
/* emulation, after the backward of a node other than conv and linear: rounds the gradients it wrote
 * of reduced values and parameters */
void dt_amp_round_grads(dt_model *m, const dt_node *nd, int n);

#endif
