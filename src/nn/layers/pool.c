/* pool.c: max pooling (DT_OP_MAXPOOL; its argmax saved, a byte per output) and average pooling
 * (DT_OP_AVGPOOL: adaptive to out_h x out_w, or DenseNet's 2x2 stride 2) (cuda/pool.cu, cpu/pool.c). */
#include "config.h"

#include "nn/layer.h"

/* the pool descriptor node nd (max or adaptive average) runs with for a batch of n */
static dt_pool_desc pool_desc(const dt_model *m, const dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_pool_desc d;
    if (nd->op == DT_OP_MAXPOOL)
        dt_pool_desc_set_max(&d, n, x->height, x->width, x->channels, nd->attr.kernel, nd->attr.stride, nd->attr.pad);
    else
        dt_pool_desc_set_adaptive(&d, n, x->height, x->width, x->channels, y->height, y->width);
    d.xt = x->dtype;
    d.yt = y->dtype;
    d.ys = slice_stride(m, nd->out);
    return d;
}

static int maxpool_shape(dt_model *m, int i, int n, int h, int w)
{
    const dt_node *nd = &m->nodes[i];
    dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_pool_desc pd;
    if (dt_pool_desc_set_max(&pd, n, x->height, x->width, x->channels, nd->attr.kernel, nd->attr.stride,
                             nd->attr.pad))
        return dt_layer_too_small(m, nd, h, w);
    y->height = pd.oh;
    y->width = pd.ow;
    return DT_OK;
}

static size_t maxpool_saved(const dt_model *m, const dt_node *nd, int n)
{
    return (size_t)value_numel(&m->values[nd->out], n); /* one byte per output */
}

static void maxpool_forward(dt_model *m, dt_node *nd, int n)
{
    dt_pool_desc d = pool_desc(m, nd, n);
    m->be->maxpool_fwd(&d, act_of(m, nd->in0), act_of(m, nd->out), saved_of(m, nd));
}

static void maxpool_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    dt_pool_desc d = pool_desc(m, nd, n);
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->maxpool_bwd(&d, grad_of(m, nd->out), saved_of(m, nd), dx, grad_accumulate(m, nd->in0));
}

static int avgpool_shape(dt_model *m, int i, int n, int h, int w)
{
    (void)n;
    const dt_node *nd = &m->nodes[i];
    dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    if (nd->attr.kernel == 2 && (x->height % 2 || x->width % 2)) {
        dt_error("model %s: an input of %dx%d gives layer %s an odd size (%dx%d): its 2x2 pool needs an even one",
                 m->arch, h, w, i > 0 ? m->nodes[i - 1].name : nd->name, x->height, x->width);
        return DT_ERR_INPUT;
    }
    y->height = nd->attr.kernel == 2 ? x->height / 2 : nd->attr.out_h;
    y->width = nd->attr.kernel == 2 ? x->width / 2 : nd->attr.out_w;
    return DT_OK;
}

static void avgpool_forward(dt_model *m, dt_node *nd, int n)
{
    dt_pool_desc d = pool_desc(m, nd, n);
    m->be->avgpool_fwd(&d, act_of(m, nd->in0), act_of(m, nd->out));
}

static void avgpool_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    dt_pool_desc d = pool_desc(m, nd, n);
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->avgpool_bwd(&d, grad_of(m, nd->out), dx, grad_accumulate(m, nd->in0));
}

const dt_kind dt_kind_pool_MAXPOOL = {.shape = maxpool_shape, .saved = maxpool_saved, .forward = maxpool_forward,
                                      .backward = maxpool_backward, .o1 = DT_O1_FP32, .strided_out = 1};
const dt_kind dt_kind_pool_AVGPOOL = {.shape = avgpool_shape, .forward = avgpool_forward, .backward = avgpool_backward,
                                      .o1 = DT_O1_FP32, .strided_out = 1};
