/* bn.c: batch norm (DT_OP_BN; cuda/bn.cu, cpu/bn.c), with a ReLU fused into it (the ReLU's node
 * folded: its output written by the BN), or an activation (DT_OP_ACT's node folded: the BN writes
 * its output, and the BN's own output is not stored), and a residual block's tail BN -> add -> ReLU
 * run as one op at the add's turn (the BN's node folded; nn/graph.c fuses all three,
 * dt_model_set_fusion). Training
 * normalises with the batch's statistics (summed over the replicas under SyncBN) and updates the
 * running ones; evaluation uses the running ones. */
#include "config.h"

#include "nn/layer.h"

/* the BN descriptor node nd runs with for a batch of n (sync: SyncBN's callback, or NULL) */
static dt_bn_desc bn_desc(const dt_model *m, const dt_node *nd, int n, int sync)
{
    const dt_value *x = &m->values[nd->in0];
    return (dt_bn_desc){.rows = (int64_t)n * x->height * x->width, .c = x->channels, .eps = nd->attr.eps,
                        .momentum = nd->attr.momentum, .sync = sync ? m->bn_sync : NULL,
                        .sync_ctx = m->bn_sync_ctx, .xt = x->dtype, .yt = m->values[nd->out].dtype,
                        .pt = ptype(m, nd->param[DT_NODE_WEIGHT]), .xs = slice_stride(m, nd->in0)};
}

static size_t bn_saved(const dt_model *m, const dt_node *nd, int n)
{
    (void)n;
    return DT_BN_SAVED(m->values[nd->in0].channels) * sizeof(float);
}

static void bn_plan(const dt_model *m, const dt_node *nd, int n, size_t *ws, size_t *scratch)
{
    (void)ws;
    dt_bn_desc d = bn_desc(m, nd, n, 1);
    size_t b = m->be->bn_scratch(&d);
    *scratch = b > *scratch ? b : *scratch;
}

/* a training BN counts its batches (num_batches_tracked, on the host) */
static void count_batch(dt_model *m, const dt_node *bn)
{
    m->counts[m->params[bn->param[DT_NODE_BATCHES_TRACKED]].off]++;
}

/* bn_fwd_* and bn_bwd's relu for node nd: what is fused into it (backend.h, DT_BN_*) */
static int fused_arg(const dt_model *m, const dt_node *nd)
{
    if (nd->attr.fused_act >= 0)
        return DT_BN_ACT(m->nodes[nd->attr.fused_act].attr.act);
    return nd->attr.fused_relu >= 0 ? DT_BN_RELU : 0;
}

static void bn_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_backend *be = m->be;
    dt_bn_desc d = bn_desc(m, nd, n, 1);
    const int yv = nd->attr.fused_act >= 0 ? m->nodes[nd->attr.fused_act].out : nd->out; /* what it writes */
    d.yt = m->values[yv].dtype;
    void *x = act_of(m, nd->in0), *y = act_of(m, yv);
    void *weight = param_of(m, nd->param[DT_NODE_WEIGHT]), *bias = param_of(m, nd->param[DT_NODE_BIAS]);
    void *rm = param_of(m, nd->param[DT_NODE_RUNNING_MEAN]), *rv = param_of(m, nd->param[DT_NODE_RUNNING_VAR]);
    const int relu = fused_arg(m, nd);
    if (m->training) {
        be->bn_fwd_train(&d, x, weight, bias, y, saved_of(m, nd), rm, rv, relu);
        count_batch(m, nd);
    } else {
        be->bn_fwd_infer(&d, x, weight, bias, rm, rv, y, relu);
    }
}

/* from the output's gradient, or its fused ReLU's or activation's */
static void bn_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    dt_bn_desc d = bn_desc(m, nd, n, m->training);
    const int from = dt_node_bwd_from(m, nd);
    d.yt = m->values[from].dtype;
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->bn_bwd(&d, act_of(m, nd->in0), grad_of(m, from), fused_arg(m, nd),
                  param_of(m, nd->param[DT_NODE_WEIGHT]), saved_of(m, nd), dx,
                  param_grad_of(m, nd->param[DT_NODE_WEIGHT]), param_grad_of(m, nd->param[DT_NODE_BIAS]),
                  grad_accumulate(m, nd->in0), b->accumulate);
}

const dt_kind dt_kind_bn_BN = {.saved = bn_saved, .plan = bn_plan, .forward = bn_forward, .backward = bn_backward,
                               .reads = DT_READS_IN0, .o1 = DT_O1_FP32};

/* --- the residual tail ------------------------------------------------------------------------ */

/* a fused residual tail's BN: its descriptor, with the type of the tail's output (the ReLU's) */
static dt_bn_desc tail_desc(const dt_model *m, const dt_node *add, int n, int sync)
{
    dt_bn_desc d = bn_desc(m, &m->nodes[add->attr.tail_bn], n, sync);
    d.yt = m->values[m->nodes[add->attr.tail_relu].out].dtype;
    return d;
}

/* the residual input of a tail's add (the input its BN did not make) */
static int tail_residual(const dt_model *m, const dt_node *add)
{
    return m->values[add->in0].producer == add->attr.tail_bn ? add->in1 : add->in0;
}

/* one op into the ReLU's output (the add's bytes: an in-place ReLU), and the BN's counter */
void dt_bn_tail_forward(dt_model *m, const dt_node *add, int n)
{
    const dt_backend *be = m->be;
    const dt_node *bn = &m->nodes[add->attr.tail_bn];
    const int r = tail_residual(m, add);
    void *y = act_of(m, m->nodes[add->attr.tail_relu].out), *gamma = param_of(m, bn->param[DT_NODE_WEIGHT]);
    void *beta = param_of(m, bn->param[DT_NODE_BIAS]), *rm = param_of(m, bn->param[DT_NODE_RUNNING_MEAN]);
    void *rv = param_of(m, bn->param[DT_NODE_RUNNING_VAR]);
    dt_bn_desc d = tail_desc(m, add, n, 1);
    if (m->training) {
        be->bn_add_relu_fwd_train(&d, act_of(m, bn->in0), gamma, beta, act_of(m, r), vtype(m, r), y, saved_of(m, bn),
                                  rm, rv);
        count_batch(m, bn);
    } else {
        be->bn_add_relu_fwd_infer(&d, act_of(m, bn->in0), gamma, beta, rm, rv, act_of(m, r), vtype(m, r), y);
    }
}

/* from the ReLU output's gradient, the BN input's and the residual's gradients and the BN's parameter
 * gradients in one op */
void dt_bn_tail_backward(dt_model *m, const dt_node *add, int n, int accumulate)
{
    const int bi = add->attr.tail_bn, r = tail_residual(m, add), yv = m->nodes[add->attr.tail_relu].out;
    const dt_node *bn = &m->nodes[bi];
    dt_bn_desc d = tail_desc(m, add, n, m->training);
    const int need_dx = bn->in0 != m->input;
    void *dx = need_dx ? grad_of(m, bn->in0) : NULL;
    int acc_dx = need_dx ? grad_accumulate(m, bn->in0) : 0, acc_r = grad_accumulate(m, r);
    m->be->bn_add_relu_bwd(&d, act_of(m, bn->in0), act_of(m, yv), grad_of(m, yv),
                           param_of(m, bn->param[DT_NODE_WEIGHT]), saved_of(m, bn), dx, grad_of(m, r), vtype(m, r),
                           param_grad_of(m, bn->param[DT_NODE_WEIGHT]), param_grad_of(m, bn->param[DT_NODE_BIAS]),
                           acc_dx, acc_r, accumulate);
}
