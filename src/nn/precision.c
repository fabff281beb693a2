/* precision.c: mixed precision at Apex's opt levels, emulated in fp32 storage: every value the
 * reduced type (fp16 or bf16) would store is rounded to it, so the numbers are those of reduced
 * storage with fp32 compute (model.h: dt_model_set_amp; the parts planning, forward and backward
 * call are declared in model_internal.h). Master weights, loss scaling and the optimiser's side
 * are train/amp.c's. */
#include "config.h"

#include <stdint.h>

#include "nn/model.h"
#include "nn/model_internal.h"

int dt_param_reduced(const dt_model *m, const dt_param *p)
{
    if (m->amp_level < 2 || p->kind == DT_P_BN_COUNT)
        return 0;
    int bn = p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS || p->kind == DT_P_BN_MEAN || p->kind == DT_P_BN_VAR;
    return !(bn && m->amp_keep_bn_fp32);
}

void dt_model_round_params(dt_model *m)
{
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (dt_param_reduced(m, p))
            m->be->round_half(p->numel, dt_param_data(m, p), m->amp_bf16);
    }
}

void dt_model_set_amp(dt_model *m, int level, int bf16, int keep_bn_fp32)
{
    m->amp_level = level;
    m->amp_bf16 = bf16;
    m->amp_keep_bn_fp32 = keep_bn_fp32;
    dt_model_round_params(m);
}

void dt_amp_round(const dt_model *m, float *x, int64_t n)
{
    m->be->round_half(n, x, m->amp_bf16);
}

int dt_amp_output_reduced(const dt_model *m, const dt_node *nd)
{
    return m->amp_level >= 2 || (m->amp_level == 1 && (nd->op == DT_OP_CONV || nd->op == DT_OP_LINEAR));
}

/* scratch for conv/linear under mixed precision: a rounded copy of the input (or of dx), of the
 * weights and bias, and room for the weight gradient: the largest of each */
size_t dt_amp_scratch_bytes(const dt_model *m, int n)
{
    int64_t mx = 0, mw = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (nd->op != DT_OP_CONV && nd->op != DT_OP_LINEAR)
            continue;
        int64_t x = value_numel(&m->values[nd->in0], n), w = m->params[nd->param[DT_NODE_WEIGHT]].numel;
        if (nd->param[DT_NODE_BIAS] >= 0)
            w += m->params[nd->param[DT_NODE_BIAS]].numel;
        mx = x > mx ? x : mx;
        mw = w > mw ? w : mw;
    }
    return (size_t)(2 * mx + 2 * mw + 64) * sizeof(float); /* x copy, w copy, dw, a dx apart */
}

/* the operands a conv/linear node computes with under mixed precision: its input rounded (a copy
 * unless stored rounded already) and its weights and bias rounded (a copy under O1) */
void dt_amp_operands(dt_model *m, const dt_node *nd, int n, const float **x, const float **w, const float **b)
{
    float *ws = dt_arena_at(&m->amp_scratch, 0);
    int64_t nx = value_numel(&m->values[nd->in0], n);
    if (m->amp_level == 1 || nd->in0 == m->input) {
        m->be->copy_grad(nx, *x, DT_FLOAT32, ws, DT_FLOAT32, 0);
        dt_amp_round(m, ws, nx);
        *x = ws;
    }
    if (m->amp_level == 1) {
        const dt_param *pw = &m->params[nd->param[DT_NODE_WEIGHT]];
        float *wc = ws + nx;
        m->be->copy_grad(pw->numel, *w, DT_FLOAT32, wc, DT_FLOAT32, 0);
        dt_amp_round(m, wc, pw->numel);
        *w = wc;
        if (*b) {
            int64_t nb = m->params[nd->param[DT_NODE_BIAS]].numel;
            m->be->copy_grad(nb, *b, DT_FLOAT32, wc + pw->numel, DT_FLOAT32, 0);
            dt_amp_round(m, wc + pw->numel, nb);
            *b = wc + pw->numel;
        }
    }
}

/* out (+)= src rounded: the reduced-type result of a cast op joining an fp32 sum (O1), or written */
static void amp_join(dt_model *m, float *src, int64_t count, float *out, int acc)
{
    dt_amp_round(m, src, count);
    m->be->copy_grad(count, src, DT_FLOAT32, out, DT_FLOAT32, acc);
}

/* A conv's backward under mixed precision: dy is the gradient of a reduced output (rounded here,
 * where an fp32 consumer made it); the operands are those of the forward; dw and dx are reduced:
 * under O1 computed apart, rounded, then added to the fp32 sums; under O2/O3 rounded in place. */
void dt_amp_conv_bwd(dt_model *m, const dt_node *nd, int n, const dt_conv_desc *d, const float *xin, float *dy,
                     int need_dx, int accumulate, void *ws)
{
    const dt_backend *be = m->be;
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    int64_t ny = value_numel(&m->values[nd->out], n), nx = value_numel(&m->values[nd->in0], n);
    if (m->amp_level == 1)
        dt_amp_round(m, dy, ny);
    const float *cx = xin, *cw = param_of(m, wi), *cb = param_of(m, bi);
    dt_amp_operands(m, nd, n, &cx, &cw, &cb);
    const dt_param *pw = &m->params[wi];
    int64_t nb = bi >= 0 ? m->params[bi].numel : 0;
    float *scratch = dt_arena_at(&m->amp_scratch, 0), *dw = scratch + nx + pw->numel + nb;
    if (m->amp_level == 1) {
        be->conv_bwd_filter(d, cx, dy, dw, nb ? dw + pw->numel : NULL, 0, ws);
        amp_join(m, dw, pw->numel, param_grad_of(m, wi), accumulate);
        if (nb)
            amp_join(m, dw + pw->numel, nb, param_grad_of(m, bi), accumulate);
    } else {
        be->conv_bwd_filter(d, cx, dy, param_grad_of(m, wi), param_grad_of(m, bi), accumulate, ws);
        dt_amp_round(m, param_grad_of(m, wi), pw->numel);
        if (nb)
            dt_amp_round(m, param_grad_of(m, bi), nb);
    }
    if (!need_dx)
        return;
    int acc = grad_accumulate(m, nd->in0);
    if (m->amp_level == 1) { /* the input copy is done with: dx goes there first */
        be->conv_bwd_data(d, dy, cw, scratch, 0, ws);
        amp_join(m, scratch, nx, grad_of(m, nd->in0), acc);
    } else {
        be->conv_bwd_data(d, dy, cw, grad_of(m, nd->in0), acc, ws);
        dt_amp_round(m, grad_of(m, nd->in0), nx);
    }
}

void dt_amp_linear_bwd(dt_model *m, const dt_node *nd, int n, const float *xin, float *dy, int need_dx, int accumulate)
{
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
    int in = xv->channels * xv->height * xv->width, out = yv->channels;
    int64_t nx = (int64_t)n * in;
    if (m->amp_level == 1)
        dt_amp_round(m, dy, (int64_t)n * out);
    const float *lx = xin, *lw = param_of(m, wi), *lb = param_of(m, bi);
    dt_amp_operands(m, nd, n, &lx, &lw, &lb);
    const dt_param *pw = &m->params[wi];
    int64_t nb = m->params[bi].numel;
    float *scratch = dt_arena_at(&m->amp_scratch, 0), *dw = scratch + nx + pw->numel + nb;
    int acc = need_dx ? grad_accumulate(m, nd->in0) : 0;
    if (m->amp_level == 1) {
        float *dx = need_dx ? grad_of(m, nd->in0) : NULL;
        /* dx is written apart only when it must be added: the rounded copy of x is in scratch */
        float *dx_tmp = need_dx && acc ? dw + pw->numel + nb : dx;
        m->be->linear_bwd(n, in, out, DT_FLOAT32, lx, lw, dy, dx_tmp, dw, dw + pw->numel, 0, 0);
        amp_join(m, dw, pw->numel, param_grad_of(m, wi), accumulate);
        amp_join(m, dw + pw->numel, nb, param_grad_of(m, bi), accumulate);
        if (need_dx)
            amp_join(m, dx_tmp, nx, dx, acc && dx_tmp != dx);
    } else {
        m->be->linear_bwd(n, in, out, DT_FLOAT32, lx, lw, dy, need_dx ? grad_of(m, nd->in0) : NULL, param_grad_of(m, wi),
                          param_grad_of(m, bi), acc, accumulate);
        dt_amp_round(m, param_grad_of(m, wi), pw->numel);
        dt_amp_round(m, param_grad_of(m, bi), nb);
        if (need_dx)
            dt_amp_round(m, grad_of(m, nd->in0), nx);
    }
}

/* O2/O3, after any other node's backward: its input gradients and (reduced) parameter gradients
 * are stored in the reduced type */
void dt_amp_round_grads(dt_model *m, const dt_node *nd, int n)
{
    int ins[2] = {nd->in0, nd->in1};
    for (int k = 0; k < 2; k++)
        if (ins[k] >= 0 && ins[k] != m->input && m->values[ins[k]].grad_ready)
            dt_amp_round(m, grad_of(m, ins[k]), value_numel(&m->values[ins[k]], n));
    for (int j = 0; j < 2; j++)
        if (nd->param[j] >= 0 && dt_param_reduced(m, &m->params[nd->param[j]]))
            dt_amp_round(m, param_grad_of(m, nd->param[j]), m->params[nd->param[j]].numel);
}
