/* layout.c: the kinds that move values without arithmetic (cuda/layout.cu, cpu/typed.c): flatten
 * (DT_OP_FLATTEN: [n, h, w, c] -> [n, h*w*c]), the concatenation along channels (DT_OP_CONCAT: an
 * input laid out in place is there already, nn/model_plan.c) and ViT's class token's features
 * (DT_OP_TOKEN0: token 0 of each sequence). */
#include "config.h"

#include "nn/layer.h"

/* one position per image */
static int to_one_position(dt_model *m, int i, int n, int h, int w)
{
    (void)n, (void)h, (void)w;
    m->values[m->nodes[i].out].height = m->values[m->nodes[i].out].width = 1;
    return DT_OK;
}

static void flatten_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0];
    m->be->flatten_fwd(n, x->height, x->width, x->channels, x->dtype, act_of(m, nd->in0), act_of(m, nd->out));
}

static void flatten_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_value *x = &m->values[nd->in0];
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    m->be->flatten_bwd(n, x->height, x->width, x->channels, x->dtype, grad_of(m, nd->out), dx,
                       grad_accumulate(m, nd->in0));
}

/* each input into its channels of every position, unless it is there */
static void concat_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_backend *be = m->be;
    const dt_value *x = &m->values[nd->in0], *x1 = &m->values[nd->in1], *y = &m->values[nd->out];
    const int64_t rows = value_numel(y, n) / y->channels;
    const int ca = x->channels, cb = x1->channels;
    void *out = act_of(m, nd->out);
    if (x->place_in != nd->out)
        be->chan_copy(rows, ca, act_of(m, nd->in0), ca, 0, x->dtype, out, y->ld, 0, y->dtype, 0);
    if (x1->place_in != nd->out)
        be->chan_copy(rows, cb, act_of(m, nd->in1), cb, 0, x1->dtype, out, y->ld, ca, y->dtype, 0);
}

/* an input laid in the output: its gradient is there (its other readers come later) */
static void concat_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_backend *be = m->be;
    const dt_value *x = &m->values[nd->in0], *x1 = &m->values[nd->in1], *y = &m->values[nd->out];
    const int64_t rows = value_numel(y, n) / y->channels;
    const int ca = x->channels, cb = x1->channels;
    void *dy = grad_of(m, nd->out);
    if (x->place_in == nd->out)
        m->values[nd->in0].grad_ready = 1;
    else if (nd->in0 != m->input)
        be->chan_copy(rows, ca, dy, y->ld, 0, y->dtype, grad_of(m, nd->in0), ca, 0, x->dtype,
                      grad_accumulate(m, nd->in0));
    if (x1->place_in == nd->out)
        m->values[nd->in1].grad_ready = 1;
    else
        be->chan_copy(rows, cb, dy, y->ld, ca, y->dtype, grad_of(m, nd->in1), cb, 0, x1->dtype,
                      grad_accumulate(m, nd->in1));
}

static void token0_forward(dt_model *m, dt_node *nd, int n)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    m->be->chan_copy(n, y->channels, act_of(m, nd->in0), x->width * x->channels, 0, x->dtype, act_of(m, nd->out),
                     y->channels, 0, y->dtype, 0);
}

/* token 0's gradient; the other tokens' is zero */
static void token0_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    (void)b;
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    void *dx = nd->in0 != m->input ? grad_of(m, nd->in0) : NULL;
    if (!grad_accumulate(m, nd->in0))
        m->be->fill(value_numel(x, n), x->dtype, 0.0f, dx);
    m->be->chan_copy(n, y->channels, grad_of(m, nd->out), y->channels, 0, y->dtype, dx, x->width * x->channels, 0,
                     x->dtype, 1);
}

const dt_kind dt_kind_layout_FLATTEN = {.shape = to_one_position, .forward = flatten_forward,
                                        .backward = flatten_backward, .o1 = DT_O1_KEEPS};
const dt_kind dt_kind_layout_CONCAT = {.forward = concat_forward, .backward = concat_backward, .o1 = DT_O1_KEEPS,
                                       .strided_out = 1};
const dt_kind dt_kind_layout_TOKEN0 = {.shape = to_one_position, .forward = token0_forward, .backward = token0_backward,
                                       .o1 = DT_O1_KEEPS};
