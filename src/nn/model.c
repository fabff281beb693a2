/* model.c: planning a model for an input size and the batch sizes it will run (its memory, the
 * backend's per-shape state and scratch, the backend's limit on a tensor), and running it: forward,
 * loss, backward (contract in model.h). Building is graph.c's, the packing of lifetimes plan.c's,
 * mixed precision precision.c's. */
#include "config.h"

#include "nn/model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model_internal.h"
#include "nn/plan.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"

/* ---------------------------------------------------------------------------------------------- */
/* planning                                                                                       */

/* node kinds by enum dt_op_kind (the profile's rows: NAME_fwd, NAME_bwd) */
static const char *const kind_names[] = {"conv", "batchnorm", "relu", "maxpool", "avgpool",
                                         "linear", "dropout", "flatten", "add", "act", "chanmul", "sdepth",
                                         "layernorm", "scale", "concat", "tokens", "attention", "token0"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == DT_OP_KINDS, "a name per node kind");

/* a descriptor's stride for value v: 0 (packed), or its ld when it is laid in a wider value */
static int slice_stride(const dt_model *m, int v)
{
    return m->values[v].ld != m->values[v].channels ? m->values[v].ld : 0;
}

/* the BN descriptor node nd runs with for a batch of n (sync: SyncBN's callback, or NULL) */
static dt_bn_desc bn_desc(const dt_model *m, const dt_node *nd, int n, int sync)
{
    const dt_value *x = &m->values[nd->in0];
    return (dt_bn_desc){.rows = (int64_t)n * x->height * x->width, .c = x->channels, .eps = nd->attr.eps,
                        .momentum = nd->attr.momentum, .sync = sync ? m->bn_sync : NULL,
                        .sync_ctx = m->bn_sync_ctx, .xt = x->dtype, .yt = m->values[nd->out].dtype,
                        .pt = ptype(m, nd->param[DT_NODE_WEIGHT]), .xs = slice_stride(m, nd->in0)};
}

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

/* shapes of every value for an input of h x w; names the layer that cannot run */
static int plan_shapes(dt_model *m, int n, int h, int w)
{
    m->values[m->input].height = h;
    m->values[m->input].width = w;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
        y->height = x->height;
        y->width = x->width;
        switch (nd->op) {
        case DT_OP_CONV:
        case DT_OP_MAXPOOL: {
            dt_conv_desc cd;
            dt_pool_desc pd;
            int k = nd->attr.kernel, s = nd->attr.stride, pad = nd->attr.pad, dil = nd->attr.dilation;
            int bad = nd->op == DT_OP_CONV
                          ? dt_conv_desc_set(&cd, n, x->height, x->width, x->channels, y->channels, k, k, s, s, pad,
                                             pad, dil, dil, nd->attr.groups)
                          : dt_pool_desc_set_max(&pd, n, x->height, x->width, x->channels, k, s, pad);
            if (bad) {
                dt_error("model %s: an input of %dx%d is too small for layer %s (it gets %dx%d)", m->arch, h, w,
                         nd->name, x->height, x->width);
                return DT_ERR_INPUT;
            }
            y->height = nd->op == DT_OP_CONV ? cd.oh : pd.oh;
            y->width = nd->op == DT_OP_CONV ? cd.ow : pd.ow;
            break;
        }
        case DT_OP_AVGPOOL:
            if (nd->attr.kernel == 2 && (x->height % 2 || x->width % 2)) {
                dt_error("model %s: an input of %dx%d gives layer %s an odd size (%dx%d): its 2x2 pool needs an "
                         "even one", m->arch, h, w, i > 0 ? m->nodes[i - 1].name : nd->name, x->height, x->width);
                return DT_ERR_INPUT;
            }
            y->height = nd->attr.kernel == 2 ? x->height / 2 : nd->attr.out_h;
            y->width = nd->attr.kernel == 2 ? x->width / 2 : nd->attr.out_w;
            break;
        case DT_OP_FLATTEN: y->height = y->width = 1; break;
        case DT_OP_TOKENS: { /* the patches in a row after the class token: as many as the embedding holds */
            const dt_param *pos = &m->params[nd->param[DT_NODE_BIAS]];
            y->height = 1;
            y->width = x->height * x->width + 1;
            if (y->width != pos->shape[1]) {
                dt_error("model %s: an input of %dx%d gives %d tokens, but %s holds %d (the input size it was "
                         "built for)", m->arch, h, w, y->width, pos->name, pos->shape[1]);
                return DT_ERR_INPUT;
            }
            break;
        }
        case DT_OP_TOKEN0: y->height = y->width = 1; break;
        case DT_OP_LINEAR:
            if (!nd->attr.pointwise)
                y->height = y->width = 1;
            break;
        default:
            break;
        }
    }
    return DT_OK;
}

static size_t value_bytes(const dt_model *m, int v, int n)
{
    return (size_t)value_numel(&m->values[v], n) * dtype_bytes(m->values[v].dtype);
}

/* the value whose bytes value v's are in: through the concatenations it is laid in, then for its
 * gradient (grad) the adds whose gradient it shares, for its activation in-place ReLUs */
static int root_of(const dt_model *m, int v, int grad)
{
    for (;;) {
        const dt_value *val = &m->values[v];
        const int alias = grad ? val->grad_alias : val->act_alias;
        if (val->place_in < 0 && alias < 0)
            return v;
        v = val->place_in >= 0 ? val->place_in : alias;
    }
}

static int grad_root(const dt_model *m, int v)
{
    return root_of(m, v, 1);
}

static int act_root(const dt_model *m, int v)
{
    return root_of(m, v, 0);
}

/* bytes from the start of the outermost value v is laid in to v's first channel */
static size_t place_bytes(const dt_model *m, int v)
{
    int64_t off = 0;
    for (int u = v; m->values[u].place_in >= 0; u = m->values[u].place_in)
        off += m->values[u].place_off;
    return (size_t)off * dtype_bytes(m->values[v].dtype);
}

/* can input k (0: in0, 1: in1) of concatenation node i live in its channels of the output? (the
 * conditions of dt_model_set_concat_in_place) */
static int placeable(const dt_model *m, int i, int k)
{
    const dt_node *cat = &m->nodes[i];
    const int v = k ? cat->in1 : cat->in0;
    const dt_value *val = &m->values[v];
    if (v == m->input || cat->in0 == cat->in1 || val->dtype != m->values[cat->out].dtype || val->act_alias >= 0 ||
        val->grad_alias >= 0)
        return 0;
    const enum dt_op_kind p = m->nodes[val->producer].op;
    if (p != DT_OP_CONV && p != DT_OP_MAXPOOL && p != DT_OP_AVGPOOL && p != DT_OP_CONCAT)
        return 0;
    for (int j = 0; j < m->n_nodes; j++) { /* the other readers: BNs, before it (backward reaches them after it) */
        const dt_node *nd = &m->nodes[j];
        if (j == i || (nd->in0 != v && nd->in1 != v))
            continue;
        if (j > i || nd->op != DT_OP_BN || nd->attr.fused_tail >= 0)
            return 0;
    }
    return 1;
}

/* Concatenations laid out in place (dt_model_set_concat_in_place) at the types and fused schedule
 * planned, and every value's ld */
static void place_concats(dt_model *m)
{
    for (int v = 0; v < m->n_values; v++) {
        m->values[v].place_in = -1;
        m->values[v].place_off = 0;
    }
    for (int i = 0; i < m->n_nodes && !m->concat_apart && !m->amp_emulate; i++) {
        const dt_node *nd = &m->nodes[i];
        for (int k = 0; k < 2 && nd->op == DT_OP_CONCAT; k++)
            if (placeable(m, i, k)) {
                dt_value *val = &m->values[k ? nd->in1 : nd->in0];
                val->place_in = nd->out;
                val->place_off = k ? m->values[nd->in0].channels : 0;
            }
    }
    for (int v = 0; v < m->n_values; v++) {
        int r = v;
        while (m->values[r].place_in >= 0)
            r = m->values[r].place_in;
        m->values[v].ld = m->values[r].channels;
    }
}

/* Gradient lifetimes, one buffer per value. Backward runs node i at time n_nodes-1-i; the gradient
 * of value v is born at its last reader and dies after its producer (a fused ReLU's: after the BN
 * that does its work); an aliased gradient lives in its root's bytes. */
static void grad_lifetimes(const dt_model *m, int n, dt_plan_buffer *b)
{
    int nv = m->n_values;
    for (int v = 0; v < nv; v++) {
        const dt_value *val = &m->values[v];
        b[v].bytes = v == m->input ? 0 : value_bytes(m, v, n);
        b[v].first = m->n_nodes;
        b[v].last = m->n_nodes - 1 - (val->producer >= 0 ? val->producer : 0);
    }
    b[m->output].first = -1; /* the loss writes it before backward */
    for (int i = 0; i < m->n_nodes; i++) {
        int t = m->n_nodes - 1 - i, ins[2] = {m->nodes[i].in0, m->nodes[i].in1};
        for (int k = 0; k < 2; k++)
            if (ins[k] >= 0 && t < b[ins[k]].first)
                b[ins[k]].first = t;
    }
    /* a BN with its ReLU fused reads the ReLU output's gradient one step after the ReLU's turn; the
     * BN output's own gradient is never written */
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_BN && m->nodes[i].attr.fused_relu >= 0) {
            int rv = m->nodes[m->nodes[i].attr.fused_relu].out, t = m->n_nodes - 1 - i;
            b[rv].last = t > b[rv].last ? t : b[rv].last;
            b[m->nodes[i].out].bytes = 0;
        }
    /* a fused residual tail reads its ReLU output's gradient at the add's turn, and writes its BN
     * input's gradient there (the BN's own turn comes later: the input's gradient is born earlier) */
    for (int j = 0; j < m->n_nodes; j++)
        if (m->nodes[j].op == DT_OP_ADD && m->nodes[j].attr.tail_bn >= 0) {
            int rv = m->nodes[m->nodes[j].attr.tail_relu].out, t = m->n_nodes - 1 - j;
            int xv = m->nodes[m->nodes[j].attr.tail_bn].in0;
            b[rv].last = t > b[rv].last ? t : b[rv].last;
            if (xv != m->input && t < b[xv].first)
                b[xv].first = t;
        }
    for (int v = nv - 1; v >= 0; v--) {
        int r = grad_root(m, v);
        if (r != v) {
            b[v].bytes = 0;
            b[r].last = b[v].last > b[r].last ? b[v].last : b[r].last;
            b[r].first = b[v].first < b[r].first ? b[v].first : b[r].first;
        }
    }
}

/* does backward read this value? (layers read their input, a ReLU its output, the loss the logits; a
 * channel scale both of its inputs) */
static int kept_for_backward(const dt_model *m, int v)
{
    if (v == m->output)
        return 1;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if ((nd->in0 == v && (nd->op == DT_OP_CONV || nd->op == DT_OP_BN || nd->op == DT_OP_LINEAR ||
                              nd->op == DT_OP_ACT || nd->op == DT_OP_CHANMUL || nd->op == DT_OP_LN ||
                              nd->op == DT_OP_SCALE || nd->op == DT_OP_ATTN)) ||
            (nd->in1 == v && nd->op == DT_OP_CHANMUL) ||
            (nd->out == v && nd->op == DT_OP_RELU && !nd->attr.fused_into_bn) || /* a fused one's BN recomputes it */
            (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0 && m->nodes[nd->attr.tail_relu].out == v)) /* a tail's mask */
            return 1;
    }
    return 0;
}

/* Activation lifetimes, one buffer per value: values backward reads live to the end; the others (a
 * BN output read only by an add, a pool's output read by a flatten) only until their last reader in
 * the forward pass, and then give their bytes to later values. An in-place ReLU's output is its
 * input's bytes, and the model's input is the caller's. */
static void act_lifetimes(const dt_model *m, int n, dt_plan_buffer *b)
{
    int nv = m->n_values, end = m->n_nodes + 1;
    for (int v = 0; v < nv; v++) {
        b[v].first = m->values[v].producer; /* -1 for the input */
        b[v].last = b[v].first;
    }
    for (int v = 0; v < nv; v++) { /* lifetimes gather on the root of each alias chain */
        int r = act_root(m, v);
        int last = m->values[v].producer;
        for (int i = 0; i < m->n_nodes; i++)
            if (m->nodes[i].in0 == v || m->nodes[i].in1 == v)
                last = i;
        if (kept_for_backward(m, v))
            last = end;
        if (last > b[r].last)
            b[r].last = last;
        if (m->values[v].producer < b[r].first) /* a concatenation's input, written before it */
            b[r].first = m->values[v].producer;
    }
    for (int v = 0; v < nv; v++)
        b[v].bytes = m->values[v].act_alias >= 0 || v == m->input ? 0 : value_bytes(m, v, n);
    for (int i = 0; i < m->n_nodes; i++) /* a fused tail's BN output exists only inside the op */
        if (m->nodes[i].op == DT_OP_BN && m->nodes[i].attr.fused_tail >= 0)
            b[m->nodes[i].out].bytes = 0;
}

/* offsets for every value from the lifetimes `fill` gives, packed by nn/plan.c; returns the bytes
 * needed or DT_PLAN_FAIL */
static size_t plan_offsets(const dt_model *m, int n, void (*fill)(const dt_model *, int, dt_plan_buffer *),
                           size_t *off)
{
    size_t total = DT_PLAN_FAIL;
    dt_plan_buffer *b = calloc(m->n_values > 0 ? (size_t)m->n_values : 1, sizeof *b);
    if (b) {
        fill(m, n, b);
        total = dt_plan_pack(b, m->n_values, DT_ARENA_ALIGN, (enum dt_plan_order)m->plan_rule);
        for (int v = 0; v < m->n_values; v++)
            off[v] = b[v].offset;
    }
    free(b);
    return total;
}

static size_t plan_grads(const dt_model *m, int n, size_t *grad_offs)
{
    size_t total = plan_offsets(m, n, grad_lifetimes, grad_offs);
    for (int v = 0; v < m->n_values; v++)
        grad_offs[v] = grad_offs[grad_root(m, v)];
    grad_offs[m->input] = DT_ARENA_FAIL;
    return total;
}

static size_t plan_acts(const dt_model *m, int n, size_t *act_offs)
{
    return plan_offsets(m, n, act_lifetimes, act_offs);
}

/* the convolution node nd computes for a batch of n */
static void conv_desc(const dt_model *m, const dt_node *nd, int n, dt_conv_desc *d)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_conv_desc_set(d, n, x->height, x->width, x->channels, y->channels, nd->attr.kernel, nd->attr.kernel,
                     nd->attr.stride, nd->attr.stride, nd->attr.pad, nd->attr.pad, nd->attr.dilation, nd->attr.dilation,
                     nd->attr.groups);
    d->bias = nd->attr.has_bias;
    d->t = dt_amp_compute_type(m);
    d->ys = slice_stride(m, nd->out);
    /* backward adds into dx unless this conv is the first writer: its input's last reader in the
     * forward order, and not sharing a residual add's gradient */
    int i = (int)(nd - m->nodes);
    d->dx_accumulate = x->grad_alias >= 0;
    for (int j = i + 1; j < m->n_nodes && !d->dx_accumulate; j++)
        d->dx_accumulate = m->nodes[j].in0 == nd->in0 || m->nodes[j].in1 == nd->in0;
}

/* activations (offsets from plan_acts, after which the saved state follows) and saved state, carved
 * from the arena (planning or real); gradient offsets come from plan_grads */
static int carve(dt_model *m, int n, dt_arena *act, size_t act_bytes, const size_t *act_offs, const size_t *grad_offs)
{
    if (dt_arena_push(act, act_bytes) != 0)
        return DT_ERR_NOMEM;
    for (int v = 0; v < m->n_values; v++) {
        m->values[v].act_off = act_offs[act_root(m, v)] + place_bytes(m, v);
        m->values[v].grad_off = grad_offs[v] + place_bytes(m, v);
    }
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
        size_t save = 0;
        switch (nd->op) {
        case DT_OP_BN: save = DT_BN_SAVED(x->channels) * sizeof(float); break;
        case DT_OP_MAXPOOL: save = (size_t)value_numel(y, n); break; /* one byte per output */
        case DT_OP_DROPOUT: save = (size_t)value_numel(y, n); break;
        case DT_OP_SDEPTH: save = (size_t)n; break; /* one byte per image */
        case DT_OP_LN: save = 2 * (size_t)n * x->height * x->width * sizeof(float); break; /* mean, rstd per row */
        case DT_OP_ATTN: /* the attention probabilities, per image and head: s x s */
            save = (size_t)n * nd->attr.groups * x->width * x->width * sizeof(float);
            break;
        default: break;
        }
        nd->save_off = DT_ARENA_FAIL;
        if (save && (nd->save_off = dt_arena_push(act, save)) == DT_ARENA_FAIL)
            return DT_ERR_NOMEM;
    }
    return DT_OK;
}

/* an arena over the backend's memory */
static int be_arena(dt_model *m, dt_arena *a, const char *name, size_t bytes)
{
    size_t cap = bytes ? (bytes + DT_ARENA_ALIGN - 1) & ~(DT_ARENA_ALIGN - 1) : DT_ARENA_ALIGN;
    void *p = m->be->mem_alloc(cap);
    if (!p) {
        dt_error("model %s: cannot allocate %.1f MiB of %s on %s", m->arch, cap / 1048576.0, name, m->be->name);
        return DT_ERR_NOMEM;
    }
    dt_arena_init_buffer(a, name, p, cap);
    return DT_OK;
}

static void be_arena_free(dt_model *m, dt_arena *a)
{
    if (a->base)
        m->be->mem_free(a->base);
    dt_arena_free(a);
    a->base = NULL;
}

/* The backend's planning ops for every node at a batch of n: the most conv workspace into *ws and the
 * most scratch into *scratch (model.h: the batch's input, normalize_u8's, and its loss are planned
 * too). */
static void plan_backend(dt_model *m, int n, size_t *ws, size_t *scratch)
{
    const dt_backend *be = m->be;
    size_t b;
#define TAKE_MAX(into, v) ((b = (v)) > *(into) ? (void)(*(into) = b) : (void)0)
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        const dt_value *y = &m->values[nd->out];
        switch (nd->op) {
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            TAKE_MAX(ws, be->conv_workspace(&d));
            break;
        }
        case DT_OP_BN: {
            dt_bn_desc d = bn_desc(m, nd, n, 1);
            TAKE_MAX(scratch, be->bn_scratch(&d));
            break;
        }
        case DT_OP_LINEAR: {
            int rows, in;
            linear_shape(m, nd, n, &rows, &in);
            TAKE_MAX(scratch, be->linear_scratch(rows, in, y->channels, dt_amp_compute_type(m)));
            break;
        }
        case DT_OP_ATTN:
            TAKE_MAX(scratch, be->attn_scratch(n, y->width, nd->attr.groups, y->channels / nd->attr.groups,
                                               vtype(m, nd->in0), y->dtype));
            break;
        default: break;
        }
    }
    const dt_value *in = &m->values[m->input];
    TAKE_MAX(scratch, be->xent_scratch(n, m->num_classes));
    TAKE_MAX(scratch, be->normalize_scratch((int64_t)n * in->height * in->width * in->channels));
#undef TAKE_MAX
}

/* "conv1", or for a node without a name (relu, add, pools) its kind after the last named node before
 * it: "relu after layer1.0.bn1" */
static void node_label(const dt_model *m, int i, char *buf, size_t size)
{
    const dt_node *nd = &m->nodes[i];
    if (nd->name[0]) {
        snprintf(buf, size, "%s", nd->name);
        return;
    }
    int j = i - 1;
    while (j >= 0 && !m->nodes[j].name[0])
        j--;
    if (j >= 0)
        snprintf(buf, size, "%s after %s", kind_names[nd->op], m->nodes[j].name);
    else
        snprintf(buf, size, "%s (node %d)", kind_names[nd->op], i);
}

/* At the shapes planned last (plan_shapes): the largest batch whose every tensor has at most limit
 * elements, the first node that bounds it (into label), and that node's elements per image. */
static int64_t fit_batch(const dt_model *m, int64_t limit, char *label, size_t size, int64_t *per_image)
{
    int64_t best = INT64_MAX, worst_node = -1, worst_per = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        int64_t per = value_numel(&m->values[nd->in0], 1), out = value_numel(&m->values[nd->out], 1);
        per = out > per ? out : per;
        int64_t fit = limit / (per > 0 ? per : 1);
        int wp = nd->param[DT_NODE_WEIGHT]; /* a weight passing the limit fits no batch */
        if (wp >= 0 && m->params[wp].numel > limit)
            fit = 0;
        if (fit < best) {
            best = fit;
            worst_node = i;
            worst_per = per;
        }
    }
    if (label && size)
        label[0] = '\0';
    if (worst_node >= 0 && label)
        node_label(m, (int)worst_node, label, size);
    if (per_image)
        *per_image = worst_per;
    return best;
}

int dt_model_check_input(dt_model *m, int h, int w)
{
    int rc = plan_shapes(m, 1, h, w);
    if (m->plan_n > 0 && (m->plan_h != h || m->plan_w != w))
        plan_shapes(m, m->plan_n, m->plan_h, m->plan_w); /* the planned shapes back */
    return rc;
}

int64_t dt_model_max_batch(dt_model *m, int h, int w, int64_t limit, char *layer, size_t layer_size)
{
    if (h < 1 || w < 1 || limit < 1) {
        dt_error("model %s: no batch size for an input of %dx%d and %lld elements per tensor", m->arch, h, w,
                 (long long)limit);
        return DT_ERR_INPUT;
    }
    int rc = plan_shapes(m, 1, h, w);
    int64_t fit = rc == DT_OK ? fit_batch(m, limit, layer, layer_size, NULL) : rc;
    if (m->plan_n > 0 && (m->plan_h != h || m->plan_w != w))
        plan_shapes(m, m->plan_n, m->plan_h, m->plan_w); /* the planned shapes back: they planned before */
    return fit;
}

/* the backend's limit on one tensor: n passing it is refused with one line naming the layer */
static int check_tensor_limit(dt_model *m, int n, int h, int w)
{
    int64_t limit = m->be->max_tensor_elems > 0 ? m->be->max_tensor_elems : INT64_MAX, per = 0;
    char layer[DT_NAME_MAX + 32];
    int64_t fit = fit_batch(m, limit, layer, sizeof layer, &per);
    if (n <= fit)
        return DT_OK;
    if (fit < 1)
        dt_error("model %s: layer %s has a tensor of more than %lld elements, the most the %s backend takes in one "
                 "tensor, even for one image of %dx%d", m->arch, layer, (long long)limit, m->be->name, h, w);
    else
        dt_error("model %s: a batch of %d images of %dx%d is too large for the %s backend: layer %s has tensors of "
                 "%lld elements per image, and one tensor holds at most %lld elements; the largest batch that fits "
                 "is %lld", m->arch, n, h, w, m->be->name, layer, (long long)per, (long long)limit, (long long)fit);
    return DT_ERR_INPUT;
}

/* The block, its event and the host buffer (two blocks: no room for labels yet), made once (by the
 * first plan, or by whoever sets the scaler before it): a static loss scale of 1 and no step taken */
static int ensure_scalars(dt_model *m)
{
    const dt_backend *be = m->be;
    if (m->scalars)
        return DT_OK;
    if (!(m->scalars = be->mem_alloc(sizeof *m->scalars)) || !(m->io_event = be->event_create()) ||
        !(m->host_io = be->host_alloc(2 * sizeof(dt_scalars)))) {
        dt_error("model %s: out of memory for the step's scalars", m->arch);
        return DT_ERR_NOMEM;
    }
    dt_scalars init = {.scale = 1, .scale_f = 1, .inv_scale = 1, .growth = 2, .backoff = 0.5, .max_scale = 0x1p24,
                       .growth_interval = 2000, .max_nonfinite = INT64_MAX};
    be->mem_put(m->scalars, &init, sizeof init);
    return DT_OK;
}

int dt_model_get_scalars(dt_model *m, dt_scalars *host)
{
    DT_TRY(ensure_scalars(m));
    m->be->mem_get(host, m->scalars, sizeof *host);
    return DT_OK;
}

int dt_model_put_scalars(dt_model *m, const dt_scalars *host)
{
    DT_TRY(ensure_scalars(m));
    m->be->mem_put(m->scalars, host, sizeof *host);
    return DT_OK;
}

void dt_model_put_metrics(dt_model *m, const dt_scalars *from)
{
    const size_t at = offsetof(dt_scalars, loss);
    m->be->mem_put((char *)m->scalars + at, (const char *)from + at, sizeof *from - at);
}

/* The block (ensure_scalars), and a plan's labels and host buffer (with room for n labels) */
static int plan_scalars(dt_model *m, int n)
{
    const dt_backend *be = m->be;
    DT_TRY(ensure_scalars(m));
    be->event_sync(m->io_event); /* every plan: its batch may be larger than the last one's */
    be->mem_free(m->labels);
    be->host_free(m->host_io);
    m->labels = be->mem_alloc((size_t)n * sizeof(int32_t));
    m->host_io = be->host_alloc(2 * sizeof(dt_scalars) + (size_t)n * sizeof(int32_t));
    if (!m->labels || !m->host_io) {
        dt_error("model %s: out of memory for the labels of a batch of %d", m->arch, n);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

/* At the shapes planned last: every value's offsets (plan_acts, plan_grads) carved from act, a
 * planning arena or the real one; *grad_bytes gets the gradient arena's size. Host memory for the
 * offsets only. */
static int carve_planned(dt_model *m, int n, dt_arena *act, size_t *grad_bytes)
{
    size_t *grad_offs = calloc((size_t)m->n_values, sizeof(size_t));
    size_t *act_offs = calloc((size_t)m->n_values, sizeof(size_t));
    int rc = grad_offs && act_offs ? DT_OK : DT_ERR_NOMEM;
    size_t gbytes = rc == DT_OK ? plan_grads(m, n, grad_offs) : 0, abytes = rc == DT_OK ? plan_acts(m, n, act_offs) : 0;
    if (rc == DT_OK && (gbytes == DT_PLAN_FAIL || abytes == DT_PLAN_FAIL))
        rc = DT_ERR_NOMEM;
    if (rc == DT_OK)
        rc = carve(m, n, act, abytes, act_offs, grad_offs);
    free(grad_offs);
    free(act_offs);
    *grad_bytes = gbytes;
    return rc;
}

/* the shapes for n x h x w and the offsets of every value and saved state in the planned arenas
 * (carved from m->act, emptied first) */
static int lay_out(dt_model *m, int n, int h, int w)
{
    size_t gbytes;
    int rc = plan_shapes(m, n, h, w);
    if (rc == DT_OK) {
        dt_arena_init_buffer(&m->act, "activations", m->act.base, m->act.capacity);
        rc = carve_planned(m, n, &m->act, &gbytes);
    }
    if (rc != DT_OK)
        dt_error("model %s: out of memory laying out a batch of %d images of %dx%d", m->arch, n, h, w);
    return rc;
}

/* the bytes each arena needs at n x h x w (the shapes planned), and the backend's planning for n and
 * the other sizes (sizes_text: the others, once each) */
typedef struct plan_need {
    size_t act, grad, ws, scratch, amp;
} plan_need;

static int measure(dt_model *m, int n, int h, int w, const int *also, int n_also, plan_need *need, char *sizes_text,
                   size_t text_size)
{
    DT_TRY(plan_shapes(m, n, h, w));
    plan_backend(m, n, &need->ws, &need->scratch);
    for (int k = 0; k < n_also; k++) {
        int seen = also[k] == n;
        for (int j = 0; j < k && !seen; j++)
            seen = also[j] == also[k];
        if (seen)
            continue;
        plan_backend(m, also[k], &need->ws, &need->scratch);
        size_t len = sizes_text ? strlen(sizes_text) : 0;
        if (text_size > len)
            snprintf(sizes_text + len, text_size - len, "%s%d", len ? ", " : "", also[k]);
    }
    dt_arena pa;
    size_t gbytes;
    dt_arena_init_plan(&pa, "activations");
    int rc = carve_planned(m, n, &pa, &gbytes);
    if (rc != DT_OK) {
        dt_error("model %s: out of memory planning", m->arch);
        return rc;
    }
#define GROW(field, v) (need->field = (v) > need->field ? (v) : need->field)
    GROW(act, dt_arena_peak(&pa));
    GROW(grad, gbytes);
    if (m->amp_level > 0)
        GROW(amp, dt_amp_scratch_bytes(m, n));
#undef GROW
    return DT_OK;
}

int dt_model_plan_inputs(dt_model *m, int n, int h, int w, int h2, int w2, const int *also, int n_also)
{
    if (n < 1 || h < 1 || w < 1 || h2 < 1 || w2 < 1 || n_also < 0 || (n_also > 0 && !also)) {
        dt_error("model %s: cannot plan for a batch of %d images of %dx%d (and %dx%d)", m->arch, n, h, w, h2, w2);
        return DT_ERR_INPUT;
    }
    for (int k = 0; k < n_also; k++)
        if (also[k] < 1 || also[k] > n) {
            dt_error("model %s: cannot plan a batch of %d as well: batches run from 1 to the planned %d", m->arch,
                     also[k], n);
            return DT_ERR_INPUT;
        }
    const int hw[2][2] = {{h, w}, {h2, w2}}, n_hw = h2 == h && w2 == w ? 1 : 2;
    for (int s = 0; s < n_hw; s++) {
        int rc = plan_shapes(m, n, hw[s][0], hw[s][1]);
        if (rc == DT_OK)
            rc = check_tensor_limit(m, n, hw[s][0], hw[s][1]);
        if (rc != DT_OK) {
            if (m->plan_n > 0) /* a plan made before stays usable */
                plan_shapes(m, m->plan_n, m->plan_h, m->plan_w);
            return rc;
        }
    }
    place_concats(m);
    be_arena_free(m, &m->act);
    be_arena_free(m, &m->grad);
    be_arena_free(m, &m->workspace);
    be_arena_free(m, &m->amp_scratch);
    m->plan_n = 0; /* not planned until this returns DT_OK */
    /* the backend first, before the arenas take device memory (cuDNN's search allocates its own): n,
     * then each other size once, at each input size; the arenas hold the most either size needs */
    plan_need need = {0, 0, 0, 0, 0};
    char sizes_text[256] = "";
    for (int s = 0; s < n_hw; s++)
        DT_TRY(measure(m, n, hw[s][0], hw[s][1], also, n_also, &need, s ? NULL : sizes_text, s ? 0 : sizeof sizes_text));
    int rc = be_arena(m, &m->act, "activations", need.act);
    if (rc == DT_OK)
        rc = be_arena(m, &m->grad, "gradients", need.grad);
    if (rc == DT_OK)
        rc = be_arena(m, &m->workspace, "workspace", need.ws);
    if (rc == DT_OK && m->amp_level > 0)
        rc = be_arena(m, &m->amp_scratch, "mixed precision", need.amp);
    if (rc == DT_OK)
        rc = m->be->reserve_scratch(need.scratch);
    if (rc == DT_OK)
        rc = lay_out(m, n, h, w);
    if (rc == DT_OK)
        rc = plan_scalars(m, n);
    DT_TRY(rc);
    m->plan_n = n;
    m->plan_h = h;
    m->plan_w = w;
    m->plan_inputs[0][0] = h;
    m->plan_inputs[0][1] = w;
    m->plan_inputs[1][0] = h2;
    m->plan_inputs[1][1] = w2;
    int tails = 0, bn_relus = 0, placed = 0; /* the fused schedule (graph.c, dt_model_set_fusion) */
    for (int i = 0; i < m->n_nodes; i++) {
        tails += m->nodes[i].op == DT_OP_ADD && m->nodes[i].attr.tail_bn >= 0;
        bn_relus += m->nodes[i].op == DT_OP_BN && m->nodes[i].attr.fused_relu >= 0;
    }
    for (int v = 0; v < m->n_values; v++)
        placed += m->values[v].place_in >= 0;
    char other[48] = "";
    if (n_hw > 1)
        snprintf(other, sizeof other, " and %dx%d", h2, w2);
    dt_debug("model %s planned for %dx%dx%dx%d%s%s%s%s: activations %.1f MiB, gradients %.1f MiB, workspace %.1f MiB, "
             "backend scratch %.1f MiB; fused on %s: %d BN+ReLU, %d BN+add+ReLU; %d concatenation inputs in place",
             m->arch, n, h, w, m->in_c, other, sizes_text[0] ? " (also batches " : "", sizes_text,
             sizes_text[0] ? ")" : "", need.act / 1048576.0, need.grad / 1048576.0, need.ws / 1048576.0,
             need.scratch / 1048576.0, m->be->name, bn_relus, tails, placed);
    return DT_OK;
}

int dt_model_plan_sizes(dt_model *m, int n, int h, int w, const int *also, int n_also)
{
    return dt_model_plan_inputs(m, n, h, w, h, w, also, n_also);
}

int dt_model_set_input(dt_model *m, int h, int w)
{
    if (m->plan_n < 1) {
        dt_error("model %s: an input size for a model not planned", m->arch);
        return DT_ERR_INPUT;
    }
    if (h == m->plan_h && w == m->plan_w)
        return DT_OK;
    const int(*in)[2] = m->plan_inputs;
    if (!(h == in[0][0] && w == in[0][1]) && !(h == in[1][0] && w == in[1][1])) {
        dt_error("model %s: an input of %dx%d, planned for %dx%d and %dx%d", m->arch, h, w, in[0][0], in[0][1],
                 in[1][0], in[1][1]);
        return DT_ERR_INPUT;
    }
    DT_TRY(lay_out(m, m->plan_n, h, w));
    m->plan_h = h;
    m->plan_w = w;
    return DT_OK;
}

int dt_model_plan(dt_model *m, int n, int h, int w)
{
    return dt_model_plan_sizes(m, n, h, w, NULL, 0);
}

/* ---------------------------------------------------------------------------------------------- */
/* forward and backward                                                                           */

/* The profile (model.h): the step's marks, each a timer and the kind of the time before it (-1:
 * none, the step's first), and the totals over the steps ended. Timers are made as marks need them
 * and kept for the next steps (never inside a capture: no profiled step is captured). */
struct dt_prof {
    const dt_backend *tb; /* whose timers: the model's backend's, else dt_backend_cpu's (the host clock) */
    dt_timer **timer;
    int *before;          /* [i]: the kind of the time from mark i - 1 to mark i */
    size_t cap_timer, cap_before; /* their room (grow.h) */
    int n, made;          /* marks this step, timers made */
    int kind;             /* the kind of the work issued since the last mark (-1: no mark yet this step) */
    int broken;           /* out of memory for a timer: the profile stopped (said once) */
    int64_t steps;
    double ms[DT_PROF_KINDS];
    unsigned char seen[DT_PROF_KINDS];
};

/* a mark: the time from the last one is the current kind's, and what follows kind's */
static void prof_record(dt_model *m, int kind)
{
    struct dt_prof *p = m->prof;
    if (!p) {
        if (!(p = m->prof = calloc(1, sizeof *p)))
            return;
        p->tb = m->be->timer_create ? m->be : &dt_backend_cpu;
        p->kind = -1;
    }
    if (p->broken)
        return;
    if (p->n == p->made) {
        size_t need = (size_t)p->made + 1;
        if (dt_grow((void **)&p->timer, &p->cap_timer, need, sizeof *p->timer) != DT_OK ||
            dt_grow((void **)&p->before, &p->cap_before, need, sizeof *p->before) != DT_OK ||
            !(p->timer[p->made] = p->tb->timer_create())) {
            dt_warn("profile: out of memory for its timers: the profile stops here");
            p->broken = 1;
            return;
        }
        p->made++;
    }
    p->tb->timer_record(p->timer[p->n]);
    p->before[p->n++] = p->kind;
    p->kind = kind;
}

/* the kind of node nd's forward (backward: DT_PROF_BWD + it), or -1 when another node's op does its
 * work (a ReLU fused into its BN; a BN whose residual tail runs at the add's turn: the BN's) */
static int node_prof_kind(const dt_node *nd)
{
    if ((nd->op == DT_OP_RELU && nd->attr.fused_into_bn) || (nd->op == DT_OP_BN && nd->attr.fused_tail >= 0))
        return -1;
    if (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0)
        return DT_OP_BN;
    return (int)nd->op;
}

void dt_model_prof_mark(dt_model *m, int kind)
{
    if (m->profiling && kind >= 0 && (!m->prof || m->prof->kind != kind))
        prof_record(m, kind);
}

void dt_model_prof_step_end(dt_model *m)
{
    struct dt_prof *p = m->prof;
    if (!p || p->kind < 0 || p->broken)
        return;
    prof_record(m, -1); /* the last kind's end */
    if (p->broken)
        return;
    for (int i = 1; i < p->n; i++) { /* timer_ms waits for the later mark: the step's work is done */
        int k = p->before[i];
        p->ms[k] += p->tb->timer_ms(p->timer[i - 1], p->timer[i]);
        p->seen[k] = 1;
    }
    p->n = 0;
    p->steps++;
}

void *dt_model_logits(const dt_model *m)
{
    return act_of(m, m->output);
}

void dt_model_get_logits(const dt_model *m, int n, float *host)
{
    dt_get_f32(m->be, vtype(m, m->output), act_of(m, m->output), (size_t)n * (size_t)m->num_classes, host);
}

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

/* Forward of a residual tail BN -> add -> ReLU at the add's turn (its residual ready whatever the
 * branches' order): one op into the ReLU's output (the add's bytes: an in-place ReLU), what each of
 * the three would have done besides (the BN's counter; emulation: the output and the running
 * statistics rounded). */
static void tail_forward(dt_model *m, const dt_node *add, int n)
{
    const dt_backend *be = m->be;
    dt_node *bn = &m->nodes[add->attr.tail_bn];
    const int r = tail_residual(m, add), yv = m->nodes[add->attr.tail_relu].out;
    void *y = act_of(m, yv), *gamma = param_of(m, bn->param[DT_NODE_WEIGHT]);
    void *beta = param_of(m, bn->param[DT_NODE_BIAS]), *rm = param_of(m, bn->param[DT_NODE_RUNNING_MEAN]);
    void *rv = param_of(m, bn->param[DT_NODE_RUNNING_VAR]);
    dt_bn_desc d = tail_desc(m, add, n, 1);
    if (m->training) {
        be->bn_add_relu_fwd_train(&d, act_of(m, bn->in0), gamma, beta, act_of(m, r), vtype(m, r), y, saved_of(m, bn),
                                  rm, rv);
        m->counts[m->params[bn->param[DT_NODE_BATCHES_TRACKED]].off]++;
        dt_amp_round_param(m, bn->param[DT_NODE_RUNNING_MEAN], rm);
        dt_amp_round_param(m, bn->param[DT_NODE_RUNNING_VAR], rv);
    } else {
        be->bn_add_relu_fwd_infer(&d, act_of(m, bn->in0), gamma, beta, rm, rv, act_of(m, r), vtype(m, r), y);
    }
    dt_amp_round_value(m, yv, y, value_numel(&m->values[yv], n));
}

/* Backward of a residual tail at its add's turn: from the ReLU output's gradient, the BN input's and
 * the residual's gradients and the BN's parameter gradients in one op, then what the three would
 * have done after (emulation rounding, the BN's parameter gradients announced). */
static void tail_backward(dt_model *m, const dt_node *add, int n, int accumulate)
{
    const dt_backend *be = m->be;
    const int bi = add->attr.tail_bn, r = tail_residual(m, add), yv = m->nodes[add->attr.tail_relu].out;
    dt_node *bn = &m->nodes[bi];
    if (!m->values[yv].grad_ready) /* unused downstream */
        return;
    dt_bn_desc d = tail_desc(m, add, n, m->training);
    const int need_dx = bn->in0 != m->input;
    void *dx = need_dx ? grad_of(m, bn->in0) : NULL;
    int acc_dx = need_dx ? grad_accumulate(m, bn->in0) : 0, acc_r = grad_accumulate(m, r);
    be->bn_add_relu_bwd(&d, act_of(m, bn->in0), act_of(m, yv), grad_of(m, yv), param_of(m, bn->param[DT_NODE_WEIGHT]),
                        saved_of(m, bn), dx, grad_of(m, r), vtype(m, r), param_grad_of(m, bn->param[DT_NODE_WEIGHT]),
                        param_grad_of(m, bn->param[DT_NODE_BIAS]), acc_dx, acc_r, accumulate);
    if (m->amp_level) { /* emulation: round what it wrote */
        dt_amp_round_grads(m, bn, n);
        dt_amp_round_grads(m, add, n);
    }
    if (m->on_grads)
        m->on_grads(m->on_grads_ctx, bi);
}

int dt_model_forward(dt_model *m, const float *x, int n)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: forward of %d images, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    const dt_backend *be = m->be;
    m->input_data = x;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        dt_model_prof_mark(m, node_prof_kind(nd));
        const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
        void *xin = act_of(m, nd->in0), *y = act_of(m, nd->out);
        void *weight = param_of(m, nd->param[DT_NODE_WEIGHT]), *bias = param_of(m, nd->param[DT_NODE_BIAS]);
        void *run_mean = param_of(m, nd->param[DT_NODE_RUNNING_MEAN]);
        void *run_var = param_of(m, nd->param[DT_NODE_RUNNING_VAR]);
        const dt_dtype xt = xv->dtype, yt = yv->dtype;
        int64_t count = value_numel(yv, n);
        switch (nd->op) {
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            const void *cx = xin, *cw = weight, *cb = bias;
            if (m->amp_level)
                dt_amp_operands(m, nd, n, &cx, &cw, &cb);
            be->conv_fwd(&d, cx, cw, cb, y, dt_arena_at(&m->workspace, 0));
            break;
        }
        case DT_OP_BN: {
            if (nd->attr.fused_tail >= 0) /* run by its tail's add */
                continue;
            dt_bn_desc d = bn_desc(m, nd, n, 1);
            float *s = saved_of(m, nd);
            int relu = nd->attr.fused_relu >= 0;
            if (m->training) {
                be->bn_fwd_train(&d, xin, weight, bias, y, s, run_mean, run_var, relu);
                m->counts[m->params[nd->param[DT_NODE_BATCHES_TRACKED]].off]++;
            } else {
                be->bn_fwd_infer(&d, xin, weight, bias, run_mean, run_var, y, relu);
            }
            break;
        }
        case DT_OP_RELU:
            if (!nd->attr.fused_into_bn)
                be->relu_fwd(count, xt, xin, y);
            break;
        case DT_OP_ADD:
            if (nd->attr.tail_bn >= 0) {
                tail_forward(m, nd, n);
                continue;
            }
            be->add_fwd(count, xin, xt, act_of(m, nd->in1), vtype(m, nd->in1), y, yt);
            break;
        case DT_OP_MAXPOOL: {
            dt_pool_desc d = pool_desc(m, nd, n);
            be->maxpool_fwd(&d, xin, y, saved_of(m, nd));
            break;
        }
        case DT_OP_AVGPOOL: {
            dt_pool_desc d = pool_desc(m, nd, n);
            be->avgpool_fwd(&d, xin, y);
            break;
        }
        case DT_OP_FLATTEN: be->flatten_fwd(n, xv->height, xv->width, xv->channels, xt, xin, y); break;
        case DT_OP_LINEAR: {
            const void *lx = xin, *lw = weight, *lb = bias;
            int rows, in;
            linear_shape(m, nd, n, &rows, &in);
            if (m->amp_level)
                dt_amp_operands(m, nd, n, &lx, &lw, &lb);
            be->linear_fwd(rows, in, yv->channels, dt_amp_compute_type(m), lx, lw, lb, y);
            break;
        }
        case DT_OP_LN:
            be->ln_fwd(count / xv->channels, xv->channels, nd->attr.eps, xin, xt, weight, bias,
                       ptype(m, nd->param[DT_NODE_WEIGHT]), y, yt, saved_of(m, nd));
            break;
        case DT_OP_TOKENS:
            be->tokens_fwd(n, yv->width - 1, yv->channels, xin, xt, weight, bias, ptype(m, nd->param[DT_NODE_WEIGHT]),
                           y, yt);
            break;
        case DT_OP_ATTN:
            be->attn_fwd(n, yv->width, nd->attr.groups, yv->channels / nd->attr.groups, xin, xt, y, yt,
                         saved_of(m, nd));
            break;
        case DT_OP_TOKEN0: /* token 0 of each sequence */
            be->chan_copy(n, yv->channels, xin, xv->width * xv->channels, 0, xt, y, yv->channels, 0, yt, 0);
            break;
        case DT_OP_CONCAT: { /* each input into its channels of every position, unless it is there */
            const int64_t rows = count / yv->channels;
            const int ca = xv->channels, cb = m->values[nd->in1].channels;
            if (xv->place_in != nd->out)
                be->chan_copy(rows, ca, xin, ca, 0, xt, y, yv->ld, 0, yt, 0);
            if (m->values[nd->in1].place_in != nd->out)
                be->chan_copy(rows, cb, act_of(m, nd->in1), cb, 0, vtype(m, nd->in1), y, yv->ld, ca, yt, 0);
            break;
        }
        case DT_OP_SCALE: /* one "image" of every position: the scale is the batch's */
            be->chanmul_fwd(1, count / xv->channels, xv->channels, xin, xt, weight, ptype(m, nd->param[DT_NODE_WEIGHT]),
                            y, yt);
            break;
        case DT_OP_DROPOUT:
        case DT_OP_SDEPTH:
            if (m->training && nd->attr.drop_prob > 0) {
                /* seeded by the model's step, which the op reads from the scalars (written with the
                 * step's in part; a graph's launch gets its own step), plus the forwards since that
                 * write (gradient accumulation): hash(seed, m->step * 1024 + i) */
                const int64_t salt = (int64_t)(m->step - m->step_written) * 1024 + i;
                if (nd->op == DT_OP_DROPOUT)
                    be->dropout_fwd(count, nd->attr.drop_prob, m->dropout_seed, salt, m->scalars, xin, xt, y, yt,
                                    saved_of(m, nd));
                else
                    be->sdepth_fwd(n, count / n, nd->attr.drop_prob, m->dropout_seed, salt, m->scalars, xin, xt, y,
                                   yt, saved_of(m, nd));
            } else {
                be->copy_grad(count, xin, xt, y, yt, 0);
            }
            break;
        case DT_OP_ACT: be->act_fwd(count, nd->attr.act, xt, xin, y); break;
        case DT_OP_CHANMUL:
            be->chanmul_fwd(n, (int64_t)xv->height * xv->width, xv->channels, xin, xt, act_of(m, nd->in1),
                            vtype(m, nd->in1), y, yt);
            break;
        }
        if (!(nd->op == DT_OP_RELU && nd->attr.fused_into_bn)) /* emulation: what the op stored, rounded */
            dt_amp_round_value(m, nd->out, y, count);
        if (nd->op == DT_OP_BN && m->training) { /* emulation: the running statistics of a reduced BN, rounded */
            dt_amp_round_param(m, nd->param[DT_NODE_RUNNING_MEAN], run_mean);
            dt_amp_round_param(m, nd->param[DT_NODE_RUNNING_VAR], run_var);
        }
    }
    return DT_OK;
}

int dt_model_check_labels(const dt_model *m, const int32_t *labels, int n)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= m->num_classes) {
            dt_error("model %s: label %d of batch index %d is outside 0..%d", m->arch, labels[i], i,
                     m->num_classes - 1);
            return DT_ERR_INPUT;
        }
    return DT_OK;
}

int dt_model_loss_async(dt_model *m, int n, float eps)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: loss of %d images, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    /* the gradient times the scaler's factor (the block's scale_f), before any rounding */
    dt_model_prof_mark(m, DT_PROF_LOSS);
    m->be->xent(n, m->num_classes, vtype(m, m->output), act_of(m, m->output), m->labels, eps,
                grad_of(m, m->output), m->scalars);
    dt_amp_round_value(m, m->output, grad_of(m, m->output), (int64_t)n * m->num_classes);
    return DT_OK;
}

int dt_model_loss(dt_model *m, const int32_t *labels, int n, float eps, double *loss)
{
    DT_TRY(dt_model_check_labels(m, labels, n));
    if (n < 1 || n > m->plan_n)
        return dt_model_loss_async(m, n, eps); /* says why */
    m->be->mem_put(m->labels, labels, (size_t)n * sizeof *labels);
    DT_TRY(dt_model_loss_async(m, n, eps));
    m->be->mem_get(loss, (const char *)m->scalars + offsetof(dt_scalars, loss), sizeof *loss);
    return DT_OK;
}

/* the host buffer's parts: [0] the in part to upload, [1] the out part downloaded, then labels */
static int32_t *host_labels(dt_model *m)
{
    return (int32_t *)(m->host_io + 2);
}

void dt_model_step_write(dt_model *m, float lr, int64_t step, int32_t signal)
{
    m->be->event_sync(m->io_event); /* the host buffer's last copy is done */
    dt_scalars *in = &m->host_io[0];
    in->agree[DT_AGREE_OVERFLOW] = 0;
    in->agree[DT_AGREE_SIGNAL] = signal;
    in->lr = lr;
    in->in_reserved = 0;
    in->step = step;
    in->model_step = (int64_t)m->step;
    /* mixing, mix_lam, mix_rest: the batch's own, written with its labels (dt_model_write_mix) */
    m->step_written = m->step;
}

/* an upload from the host buffer, the compute queue waiting for it */
static void upload_io(dt_model *m, void *dst, const void *src, size_t bytes)
{
    const dt_backend *be = m->be;
    be->upload(dst, src, bytes, DT_QUEUE_COPY);
    be->event_record(m->io_event, DT_QUEUE_COPY);
    be->event_wait(DT_QUEUE_COMPUTE, m->io_event);
}

void dt_model_step_upload(dt_model *m)
{
    dt_model_prof_mark(m, DT_PROF_UPLOAD);
    upload_io(m, m->scalars, &m->host_io[0], DT_SCALARS_IN_BYTES);
}

void dt_model_step_begin(dt_model *m, float lr, int64_t step, int32_t signal)
{
    dt_model_step_write(m, lr, step, signal);
    dt_model_step_upload(m);
}

void dt_model_write_mix(dt_model *m, int mixing, float lam, float rest)
{
    m->be->event_sync(m->io_event); /* the host buffer's last copy is done */
    dt_scalars *in = &m->host_io[0];
    in->mixing = mixing;
    in->mix_lam = mixing ? lam : 0.0f;
    in->mix_rest = mixing ? rest : 0.0f;
    in->in_reserved2 = 0;
}

int dt_model_write_labels(dt_model *m, const int32_t *labels_host, int n)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: %d labels, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    DT_TRY(dt_model_check_labels(m, labels_host, n));
    m->be->event_sync(m->io_event);
    memcpy(host_labels(m), labels_host, (size_t)n * sizeof *labels_host);
    return DT_OK;
}

void dt_model_labels_upload(dt_model *m, int n)
{
    dt_model_prof_mark(m, DT_PROF_UPLOAD);
    upload_io(m, m->labels, host_labels(m), (size_t)n * sizeof(int32_t));
    /* the batch's mixing with them: per batch, also under gradient accumulation */
    const size_t at = offsetof(dt_scalars, mixing), bytes = offsetof(dt_scalars, in_reserved2) + sizeof(int32_t) - at;
    upload_io(m, (char *)m->scalars + at, (const char *)&m->host_io[0] + at, bytes);
}

int dt_model_upload_labels(dt_model *m, const int32_t *labels_host, int n)
{
    DT_TRY(dt_model_write_labels(m, labels_host, n));
    dt_model_labels_upload(m, n);
    return DT_OK;
}

void dt_model_step_download(dt_model *m)
{
    dt_model_prof_mark(m, DT_PROF_OTHER);
    m->be->download(&m->host_io[1], m->scalars, DT_SCALARS_OUT_BYTES, DT_QUEUE_COMPUTE);
}

const dt_scalars *dt_model_step_wait(dt_model *m)
{
    const dt_backend *be = m->be;
    be->event_record(m->io_event, DT_QUEUE_COMPUTE);
    be->event_sync(m->io_event);
    return &m->host_io[1];
}

const dt_scalars *dt_model_step_out(dt_model *m)
{
    dt_model_step_download(m);
    return dt_model_step_wait(m);
}


int dt_model_backward(dt_model *m, int n, int accumulate)
{
    const dt_backend *be = m->be;
    for (int v = 0; v < m->n_values; v++)
        m->values[v].grad_ready = 0;
    m->values[m->output].grad_ready = 1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        dt_node *nd = &m->nodes[i];
        const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
        const int need_dx = nd->in0 != m->input;
        void *xin = act_of(m, nd->in0), *y = act_of(m, nd->out), *dy = grad_of(m, nd->out);
        void *dx = need_dx ? grad_of(m, nd->in0) : NULL; /* the model's input has no gradient */
        void *weight = param_of(m, nd->param[DT_NODE_WEIGHT]);
        void *dweight = param_grad_of(m, nd->param[DT_NODE_WEIGHT]);
        void *dbias = param_grad_of(m, nd->param[DT_NODE_BIAS]);
        const dt_dtype xt = xv->dtype, yt = yv->dtype;
        int64_t count = value_numel(yv, n);
        int ready = yv->grad_ready;
        if (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0) { /* a residual tail, its BN and ReLU in one op */
            dt_model_prof_mark(m, DT_PROF_BWD + DT_OP_BN);
            tail_backward(m, nd, n, accumulate);
            continue;
        }
        if (nd->op == DT_OP_BN && nd->attr.fused_tail >= 0) /* done at its tail's add */
            continue;
        if (nd->op == DT_OP_BN && nd->attr.fused_relu >= 0) { /* its fused ReLU's output gradient */
            int rv = m->nodes[nd->attr.fused_relu].out;
            dy = grad_of(m, rv);
            ready = m->values[rv].grad_ready;
        }
        if (!ready || (nd->op == DT_OP_RELU && nd->attr.fused_into_bn)) /* unused downstream, or done by the BN */
            continue;
        dt_model_prof_mark(m, DT_PROF_BWD + (int)nd->op); /* a convolution's: its weight gradient first */
        switch (nd->op) {
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            void *ws = dt_arena_at(&m->workspace, 0);
            if (m->amp_level) {
                dt_amp_conv_bwd(m, nd, n, &d, xin, dy, need_dx, accumulate, ws);
                break;
            }
            be->conv_bwd_filter(&d, xin, dy, dweight, dbias, accumulate, ws);
            dt_model_prof_mark(m, DT_PROF_CONV_DGRAD);
            if (need_dx)
                be->conv_bwd_data(&d, dy, weight, dx, grad_accumulate(m, nd->in0), ws);
            break;
        }
        case DT_OP_BN: {
            dt_bn_desc d = bn_desc(m, nd, n, m->training);
            be->bn_bwd(&d, xin, dy, nd->attr.fused_relu >= 0, weight, saved_of(m, nd), dx, dweight, dbias,
                       grad_accumulate(m, nd->in0), accumulate);
            break;
        }
        case DT_OP_RELU: be->relu_bwd(count, yt, y, dy, dx, grad_accumulate(m, nd->in0)); break;
        case DT_OP_ADD: {
            int ins[2] = {nd->in0, nd->in1};
            for (int k = 0; k < 2; k++) {
                if (m->values[ins[k]].grad_alias == nd->out)
                    m->values[ins[k]].grad_ready = 1; /* it is this gradient */
                else
                    be->copy_grad(count, dy, yt, grad_of(m, ins[k]), vtype(m, ins[k]), grad_accumulate(m, ins[k]));
            }
            break;
        }
        case DT_OP_MAXPOOL: {
            dt_pool_desc d = pool_desc(m, nd, n);
            be->maxpool_bwd(&d, dy, saved_of(m, nd), dx, grad_accumulate(m, nd->in0));
            break;
        }
        case DT_OP_AVGPOOL: {
            dt_pool_desc d = pool_desc(m, nd, n);
            be->avgpool_bwd(&d, dy, dx, grad_accumulate(m, nd->in0));
            break;
        }
        case DT_OP_FLATTEN:
            be->flatten_bwd(n, xv->height, xv->width, xv->channels, xt, dy, dx, grad_accumulate(m, nd->in0));
            break;
        case DT_OP_LINEAR:
            if (m->amp_level) {
                dt_amp_linear_bwd(m, nd, n, xin, dy, need_dx, accumulate);
                break;
            }
        {
            int rows, in;
            linear_shape(m, nd, n, &rows, &in);
            be->linear_bwd(rows, in, yv->channels, DT_FLOAT32, xin, weight, dy, dx, dweight, dbias,
                           need_dx ? grad_accumulate(m, nd->in0) : 0, accumulate);
            break;
        }
        case DT_OP_LN:
            be->ln_bwd(count / xv->channels, xv->channels, xin, xt, weight, ptype(m, nd->param[DT_NODE_WEIGHT]),
                       saved_of(m, nd), dy, yt, dx, dweight, dbias, need_dx ? grad_accumulate(m, nd->in0) : 0,
                       accumulate);
            break;
        case DT_OP_TOKENS:
            be->tokens_bwd(n, yv->width - 1, yv->channels, dy, yt, dx, xt, dweight, dbias,
                           ptype(m, nd->param[DT_NODE_WEIGHT]), need_dx ? grad_accumulate(m, nd->in0) : 0, accumulate);
            break;
        case DT_OP_ATTN:
            be->attn_bwd(n, yv->width, nd->attr.groups, yv->channels / nd->attr.groups, xin, xt, saved_of(m, nd), dy,
                         yt, dx, grad_accumulate(m, nd->in0));
            break;
        case DT_OP_TOKEN0: { /* token 0's gradient; the other tokens' is zero */
            const int acc = grad_accumulate(m, nd->in0);
            if (!acc)
                be->fill(value_numel(xv, n), xt, 0.0f, dx);
            be->chan_copy(n, yv->channels, dy, yv->channels, 0, yt, dx, xv->width * xv->channels, 0, xt, 1);
            break;
        }
        case DT_OP_CONCAT: { /* an input laid in the output: its gradient is there (its other readers come later) */
            const int64_t rows = count / yv->channels;
            const int ca = xv->channels, cb = m->values[nd->in1].channels;
            if (xv->place_in == nd->out)
                m->values[nd->in0].grad_ready = 1;
            else if (need_dx)
                be->chan_copy(rows, ca, dy, yv->ld, 0, yt, dx, ca, 0, xt, grad_accumulate(m, nd->in0));
            if (m->values[nd->in1].place_in == nd->out)
                m->values[nd->in1].grad_ready = 1;
            else
                be->chan_copy(rows, cb, dy, yv->ld, ca, yt, grad_of(m, nd->in1), cb, 0, vtype(m, nd->in1),
                              grad_accumulate(m, nd->in1));
            break;
        }
        case DT_OP_SCALE:
            be->chanmul_bwd(1, count / xv->channels, xv->channels, xin, xt, weight, ptype(m, nd->param[DT_NODE_WEIGHT]),
                            dy, yt, dx, dweight, need_dx ? grad_accumulate(m, nd->in0) : 0, accumulate);
            break;
        case DT_OP_DROPOUT:
        case DT_OP_SDEPTH:
            if (!(m->training && nd->attr.drop_prob > 0))
                be->copy_grad(count, dy, yt, dx, xt, grad_accumulate(m, nd->in0));
            else if (nd->op == DT_OP_DROPOUT)
                be->dropout_bwd(count, nd->attr.drop_prob, saved_of(m, nd), dy, yt, dx, xt, grad_accumulate(m, nd->in0));
            else
                be->sdepth_bwd(n, count / n, nd->attr.drop_prob, saved_of(m, nd), dy, yt, dx, xt,
                               grad_accumulate(m, nd->in0));
            break;
        case DT_OP_ACT: be->act_bwd(count, nd->attr.act, xt, xin, dy, dx, grad_accumulate(m, nd->in0)); break;
        case DT_OP_CHANMUL: {
            const int acc_dx = need_dx ? grad_accumulate(m, nd->in0) : 0, acc_ds = grad_accumulate(m, nd->in1);
            be->chanmul_bwd(n, (int64_t)xv->height * xv->width, xv->channels, xin, xt, act_of(m, nd->in1),
                            vtype(m, nd->in1), dy, yt, dx, grad_of(m, nd->in1), acc_dx, acc_ds);
            break;
        }
        }
        if (m->amp_level && nd->op != DT_OP_CONV && nd->op != DT_OP_LINEAR) /* emulation: round what it wrote */
            dt_amp_round_grads(m, nd, n);
        if (m->on_grads && nd->param[DT_NODE_WEIGHT] >= 0)
            m->on_grads(m->on_grads_ctx, i);
    }
    m->step++;
    return DT_OK;
}

void dt_model_host_step(dt_model *m)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_BN)
            m->counts[m->params[m->nodes[i].param[DT_NODE_BATCHES_TRACKED]].off]++;
    m->step++;
}

/* the profile's name for kind k (a row of the report) into buf */
static const char *prof_kind_name(int k, char *buf, size_t n)
{
    static const char *const rest[] = {"conv_dgrad", "input_upload", "input_normalize", "loss", "ddp_pack",
                                       "ddp_unpack", "amp_scaler", "optimizer", "other"};
    _Static_assert(sizeof rest / sizeof rest[0] == DT_PROF_KINDS - DT_PROF_CONV_DGRAD, "a name per kind");
    if (k >= DT_PROF_CONV_DGRAD)
        return rest[k - DT_PROF_CONV_DGRAD];
    if (k == DT_PROF_BWD + DT_OP_CONV)
        return "conv_wgrad";
    snprintf(buf, n, "%s_%s", kind_names[k % DT_OP_KINDS], k < DT_PROF_BWD ? "fwd" : "bwd");
    return buf;
}

void dt_model_profile_report(dt_model *m, FILE *f)
{
    struct dt_prof *p = m->prof;
    dt_model_prof_step_end(m); /* a step in progress (a caller that ends none) */
    if (!p || !p->steps) {
        fprintf(f, "profile: no step was profiled\n");
        return;
    }
    int order[DT_PROF_KINDS], n = 0;
    double total = 0;
    for (int k = 0; k < DT_PROF_KINDS; k++)
        if (p->seen[k]) {
            total += p->ms[k];
            int j = n++;
            for (; j > 0 && p->ms[order[j - 1]] < p->ms[k]; j--) /* the most time first */
                order[j] = order[j - 1];
            order[j] = k;
        }
    const double steps = (double)p->steps;
    fprintf(f, "profile: %lld step%s, ms per step by kind (%s timers)\n", (long long)p->steps,
            p->steps == 1 ? "" : "s", p->tb->name);
    fprintf(f, "%-20s %10s %7s\n", "kind", "ms/step", "share");
    for (int i = 0; i < n; i++) {
        char buf[40];
        int k = order[i];
        fprintf(f, "%-20s %10.3f %6.1f%%\n", prof_kind_name(k, buf, sizeof buf), p->ms[k] / steps,
                total > 0 ? 100 * p->ms[k] / total : 0.0);
    }
    fprintf(f, "%-20s %10.3f %6.1f%%\n", "total", total / steps, total > 0 ? 100.0 : 0.0);
    p->steps = 0;
    memset(p->ms, 0, sizeof p->ms);
    memset(p->seen, 0, sizeof p->seen);
}

void dt_model_free(dt_model *m)
{
    if (!m)
        return;
    free(m->nodes);
    free(m->values);
    free(m->params);
    if (m->be) {
        m->be->mem_free(m->weights);
        m->be->mem_free(m->grads);
        m->be->mem_free(m->buffers);
        be_arena_free(m, &m->act);
        be_arena_free(m, &m->grad);
        be_arena_free(m, &m->workspace);
        be_arena_free(m, &m->amp_scratch);
        if (m->io_event) {
            m->be->event_sync(m->io_event);
            m->be->event_destroy(m->io_event);
        }
        m->be->mem_free(m->scalars);
        m->be->mem_free(m->labels);
        m->be->host_free(m->host_io);
    }
    free(m->counts);
    if (m->prof) {
        for (int i = 0; i < m->prof->made; i++)
            m->prof->tb->timer_destroy(m->prof->timer[i]);
        free(m->prof->timer);
        free(m->prof->before);
        free(m->prof);
    }
    memset(m, 0, sizeof *m);
}
