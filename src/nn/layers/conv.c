/* conv.c: the convolution (DT_OP_CONV; nn/backend.h's conv ops, cuda/conv_cudnn.c, cpu/conv.c). It
 * computes in the model's compute type, from the operands and into the results precision planned. */
#include "config.h"

#include "nn/layer.h"

/* the convolution node nd computes for a batch of n */
static void conv_desc(const dt_model *m, const dt_node *nd, int n, dt_conv_desc *d)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_conv_desc_set(d, n, x->height, x->width, x->channels, y->channels, nd->attr.kernel, nd->attr.kernel,
                     nd->attr.stride, nd->attr.stride, nd->attr.pad, nd->attr.pad, nd->attr.dilation, nd->attr.dilation,
                     nd->attr.groups);
    d->bias = nd->attr.has_bias;
    d->t = m->compute_type;
    d->ys = slice_stride(m, nd->out);
    /* backward adds into dx unless this conv is the first writer: its input's last reader in the
     * forward order, and not sharing a residual add's gradient */
    int i = (int)(nd - m->nodes);
    d->dx_accumulate = x->grad_alias >= 0;
    for (int j = i + 1; j < m->n_nodes && !d->dx_accumulate; j++)
        d->dx_accumulate = m->nodes[j].in0 == nd->in0 || m->nodes[j].in1 == nd->in0;
}

static int conv_shape(dt_model *m, int i, int n, int h, int w)
{
    const dt_node *nd = &m->nodes[i];
    dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    const int k = nd->attr.kernel, s = nd->attr.stride, pad = nd->attr.pad, dil = nd->attr.dilation;
    dt_conv_desc cd;
    if (dt_conv_desc_set(&cd, n, x->height, x->width, x->channels, y->channels, k, k, s, s, pad, pad, dil, dil,
                         nd->attr.groups))
        return dt_layer_too_small(m, nd, h, w);
    y->height = cd.oh;
    y->width = cd.ow;
    return DT_OK;
}

static void conv_plan(const dt_model *m, const dt_node *nd, int n, size_t *ws, size_t *scratch)
{
    (void)scratch;
    dt_conv_desc d;
    conv_desc(m, nd, n, &d);
    size_t b = m->be->conv_workspace(&d);
    *ws = b > *ws ? b : *ws;
}

static void conv_forward(dt_model *m, dt_node *nd, int n)
{
    dt_conv_desc d;
    conv_desc(m, nd, n, &d);
    const void *x = dt_operand(m, nd, DT_X, n, act_of(m, nd->in0));
    const void *w = dt_operand(m, nd, DT_W, n, param_of(m, nd->param[DT_NODE_WEIGHT]));
    const void *b = dt_operand(m, nd, DT_B, n, param_of(m, nd->param[DT_NODE_BIAS]));
    m->be->conv_fwd(&d, x, w, b, act_of(m, nd->out), dt_arena_at(&m->workspace, 0));
}

/* the weight gradient (and the bias's), its casts, then the input's */
static void conv_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    const dt_backend *be = m->be;
    dt_conv_desc d;
    conv_desc(m, nd, n, &d);
    void *ws = dt_arena_at(&m->workspace, 0), *dy = grad_of(m, nd->out);
    const int need_dx = nd->in0 != m->input; /* the model's input has no gradient */
    const void *x = dt_operand(m, nd, DT_X, n, act_of(m, nd->in0));
    const void *w = dt_operand(m, nd, DT_W, n, param_of(m, nd->param[DT_NODE_WEIGHT]));
    b->acc_dx = need_dx ? grad_accumulate(m, nd->in0) : 0;
    be->conv_bwd_filter(&d, x, dy, dt_result(m, nd, DT_W, n, param_grad_of(m, nd->param[DT_NODE_WEIGHT])),
                        dt_result(m, nd, DT_B, n, param_grad_of(m, nd->param[DT_NODE_BIAS])),
                        dt_result_direct(nd, DT_W) && b->accumulate, ws);
    dt_node_casts(m, nd, DT_PH_BWD_MID, n, b);
    dt_model_prof_mark(m, DT_PROF_CONV_DGRAD);
    if (need_dx)
        be->conv_bwd_data(&d, dy, w, dt_result(m, nd, DT_X, n, grad_of(m, nd->in0)),
                          dt_result_direct(nd, DT_X) && b->acc_dx, ws);
}

const dt_kind dt_kind_conv_CONV = {.shape = conv_shape, .plan = conv_plan, .forward = conv_forward,
                                   .backward = conv_backward, .reads = DT_READS_IN0, .o1 = DT_O1_REDUCES, .casts = 1,
                                   .strided_out = 1};
