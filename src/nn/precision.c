/* precision.c: mixed precision at Apex's opt levels (model.h: dt_model_set_amp; the parts planning,
 * forward and backward call are declared in model_internal.h). Master weights, loss scaling and the
 * optimiser's side are train/amp.c's.
 *
 * Each value, gradient and parameter is reduced or not by the opt level (dt_amp_value_types,
 * dt_param_reduced). Stored for real, a reduced one is fp16/bf16 memory and the ops round what they
 * store (backend.h, "Types"); emulated, it is fp32 memory that is rounded in place after each write
 * (round_half). Both hold the same numbers: the emulation is the real storage's oracle. Conv and
 * linear layers compute in the compute type (the reduced type, stored; fp32, emulated): an operand
 * stored otherwise gets a copy in it (O1's casts, the model's fp32 input), and a result whose
 * target is not reduced (O1's fp32 parameter gradients, an fp32 value's gradient) is made apart in
 * that type, then added to its target (the "join"). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/check.h"

static dt_dtype reduced_type(const dt_model *m)
{
    return m->amp_bf16 ? DT_BFLOAT16 : DT_FLOAT16;
}

dt_dtype dt_model_reduced_type(const dt_model *m)
{
    return m->amp_level ? reduced_type(m) : DT_FLOAT32;
}

int dt_param_reduced(const dt_model *m, const dt_param *p)
{
    if (m->amp_level < 2 || p->kind == DT_P_BN_COUNT)
        return 0;
    int bn = p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS || p->kind == DT_P_BN_MEAN || p->kind == DT_P_BN_VAR;
    return !(bn && m->amp_keep_bn_fp32);
}

int dt_model_params_fp32(const dt_model *m)
{
    for (int i = 0; i < m->n_params; i++)
        if (dt_param_trainable(&m->params[i]) && m->params[i].dtype != DT_FLOAT32)
            return 0;
    return 1;
}

dt_dtype dt_amp_compute_type(const dt_model *m)
{
    return m->amp_level && !m->amp_emulate ? reduced_type(m) : DT_FLOAT32;
}

/* emulation: x (n fp32 values of something reduced) rounded in place */
static void emulate_round(const dt_model *m, int reduced, void *x, int64_t n)
{
    if (m->amp_emulate && reduced && x)
        m->be->round_half(n, x, m->amp_bf16);
}

void dt_amp_round_value(const dt_model *m, int v, void *x, int64_t n)
{
    emulate_round(m, m->values[v].reduced, x, n);
}

void dt_amp_round_param(const dt_model *m, int idx, void *x)
{
    if (idx >= 0)
        emulate_round(m, dt_param_reduced(m, &m->params[idx]), x, m->params[idx].numel);
}

void dt_model_round_params(dt_model *m)
{
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].kind != DT_P_BN_COUNT)
            dt_amp_round_param(m, i, dt_param_data(m, &m->params[i]));
}

void dt_amp_value_types(dt_model *m)
{
    for (int v = 0; v < m->n_values; v++) {
        dt_value *val = &m->values[v];
        int r = 0;
        if (v != m->input && m->amp_level >= 2) {
            r = 1;
        } else if (v != m->input && m->amp_level == 1) {
            /* what conv and linear make; activations, flatten, stochastic depth, attention (autocast's
             * reduced matmuls) and a class token keep their input's; a
             * channel scale or a concatenation is reduced when both its inputs are (autocast's type
             * promotion) */
            const dt_node *nd = &m->nodes[val->producer];
            const int keeps = nd->op == DT_OP_RELU || nd->op == DT_OP_FLATTEN || nd->op == DT_OP_ACT ||
                              nd->op == DT_OP_SDEPTH || nd->op == DT_OP_CHANMUL || nd->op == DT_OP_CONCAT ||
                              nd->op == DT_OP_ATTN || nd->op == DT_OP_TOKEN0;
            r = nd->op == DT_OP_CONV || nd->op == DT_OP_LINEAR ||
                (keeps && m->values[nd->in0].reduced && (nd->in1 < 0 || m->values[nd->in1].reduced));
        }
        val->reduced = r;
        val->dtype = r && !m->amp_emulate ? reduced_type(m) : DT_FLOAT32;
    }
    for (int v = 0; v < m->n_values; v++) { /* a gradient shared across types becomes a copy */
        int a = m->values[v].grad_alias;
        if (a >= 0 && m->values[a].dtype != m->values[v].dtype)
            m->values[v].grad_alias = -1;
    }
}

int dt_model_set_amp(dt_model *m, int level, int bf16, int keep_bn_fp32)
{
    m->amp_level = level;
    m->amp_bf16 = bf16;
    m->amp_keep_bn_fp32 = keep_bn_fp32;
    if (level && !(m->be->storage_types & 1u << reduced_type(m)))
        m->amp_emulate = 1;
    dt_amp_value_types(m);
    if (!level || m->amp_emulate) {
        dt_model_round_params(m);
        return DT_OK;
    }
    /* the parameters move to their types: new storage, each tensor rounded into it */
    size_t *old = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof *old);
    DT_CHECK_ALLOC(old);
    for (int i = 0; i < m->n_params; i++) {
        old[i] = m->params[i].boff;
        if (dt_param_reduced(m, &m->params[i]))
            m->params[i].dtype = reduced_type(m);
    }
    void *w0 = m->weights, *g0 = m->grads, *b0 = m->buffers, *w, *g, *b;
    dt_param_layout(m);
    int rc = dt_param_storage(m, &w, &g, &b);
    if (rc != DT_OK) {
        free(old);
        return rc;
    }
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT)
            continue;
        int t = dt_param_trainable(p);
        m->be->copy_grad(p->numel, (char *)(t ? w0 : b0) + old[i], DT_FLOAT32, (char *)(t ? w : b) + p->boff,
                         p->dtype, 0);
    }
    m->be->mem_free(w0); /* after the copies (a backend orders a free after its queued ops) */
    m->be->mem_free(g0);
    m->be->mem_free(b0);
    m->weights = w;
    m->grads = g;
    m->buffers = b;
    free(old);
    return DT_OK;
}

/* does an operand (of type t, `reduced` when the opt level reduces it) need a copy in the compute type? */
static int needs_copy(const dt_model *m, dt_dtype t, int reduced)
{
    return !(t == dt_amp_compute_type(m) && (!m->amp_emulate || reduced));
}

/* Scratch for conv/linear under mixed precision, in the compute type, laid out per node as
 * scratch_at's regions say: [x copy or conv's dx: nx][w copy: nw][b copy: nb][dw: nw][db: nb][linear's
 * dx: nx]. Only what some node uses counts: under O2/O3 stored for real, that is the copy of the
 * model's fp32 input and nothing else. */
size_t dt_amp_scratch_bytes(const dt_model *m, int n)
{
    int64_t most = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (nd->op != DT_OP_CONV && nd->op != DT_OP_LINEAR)
            continue;
        const dt_value *x = &m->values[nd->in0];
        const dt_param *pw = &m->params[nd->param[DT_NODE_WEIGHT]];
        int64_t nx = value_numel(x, n), nw = pw->numel, end = 0;
        int64_t nb = nd->param[DT_NODE_BIAS] >= 0 ? m->params[nd->param[DT_NODE_BIAS]].numel : 0;
        int dx_apart = nd->in0 != m->input && !x->reduced, red_w = dt_param_reduced(m, pw);
        if (needs_copy(m, x->dtype, x->reduced) || (nd->op == DT_OP_CONV && dx_apart))
            end = nx;
        if (needs_copy(m, pw->dtype, red_w))
            end = nx + nw + nb;
        if (!red_w)
            end = nx + 2 * (nw + nb);
        if (nd->op == DT_OP_LINEAR && dx_apart)
            end = 2 * nx + 2 * (nw + nb);
        most = end > most ? end : most;
    }
    return (size_t)(most + 64) * dtype_bytes(dt_amp_compute_type(m));
}

/* the scratch as regions of the compute type: the x copy (or dx) at 0, the weight copy after nx
 * elements, the bias copy after it, the weight gradient after that, its bias part after it */
static char *scratch_at(const dt_model *m, int64_t elems)
{
    return (char *)dt_arena_at(&m->amp_scratch, 0) + (size_t)elems * dtype_bytes(dt_amp_compute_type(m));
}

/* *x (of type t, n values; `reduced` when the opt level reduces it already) in the compute type:
 * itself, or a copy at dst (rounded when emulated) */
static void operand(const dt_model *m, const void **x, dt_dtype t, int reduced, int64_t n, void *dst)
{
    if (!needs_copy(m, t, reduced))
        return;
    m->be->copy_grad(n, *x, t, dst, dt_amp_compute_type(m), 0);
    emulate_round(m, 1, dst, n);
    *x = dst;
}

void dt_amp_operands(dt_model *m, const dt_node *nd, int n, const void **x, const void **w, const void **b)
{
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    const dt_param *pw = &m->params[wi];
    int64_t nx = value_numel(&m->values[nd->in0], n);
    operand(m, x, vtype(m, nd->in0), m->values[nd->in0].reduced, nx, scratch_at(m, 0));
    int red = dt_param_reduced(m, pw);
    operand(m, w, pw->dtype, red, pw->numel, scratch_at(m, nx));
    if (*b)
        operand(m, b, m->params[bi].dtype, red, m->params[bi].numel, scratch_at(m, nx + pw->numel));
}

/* Where a conv/linear backward writes a result for target (n values of type t, `reduced` when the
 * opt level reduces it): the target itself when it is reduced (the compute type's values: added to
 * when accumulate), else apart at `apart`, to be joined after. */
typedef struct result_to {
    void *target, *at;
    dt_dtype t;
    int64_t n;
    int direct, accumulate;
} result_to;

static result_to result_for(void *target, dt_dtype t, int reduced, int64_t n, void *apart, int accumulate)
{
    return (result_to){.target = target, .at = reduced ? target : apart, .t = t, .n = n, .direct = reduced,
                       .accumulate = accumulate};
}

/* after the op: rounded (emulated), then joined to its target when made apart */
static void result_done(const dt_model *m, const result_to *r)
{
    if (!r->target)
        return;
    emulate_round(m, 1, r->at, r->n);
    if (!r->direct)
        m->be->copy_grad(r->n, r->at, dt_amp_compute_type(m), r->target, r->t, r->accumulate);
}

/* the gradient results of conv/linear node nd: weight, bias, and (need_dx) the input's */
static void results(dt_model *m, const dt_node *nd, int n, int need_dx, int accumulate, result_to *rw,
                    result_to *rb, result_to *rx)
{
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    const dt_param *pw = &m->params[wi];
    int64_t nx = value_numel(&m->values[nd->in0], n), nb = bi >= 0 ? m->params[bi].numel : 0;
    int red = dt_param_reduced(m, pw);
    *rw = result_for(param_grad_of(m, wi), pw->dtype, red, pw->numel, scratch_at(m, nx + pw->numel + nb), accumulate);
    *rb = result_for(param_grad_of(m, bi), ptype(m, bi), red, nb, scratch_at(m, nx + 2 * pw->numel + nb), accumulate);
    *rx = (result_to){0};
    if (need_dx) /* apart: where the input's copy was (done with once the filter gradient is made) */
        *rx = result_for(grad_of(m, nd->in0), vtype(m, nd->in0), m->values[nd->in0].reduced, nx, scratch_at(m, 0),
                         grad_accumulate(m, nd->in0));
}

void dt_amp_conv_bwd(dt_model *m, const dt_node *nd, int n, const dt_conv_desc *d, const void *xin, void *dy,
                     int need_dx, int accumulate, void *ws)
{
    const dt_backend *be = m->be;
    const void *cx = xin, *cw = param_of(m, nd->param[DT_NODE_WEIGHT]), *cb = param_of(m, nd->param[DT_NODE_BIAS]);
    dt_amp_operands(m, nd, n, &cx, &cw, &cb);
    result_to rw, rb, rx;
    results(m, nd, n, need_dx, accumulate, &rw, &rb, &rx);
    be->conv_bwd_filter(d, cx, dy, rw.at, rb.target ? rb.at : NULL, rw.direct && accumulate, ws);
    result_done(m, &rw);
    result_done(m, &rb);
    if (!need_dx)
        return;
    dt_model_prof_mark(m, DT_PROF_CONV_DGRAD);
    be->conv_bwd_data(d, dy, cw, rx.at, rx.direct && rx.accumulate, ws);
    result_done(m, &rx);
}

void dt_amp_linear_bwd(dt_model *m, const dt_node *nd, int n, const void *xin, void *dy, int need_dx, int accumulate)
{
    const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
    int rows, in, out = yv->channels;
    linear_shape(m, nd, n, &rows, &in);
    const void *lx = xin, *lw = param_of(m, nd->param[DT_NODE_WEIGHT]), *lb = param_of(m, nd->param[DT_NODE_BIAS]);
    dt_amp_operands(m, nd, n, &lx, &lw, &lb);
    result_to rw, rb, rx;
    results(m, nd, n, need_dx, accumulate, &rw, &rb, &rx);
    if (need_dx && !rx.direct) /* the input's copy is still read: dx apart after the weight gradient */
        rx.at = scratch_at(m, value_numel(xv, n) + 2 * (rw.n + rb.n));
    m->be->linear_bwd(rows, in, out, dt_amp_compute_type(m), lx, lw, dy, need_dx ? rx.at : NULL, rw.at,
                      rb.target ? rb.at : NULL, rx.direct && rx.accumulate, rw.direct && accumulate);
    result_done(m, &rw);
    result_done(m, &rb);
    result_done(m, &rx);
}

void dt_amp_round_grads(dt_model *m, const dt_node *nd, int n)
{
    if (!m->amp_emulate)
        return;
    int ins[2] = {nd->in0, nd->in1};
    for (int k = 0; k < 2; k++)
        if (ins[k] >= 0 && ins[k] != m->input && m->values[ins[k]].grad_ready)
            dt_amp_round_value(m, ins[k], grad_of(m, ins[k]), value_numel(&m->values[ins[k]], n));
    for (int j = 0; j < 2; j++)
        dt_amp_round_param(m, nd->param[j], param_grad_of(m, nd->param[j]));
}
