/* act.c: the element-wise activations (cuda/act.cu, cpu/act.c): ReLU (DT_OP_RELU; in place when its
 * input has no other reader, so its backward reads its output; fused into the BN before it when it
 * can be, nn/graph.c) and the others (DT_OP_ACT: ReLU6, Hardswish, SiLU, GELU, ...; backward reads
 * the input; fused into the BN before it when the backend runs DT_FUSE_BN_ACT and nothing else reads
 * the BN's output: then the BN's node does this one's work each way, layers/bn.c). */
#include "config.h"

#include "nn/layer.h"

static void relu_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *y = &m->values[nd->out];
    m->be->relu_fwd(value_numel(y, n), m->values[nd->in0].dtype, act_of(m, nd->in0), act_of(m, nd->out));
}

static void relu_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_value *y = &m->values[nd->out];
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->relu_bwd(value_numel(y, n), y->dtype, act_of(m, nd->out), grad_of(m, nd->out), dx,
                    grad_accumulate(m, nd->in0));
}

static void act_forward(dt_model *m, dt_node *nd, int n)
{
    m->be->act_fwd(value_numel(&m->values[nd->out], n), nd->attr.act, m->values[nd->in0].dtype, act_of(m, nd->in0),
                   act_of(m, nd->out));
}

static void act_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->act_bwd(value_numel(&m->values[nd->out], n), nd->attr.act, m->values[nd->in0].dtype, act_of(m, nd->in0),
                   grad_of(m, nd->out), dx, grad_accumulate(m, nd->in0));
}

const dt_kind dt_kind_act_RELU = {.forward = relu_forward, .backward = relu_backward, .reads = DT_READS_OUT,
                                  .o1 = DT_O1_KEEPS};
const dt_kind dt_kind_act_ACT = {.forward = act_forward, .backward = act_backward, .reads = DT_READS_IN0,
                                 .o1 = DT_O1_KEEPS};
