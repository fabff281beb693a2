/* model_internal.h: what nn/model.c (planning, forward, backward) and nn/precision.c (mixed
 * precision) share about a planned model; not for other modules (they use model.h). */
#ifndef DT_NN_MODEL_INTERNAL_H
#define DT_NN_MODEL_INTERNAL_H

#include <stdint.h>

#include "nn/model.h"
#include "util/arena.h"

/* elements of value v for a batch of n */
static inline int64_t value_numel(const dt_value *v, int n)
{
    return (int64_t)n * v->height * v->width * v->channels;
}

/* the activation of value v (the model's input is the caller's memory, read but never written) */
static inline float *act_of(const dt_model *m, int v)
{
    if (v == m->input)
        return (float *)(uintptr_t)m->input_data;
    return (float *)dt_arena_at(&m->act, m->values[v].act_off);
}

/* the gradient of value v */
static inline float *grad_of(const dt_model *m, int v)
{
    return (float *)dt_arena_at(&m->grad, m->values[v].grad_off);
}

/* a node's state saved by forward for backward (BN statistics, max pool argmax, dropout mask) */
static inline void *saved_of(const dt_model *m, const dt_node *nd)
{
    return dt_arena_at(&m->act, nd->save_off);
}

/* data and gradient of parameter idx (a dt_node.param[] entry): NULL when idx < 0 */
static inline float *param_of(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_data(m, &m->params[idx]);
}

static inline float *param_grad_of(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_grad(m, &m->params[idx]);
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

/* rounds n floats at x to the model's reduced type (fp16 or bf16) */
void dt_amp_round(const dt_model *m, float *x, int64_t n);
/* is the node's output stored in the reduced type? O1: what conv and linear make; O2/O3: all */
int dt_amp_output_reduced(const dt_model *m, const dt_node *nd);
/* bytes of m->amp_scratch for a batch of n */
size_t dt_amp_scratch_bytes(const dt_model *m, int n);
/* the operands a conv/linear node computes with: x, w and b replaced by rounded copies where needed */
void dt_amp_operands(dt_model *m, const dt_node *nd, int n, const float **x, const float **w, const float **b);
/* conv and linear backward under mixed precision (dy may be rounded in place) */
void dt_amp_conv_bwd(dt_model *m, const dt_node *nd, int n, const dt_conv_desc *d, const float *xin, float *dy,
                     int need_dx, int accumulate, void *ws);
void dt_amp_linear_bwd(dt_model *m, const dt_node *nd, int n, const float *xin, float *dy, int need_dx, int accumulate);
/* O2/O3, after the backward of a node other than conv and linear: rounds what it wrote */
void dt_amp_round_grads(dt_model *m, const dt_node *nd, int n);

#endif
