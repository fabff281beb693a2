/* attn.c: ViT's encoder pieces (cuda/attn.cu, cpu/attn.c): the tokens (DT_OP_TOKENS: the class token
 * before the patches, plus the position embedding) and self-attention's core (DT_OP_ATTN: softmax(q
 * k^T / sqrt(d)) v per head, its probabilities saved for backward). A sequence of s tokens of d
 * features is a value of height 1, width s and d channels. */
#include "config.h"

#include "nn/layer.h"

/* the patches in a row after the class token: as many as the embedding holds */
static int tokens_shape(dt_model *m, int i, int n, int h, int w)
{
    (void)n;
    const dt_node *nd = &m->nodes[i];
    const dt_value *x = &m->values[nd->in0];
    dt_value *y = &m->values[nd->out];
    const dt_param *pos = &m->params[nd->param[DT_NODE_BIAS]];
    y->height = 1;
    y->width = x->height * x->width + 1;
    if (y->width != pos->shape[1]) {
        dt_error("model %s: an input of %dx%d gives %d tokens, but %s holds %d (the input size it was built for)",
                 m->arch, h, w, y->width, pos->name, pos->shape[1]);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

static void tokens_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT];
    m->be->tokens_fwd(n, y->width - 1, y->channels, act_of(m, nd->in0), vtype(m, nd->in0), param_of(m, wi),
                      param_of(m, nd->param[DT_NODE_BIAS]), ptype(m, wi), act_of(m, nd->out), y->dtype);
}

static void tokens_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    const dt_value *y = &m->values[nd->out];
    const int wi = nd->param[DT_NODE_WEIGHT], need_dx = nd->in0 != m->input;
    m->be->tokens_bwd(n, y->width - 1, y->channels, grad_of(m, nd->out), y->dtype,
                      need_dx ? grad_of(m, nd->in0) : NULL, vtype(m, nd->in0), param_grad_of(m, wi),
                      param_grad_of(m, nd->param[DT_NODE_BIAS]), ptype(m, wi),
                      need_dx ? grad_accumulate(m, nd->in0) : 0, b->accumulate);
}

/* the attention probabilities, per image and head: s x s */
static size_t attn_saved(const dt_model *m, const dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0];
    return (size_t)n * nd->attr.groups * x->width * x->width * sizeof(float);
}

static void attn_plan(const dt_model *m, const dt_node *nd, int n, size_t *ws, size_t *scratch)
{
    (void)ws;
    const dt_value *y = &m->values[nd->out];
    size_t b = m->be->attn_scratch(n, y->width, nd->attr.groups, y->channels / nd->attr.groups, vtype(m, nd->in0),
                                   y->dtype);
    *scratch = b > *scratch ? b : *scratch;
}

static void attn_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *y = &m->values[nd->out];
    m->be->attn_fwd(n, y->width, nd->attr.groups, y->channels / nd->attr.groups, act_of(m, nd->in0),
                    vtype(m, nd->in0), act_of(m, nd->out), y->dtype, saved_of(m, nd));
}

static void attn_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_value *y = &m->values[nd->out];
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->attn_bwd(n, y->width, nd->attr.groups, y->channels / nd->attr.groups, act_of(m, nd->in0),
                    vtype(m, nd->in0), saved_of(m, nd), grad_of(m, nd->out), y->dtype, dx,
                    grad_accumulate(m, nd->in0));
}

const dt_kind dt_kind_attn_TOKENS = {.shape = tokens_shape, .forward = tokens_forward, .backward = tokens_backward,
                                     .o1 = DT_O1_FP32};
const dt_kind dt_kind_attn_ATTN = {.saved = attn_saved, .plan = attn_plan, .forward = attn_forward,
                                   .backward = attn_backward, .reads = DT_READS_IN0, .o1 = DT_O1_KEEPS};
