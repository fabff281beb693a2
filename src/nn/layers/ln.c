/* ln.c: layer norm over each position's channels (DT_OP_LN: ConvNeXt's LayerNorm2d, ViT's LayerNorm;
 * cuda/ln.cu, cpu/ln.c); forward saves each row's mean and rstd. */
#include "config.h"

#include "nn/layer.h"

static size_t ln_saved(const dt_model *m, const dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0];
    return 2 * (size_t)n * x->height * x->width * sizeof(float); /* mean, rstd per row */
}

static void ln_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT];
    m->be->ln_fwd(value_numel(y, n) / x->channels, x->channels, nd->attr.eps, act_of(m, nd->in0), x->dtype,
                  param_of(m, wi), param_of(m, nd->param[DT_NODE_BIAS]), ptype(m, wi), act_of(m, nd->out), y->dtype,
                  saved_of(m, nd));
}

static void ln_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT], need_dx = nd->in0 != m->input;
    m->be->ln_bwd(value_numel(y, n) / x->channels, x->channels, act_of(m, nd->in0), x->dtype, param_of(m, wi),
                  ptype(m, wi), saved_of(m, nd), grad_of(m, nd->out), y->dtype, need_dx ? grad_of(m, nd->in0) : NULL,
                  param_grad_of(m, wi), param_grad_of(m, nd->param[DT_NODE_BIAS]),
                  need_dx ? grad_accumulate(m, nd->in0) : 0, b->accumulate);
}

const dt_kind dt_kind_ln_LN = {.saved = ln_saved, .forward = ln_forward, .backward = ln_backward, .reads = DT_READS_IN0,
                               .o1 = DT_O1_FP32};
