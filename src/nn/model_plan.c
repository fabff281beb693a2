/* model_plan.c: planning a model for an input size and the batch sizes it will run (contract in
 * model.h): the shapes (each kind's rule), the lifetimes of activations and gradients and their
 * places in the arenas (packed by plan.c), concatenations laid out in place, the state forward
 * saves, the backend's per-shape planning and scratch, its limit on a tensor, and precision's casts
 * (precision.c). Building is graph.c's, running model_run.c's. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layer.h"
#include "nn/model.h"
#include "nn/model_internal.h"
#include "nn/plan.h"
#include "util/check.h"
#include "util/log.h"

/* shapes of every value for an input of h x w (each kind's shape rule; the input's own size where it
 * has none); names the layer that cannot run */
static int plan_shapes(dt_model *m, int n, int h, int w)
{
    m->values[m->input].height = h;
    m->values[m->input].width = w;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        dt_value *x = &m->values[nd->in0], *y = &m->values[nd->out];
        y->height = x->height;
        y->width = x->width;
        if (dt_kinds[nd->op]->shape)
            DT_TRY(dt_kinds[nd->op]->shape(m, i, n, h, w));
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
    if (!dt_kinds[m->nodes[val->producer].op]->strided_out)
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
    for (int i = 0; i < m->n_nodes && !m->concat_apart && !m->prec_emulate; i++) {
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
 * of value v is born at its last reader and dies after its producer (a fused ReLU's or activation's:
 * after the BN that does its work); an aliased gradient lives in its root's bytes. */
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
    /* a BN with its ReLU or activation fused reads that one's output gradient after its turn; the BN
     * output's own gradient is never written */
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_BN && (m->nodes[i].attr.fused_relu >= 0 || m->nodes[i].attr.fused_act >= 0)) {
            int rv = dt_node_bwd_from(m, &m->nodes[i]), t = m->n_nodes - 1 - i;
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

/* does backward read this value? (what each kind's reads says, a BN in a fused residual tail too; the
 * loss reads the logits, a fused residual tail its ReLU's output; a ReLU or an activation fused into
 * its BN reads nothing: the BN recomputes what it would read) */
static int kept_for_backward(const dt_model *m, int v)
{
    if (v == m->output)
        return 1;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        const unsigned reads = dt_kinds[nd->op]->reads;
        if (nd->attr.fused_into_bn)
            continue;
        if ((nd->in0 == v && (reads & DT_READS_IN0)) || (nd->in1 == v && (reads & DT_READS_IN1)) ||
            (nd->out == v && (reads & DT_READS_OUT)) ||
            (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0 && m->nodes[nd->attr.tail_relu].out == v))
            return 1;
    }
    return 0;
}

/* Activation lifetimes, one buffer per value: values backward reads live to the end; the others (a
 * BN output read only by an add, a pool's output read by a flatten) only until their last reader in
 * the forward pass, and then give their bytes to later values. An in-place ReLU's output is its
 * input's bytes, and the model's input is the caller's. A BN with its activation fused writes the
 * activation's output at its own turn (so that output is born there) and has no output of its own. */
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
    for (int i = 0; i < m->n_nodes; i++) /* a fused tail's or activation's BN output exists only inside the op */
        if (m->nodes[i].op == DT_OP_BN && (m->nodes[i].attr.fused_tail >= 0 || m->nodes[i].attr.fused_act >= 0)) {
            b[m->nodes[i].out].bytes = 0;
            if (m->nodes[i].attr.fused_act >= 0) {
                int r = act_root(m, m->nodes[m->nodes[i].attr.fused_act].out);
                b[r].first = i < b[r].first ? i : b[r].first;
            }
        }
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
        const size_t save = dt_kinds[nd->op]->saved ? dt_kinds[nd->op]->saved(m, nd, n) : 0;
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
/* The backend's planning ops for every node at a batch of n (each kind's plan): the most conv
 * workspace into *ws and the most scratch into *scratch (model.h: the batch's input, normalize_u8's,
 * and its loss are planned too). */
static void plan_backend(dt_model *m, int n, size_t *ws, size_t *scratch)
{
    const dt_backend *be = m->be;
    for (int i = 0; i < m->n_nodes; i++) {
        const dt_node *nd = &m->nodes[i];
        if (dt_kinds[nd->op]->plan)
            dt_kinds[nd->op]->plan(m, nd, n, ws, scratch);
    }
    const dt_value *in = &m->values[m->input];
    size_t b = be->xent_scratch(n, m->num_classes);
    *scratch = b > *scratch ? b : *scratch;
    b = be->normalize_scratch((int64_t)n * in->height * in->width * in->channels);
    *scratch = b > *scratch ? b : *scratch;
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
        snprintf(buf, size, "%s after %s", dt_kind_names[nd->op], m->nodes[j].name);
    else
        snprintf(buf, size, "%s (node %d)", dt_kind_names[nd->op], i);
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
    if (m->prec_level > 0)
        GROW(amp, dt_prec_scratch_bytes(m, n));
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
    DT_TRY(dt_prec_plan(m));
    be_arena_free(m, &m->act);
    be_arena_free(m, &m->grad);
    be_arena_free(m, &m->workspace);
    be_arena_free(m, &m->prec_scratch);
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
    if (rc == DT_OK && m->prec_level > 0)
        rc = be_arena(m, &m->prec_scratch, "mixed precision", need.amp);
    if (rc == DT_OK)
        rc = m->be->reserve_scratch(need.scratch);
    if (rc == DT_OK)
        rc = lay_out(m, n, h, w);
    if (rc == DT_OK)
        rc = dt_model_plan_scalars(m, n);
    DT_TRY(rc);
    m->plan_n = n;
    m->plan_h = h;
    m->plan_w = w;
    m->plan_inputs[0][0] = h;
    m->plan_inputs[0][1] = w;
    m->plan_inputs[1][0] = h2;
    m->plan_inputs[1][1] = w2;
    int tails = 0, bn_relus = 0, bn_acts = 0, placed = 0; /* the fused schedule (graph.c, dt_model_set_fusion) */
    for (int i = 0; i < m->n_nodes; i++) {
        tails += m->nodes[i].op == DT_OP_ADD && m->nodes[i].attr.tail_bn >= 0;
        bn_relus += m->nodes[i].op == DT_OP_BN && m->nodes[i].attr.fused_relu >= 0;
        bn_acts += m->nodes[i].op == DT_OP_BN && m->nodes[i].attr.fused_act >= 0;
    }
    for (int v = 0; v < m->n_values; v++)
        placed += m->values[v].place_in >= 0;
    char other[48] = "";
    if (n_hw > 1)
        snprintf(other, sizeof other, " and %dx%d", h2, w2);
    dt_debug("model %s planned for %dx%dx%dx%d%s%s%s%s: activations %.1f MiB, gradients %.1f MiB, workspace %.1f MiB, "
             "backend scratch %.1f MiB; fused on %s: %d BN+ReLU, %d BN+add+ReLU, %d BN+activation; %d concatenation "
             "inputs in place",
             m->arch, n, h, w, m->in_c, other, sizes_text[0] ? " (also batches " : "", sizes_text,
             sizes_text[0] ? ")" : "", need.act / 1048576.0, need.grad / 1048576.0, need.ws / 1048576.0,
             need.scratch / 1048576.0, m->be->name, bn_relus, tails, bn_acts, placed);
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
        be_arena_free(m, &m->prec_scratch);
        if (m->io_event) {
            m->be->event_sync(m->io_event);
            m->be->event_destroy(m->io_event);
        }
        m->be->mem_free(m->scalars);
        m->be->mem_free(m->labels);
        m->be->host_free(m->host_io);
    }
    free(m->counts);
    dt_model_prof_free(m);
    free(m->casts);
    memset(m, 0, sizeof *m);
}
