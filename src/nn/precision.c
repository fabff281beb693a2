/* precision.c: mixed precision at Apex's opt levels (model.h: dt_model_set_amp), decided once, when
 * the model is planned (model_internal.h). Master weights, loss scaling and the optimiser's side are
 * train/amp.c's.
 *
 * Each value, gradient and parameter is reduced or not by the opt level (dt_prec_value_types,
 * dt_param_reduced). Stored for real, a reduced one is fp16/bf16 memory and the ops round what they
 * store (backend.h, "Types"); emulated, it is fp32 memory that is rounded in place after each write.
 * Both hold the same numbers: the emulation is the real storage's oracle, a plan mode of its own
 * (its rounding casts). Conv and linear layers compute in the compute type (the reduced type, stored;
 * fp32, emulated): an operand stored otherwise gets a copy in it (O1's casts, the model's fp32
 * input), and a result whose target is not reduced (O1's fp32 parameter gradients, an fp32 value's
 * gradient) is made apart in that type, then added to its target (the "join"). dt_prec_plan writes
 * all of that as casts (graph_types.h); forward and backward run them (layer.h) and ask nothing. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

static dt_dtype reduced_type(const dt_model *m)
{
    return m->prec_bf16 ? DT_BFLOAT16 : DT_FLOAT16;
}

dt_dtype dt_model_reduced_type(const dt_model *m)
{
    return m->prec_level ? reduced_type(m) : DT_FLOAT32;
}

/* the opt level's rule for parameter p: reduced or not */
static int param_rule(const dt_model *m, const dt_param *p)
{
    if (m->prec_level < 2 || p->kind == DT_P_BN_COUNT)
        return 0;
    int bn = p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS || p->kind == DT_P_BN_MEAN || p->kind == DT_P_BN_VAR;
    return !(bn && m->prec_keep_bn_fp32);
}

void dt_model_round_params(dt_model *m)
{
    if (!m->prec_emulate)
        return;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].kind != DT_P_BN_COUNT && dt_param_reduced(m, &m->params[i]))
            m->be->round_half(m->params[i].numel, dt_param_data(m, &m->params[i]), m->prec_bf16);
}

void dt_prec_value_types(dt_model *m)
{
    for (int v = 0; v < m->n_values; v++) {
        dt_value *val = &m->values[v];
        int r = 0;
        if (v != m->input && m->prec_level >= 2) {
            r = 1;
        } else if (v != m->input && m->prec_level == 1) {
            /* each kind's rule (its dt_kind's o1): what conv and linear make is reduced; activations,
             * flatten, stochastic depth, attention (autocast's reduced matmuls) and a class token keep
             * their input's; a channel scale or a concatenation is reduced when both its inputs are
             * (autocast's type promotion) */
            const dt_node *nd = &m->nodes[val->producer];
            const enum dt_o1_rule o1 = dt_kinds[nd->op]->o1;
            r = o1 == DT_O1_REDUCES ||
                (o1 == DT_O1_KEEPS && m->values[nd->in0].reduced && (nd->in1 < 0 || m->values[nd->in1].reduced));
        }
        val->reduced = r;
        val->dtype = r && !m->prec_emulate ? reduced_type(m) : DT_FLOAT32;
    }
    for (int v = 0; v < m->n_values; v++) { /* a gradient shared across types becomes a copy */
        int a = m->values[v].grad_alias;
        if (a >= 0 && m->values[a].dtype != m->values[v].dtype)
            m->values[v].grad_alias = -1;
    }
}

int dt_model_set_amp(dt_model *m, int level, int bf16, int keep_bn_fp32)
{
    m->prec_level = level;
    m->prec_bf16 = bf16;
    m->prec_keep_bn_fp32 = keep_bn_fp32;
    if (level && !(m->be->storage_types & 1u << reduced_type(m)))
        m->prec_emulate = 1;
    m->compute_type = level && !m->prec_emulate ? reduced_type(m) : DT_FLOAT32;
    for (int i = 0; i < m->n_params; i++)
        m->params[i].reduced = param_rule(m, &m->params[i]);
    dt_prec_value_types(m);
    if (!level || m->prec_emulate) {
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
        m->params_16 |= dt_param_trainable(&m->params[i]) && m->params[i].dtype != DT_FLOAT32;
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

/* --- the plan: casts ---------------------------------------------------------------------------- */

/* does an operand (of type t, `reduced` when the opt level reduces it) need a copy in the compute type? */
static int needs_copy(const dt_model *m, dt_dtype t, int reduced)
{
    return !(t == m->compute_type && (!m->prec_emulate || reduced));
}

/* the sizes a conv/linear node's scratch regions are counted in: its input's elements (per image:
 * they follow the batch and the input size) and its parameters' */
typedef struct regions {
    int x;          /* the input value */
    int64_t nw, nb; /* weight and bias elements (nb 0: no bias) */
} regions;

static regions regions_of(const dt_model *m, const dt_node *nd)
{
    const int bi = nd->param[DT_NODE_BIAS];
    return (regions){.x = nd->in0, .nw = m->params[nd->param[DT_NODE_WEIGHT]].numel,
                     .nb = bi >= 0 ? m->params[bi].numel : 0};
}

/* k times the input's elements plus fixed */
static dt_extent sz(const regions *r, int k, int64_t fixed)
{
    return (dt_extent){.v = k ? r->x : -1, .k = k, .fixed = fixed};
}

static dt_at scratch(const regions *r, int k, int64_t fixed)
{
    return (dt_at){.space = DT_AT_SCRATCH, .at = sz(r, k, fixed)};
}

static dt_at at(int space, int idx)
{
    return (dt_at){.space = space, .idx = idx};
}

/* the size of a value (per image) or of a parameter */
static dt_extent value_size(int v)
{
    return (dt_extent){.v = v, .k = 1};
}

static dt_extent param_size(const dt_model *m, int idx)
{
    return (dt_extent){.v = -1, .fixed = m->params[idx].numel};
}

static int emit(dt_model *m, dt_cast c)
{
    if (dt_grow((void **)&m->casts, &m->cap_casts, (size_t)m->n_casts + 1, sizeof *m->casts) != DT_OK)
        return DT_ERR_NOMEM;
    m->casts[m->n_casts++] = c;
    return DT_OK;
}

static int copy(dt_model *m, dt_at src, dt_dtype st, dt_at dst, dt_dtype dt, dt_extent count, int acc)
{
    return emit(m, (dt_cast){.kind = DT_CAST_COPY, .acc = acc, .src = src, .dst = dst, .st = st, .dt = dt,
                             .count = count});
}

/* the emulation's rounding of dst (count elements) when it is reduced; nothing stored for real */
static int round_if(dt_model *m, int reduced, dt_at dst, dt_extent count, int when)
{
    if (!m->prec_emulate || !reduced)
        return DT_OK;
    return emit(m, (dt_cast){.kind = DT_CAST_ROUND, .when = when, .dst = dst, .count = count});
}

static int round_act(dt_model *m, int v)
{
    return round_if(m, m->values[v].reduced, at(DT_AT_ACT, v), value_size(v), DT_WHEN_ALWAYS);
}

/* a parameter's data (running statistics: in training) or gradient (space) */
static int round_param(dt_model *m, int idx, int space, int when)
{
    if (idx < 0)
        return DT_OK;
    return round_if(m, dt_param_reduced(m, &m->params[idx]), at(space, idx), param_size(m, idx), when);
}

/* after a backward other than conv's and linear's: the gradients it wrote of reduced values and
 * parameters */
static int round_grads(dt_model *m, const dt_node *nd)
{
    const int ins[2] = {nd->in0, nd->in1};
    for (int k = 0; k < 2; k++)
        if (ins[k] >= 0 && ins[k] != m->input)
            DT_TRY(round_if(m, m->values[ins[k]].reduced, at(DT_AT_GRAD, ins[k]), value_size(ins[k]),
                            DT_WHEN_GRAD_WRITTEN));
    for (int j = 0; j < 2; j++)
        DT_TRY(round_param(m, nd->param[j], DT_AT_PGRAD, DT_WHEN_ALWAYS));
    return DT_OK;
}

/* Scratch for conv/linear under mixed precision, in the compute type, laid out per node in regions
 * of its input's elements (nx) and its parameters': [x copy or conv's dx: nx][w copy: nw][b copy:
 * nb][dw: nw][db: nb][linear's dx: nx]. Only what some node uses counts: under O2/O3 stored for
 * real, that is the copy of the model's fp32 input and nothing else. */

/* operand k of node nd (src, of type t, `reduced` at the opt level) read from a copy at dst when it
 * needs one */
static int operand(dt_model *m, dt_node *nd, int k, dt_at src, dt_dtype t, int reduced, dt_extent count, dt_at dst)
{
    if (!needs_copy(m, t, reduced))
        return DT_OK;
    nd->operand[k] = dst;
    DT_TRY(copy(m, src, t, dst, m->compute_type, count, DT_ACC_NONE));
    return round_if(m, 1, dst, count, DT_WHEN_ALWAYS);
}

/* the operands' copies (x, w and, forward, b) of conv/linear node nd */
static int operands(dt_model *m, dt_node *nd, const regions *r, int with_bias)
{
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    const int red = dt_param_reduced(m, &m->params[wi]);
    DT_TRY(operand(m, nd, DT_X, at(DT_AT_ACT, nd->in0), vtype(m, nd->in0), m->values[nd->in0].reduced,
                   value_size(nd->in0), scratch(r, 0, 0)));
    DT_TRY(operand(m, nd, DT_W, at(DT_AT_PARAM, wi), ptype(m, wi), red, param_size(m, wi), scratch(r, 1, 0)));
    if (with_bias && bi >= 0)
        DT_TRY(operand(m, nd, DT_B, at(DT_AT_PARAM, bi), ptype(m, bi), red, param_size(m, bi), scratch(r, 1, r->nw)));
    return DT_OK;
}

/* A gradient result k of conv/linear node nd, for target (of type t, `reduced` at the opt level):
 * written into the target itself when it is reduced (the compute type's values), else apart, then
 * rounded (emulated) and joined to the target (added when acc says). */
static int result(dt_model *m, dt_node *nd, int k, dt_at target, dt_dtype t, int reduced, dt_extent count, dt_at apart,
                  int acc)
{
    dt_at where = reduced ? target : apart;
    nd->result[k] = reduced ? (dt_at){.space = DT_AT_OWN} : apart;
    DT_TRY(round_if(m, 1, where, count, DT_WHEN_ALWAYS));
    return reduced ? DT_OK : copy(m, apart, m->compute_type, target, t, count, acc);
}

/* a conv or linear node's casts, each way */
static int plan_casting(dt_model *m, dt_node *nd)
{
    const int wi = nd->param[DT_NODE_WEIGHT], bi = nd->param[DT_NODE_BIAS];
    const int red = dt_param_reduced(m, &m->params[wi]), need_dx = nd->in0 != m->input;
    const regions r = regions_of(m, nd);
#define PHASE(ph, body)                                                                                                \
    do {                                                                                                               \
        nd->cast_at[ph] = m->n_casts;                                                                                  \
        DT_TRY(body);                                                                                                  \
        nd->casts[ph] = m->n_casts - nd->cast_at[ph];                                                                  \
    } while (0)
    PHASE(DT_PH_FWD_PRE, operands(m, nd, &r, 1));
    PHASE(DT_PH_FWD_POST, round_act(m, nd->out));
    /* backward reads x and w again: the same copies (the bias's is not read) */
    PHASE(DT_PH_BWD_PRE, operands(m, nd, &r, 0));
    const int conv = nd->op == DT_OP_CONV;
    /* the parameters' gradients: after the weight gradient's op (a conv's comes before its dx's) */
    nd->cast_at[conv ? DT_PH_BWD_MID : DT_PH_BWD_POST] = m->n_casts;
    DT_TRY(result(m, nd, DT_W, at(DT_AT_PGRAD, wi), ptype(m, wi), red, param_size(m, wi), scratch(&r, 1, r.nw + r.nb),
                  DT_ACC_PASS));
    if (bi >= 0)
        DT_TRY(result(m, nd, DT_B, at(DT_AT_PGRAD, bi), ptype(m, bi), red, param_size(m, bi),
                      scratch(&r, 1, 2 * r.nw + r.nb), DT_ACC_PASS));
    if (conv) {
        nd->casts[DT_PH_BWD_MID] = m->n_casts - nd->cast_at[DT_PH_BWD_MID];
        nd->cast_at[DT_PH_BWD_POST] = m->n_casts;
    }
    /* the input's: apart where the input's copy was (a conv: done with it once the filter gradient is
     * made), or after the parameters' gradients (linear: its one op still reads the copy) */
    if (need_dx)
        DT_TRY(result(m, nd, DT_X, at(DT_AT_GRAD, nd->in0), vtype(m, nd->in0), m->values[nd->in0].reduced,
                      value_size(nd->in0), conv ? scratch(&r, 0, 0) : scratch(&r, 1, 2 * (r.nw + r.nb)), DT_ACC_DX));
    nd->casts[DT_PH_BWD_POST] = m->n_casts - nd->cast_at[DT_PH_BWD_POST];
    return DT_OK;
#undef PHASE
}

/* any other node's: the emulation's roundings of what it wrote, each way */
static int plan_rounding(dt_model *m, dt_node *nd)
{
    const int bn = nd->op == DT_OP_BN, tail = nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0;
    const dt_node *tb = tail ? &m->nodes[nd->attr.tail_bn] : nd;
    nd->cast_at[DT_PH_FWD_POST] = m->n_casts;
    if (tail) { /* the tail's running statistics, then its output (the ReLU's) */
        DT_TRY(round_param(m, tb->param[DT_NODE_RUNNING_MEAN], DT_AT_PARAM, DT_WHEN_TRAINING));
        DT_TRY(round_param(m, tb->param[DT_NODE_RUNNING_VAR], DT_AT_PARAM, DT_WHEN_TRAINING));
        DT_TRY(round_act(m, m->nodes[nd->attr.tail_relu].out));
    } else { /* its output (a BN's with its activation fused: the activation's), then a BN's running statistics */
        DT_TRY(round_act(m, bn && nd->attr.fused_act >= 0 ? m->nodes[nd->attr.fused_act].out : nd->out));
        if (bn) {
            DT_TRY(round_param(m, nd->param[DT_NODE_RUNNING_MEAN], DT_AT_PARAM, DT_WHEN_TRAINING));
            DT_TRY(round_param(m, nd->param[DT_NODE_RUNNING_VAR], DT_AT_PARAM, DT_WHEN_TRAINING));
        }
    }
    nd->casts[DT_PH_FWD_POST] = m->n_casts - nd->cast_at[DT_PH_FWD_POST];
    nd->cast_at[DT_PH_BWD_POST] = m->n_casts;
    if (m->prec_level) {
        if (tail) /* the BN's and the add's, as the three ops would */
            DT_TRY(round_grads(m, tb));
        DT_TRY(round_grads(m, nd));
    }
    nd->casts[DT_PH_BWD_POST] = m->n_casts - nd->cast_at[DT_PH_BWD_POST];
    return DT_OK;
}

int dt_prec_plan(dt_model *m)
{
    m->n_casts = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        for (int k = 0; k < DT_OPERANDS; k++)
            nd->operand[k] = nd->result[k] = (dt_at){.space = DT_AT_OWN};
        for (int ph = 0; ph < DT_PHASES; ph++)
            nd->cast_at[ph] = nd->casts[ph] = 0;
        if (dt_node_folded(nd))
            continue;
        int rc = dt_kinds[nd->op]->casts && m->prec_level ? plan_casting(m, nd) : plan_rounding(m, nd);
        if (rc != DT_OK) {
            dt_error("model %s: out of memory planning its precision", m->arch);
            return rc;
        }
    }
    /* the loss's gradient of the logits */
    m->loss_cast_at = m->n_casts;
    if (round_if(m, m->values[m->output].reduced, at(DT_AT_GRAD, m->output), value_size(m->output),
                 DT_WHEN_ALWAYS) != DT_OK) {
        dt_error("model %s: out of memory planning its precision", m->arch);
        return DT_ERR_NOMEM;
    }
    m->loss_casts = m->n_casts - m->loss_cast_at;
    return DT_OK;
}

size_t dt_prec_scratch_bytes(const dt_model *m, int n)
{
    int64_t most = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (!dt_kinds[nd->op]->casts)
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
    return (size_t)(most + 64) * dtype_bytes(m->compute_type);
}
