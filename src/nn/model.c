/* model.c: building, planning, forward and backward of a model graph (contract in model.h). */
#include "config.h"

#include "nn/model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/check.h"
#include "util/grow.h"
#include "util/clock.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"

/* ---------------------------------------------------------------------------------------------- */
/* building                                                                                       */

static int alloc_params(dt_model *m);
static void conv_desc(const dt_model *m, const dt_node *nd, int n, dt_conv_desc *d);

static int new_value(dt_model *m, int c, int producer)
{
    if (m->build_error || dt_grow((void **)&m->values, &m->cap_values, (size_t)m->n_values + 1, sizeof(dt_value))) {
        m->build_error = m->build_error ? m->build_error : DT_ERR_NOMEM;
        return -1;
    }
    m->values[m->n_values] = (dt_value){.c = c, .producer = producer, .alias = -1, .galias = -1};
    return m->n_values++;
}

static dt_node *new_node(dt_model *m, enum dt_op_kind op, const char *name, int in0)
{
    if (m->build_error)
        return NULL;
    if (in0 < 0 || in0 >= m->n_values) {
        m->build_error = DT_ERR_STATE;
        return NULL;
    }
    if (dt_grow((void **)&m->nodes, &m->cap_nodes, (size_t)m->n_nodes + 1, sizeof(dt_node))) {
        m->build_error = DT_ERR_NOMEM;
        return NULL;
    }
    dt_node *n = &m->nodes[m->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    snprintf(n->name, sizeof n->name, "%s", name ? name : "");
    n->in0 = in0;
    n->in1 = -1;
    n->a.relu_node = -1;
    for (int i = 0; i < 5; i++)
        n->p[i] = -1;
    return n;
}

/* the node just made gets its output value */
static int finish_node(dt_model *m, dt_node *n, int c)
{
    if (!n)
        return -1;
    int v = new_value(m, c, m->n_nodes);
    if (v < 0)
        return -1;
    n->out = v;
    m->n_nodes++;
    return v;
}

static int new_param(dt_model *m, const char *module, const char *leaf, enum dt_param_kind kind, int ndim,
                     const int *shape, enum dt_init init)
{
    if (m->build_error || dt_grow((void **)&m->params, &m->cap_params, (size_t)m->n_params + 1, sizeof(dt_param))) {
        m->build_error = m->build_error ? m->build_error : DT_ERR_NOMEM;
        return -1;
    }
    dt_param *p = &m->params[m->n_params];
    memset(p, 0, sizeof *p);
    if ((size_t)snprintf(p->name, sizeof p->name, "%s%s%s", module, module[0] ? "." : "", leaf) >= sizeof p->name) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    p->kind = kind;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= shape[i];
    }
    p->init = init;
    return m->n_params++;
}

int dt_model_begin(dt_model *m, const char *arch, int in_c, int num_classes, const dt_backend *be)
{
    memset(m, 0, sizeof *m);
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->in_c = in_c;
    m->num_classes = num_classes;
    m->be = be;
    m->training = 1;
    const char *prof = getenv("DT_PROFILE");
    m->profile = prof && *prof && strcmp(prof, "0") != 0;
    m->input = new_value(m, in_c, -1);
    return m->input;
}

int dt_b_conv_full(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int dil, int groups, int bias,
                   enum dt_init init)
{
    dt_node *n = new_node(m, DT_OP_CONV, name, x);
    if (!n)
        return -1;
    int ic = m->values[x].c;
    if (groups < 1 || ic % groups || oc % groups) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->a.k = k;
    n->a.s = s;
    n->a.pad = pad;
    n->a.dil = dil;
    n->a.groups = groups;
    n->a.bias = bias;
    int shape[4] = {oc, ic / groups, k, k};
    n->p[0] = new_param(m, name, "weight", DT_P_WEIGHT, 4, shape, init);
    if (n->p[0] >= 0) {
        dt_param *w = &m->params[n->p[0]];
        w->ohwi = 1;
        w->fan_in = ic / groups * k * k;
        w->fan_out = oc * k * k; /* PyTorch: size(0) * receptive field */
    }
    if (bias) {
        n->p[1] = new_param(m, name, "bias", DT_P_BIAS, 1, &oc, init == DT_INIT_TORCH_DEFAULT ? DT_INIT_TORCH_DEFAULT : DT_INIT_ZEROS);
        if (n->p[1] >= 0)
            m->params[n->p[1]].fan_in = ic / groups * k * k;
    }
    return finish_node(m, n, oc);
}

int dt_b_conv(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int bias, enum dt_init init)
{
    return dt_b_conv_full(m, name, x, oc, k, s, pad, 1, 1, bias, init);
}

int dt_b_bn(dt_model *m, const char *name, int x)
{
    dt_node *n = new_node(m, DT_OP_BN, name, x);
    if (!n)
        return -1;
    int c = m->values[x].c, one = 1;
    n->a.eps = 1e-5f;
    n->a.momentum = 0.1f;
    n->p[0] = new_param(m, name, "weight", DT_P_BN_WEIGHT, 1, &c, DT_INIT_ONES);
    n->p[1] = new_param(m, name, "bias", DT_P_BN_BIAS, 1, &c, DT_INIT_ZEROS);
    n->p[2] = new_param(m, name, "running_mean", DT_P_BN_MEAN, 1, &c, DT_INIT_ZEROS);
    n->p[3] = new_param(m, name, "running_var", DT_P_BN_VAR, 1, &c, DT_INIT_ONES);
    n->p[4] = new_param(m, name, "num_batches_tracked", DT_P_BN_COUNT, 0, &one, DT_INIT_ZEROS);
    return finish_node(m, n, c);
}

int dt_b_relu(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_RELU, "", x);
    return n ? finish_node(m, n, m->values[x].c) : -1;
}

int dt_b_maxpool(dt_model *m, int x, int k, int s, int pad)
{
    dt_node *n = new_node(m, DT_OP_MAXPOOL, "maxpool", x);
    if (!n)
        return -1;
    n->a.k = k;
    n->a.s = s;
    n->a.pad = pad;
    return finish_node(m, n, m->values[x].c);
}

int dt_b_avgpool(dt_model *m, int x, int oh, int ow)
{
    dt_node *n = new_node(m, DT_OP_AVGPOOL, "avgpool", x);
    if (!n)
        return -1;
    n->a.oh = oh;
    n->a.ow = ow;
    return finish_node(m, n, m->values[x].c);
}

int dt_b_flatten(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_FLATTEN, "flatten", x);
    if (!n)
        return -1;
    /* the feature count must not depend on the input size: flatten follows an adaptive pool */
    int pr = m->values[x].producer;
    if (pr < 0 || m->nodes[pr].op != DT_OP_AVGPOOL) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    return finish_node(m, n, m->values[x].c * m->nodes[pr].a.oh * m->nodes[pr].a.ow);
}

int dt_b_linear(dt_model *m, const char *name, int x, int out, enum dt_init init_w, enum dt_init init_b)
{
    dt_node *n = new_node(m, DT_OP_LINEAR, name, x);
    if (!n)
        return -1;
    n->a.bias = 1;
    int in = m->values[x].c; /* a flattened value or another linear layer's output */
    int shape[2] = {out, in};
    n->p[0] = new_param(m, name, "weight", DT_P_WEIGHT, 2, shape, init_w);
    n->p[1] = new_param(m, name, "bias", DT_P_BIAS, 1, &out, init_b);
    if (n->p[0] >= 0 && n->p[1] >= 0) {
        m->params[n->p[0]].fan_in = m->params[n->p[1]].fan_in = in;
        m->params[n->p[0]].fan_out = out;
    }
    return finish_node(m, n, out);
}

int dt_b_dropout(dt_model *m, int x, float p)
{
    dt_node *n = new_node(m, DT_OP_DROPOUT, "dropout", x);
    if (!n)
        return -1;
    n->a.drop = p;
    return finish_node(m, n, m->values[x].c);
}

int dt_b_add(dt_model *m, int a, int b)
{
    dt_node *n = new_node(m, DT_OP_ADD, "add", a);
    if (!n)
        return -1;
    if (b < 0 || b >= m->n_values || m->values[a].c != m->values[b].c) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->in1 = b;
    return finish_node(m, n, m->values[a].c);
}

int dt_model_end(dt_model *m, int output)
{
    if (m->build_error) {
        dt_error("model %s: building failed: %s", m->arch, dt_status_str(m->build_error));
        return m->build_error;
    }
    m->output = output;
    for (int i = 0; i < m->n_nodes; i++) {
        m->values[m->nodes[i].in0].consumers++;
        if (m->nodes[i].in1 >= 0)
            m->values[m->nodes[i].in1].consumers++;
    }
    /* an add passes its output gradient to both inputs unchanged: an input read by nothing else can
     * use that gradient's bytes instead of a copy */
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        if (nd->op != DT_OP_ADD)
            continue;
        int ins[2] = {nd->in0, nd->in1};
        for (int k = 0; k < 2; k++) {
            int v = ins[k], other = ins[1 - k];
            if (v == m->input || v == other)
                continue;
            if (m->values[v].consumers == 1) {
                m->values[v].galias = nd->out;
                continue;
            }
            /* a residual block's input: the add runs first in backward (every other reader comes before
             * it in the forward order), so the add's gradient can start the sum in place, provided the
             * other input's producer has read the shared gradient before the other readers add to it */
            int ok = 1, op = m->values[other].producer;
            for (int j = 0; j < m->n_nodes && ok; j++) {
                const dt_node *c = &m->nodes[j];
                if (j != i && (c->in0 == v || c->in1 == v))
                    ok = j < i && (m->values[other].consumers != 1 || op > j);
            }
            if (ok)
                m->values[v].galias = nd->out;
        }
    }
    /* in-place ReLU: no backward needs a layer's own output except the ReLU's, so a ReLU may
     * overwrite its input when nothing else reads it; after a BN it runs inside the BN, whose
     * backward recomputes where the output was zero, so not even the ReLU's output must be kept */
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        if (nd->op == DT_OP_RELU && nd->in0 != m->input && m->values[nd->in0].consumers == 1) {
            m->values[nd->out].alias = nd->in0;
            int pr = m->values[nd->in0].producer; /* BN then in-place ReLU: one pass each way */
            if (pr >= 0 && m->nodes[pr].op == DT_OP_BN) {
                m->nodes[pr].a.relu_node = i;
                nd->a.fused = 1;
            }
        }
    }
    return alloc_params(m);
}

/* ---------------------------------------------------------------------------------------------- */
/* parameters                                                                                     */

int dt_param_trainable(const dt_param *p)
{
    return p->kind == DT_P_WEIGHT || p->kind == DT_P_BIAS || p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS;
}

float *dt_param_data(const dt_model *m, const dt_param *p)
{
    if (p->kind == DT_P_BN_COUNT)
        return NULL;
    return dt_param_trainable(p) ? m->weights + p->off : m->buffers + p->off;
}

float *dt_param_grad(const dt_model *m, const dt_param *p)
{
    return dt_param_trainable(p) ? m->grads + p->off : NULL;
}

void dt_model_set_dropout(dt_model *m, float p)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_DROPOUT)
            m->nodes[i].a.drop = p;
}

int dt_model_find_param(const dt_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return i;
    return -1;
}

/* O,I,KH,KW <-> O,KH,KW,I for conv weights; a plain copy otherwise */
static void permute_conv(const dt_param *p, const float *src, float *dst, int to_torch)
{
    if (!p->ohwi) {
        memcpy(dst, src, (size_t)p->numel * sizeof(float));
        return;
    }
    int o = p->shape[0], ci = p->shape[1], kh = p->shape[2], kw = p->shape[3];
    for (int a = 0; a < o; a++)
        for (int i = 0; i < ci; i++)
            for (int y = 0; y < kh; y++)
                for (int x = 0; x < kw; x++) {
                    int64_t t = (((int64_t)a * ci + i) * kh + y) * kw + x, u = (((int64_t)a * kh + y) * kw + x) * ci + i;
                    if (to_torch)
                        dst[t] = src[u];
                    else
                        dst[u] = src[t];
                }
}

void dt_param_from_torch(const dt_param *p, const float *torch, float *ours)
{
    permute_conv(p, torch, ours, 0);
}

void dt_param_to_torch(const dt_param *p, const float *ours, float *torch)
{
    permute_conv(p, ours, torch, 1);
}

/* storage for all parameters once every shape is known (after the first planning) */
static int alloc_params(dt_model *m)
{
    int64_t nw = 0, nb = 0, nc = 0;
    for (int i = 0; i < m->n_params; i++) {
        dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT)
            p->off = nc++;
        else if (dt_param_trainable(p)) {
            p->off = nw;
            nw += (p->numel + 15) & ~(int64_t)15; /* each tensor 64-byte aligned */
        } else {
            p->off = nb;
            nb += p->numel;
        }
    }
    m->n_weights = nw;
    m->n_buffers = nb;
    m->n_counts = nc;
    size_t bw = (size_t)(nw ? nw : 1) * sizeof(float);
    m->weights = m->be->mem_alloc(bw);
    m->grads = m->be->mem_alloc(bw);
    m->buffers = m->be->mem_alloc((size_t)(nb ? nb : 1) * sizeof(float));
    if (!m->weights || !m->grads || !m->buffers) {
        dt_error("model %s: cannot allocate %zu bytes of parameters on %s", m->arch, 2 * bw, m->be->name);
        return DT_ERR_NOMEM;
    }
    DT_CHECK_ALLOC(m->counts = calloc((size_t)(nc ? nc : 1), sizeof(int64_t))); /* host: counted by host code */
    return DT_OK;
}

void dt_model_init_weights(dt_model *m, uint64_t seed, int zero_init_residual)
{
    dt_rng r;
    dt_rng_seed(&r, seed, 0x696e6974 /* "init" */);
    int64_t most = 0;
    for (int i = 0; i < m->n_params; i++)
        most = m->params[i].numel > most ? m->params[i].numel : most;
    float *d = malloc((size_t)(most ? most : 1) * sizeof(float)); /* drawn on the host, then put */
    if (!d) {
        dt_error("model %s: out of memory initialising the weights", m->arch);
        abort();
    }
    for (int i = 0; i < m->n_params; i++) {
        dt_param *p = &m->params[i];
        if (p->kind == DT_P_BN_COUNT) {
            m->counts[p->off] = 0;
            continue;
        }
        double bound = p->fan_in > 0 ? 1.0 / sqrt((double)p->fan_in) : 0.0;
        double std = p->fan_out > 0 ? sqrt(2.0 / (double)p->fan_out) : 0.0;
        for (int64_t j = 0; j < p->numel; j++) {
            double v = 0;
            switch (p->init) {
            case DT_INIT_ZEROS: v = 0; break;
            case DT_INIT_ONES: v = (p->zero_init && zero_init_residual) ? 0 : 1; break;
            case DT_INIT_KAIMING_FAN_OUT: v = std * dt_rng_normal(&r); break;
            /* kaiming_uniform(a=sqrt(5)) for weights and the matching bias rule: both U(-1/sqrt(fan_in), +) */
            case DT_INIT_TORCH_DEFAULT: v = (2.0 * dt_rng_uniform(&r) - 1.0) * bound; break;
            case DT_INIT_NORMAL_001: v = 0.01 * dt_rng_normal(&r); break;
            }
            d[j] = (float)v; /* drawn in O,KH,KW,I order: the distribution is all that matters */
        }
        m->be->mem_put(dt_param_data(m, p), d, (size_t)p->numel * sizeof(float));
    }
    free(d);
}

/* ---------------------------------------------------------------------------------------------- */
/* planning                                                                                       */

static int64_t value_numel(const dt_model *m, const dt_value *v, int n)
{
    (void)m;
    return (int64_t)n * v->h * v->w * v->c;
}

/* shapes of every value for an input of h x w; names the layer that cannot run */
static int plan_shapes(dt_model *m, int n, int h, int w)
{
    m->values[m->input].h = h;
    m->values[m->input].w = w;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
        y->h = x->h;
        y->w = x->w;
        switch (nd->op) {
        case DT_OP_CONV:
        case DT_OP_MAXPOOL: {
            dt_conv_desc cd;
            dt_pool_desc pd;
            int bad = nd->op == DT_OP_CONV
                          ? dt_conv_desc_set(&cd, n, x->h, x->w, x->c, y->c, nd->a.k, nd->a.k, nd->a.s, nd->a.s,
                                             nd->a.pad, nd->a.pad, nd->a.dil, nd->a.dil, nd->a.groups)
                          : dt_pool_desc_set_max(&pd, n, x->h, x->w, x->c, nd->a.k, nd->a.s, nd->a.pad);
            if (bad) {
                dt_error("model %s: an input of %dx%d is too small for layer %s (it gets %dx%d)", m->arch, h, w,
                         nd->name, x->h, x->w);
                return DT_ERR_INPUT;
            }
            y->h = nd->op == DT_OP_CONV ? cd.oh : pd.oh;
            y->w = nd->op == DT_OP_CONV ? cd.ow : pd.ow;
            break;
        }
        case DT_OP_AVGPOOL:
            y->h = nd->a.oh;
            y->w = nd->a.ow;
            break;
        case DT_OP_FLATTEN:
        case DT_OP_LINEAR: y->h = y->w = 1; break;
        default:
            break;
        }
    }
    return DT_OK;
}

/* First fit in the given order: each block takes the lowest offset whose range is free of every
 * block placed before it with an overlapping lifetime. Returns the bytes needed. */
static size_t first_fit(int k, const int *order, const size_t *bytes, const int *born, const int *dies, size_t *off)
{
    size_t total = 0;
    for (int a = 0; a < k; a++) {
        int v = order[a];
        size_t o = 0;
        for (int moved = 1; moved;) { /* bump past every overlapping placed block */
            moved = 0;
            for (int q = 0; q < a; q++) {
                int u = order[q];
                if (born[u] <= dies[v] && born[v] <= dies[u] && o < off[u] + bytes[u] && off[u] < o + bytes[v]) {
                    o = off[u] + bytes[u];
                    moved = 1;
                }
            }
        }
        off[v] = o;
        if (o + bytes[v] > total)
            total = o + bytes[v];
    }
    return total;
}

/* Offsets for n blocks of bytes[i] live over [born[i], dies[i]] (inclusive), packed by first fit in
 * three orders (largest first; longest-lived first; earliest born first), keeping the smallest
 * packing: none of them is best for every network (force = k: only the k-th). Blocks with bytes 0 are skipped (offset 0).
 * Returns the bytes needed, or DT_ARENA_FAIL when out of memory. */
static size_t place_intervals(int n, const size_t *bytes, const int *born, const int *dies, int force, size_t *off)
{
    size_t slots = (size_t)(n ? n : 1), best = DT_ARENA_FAIL;
    int *order = calloc(slots, sizeof(int));
    double *key = calloc(slots, sizeof(double));
    size_t *trial = calloc(slots, sizeof(size_t));
    for (int i = 0; i < n; i++)
        off[i] = 0;
    for (int rule = 0; rule < 3 && order && key && trial; rule++) {
        if (force && rule != force - 1)
            continue;
        int k = 0;
        for (int i = 0; i < n; i++) {
            trial[i] = 0;
            if (!bytes[i])
                continue;
            order[k++] = i;
            double life = (double)dies[i] - born[i], b = (double)bytes[i];
            key[i] = rule == 0 ? b : rule == 1 ? life * 1e15 + b : -(double)born[i] * 1e15 + b;
        }
        for (int a = 1; a < k; a++) /* descending key; insertion sort keeps ties in index order */
            for (int b = a; b > 0 && key[order[b]] > key[order[b - 1]]; b--) {
                int t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        size_t total = first_fit(k, order, bytes, born, dies, trial);
        if (best == DT_ARENA_FAIL || total < best) {
            best = total;
            memcpy(off, trial, (size_t)n * sizeof(size_t));
        }
    }
    free(order);
    free(key);
    free(trial);
    return best;
}

static size_t aligned_bytes(const dt_model *m, int v, int n)
{
    return ((size_t)value_numel(m, &m->values[v], n) * sizeof(float) + DT_ARENA_ALIGN - 1) & ~(DT_ARENA_ALIGN - 1);
}

static int grad_root(const dt_model *m, int v)
{
    while (m->values[v].galias >= 0)
        v = m->values[v].galias;
    return v;
}

/* Gradient lifetimes. Backward runs node i at time n_nodes-1-i; the gradient of value v is born at
 * its last reader and dies after its producer (a fused ReLU's: after the BN that does its work); an
 * aliased gradient lives in its root's bytes. */
static void grad_lifetimes(const dt_model *m, int n, int *born, int *dies, size_t *bytes)
{
    int nv = m->n_values;
    for (int v = 0; v < nv; v++) {
        const dt_value *val = &m->values[v];
        bytes[v] = v == m->input ? 0 : aligned_bytes(m, v, n);
        born[v] = m->n_nodes;
        dies[v] = m->n_nodes - 1 - (val->producer >= 0 ? val->producer : 0);
    }
    born[m->output] = -1; /* the loss writes it before backward */
    for (int i = 0; i < m->n_nodes; i++) {
        int t = m->n_nodes - 1 - i, ins[2] = {m->nodes[i].in0, m->nodes[i].in1};
        for (int k = 0; k < 2; k++)
            if (ins[k] >= 0 && t < born[ins[k]])
                born[ins[k]] = t;
    }
    /* a BN with its ReLU fused reads the ReLU output's gradient one step after the ReLU's turn; the
     * BN output's own gradient is never written */
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_BN && m->nodes[i].a.relu_node >= 0) {
            int rv = m->nodes[m->nodes[i].a.relu_node].out, t = m->n_nodes - 1 - i;
            dies[rv] = t > dies[rv] ? t : dies[rv];
            bytes[m->nodes[i].out] = 0;
        }
    for (int v = nv - 1; v >= 0; v--) {
        int r = grad_root(m, v);
        if (r != v) {
            bytes[v] = 0;
            dies[r] = dies[v] > dies[r] ? dies[v] : dies[r];
            born[r] = born[v] < born[r] ? born[v] : born[r];
        }
    }
}

/* does backward read this value? (layers read their input, a ReLU its output, the loss the logits) */
static int kept_for_backward(const dt_model *m, int v)
{
    if (v == m->output)
        return 1;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if ((nd->in0 == v && (nd->op == DT_OP_CONV || nd->op == DT_OP_BN || nd->op == DT_OP_LINEAR)) ||
            (nd->out == v && nd->op == DT_OP_RELU && !nd->a.fused)) /* a fused one's BN recomputes it */
            return 1;
    }
    return 0;
}

/* Activation lifetimes: values backward reads live to the end; the others (a BN output read only
 * by an add, a pool's output read by a flatten) only until their last reader in the forward pass,
 * and then give their bytes to later values. An in-place ReLU's output is its input's bytes, and
 * the model's input is the caller's. */
static void act_lifetimes(const dt_model *m, int n, int *born, int *dies, size_t *bytes)
{
    int nv = m->n_values, end = m->n_nodes + 1;
    for (int v = 0; v < nv; v++) {
        born[v] = m->values[v].producer; /* -1 for the input */
        dies[v] = born[v];
    }
    for (int v = 0; v < nv; v++) { /* lifetimes gather on the root of each alias chain */
        int r = v;
        while (m->values[r].alias >= 0)
            r = m->values[r].alias;
        int last = m->values[v].producer;
        for (int i = 0; i < m->n_nodes; i++)
            if (m->nodes[i].in0 == v || m->nodes[i].in1 == v)
                last = i;
        if (kept_for_backward(m, v))
            last = end;
        if (last > dies[r])
            dies[r] = last;
    }
    for (int v = 0; v < nv; v++)
        bytes[v] = m->values[v].alias >= 0 || v == m->input ? 0 : aligned_bytes(m, v, n);
}

/* offsets for every value from the lifetimes `fill` gives; returns the bytes needed or DT_ARENA_FAIL */
static size_t plan_offsets(const dt_model *m, int n, void (*fill)(const dt_model *, int, int *, int *, size_t *),
                           size_t *off)
{
    int nv = m->n_values;
    int *born = calloc((size_t)nv, sizeof(int)), *dies = calloc((size_t)nv, sizeof(int));
    size_t *bytes = calloc((size_t)nv, sizeof(size_t)), total = DT_ARENA_FAIL;
    if (born && dies && bytes) {
        fill(m, n, born, dies, bytes);
        total = place_intervals(nv, bytes, born, dies, m->plan_rule, off);
    }
    free(born);
    free(dies);
    free(bytes);
    return total;
}

static size_t plan_grads(const dt_model *m, int n, size_t *goff)
{
    size_t total = plan_offsets(m, n, grad_lifetimes, goff);
    for (int v = 0; v < m->n_values; v++)
        goff[v] = goff[grad_root(m, v)];
    goff[m->input] = DT_ARENA_FAIL;
    return total;
}

static size_t plan_acts(const dt_model *m, int n, size_t *aoff)
{
    return plan_offsets(m, n, act_lifetimes, aoff);
}

/* activations (offsets from plan_acts, after which the saved state follows), saved state and
 * workspace, carved from the arenas (planning or real); gradient offsets come from plan_grads */
static int carve(dt_model *m, int n, dt_arena *act, size_t act_bytes, const size_t *aoff, const size_t *goff,
                 size_t *ws_bytes)
{
    *ws_bytes = 0;
    if (dt_arena_push(act, act_bytes) != 0)
        return DT_ERR_NOMEM;
    for (int v = 0; v < m->n_values; v++) {
        dt_value *val = &m->values[v];
        int r = v;
        while (m->values[r].alias >= 0)
            r = m->values[r].alias;
        val->off = aoff[r];
        val->goff = goff[v];
    }
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
        size_t save = 0;
        switch (nd->op) {
        case DT_OP_BN: save = DT_BN_SAVED(x->c) * sizeof(float); break;
        case DT_OP_MAXPOOL: save = (size_t)value_numel(m, y, n); break; /* one byte per output */
        case DT_OP_DROPOUT: save = (size_t)value_numel(m, y, n); break;
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            size_t b = m->be->conv_workspace(&d);
            *ws_bytes = b > *ws_bytes ? b : *ws_bytes;
            break;
        }
        default: break;
        }
        nd->save_off = DT_ARENA_FAIL;
        if (save && (nd->save_off = dt_arena_push(act, save)) == DT_ARENA_FAIL)
            return DT_ERR_NOMEM;
    }
    return DT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* mixed precision                                                                                */

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

static void amp_round(const dt_model *m, float *x, int64_t n)
{
    m->be->round_half(n, x, m->amp_bf16);
}

/* is the node's output stored in the reduced type? O1: what conv and linear make; O2/O3: all */
static int amp_out(const dt_model *m, const dt_node *nd)
{
    return m->amp_level >= 2 || (m->amp_level == 1 && (nd->op == DT_OP_CONV || nd->op == DT_OP_LINEAR));
}

/* scratch for conv/linear under mixed precision: a rounded copy of the input (or of dx), of the
 * weights and bias, and room for the weight gradient: the largest of each */
static size_t amp_bytes(const dt_model *m, int n)
{
    int64_t mx = 0, mw = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (nd->op != DT_OP_CONV && nd->op != DT_OP_LINEAR)
            continue;
        int64_t x = value_numel(m, &m->values[nd->in0], n), w = m->params[nd->p[0]].numel;
        if (nd->p[1] >= 0)
            w += m->params[nd->p[1]].numel;
        mx = x > mx ? x : mx;
        mw = w > mw ? w : mw;
    }
    return (size_t)(2 * mx + 2 * mw + 64) * sizeof(float); /* x copy, w copy, dw, a dx apart */
}

/* the operands a conv/linear node computes with under mixed precision: its input rounded (a copy
 * unless stored rounded already) and its weights and bias rounded (a copy under O1) */
static void amp_operands(dt_model *m, const dt_node *nd, int n, const float **x, const float **w, const float **b)
{
    float *ws = dt_arena_at(&m->amp_ws, 0);
    int64_t nx = value_numel(m, &m->values[nd->in0], n);
    if (m->amp_level == 1 || nd->in0 == m->input) {
        m->be->copy_grad(nx, *x, ws, 0);
        amp_round(m, ws, nx);
        *x = ws;
    }
    if (m->amp_level == 1) {
        const dt_param *pw = &m->params[nd->p[0]];
        float *wc = ws + nx;
        m->be->copy_grad(pw->numel, *w, wc, 0);
        amp_round(m, wc, pw->numel);
        *w = wc;
        if (*b) {
            int64_t nb = m->params[nd->p[1]].numel;
            m->be->copy_grad(nb, *b, wc + pw->numel, 0);
            amp_round(m, wc + pw->numel, nb);
            *b = wc + pw->numel;
        }
    }
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

int dt_model_plan(dt_model *m, int n, int h, int w)
{
    if (n < 1 || h < 1 || w < 1) {
        dt_error("model %s: cannot plan for a batch of %d images of %dx%d", m->arch, n, h, w);
        return DT_ERR_INPUT;
    }
    DT_TRY(plan_shapes(m, n, h, w));
    be_arena_free(m, &m->act);
    be_arena_free(m, &m->grad);
    be_arena_free(m, &m->ws);
    dt_arena pa;
    size_t ws = 0, *goff = calloc((size_t)m->n_values, sizeof(size_t)), *aoff = calloc((size_t)m->n_values, sizeof(size_t));
    if (!goff || !aoff) {
        free(goff);
        free(aoff);
        dt_error("model %s: out of memory planning", m->arch);
        return DT_ERR_NOMEM;
    }
    size_t gbytes = plan_grads(m, n, goff), abytes = plan_acts(m, n, aoff);
    int rc = gbytes == DT_ARENA_FAIL || abytes == DT_ARENA_FAIL ? DT_ERR_NOMEM : DT_OK;
    dt_arena_init_plan(&pa, "activations");
    if (rc == DT_OK)
        rc = carve(m, n, &pa, abytes, aoff, goff, &ws);
    if (rc == DT_OK)
        rc = be_arena(m, &m->act, "activations", dt_arena_peak(&pa));
    if (rc == DT_OK)
        rc = be_arena(m, &m->grad, "gradients", gbytes);
    if (rc == DT_OK)
        rc = be_arena(m, &m->ws, "workspace", ws);
    if (rc == DT_OK)
        rc = carve(m, n, &m->act, abytes, aoff, goff, &ws);
    free(goff);
    free(aoff);
    be_arena_free(m, &m->amp_ws);
    if (rc == DT_OK && m->amp_level > 0)
        rc = be_arena(m, &m->amp_ws, "mixed precision", amp_bytes(m, n));
    DT_TRY(rc);
    m->plan_n = n;
    m->plan_h = h;
    m->plan_w = w;
    dt_debug("model %s planned for %dx%dx%dx%d: activations %.1f MiB, gradients %.1f MiB, workspace %.1f MiB",
             m->arch, n, h, w, m->in_c, dt_arena_peak(&pa) / 1048576.0, gbytes / 1048576.0, ws / 1048576.0);
    return DT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* forward and backward                                                                           */

static float *val(const dt_model *m, int v)
{
    if (v == m->input) /* the caller's input, read but never written */
        return (float *)(uintptr_t)m->x;
    return dt_arena_at(&m->act, m->values[v].off);
}

static float *gval(const dt_model *m, int v)
{
    return dt_arena_at(&m->grad, m->values[v].goff);
}

static void *saved(const dt_model *m, const dt_node *nd)
{
    return dt_arena_at(&m->act, nd->save_off);
}

static float *pdata(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_data(m, &m->params[idx]);
}

static float *pgrad(const dt_model *m, int idx)
{
    return idx < 0 ? NULL : dt_param_grad(m, &m->params[idx]);
}

static void conv_desc(const dt_model *m, const dt_node *nd, int n, dt_conv_desc *d)
{
    const dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
    dt_conv_desc_set(d, n, x->h, x->w, x->c, y->c, nd->a.k, nd->a.k, nd->a.s, nd->a.s, nd->a.pad, nd->a.pad,
                     nd->a.dil, nd->a.dil, nd->a.groups);
    d->bias = nd->a.bias;
    /* backward adds into dx unless this conv is the first writer: its input's last reader in the
     * forward order, and not sharing a residual add's gradient */
    int i = (int)(nd - m->nodes);
    d->dx_accumulate = x->galias >= 0;
    for (int j = i + 1; j < m->n_nodes && !d->dx_accumulate; j++)
        d->dx_accumulate = m->nodes[j].in0 == nd->in0 || m->nodes[j].in1 == nd->in0;
}

/* adds the time since t to slot kind (none when kind < 0) of pass; returns the time now */
static double profile_tick(dt_model *m, int pass, int kind, double t)
{
    double n = dt_seconds();
    if (kind >= 0)
        m->prof[pass][kind] += n - t;
    return n;
}

float *dt_model_logits(const dt_model *m)
{
    return val(m, m->output);
}

void dt_model_get_logits(const dt_model *m, int n, float *host)
{
    m->be->mem_get(host, val(m, m->output), (size_t)n * (size_t)m->num_classes * sizeof(float));
}

int dt_model_forward(dt_model *m, const float *x, int n)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: forward of %d images, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    const dt_backend *be = m->be;
    m->x = x;
    double t = m->profile ? dt_seconds() : 0;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        if (m->profile)
            t = profile_tick(m, 0, i ? (int)m->nodes[i - 1].op : -1, t);
        const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
        float *xin = val(m, nd->in0), *y = val(m, nd->out);
        int64_t count = value_numel(m, yv, n);
        switch (nd->op) {
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            const float *cx = xin, *cw = pdata(m, nd->p[0]), *cb = pdata(m, nd->p[1]);
            if (m->amp_level)
                amp_operands(m, nd, n, &cx, &cw, &cb);
            be->conv_fwd(&d, cx, cw, cb, y, dt_arena_at(&m->ws, 0));
            break;
        }
        case DT_OP_BN: {
            dt_bn_desc d = {.rows = (int64_t)n * xv->h * xv->w, .c = xv->c, .eps = nd->a.eps, .momentum = nd->a.momentum,
                            .sync = m->bn_sync, .sync_ctx = m->bn_sync_ctx};
            float *s = saved(m, nd);
            int relu = nd->a.relu_node >= 0;
            if (m->training) {
                be->bn_fwd_train(&d, xin, pdata(m, nd->p[0]), pdata(m, nd->p[1]), y, s, pdata(m, nd->p[2]),
                                 pdata(m, nd->p[3]), relu);
                m->counts[m->params[nd->p[4]].off]++;
            } else {
                be->bn_fwd_infer(&d, xin, pdata(m, nd->p[0]), pdata(m, nd->p[1]), pdata(m, nd->p[2]),
                                 pdata(m, nd->p[3]), y, relu);
            }
            break;
        }
        case DT_OP_RELU:
            if (!nd->a.fused)
                be->relu_fwd(count, xin, y);
            break;
        case DT_OP_ADD: be->add_fwd(count, xin, val(m, nd->in1), y); break;
        case DT_OP_MAXPOOL: {
            dt_pool_desc d;
            dt_pool_desc_set_max(&d, n, xv->h, xv->w, xv->c, nd->a.k, nd->a.s, nd->a.pad);
            be->maxpool_fwd(&d, xin, y, saved(m, nd));
            break;
        }
        case DT_OP_AVGPOOL: {
            dt_pool_desc d;
            dt_pool_desc_set_adaptive(&d, n, xv->h, xv->w, xv->c, nd->a.oh, nd->a.ow);
            be->avgpool_fwd(&d, xin, y);
            break;
        }
        case DT_OP_FLATTEN: be->flatten_fwd(n, xv->h, xv->w, xv->c, xin, y); break;
        case DT_OP_LINEAR: {
            const float *lx = xin, *lw = pdata(m, nd->p[0]), *lb = pdata(m, nd->p[1]);
            if (m->amp_level)
                amp_operands(m, nd, n, &lx, &lw, &lb);
            be->linear_fwd(n, xv->c * xv->h * xv->w, yv->c, lx, lw, lb, y);
            break;
        }
        case DT_OP_DROPOUT:
            if (m->training && nd->a.drop > 0)
                be->dropout_fwd(count, nd->a.drop, dt_hash64(m->dropout_seed, m->step * 1024 + (uint64_t)i), xin, y,
                                saved(m, nd));
            else
                be->copy_grad(count, xin, y, 0);
            break;
        }
        if (amp_out(m, nd) && !(nd->op == DT_OP_RELU && nd->a.fused))
            amp_round(m, y, count);
        if (nd->op == DT_OP_BN && m->training && m->amp_level >= 2 && !m->amp_keep_bn_fp32) {
            amp_round(m, pdata(m, nd->p[2]), xv->c); /* running statistics of an fp16 BN are fp16 */
            amp_round(m, pdata(m, nd->p[3]), xv->c);
        }
    }
    if (m->profile)
        profile_tick(m, 0, m->nodes[m->n_nodes - 1].op, t);
    return DT_OK;
}

int dt_model_loss(dt_model *m, const int32_t *labels, int n, float eps, double *loss)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= m->num_classes) {
            dt_error("model %s: label %d of batch index %d is outside 0..%d", m->arch, labels[i], i,
                     m->num_classes - 1);
            return DT_ERR_INPUT;
        }
    *loss = m->be->xent(n, m->num_classes, val(m, m->output), labels, eps, gval(m, m->output));
    if (m->loss_scale != 0 && m->loss_scale != 1) /* the scaler's factor, before any rounding */
        m->be->scale((int64_t)n * m->num_classes, m->loss_scale, gval(m, m->output));
    if (m->amp_level) /* the logits were reduced: so is their gradient */
        amp_round(m, gval(m, m->output), (int64_t)n * m->num_classes);
    m->last_loss = *loss;
    return DT_OK;
}

/* gradient destination of value v: overwrite on first write of this pass, add afterwards */
static int grad_acc(dt_model *m, int v)
{
    int acc = m->values[v].grad_ready;
    m->values[v].grad_ready = 1;
    return acc;
}

/* out (+)= src rounded: the reduced-type result of a cast op joining an fp32 sum (O1), or written */
static void amp_join(dt_model *m, float *src, int64_t count, float *out, int acc)
{
    amp_round(m, src, count);
    m->be->copy_grad(count, src, out, acc);
}

/* A conv's backward under mixed precision: dy is the gradient of a reduced output (rounded here,
 * where an fp32 consumer made it); the operands are those of the forward; dw and dx are reduced:
 * under O1 computed apart, rounded, then added to the fp32 sums; under O2/O3 rounded in place. */
static void amp_conv_bwd(dt_model *m, const dt_node *nd, int n, const dt_conv_desc *d, const float *xin, float *dy,
                         int need_dx, int accumulate, void *ws)
{
    const dt_backend *be = m->be;
    int64_t ny = value_numel(m, &m->values[nd->out], n), nx = value_numel(m, &m->values[nd->in0], n);
    if (m->amp_level == 1)
        amp_round(m, dy, ny);
    const float *cx = xin, *cw = pdata(m, nd->p[0]), *cb = pdata(m, nd->p[1]);
    amp_operands(m, nd, n, &cx, &cw, &cb);
    const dt_param *pw = &m->params[nd->p[0]];
    int64_t nb = nd->p[1] >= 0 ? m->params[nd->p[1]].numel : 0;
    float *scratch = dt_arena_at(&m->amp_ws, 0), *dw = scratch + nx + pw->numel + nb;
    if (m->amp_level == 1) {
        be->conv_bwd_filter(d, cx, dy, dw, nb ? dw + pw->numel : NULL, 0, ws);
        amp_join(m, dw, pw->numel, pgrad(m, nd->p[0]), accumulate);
        if (nb)
            amp_join(m, dw + pw->numel, nb, pgrad(m, nd->p[1]), accumulate);
    } else {
        be->conv_bwd_filter(d, cx, dy, pgrad(m, nd->p[0]), pgrad(m, nd->p[1]), accumulate, ws);
        amp_round(m, pgrad(m, nd->p[0]), pw->numel);
        if (nb)
            amp_round(m, pgrad(m, nd->p[1]), nb);
    }
    if (!need_dx)
        return;
    int acc = grad_acc(m, nd->in0);
    if (m->amp_level == 1) { /* the input copy is done with: dx goes there first */
        be->conv_bwd_data(d, dy, cw, scratch, 0, ws);
        amp_join(m, scratch, nx, gval(m, nd->in0), acc);
    } else {
        be->conv_bwd_data(d, dy, cw, gval(m, nd->in0), acc, ws);
        amp_round(m, gval(m, nd->in0), nx);
    }
}

static void amp_linear_bwd(dt_model *m, const dt_node *nd, int n, const float *xin, float *dy, int need_dx,
                           int accumulate)
{
    const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
    int in = xv->c * xv->h * xv->w, out = yv->c;
    int64_t nx = (int64_t)n * in;
    if (m->amp_level == 1)
        amp_round(m, dy, (int64_t)n * out);
    const float *lx = xin, *lw = pdata(m, nd->p[0]), *lb = pdata(m, nd->p[1]);
    amp_operands(m, nd, n, &lx, &lw, &lb);
    const dt_param *pw = &m->params[nd->p[0]];
    int64_t nb = m->params[nd->p[1]].numel;
    float *scratch = dt_arena_at(&m->amp_ws, 0), *dw = scratch + nx + pw->numel + nb;
    int acc = need_dx ? grad_acc(m, nd->in0) : 0;
    if (m->amp_level == 1) {
        float *dx = need_dx ? gval(m, nd->in0) : NULL;
        /* dx is written apart only when it must be added: the rounded copy of x is in scratch */
        float *dx_tmp = need_dx && acc ? dw + pw->numel + nb : dx;
        m->be->linear_bwd(n, in, out, lx, lw, dy, dx_tmp, dw, dw + pw->numel, 0, 0);
        amp_join(m, dw, pw->numel, pgrad(m, nd->p[0]), accumulate);
        amp_join(m, dw + pw->numel, nb, pgrad(m, nd->p[1]), accumulate);
        if (need_dx)
            amp_join(m, dx_tmp, nx, dx, acc && dx_tmp != dx);
    } else {
        m->be->linear_bwd(n, in, out, lx, lw, dy, need_dx ? gval(m, nd->in0) : NULL, pgrad(m, nd->p[0]),
                          pgrad(m, nd->p[1]), acc, accumulate);
        amp_round(m, pgrad(m, nd->p[0]), pw->numel);
        amp_round(m, pgrad(m, nd->p[1]), nb);
        if (need_dx)
            amp_round(m, gval(m, nd->in0), nx);
    }
}

/* O2/O3, after any other node's backward: its input gradients and (reduced) parameter gradients
 * are stored in the reduced type */
static void amp_round_grads(dt_model *m, const dt_node *nd, int n)
{
    int ins[2] = {nd->in0, nd->in1};
    for (int k = 0; k < 2; k++)
        if (ins[k] >= 0 && ins[k] != m->input && m->values[ins[k]].grad_ready)
            amp_round(m, gval(m, ins[k]), value_numel(m, &m->values[ins[k]], n));
    for (int j = 0; j < 2; j++)
        if (nd->p[j] >= 0 && dt_param_reduced(m, &m->params[nd->p[j]]))
            amp_round(m, pgrad(m, nd->p[j]), m->params[nd->p[j]].numel);
}

int dt_model_backward(dt_model *m, int n, int accumulate)
{
    const dt_backend *be = m->be;
    for (int v = 0; v < m->n_values; v++)
        m->values[v].grad_ready = 0;
    m->values[m->output].grad_ready = 1;
    double t = m->profile ? dt_seconds() : 0;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        dt_node *nd = &m->nodes[i];
        if (m->profile)
            t = profile_tick(m, 1, i < m->n_nodes - 1 ? (int)m->nodes[i + 1].op : -1, t);
        const dt_value *xv = &m->values[nd->in0], *yv = &m->values[nd->out];
        const int need_dx = nd->in0 != m->input;
        float *xin = val(m, nd->in0), *y = val(m, nd->out), *dy = gval(m, nd->out);
        int64_t count = value_numel(m, yv, n);
        int ready = yv->grad_ready;
        if (nd->op == DT_OP_BN && nd->a.relu_node >= 0) { /* its fused ReLU's output gradient */
            int rv = m->nodes[nd->a.relu_node].out;
            dy = gval(m, rv);
            ready = m->values[rv].grad_ready;
        }
        if (!ready || (nd->op == DT_OP_RELU && nd->a.fused)) /* unused downstream, or done by the BN */
            continue;
        switch (nd->op) {
        case DT_OP_CONV: {
            dt_conv_desc d;
            conv_desc(m, nd, n, &d);
            void *ws = dt_arena_at(&m->ws, 0);
            if (m->amp_level) {
                amp_conv_bwd(m, nd, n, &d, xin, dy, need_dx, accumulate, ws);
                break;
            }
            be->conv_bwd_filter(&d, xin, dy, pgrad(m, nd->p[0]), pgrad(m, nd->p[1]), accumulate, ws);
            if (m->profile)
                t = profile_tick(m, 1, DT_OP_CONV, t);
            if (need_dx)
                be->conv_bwd_data(&d, dy, pdata(m, nd->p[0]), gval(m, nd->in0), grad_acc(m, nd->in0), ws);
            if (m->profile)
                t = profile_tick(m, 1, DT_OP_KINDS, t);
            break;
        }
        case DT_OP_BN: {
            dt_bn_desc d = {.rows = (int64_t)n * xv->h * xv->w, .c = xv->c, .eps = nd->a.eps, .momentum = nd->a.momentum,
                            .sync = m->training ? m->bn_sync : NULL, .sync_ctx = m->bn_sync_ctx};
            float *s = saved(m, nd);
            be->bn_bwd(&d, xin, dy, nd->a.relu_node >= 0, pdata(m, nd->p[0]), s, gval(m, nd->in0), pgrad(m, nd->p[0]), pgrad(m, nd->p[1]), grad_acc(m, nd->in0), accumulate);
            break;
        }
        case DT_OP_RELU: be->relu_bwd(count, y, dy, gval(m, nd->in0), grad_acc(m, nd->in0)); break;
        case DT_OP_ADD: {
            int ins[2] = {nd->in0, nd->in1};
            for (int k = 0; k < 2; k++) {
                if (m->values[ins[k]].galias == nd->out)
                    m->values[ins[k]].grad_ready = 1; /* it is this gradient */
                else
                    be->copy_grad(count, dy, gval(m, ins[k]), grad_acc(m, ins[k]));
            }
            break;
        }
        case DT_OP_MAXPOOL: {
            dt_pool_desc d;
            dt_pool_desc_set_max(&d, n, xv->h, xv->w, xv->c, nd->a.k, nd->a.s, nd->a.pad);
            be->maxpool_bwd(&d, dy, saved(m, nd), gval(m, nd->in0), grad_acc(m, nd->in0));
            break;
        }
        case DT_OP_AVGPOOL: {
            dt_pool_desc d;
            dt_pool_desc_set_adaptive(&d, n, xv->h, xv->w, xv->c, nd->a.oh, nd->a.ow);
            be->avgpool_bwd(&d, dy, gval(m, nd->in0), grad_acc(m, nd->in0));
            break;
        }
        case DT_OP_FLATTEN: be->flatten_bwd(n, xv->h, xv->w, xv->c, dy, gval(m, nd->in0), grad_acc(m, nd->in0)); break;
        case DT_OP_LINEAR:
            if (m->amp_level) {
                amp_linear_bwd(m, nd, n, xin, dy, need_dx, accumulate);
                break;
            }
            be->linear_bwd(n, xv->c * xv->h * xv->w, yv->c, xin, pdata(m, nd->p[0]), dy,
                           need_dx ? gval(m, nd->in0) : NULL, pgrad(m, nd->p[0]), pgrad(m, nd->p[1]),
                           need_dx ? grad_acc(m, nd->in0) : 0, accumulate);
            break;
        case DT_OP_DROPOUT:
            if (m->training && nd->a.drop > 0)
                be->dropout_bwd(count, nd->a.drop, saved(m, nd), dy, gval(m, nd->in0), grad_acc(m, nd->in0));
            else
                be->copy_grad(count, dy, gval(m, nd->in0), grad_acc(m, nd->in0));
            break;
        }
        if (m->amp_level >= 2 && nd->op != DT_OP_CONV && nd->op != DT_OP_LINEAR)
            amp_round_grads(m, nd, n);
        if (m->on_grads && nd->p[0] >= 0)
            m->on_grads(m->on_grads_ctx, i);
    }
    if (m->profile)
        profile_tick(m, 1, m->nodes[0].op, t);
    m->step++;
    return DT_OK;
}

void dt_model_profile_report(dt_model *m, FILE *f)
{
    static const char *const names[DT_OP_KINDS + 1] = {"conv", "batchnorm", "relu", "maxpool", "avgpool",
                                                       "linear", "dropout", "flatten", "add", "conv dx"};
    double total = 0;
    for (int p = 0; p < 2; p++)
        for (int k = 0; k <= DT_OP_KINDS; k++)
            total += m->prof[p][k];
    if (total <= 0)
        return;
    fprintf(f, "%-10s %10s %10s %7s\n", "op", "fwd s", "bwd s", "share");
    for (int k = 0; k <= DT_OP_KINDS; k++) {
        double a = m->prof[0][k], b = m->prof[1][k];
        if (a + b > 0)
            fprintf(f, "%-10s %10.3f %10.3f %6.1f%%\n", names[k], a, b, 100 * (a + b) / total);
    }
    fprintf(f, "%-10s %21.3f\n", "total", total);
    memset(m->prof, 0, sizeof m->prof);
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
        be_arena_free(m, &m->ws);
        be_arena_free(m, &m->amp_ws);
    }
    free(m->counts);
    memset(m, 0, sizeof *m);
}
