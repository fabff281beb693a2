/* eltwise.c: the element-wise kinds (cuda/eltwise.cu, cpu/eltwise.c): the residual add (DT_OP_ADD;
 * with its block's tail BN and ReLU fused, it runs them: bn.c), dropout (DT_OP_DROPOUT, its mask
 * saved) and stochastic depth (DT_OP_SDEPTH, a byte per image), ConvNeXt's layer scale (DT_OP_SCALE)
 * and squeeze-and-excitation's channel scale (DT_OP_CHANMUL). */
#include "config.h"

#include "nn/layer.h"

static void add_forward(dt_model *m, dt_node *nd, int n)
{
    if (nd->attr.tail_bn >= 0) {
        dt_bn_tail_forward(m, nd, n);
        return;
    }
    const dt_value *y = &m->values[nd->out];
    m->be->add_fwd(value_numel(y, n), act_of(m, nd->in0), vtype(m, nd->in0), act_of(m, nd->in1), vtype(m, nd->in1),
                   act_of(m, nd->out), y->dtype);
}

/* each input's gradient is the output's: an input sharing it has it already, the others get copies */
static void add_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    if (nd->attr.tail_bn >= 0) {
        dt_bn_tail_backward(m, nd, n, b->accumulate);
        return;
    }
    const dt_value *y = &m->values[nd->out];
    const int ins[2] = {nd->in0, nd->in1};
    for (int k = 0; k < 2; k++) {
        if (m->values[ins[k]].grad_alias == nd->out)
            m->values[ins[k]].grad_ready = 1; /* it is this gradient */
        else
            m->be->copy_grad(value_numel(y, n), grad_of(m, nd->out), y->dtype, grad_of(m, ins[k]), vtype(m, ins[k]),
                             grad_accumulate(m, ins[k]));
    }
}

static size_t dropout_saved(const dt_model *m, const dt_node *nd, int n)
{
    return nd->op == DT_OP_DROPOUT ? (size_t)value_numel(&m->values[nd->out], n) : (size_t)n;
}

/* Dropout and stochastic depth, in training with a probability: seeded by the model's step, which
 * the op reads from the scalars (written with the step's in part; a graph's launch gets its own
 * step), plus the forwards since that write (gradient accumulation): hash(seed, m->step * 1024 + i).
 * Otherwise a copy. */
static void drop_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_backend *be = m->be;
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int64_t count = value_numel(y, n);
    void *in = act_of(m, nd->in0), *out = act_of(m, nd->out);
    if (!(m->training && nd->attr.drop_prob > 0)) {
        be->copy_grad(count, in, x->dtype, out, y->dtype, 0);
        return;
    }
    const int64_t salt = (int64_t)(m->step - m->step_written) * 1024 + (nd - m->nodes);
    if (nd->op == DT_OP_DROPOUT)
        be->dropout_fwd(count, nd->attr.drop_prob, m->dropout_seed, salt, m->scalars, in, x->dtype, out, y->dtype,
                        saved_of(m, nd));
    else
        be->sdepth_fwd(n, count / n, nd->attr.drop_prob, m->dropout_seed, salt, m->scalars, in, x->dtype, out,
                       y->dtype, saved_of(m, nd));
}

static void drop_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_backend *be = m->be;
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int64_t count = value_numel(y, n);
    void *dy = grad_of(m, nd->out), *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    if (!(m->training && nd->attr.drop_prob > 0))
        be->copy_grad(count, dy, y->dtype, dx, x->dtype, grad_accumulate(m, nd->in0));
    else if (nd->op == DT_OP_DROPOUT)
        be->dropout_bwd(count, nd->attr.drop_prob, saved_of(m, nd), dy, y->dtype, dx, x->dtype,
                        grad_accumulate(m, nd->in0));
    else
        be->sdepth_bwd(n, count / n, nd->attr.drop_prob, saved_of(m, nd), dy, y->dtype, dx, x->dtype,
                       grad_accumulate(m, nd->in0));
}

/* one "image" of every position: the scale is the batch's */
static void scale_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT];
    m->be->chanmul_fwd(1, value_numel(y, n) / x->channels, x->channels, act_of(m, nd->in0), x->dtype,
                       param_of(m, wi), ptype(m, wi), act_of(m, nd->out), y->dtype);
}

static void scale_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT], need_dx = nd->in0 != m->input;
    m->be->chanmul_bwd(1, value_numel(y, n) / x->channels, x->channels, act_of(m, nd->in0), x->dtype,
                       param_of(m, wi), ptype(m, wi), grad_of(m, nd->out), y->dtype,
                       need_dx ? grad_of(m, nd->in0) : NULL, param_grad_of(m, wi),
                       need_dx ? grad_accumulate(m, nd->in0) : 0, b->accumulate);
}

static void chanmul_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    m->be->chanmul_fwd(n, (int64_t)x->height * x->width, x->channels, act_of(m, nd->in0), x->dtype,
                       act_of(m, nd->in1), vtype(m, nd->in1), act_of(m, nd->out), y->dtype);
}

static void chanmul_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int need_dx = nd->in0 != m->input;
    const int acc_dx = need_dx ? grad_accumulate(m, nd->in0) : 0, acc_ds = grad_accumulate(m, nd->in1);
    m->be->chanmul_bwd(n, (int64_t)x->height * x->width, x->channels, act_of(m, nd->in0), x->dtype,
                       act_of(m, nd->in1), vtype(m, nd->in1), grad_of(m, nd->out), y->dtype,
                       need_dx ? grad_of(m, nd->in0) : NULL, grad_of(m, nd->in1), acc_dx, acc_ds);
}

const dt_kind dt_kind_eltwise_ADD = {.forward = add_forward, .backward = add_backward, .o1 = DT_O1_FP32};
const dt_kind dt_kind_eltwise_DROPOUT = {.saved = dropout_saved, .forward = drop_forward, .backward = drop_backward,
                                         .o1 = DT_O1_FP32};
const dt_kind dt_kind_eltwise_SDEPTH = {.saved = dropout_saved, .forward = drop_forward, .backward = drop_backward,
                                        .o1 = DT_O1_KEEPS};
const dt_kind dt_kind_eltwise_SCALE = {.forward = scale_forward, .backward = scale_backward, .reads = DT_READS_IN0,
                                       .o1 = DT_O1_FP32};
const dt_kind dt_kind_eltwise_CHANMUL = {.forward = chanmul_forward, .backward = chanmul_backward,
                                         .reads = DT_READS_IN0 | DT_READS_IN1, .o1 = DT_O1_KEEPS};
