/* linear.c: the fully connected layer (DT_OP_LINEAR; cuda/linear.cu, linear_cublas.c, cpu/linear.c):
 * on the flattened image, or pointwise on every position's channels. It computes in the model's
 * compute type, from the operands and into the results precision planned. */
#include "config.h"

#include "nn/layer.h"

static int linear_shape_rule(dt_model *m, int i, int n, int h, int w)
{
    (void)n, (void)h, (void)w;
    const dt_node *nd = &m->nodes[i];
    if (!nd->attr.pointwise)
        m->values[nd->out].height = m->values[nd->out].width = 1;
    return DT_OK;
}

static void linear_plan(const dt_model *m, const dt_node *nd, int n, size_t *ws, size_t *scratch)
{
    (void)ws;
    int rows, in;
    linear_shape(m, nd, n, &rows, &in);
    size_t b = m->be->linear_scratch(rows, in, m->values[nd->out].channels, m->compute_type);
    *scratch = b > *scratch ? b : *scratch;
}

static void linear_forward(dt_model *m, dt_node *nd, int n)
{
    int rows, in;
    linear_shape(m, nd, n, &rows, &in);
    const void *x = dt_operand(m, nd, DT_X, n, act_of(m, nd->in0));
    const void *w = dt_operand(m, nd, DT_W, n, param_of(m, nd->param[DT_NODE_WEIGHT]));
    const void *b = dt_operand(m, nd, DT_B, n, param_of(m, nd->param[DT_NODE_BIAS]));
    m->be->linear_fwd(rows, in, m->values[nd->out].channels, m->compute_type, x, w, b, act_of(m, nd->out));
}

/* every gradient in one op (its casts after it join them) */
static void linear_backward(dt_model *m, dt_node *nd, int n, dt_bwd *b)
{
    int rows, in;
    linear_shape(m, nd, n, &rows, &in);
    const int need_dx = nd->in0 != m->input;
    const void *x = dt_operand(m, nd, DT_X, n, act_of(m, nd->in0));
    const void *w = dt_operand(m, nd, DT_W, n, param_of(m, nd->param[DT_NODE_WEIGHT]));
    b->acc_dx = need_dx ? grad_accumulate(m, nd->in0) : 0;
    void *dx = need_dx ? dt_result(m, nd, DT_X, n, grad_of(m, nd->in0)) : NULL;
    m->be->linear_bwd(rows, in, m->values[nd->out].channels, m->compute_type, x, w, grad_of(m, nd->out), dx,
                      dt_result(m, nd, DT_W, n, param_grad_of(m, nd->param[DT_NODE_WEIGHT])),
                      dt_result(m, nd, DT_B, n, param_grad_of(m, nd->param[DT_NODE_BIAS])),
                      dt_result_direct(nd, DT_X) && b->acc_dx, dt_result_direct(nd, DT_W) && b->accumulate);
}

const dt_kind dt_kind_linear_LINEAR = {.shape = linear_shape_rule, .plan = linear_plan, .forward = linear_forward,
                                       .backward = linear_backward, .reads = DT_READS_IN0, .o1 = DT_O1_REDUCES,
                                       .casts = 1};
