/* layer.h: what running a planned model needs: the accessors of its tensors, the node kinds' table
 * (dt_kind, one per DT_KINDS line, defined in its family file under nn/layers/), and the runner of
 * the casts precision planned (graph_types.h). For nn/model_run.c's loop, the planner and the family files;
 * not for other modules (they use model.h).
 *
 * A family file holds everything about its kinds: the shape rule, the state forward saves for
 * backward, the backend's planning, forward and backward, and the flags the planner reads. Nothing
 * in it asks about opt levels: a conv or linear node reads its operands through dt_operand and writes
 * its gradients through dt_result, where the plan put them. */
#ifndef DT_NN_LAYER_H
#define DT_NN_LAYER_H

#include <stdint.h>

#include "nn/model.h"
#include "util/arena.h"
#include "util/check.h"
#include "util/log.h"

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

/* a descriptor's stride for value v: 0 (packed), or its ld when it is laid in a wider value */
static inline int slice_stride(const dt_model *m, int v)
{
    return m->values[v].ld != m->values[v].channels ? m->values[v].ld : 0;
}

/* --- the node kinds ----------------------------------------------------------------------------- */

/* what backward reads besides the gradients (the planner keeps those activations alive) */
enum { DT_READS_IN0 = 1, DT_READS_IN1 = 2, DT_READS_OUT = 4 };
/* O1's type for a kind's output (autocast's rule): fp32, the reduced type (conv, linear: they cast
 * their operands), or reduced when its inputs are */
enum dt_o1_rule { DT_O1_FP32, DT_O1_REDUCES, DT_O1_KEEPS };

/* what backward hands a node: the pass's accumulate (parameter gradients added to), and, set by a
 * conv or linear node, whether its input's gradient was added to (its casts after it join so) */
typedef struct dt_bwd {
    int accumulate, acc_dx;
} dt_bwd;

typedef struct dt_kind {
    /* the output's height and width (set to the input's before): DT_OK, or DT_ERR_INPUT after one
     * line naming the layer, for the model's input of h x w; NULL: the input's */
    int (*shape)(dt_model *m, int i, int n, int h, int w);
    /* bytes forward saves for backward at a batch of n; NULL: none */
    size_t (*saved)(const dt_model *m, const dt_node *nd, int n);
    /* the backend's planning ops at a batch of n: the most workspace into *ws, scratch into *scratch */
    void (*plan)(const dt_model *m, const dt_node *nd, int n, size_t *ws, size_t *scratch);
    void (*forward)(dt_model *m, dt_node *nd, int n);
    void (*backward)(dt_model *m, dt_node *nd, int n, dt_bwd *b);
    unsigned reads;       /* DT_READS_* (a ReLU fused into its BN reads nothing: the BN recomputes it) */
    enum dt_o1_rule o1;
    int casts;            /* 1: computes in the compute type, its operands cast (conv, linear) */
    int strided_out;      /* 1: can write its output into a wider value's channels (a concatenation) */
} dt_kind;

/* every kind's, and its name, by enum dt_op_kind (nn/layers/kinds.c, from DT_KINDS) */
extern const dt_kind *const dt_kinds[DT_OP_KINDS];
extern const char *const dt_kind_names[DT_OP_KINDS];

/* the line a shape rule gives for a layer its input is too small for: DT_ERR_INPUT */
static inline int dt_layer_too_small(const dt_model *m, const dt_node *nd, int h, int w)
{
    const dt_value *x = &m->values[nd->in0];
    dt_error("model %s: an input of %dx%d is too small for layer %s (it gets %dx%d)", m->arch, h, w, nd->name,
             x->height, x->width);
    return DT_ERR_INPUT;
}

/* a residual tail BN -> add -> in-place ReLU as one op, at its add's turn (nn/layers/bn.c) */
void dt_bn_tail_forward(dt_model *m, const dt_node *add, int n);
void dt_bn_tail_backward(dt_model *m, const dt_node *add, int n, int accumulate);

/* 1 when another node's op does node nd's work: a ReLU or an activation fused into its BN, a BN run
 * by its residual tail's add */
static inline int dt_node_folded(const dt_node *nd)
{
    return ((nd->op == DT_OP_RELU || nd->op == DT_OP_ACT) && nd->attr.fused_into_bn) ||
           (nd->op == DT_OP_BN && nd->attr.fused_tail >= 0);
}

/* the value whose gradient node nd's backward starts from: its output's, or that of the ReLU or
 * activation its op ends with (a BN with its ReLU or activation fused, a residual tail's add) */
static inline int dt_node_bwd_from(const dt_model *m, const dt_node *nd)
{
    if (nd->op == DT_OP_BN && nd->attr.fused_relu >= 0)
        return m->nodes[nd->attr.fused_relu].out;
    if (nd->op == DT_OP_BN && nd->attr.fused_act >= 0)
        return m->nodes[nd->attr.fused_act].out;
    if (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0)
        return m->nodes[nd->attr.tail_relu].out;
    return nd->out;
}

/* --- casts, as planned -------------------------------------------------------------------------- */

static inline int64_t dt_extent_at(const dt_model *m, const dt_extent *s, int n)
{
    return (s->v >= 0 ? s->k * value_numel(&m->values[s->v], n) : 0) + s->fixed;
}

/* the memory of a planned tensor at a batch of n (DT_AT_OWN: own) */
static inline void *dt_at_ptr(const dt_model *m, const dt_at *a, int n, void *own)
{
    switch (a->space) {
    case DT_AT_ACT: return act_of(m, a->idx);
    case DT_AT_GRAD: return grad_of(m, a->idx);
    case DT_AT_PARAM: return param_of(m, a->idx);
    case DT_AT_PGRAD: return param_grad_of(m, a->idx);
    case DT_AT_SCRATCH:
        return (char *)dt_arena_at(&m->prec_scratch, 0) +
               (size_t)dt_extent_at(m, &a->at, n) * dtype_bytes(m->compute_type);
    default: return own;
    }
}

/* where node nd reads operand k (enum dt_operand) from: a planned copy, else own (its own tensor;
 * NULL stays NULL: a conv without bias) */
static inline const void *dt_operand(const dt_model *m, const dt_node *nd, int k, int n, const void *own)
{
    return own ? dt_at_ptr(m, &nd->operand[k], n, (void *)(uintptr_t)own) : NULL;
}

/* where node nd writes the gradient of operand k: apart (the casts after the op join it to own), or
 * own itself (NULL stays NULL) */
static inline void *dt_result(const dt_model *m, const dt_node *nd, int k, int n, void *own)
{
    return own ? dt_at_ptr(m, &nd->result[k], n, own) : NULL;
}

/* 1 when node nd writes operand k's gradient into the gradient itself (then the op adds to it when
 * it accumulates; apart, the join after it adds) */
static inline int dt_result_direct(const dt_node *nd, int k)
{
    return nd->result[k].space == DT_AT_OWN;
}

/* runs count casts of the model's from index at, at a batch of n; b: the backward's (NULL forward) */
static inline void dt_run_casts(dt_model *m, int at, int count, int n, const dt_bwd *b)
{
    const dt_backend *be = m->be;
    for (const dt_cast *c = m->casts + at, *end = c + count; c < end; c++) {
        if ((c->when == DT_WHEN_TRAINING && !m->training) ||
            (c->when == DT_WHEN_GRAD_WRITTEN && !m->values[c->dst.idx].grad_ready))
            continue;
        const int64_t count_n = dt_extent_at(m, &c->count, n);
        void *dst = dt_at_ptr(m, &c->dst, n, NULL);
        if (c->kind == DT_CAST_COPY) {
            int acc = !b || c->acc == DT_ACC_NONE ? 0 : c->acc == DT_ACC_PASS ? b->accumulate : b->acc_dx;
            be->copy_grad(count_n, dt_at_ptr(m, &c->src, n, NULL), c->st, dst, c->dt, acc);
        } else {
            be->round_half(count_n, dst, m->prec_bf16);
        }
    }
}

/* node nd's casts of phase ph */
static inline void dt_node_casts(dt_model *m, const dt_node *nd, int ph, int n, const dt_bwd *b)
{
    if (nd->casts[ph])
        dt_run_casts(m, nd->cast_at[ph], nd->casts[ph], n, b);
}

#endif
