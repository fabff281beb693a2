/* graph.c: building a model's graph (the dt_layer_* calls, and the analysis at dt_model_end that
 * lets ReLUs run in place and adds share gradients, and the fused schedule: BN with the ReLU or the
 * activation after it, residual tails; dt_model_set_fusion) and its parameters: storage, lookup,
 * layout conversion and torchvision's initialisation (contract in model.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"

/* ---------------------------------------------------------------------------------------------- */
/* building                                                                                       */

static int alloc_params(dt_model *m);

static int new_value(dt_model *m, int c, int producer)
{
    if (m->build_error || dt_grow((void **)&m->values, &m->cap_values, (size_t)m->n_values + 1, sizeof(dt_value))) {
        m->build_error = m->build_error ? m->build_error : DT_ERR_NOMEM;
        return -1;
    }
    m->values[m->n_values] = (dt_value){.channels = c, .producer = producer, .act_alias = -1, .grad_alias = -1,
                                             .place_in = -1, .ld = c};
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
    n->attr.fused_relu = n->attr.fused_act = -1;
    n->attr.tail_bn = n->attr.tail_relu = n->attr.fused_tail = -1;
    for (int i = 0; i < DT_NODE_PARAMS; i++)
        n->param[i] = -1;
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
    m->profiling = m->profile; /* every call profiled, unless the caller chooses (the trainer: its steps) */
    m->input = new_value(m, in_c, -1);
    return m->input;
}

int dt_layer_conv_grouped(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int dil, int groups,
                          int bias, enum dt_init init)
{
    dt_node *n = new_node(m, DT_OP_CONV, name, x);
    if (!n)
        return -1;
    int ic = m->values[x].channels;
    if (groups < 1 || ic % groups || oc % groups) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->attr.kernel = k;
    n->attr.stride = s;
    n->attr.pad = pad;
    n->attr.dilation = dil;
    n->attr.groups = groups;
    n->attr.has_bias = bias;
    int shape[4] = {oc, ic / groups, k, k};
    n->param[DT_NODE_WEIGHT] = new_param(m, name, "weight", DT_P_WEIGHT, 4, shape, init);
    if (n->param[DT_NODE_WEIGHT] >= 0) {
        dt_param *w = &m->params[n->param[DT_NODE_WEIGHT]];
        w->ohwi = 1;
        w->fan_in = ic / groups * k * k;
        w->fan_out = oc * k * k; /* PyTorch: size(0) * receptive field */
    }
    if (bias) {
        enum dt_init init_b = init == DT_INIT_TORCH_DEFAULT ? DT_INIT_TORCH_DEFAULT : DT_INIT_ZEROS;
        n->param[DT_NODE_BIAS] = new_param(m, name, "bias", DT_P_BIAS, 1, &oc, init_b);
        if (n->param[DT_NODE_BIAS] >= 0)
            m->params[n->param[DT_NODE_BIAS]].fan_in = ic / groups * k * k;
    }
    return finish_node(m, n, oc);
}

int dt_layer_conv(dt_model *m, const char *name, int x, int oc, int k, int s, int pad, int bias, enum dt_init init)
{
    return dt_layer_conv_grouped(m, name, x, oc, k, s, pad, 1, 1, bias, init);
}

int dt_layer_batchnorm_eps(dt_model *m, const char *name, int x, float eps, float momentum)
{
    dt_node *n = new_node(m, DT_OP_BN, name, x);
    if (!n)
        return -1;
    int c = m->values[x].channels, one = 1;
    n->attr.eps = eps;
    n->attr.momentum = momentum;
    n->param[DT_NODE_WEIGHT] = new_param(m, name, "weight", DT_P_BN_WEIGHT, 1, &c, DT_INIT_ONES);
    n->param[DT_NODE_BIAS] = new_param(m, name, "bias", DT_P_BN_BIAS, 1, &c, DT_INIT_ZEROS);
    n->param[DT_NODE_RUNNING_MEAN] = new_param(m, name, "running_mean", DT_P_BN_MEAN, 1, &c, DT_INIT_ZEROS);
    n->param[DT_NODE_RUNNING_VAR] = new_param(m, name, "running_var", DT_P_BN_VAR, 1, &c, DT_INIT_ONES);
    n->param[DT_NODE_BATCHES_TRACKED] =
        new_param(m, name, "num_batches_tracked", DT_P_BN_COUNT, 0, &one, DT_INIT_ZEROS);
    return finish_node(m, n, c);
}

int dt_layer_batchnorm(dt_model *m, const char *name, int x)
{
    return dt_layer_batchnorm_eps(m, name, x, 1e-5f, 0.1f);
}

int dt_layer_layernorm(dt_model *m, const char *name, int x, float eps)
{
    dt_node *n = new_node(m, DT_OP_LN, name, x);
    if (!n)
        return -1;
    int c = m->values[x].channels;
    n->attr.eps = eps;
    n->param[DT_NODE_WEIGHT] = new_param(m, name, "weight", DT_P_BN_WEIGHT, 1, &c, DT_INIT_ONES);
    n->param[DT_NODE_BIAS] = new_param(m, name, "bias", DT_P_BN_BIAS, 1, &c, DT_INIT_ZEROS);
    return finish_node(m, n, c);
}

int dt_param_layer_scale(dt_model *m, const char *name, int c, float value)
{
    int shape[3] = {c, 1, 1};
    int p = new_param(m, name, "layer_scale", DT_P_WEIGHT, 3, shape, DT_INIT_CONSTANT);
    if (p >= 0)
        m->params[p].init_value = value;
    return p;
}

int dt_layer_scale(dt_model *m, int x, int param)
{
    dt_node *n = new_node(m, DT_OP_SCALE, "layer_scale", x);
    if (!n)
        return -1;
    if (param < 0 || param >= m->n_params || m->params[param].numel != m->values[x].channels) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->param[DT_NODE_WEIGHT] = param;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_act(dt_model *m, int x, int act)
{
    dt_node *n = new_node(m, DT_OP_ACT, "", x);
    if (!n)
        return -1;
    if (act < 0 || act >= DT_ACT_COUNT) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->attr.act = act;
    return finish_node(m, n, m->values[x].channels);
}

/* a node of kind op reading a and b, values of the same channels, writing that many (add, chanmul) */
static int pair_node(dt_model *m, enum dt_op_kind op, const char *name, int a, int b)
{
    dt_node *n = new_node(m, op, name, a);
    if (!n)
        return -1;
    if (b < 0 || b >= m->n_values || m->values[a].channels != m->values[b].channels) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->in1 = b;
    return finish_node(m, n, m->values[a].channels);
}

int dt_layer_chanmul(dt_model *m, int x, int s)
{
    return pair_node(m, DT_OP_CHANMUL, "scale", x, s);
}

int dt_layer_sdepth(dt_model *m, int x, float depth, float p)
{
    dt_node *n = new_node(m, DT_OP_SDEPTH, "stochastic_depth", x);
    if (!n)
        return -1;
    n->attr.depth = depth;
    n->attr.drop_prob = depth * p;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_relu(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_RELU, "", x);
    return n ? finish_node(m, n, m->values[x].channels) : -1;
}

int dt_layer_maxpool(dt_model *m, int x, int k, int s, int pad)
{
    dt_node *n = new_node(m, DT_OP_MAXPOOL, "maxpool", x);
    if (!n)
        return -1;
    n->attr.kernel = k;
    n->attr.stride = s;
    n->attr.pad = pad;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_adaptive_avgpool(dt_model *m, int x, int oh, int ow)
{
    dt_node *n = new_node(m, DT_OP_AVGPOOL, "avgpool", x);
    if (!n)
        return -1;
    n->attr.out_h = oh;
    n->attr.out_w = ow;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_avgpool2(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_AVGPOOL, "pool", x);
    if (!n)
        return -1;
    n->attr.kernel = 2;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_concat(dt_model *m, int a, int b)
{
    dt_node *n = new_node(m, DT_OP_CONCAT, "cat", a);
    if (!n)
        return -1;
    if (b < 0 || b >= m->n_values || b == a) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->in1 = b;
    return finish_node(m, n, m->values[a].channels + m->values[b].channels);
}

int dt_layer_flatten(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_FLATTEN, "flatten", x);
    if (!n)
        return -1;
    /* the feature count must not depend on the input size: flatten follows an adaptive pool (a layer
     * norm between them keeps its shape) */
    int pr = m->values[x].producer;
    if (pr >= 0 && m->nodes[pr].op == DT_OP_LN)
        pr = m->values[m->nodes[pr].in0].producer;
    if (pr < 0 || m->nodes[pr].op != DT_OP_AVGPOOL || m->nodes[pr].attr.kernel) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    return finish_node(m, n, m->values[x].channels * m->nodes[pr].attr.out_h * m->nodes[pr].attr.out_w);
}

static int linear_node(dt_model *m, const char *name, const char *wleaf, const char *bleaf, int x, int out,
                       enum dt_init init_w, enum dt_init init_b, int pointwise)
{
    dt_node *n = new_node(m, DT_OP_LINEAR, name, x);
    if (!n)
        return -1;
    n->attr.has_bias = 1;
    n->attr.pointwise = pointwise;
    int in = m->values[x].channels; /* a flattened value or another linear layer's output */
    int shape[2] = {out, in};
    n->param[DT_NODE_WEIGHT] = new_param(m, name, wleaf, DT_P_WEIGHT, 2, shape, init_w);
    n->param[DT_NODE_BIAS] = new_param(m, name, bleaf, DT_P_BIAS, 1, &out, init_b);
    if (n->param[DT_NODE_WEIGHT] >= 0 && n->param[DT_NODE_BIAS] >= 0) {
        m->params[n->param[DT_NODE_WEIGHT]].fan_in = m->params[n->param[DT_NODE_BIAS]].fan_in = in;
        m->params[n->param[DT_NODE_WEIGHT]].fan_out = out;
    }
    return finish_node(m, n, out);
}

int dt_layer_linear(dt_model *m, const char *name, int x, int out, enum dt_init init_w, enum dt_init init_b)
{
    return linear_node(m, name, "weight", "bias", x, out, init_w, init_b, 0);
}

int dt_layer_linear_rows(dt_model *m, const char *name, int x, int out, enum dt_init init_w, enum dt_init init_b)
{
    return linear_node(m, name, "weight", "bias", x, out, init_w, init_b, 1);
}

int dt_layer_linear_rows_as(dt_model *m, const char *name, const char *wleaf, const char *bleaf, int x, int out,
                            enum dt_init init_w, enum dt_init init_b)
{
    return linear_node(m, name, wleaf, bleaf, x, out, init_w, init_b, 1);
}

int dt_param_new(dt_model *m, const char *name, int ndim, const int *shape, enum dt_init init, float init_value)
{
    int p = new_param(m, "", name, DT_P_WEIGHT, ndim, shape, init);
    if (p >= 0)
        m->params[p].init_value = init_value;
    return p;
}

int dt_layer_tokens(dt_model *m, const char *name, int x, int cls, int pos)
{
    dt_node *n = new_node(m, DT_OP_TOKENS, name, x);
    if (!n)
        return -1;
    int d = m->values[x].channels;
    if (cls < 0 || pos < 0 || cls >= m->n_params || pos >= m->n_params || m->params[cls].numel != d ||
        m->params[pos].ndim != 3 || m->params[pos].shape[2] != d || m->params[pos].shape[1] < 2) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->param[DT_NODE_WEIGHT] = cls;
    n->param[DT_NODE_BIAS] = pos;
    return finish_node(m, n, d);
}

int dt_layer_attention(dt_model *m, const char *name, int qkv, int heads)
{
    dt_node *n = new_node(m, DT_OP_ATTN, name, qkv);
    if (!n)
        return -1;
    int c = m->values[qkv].channels;
    if (heads < 1 || c % (3 * heads)) {
        m->build_error = DT_ERR_STATE;
        return -1;
    }
    n->attr.groups = heads;
    return finish_node(m, n, c / 3);
}

int dt_layer_token0(dt_model *m, int x)
{
    dt_node *n = new_node(m, DT_OP_TOKEN0, "class_token", x);
    return n ? finish_node(m, n, m->values[x].channels) : -1;
}

int dt_layer_dropout(dt_model *m, int x, float p)
{
    dt_node *n = new_node(m, DT_OP_DROPOUT, "dropout", x);
    if (!n)
        return -1;
    n->attr.drop_prob = p;
    return finish_node(m, n, m->values[x].channels);
}

int dt_layer_add(dt_model *m, int a, int b)
{
    return pair_node(m, DT_OP_ADD, "add", a, b);
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
                m->values[v].grad_alias = nd->out;
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
                m->values[v].grad_alias = nd->out;
        }
    }
    /* in-place ReLU: no backward needs a layer's own output except the ReLU's, so a ReLU may
     * overwrite its input when nothing else reads it */
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        if (nd->op == DT_OP_RELU && nd->in0 != m->input && m->values[nd->in0].consumers == 1)
            m->values[nd->out].act_alias = nd->in0;
    }
    dt_model_set_fusion(m, DT_FUSE_ALL);
    return alloc_params(m);
}

void dt_model_set_concat_in_place(dt_model *m, int on)
{
    m->concat_apart = !on;
}

unsigned dt_model_set_fusion(dt_model *m, unsigned patterns)
{
    for (int i = 0; i < m->n_nodes; i++) { /* undo */
        dt_node *nd = &m->nodes[i];
        nd->attr.fused_relu = nd->attr.fused_act = nd->attr.tail_bn = nd->attr.tail_relu = nd->attr.fused_tail = -1;
        nd->attr.fused_into_bn = 0;
    }
    patterns &= m->be->fuses; /* the backend's say */
    /* BN then in-place ReLU: the ReLU runs inside the BN, whose backward recomputes where the output
     * was zero, so not even the ReLU's output must be kept */
    for (int i = 0; i < m->n_nodes && (patterns & DT_FUSE_BN_RELU); i++) {
        dt_node *nd = &m->nodes[i];
        int pr = m->values[nd->in0].producer;
        if (nd->op == DT_OP_RELU && m->values[nd->out].act_alias == nd->in0 && pr >= 0 && m->nodes[pr].op == DT_OP_BN) {
            m->nodes[pr].attr.fused_relu = i;
            nd->attr.fused_into_bn = 1;
        }
    }
    /* BN then an activation node that alone reads its output: the BN writes the activation's output
     * (its own is never stored) and its backward recomputes its output from x for the activation's
     * derivative (cpu/bn.c) */
    for (int i = 0; i < m->n_nodes && (patterns & DT_FUSE_BN_ACT); i++) {
        dt_node *nd = &m->nodes[i];
        const int b = nd->in0, pr = b != m->input ? m->values[b].producer : -1;
        if (nd->op == DT_OP_ACT && pr >= 0 && m->nodes[pr].op == DT_OP_BN && m->nodes[pr].attr.fused_relu < 0 &&
            b != m->output && m->values[b].consumers == 1 && m->values[b].act_alias < 0) {
            m->nodes[pr].attr.fused_act = i;
            nd->attr.fused_into_bn = 1;
        }
    }
    if (!(patterns & DT_FUSE_BN_ADD_RELU))
        return patterns;
    /* BN (output read only by the add) -> add -> ReLU in place (the add's output read only by it):
     * the residual block's tail, one op at the add's turn (its other input, the residual, is ready
     * then, whatever the order of the branches) */
    for (int k = 0; k < m->n_nodes; k++) {
        dt_node *relu = &m->nodes[k];
        if (relu->op != DT_OP_RELU || relu->attr.fused_into_bn || m->values[relu->out].act_alias != relu->in0)
            continue;
        int j = m->values[relu->in0].producer;
        if (j < 0 || m->nodes[j].op != DT_OP_ADD || m->values[relu->in0].consumers != 1)
            continue;
        dt_node *add = &m->nodes[j];
        int ins[2] = {add->in0, add->in1};
        for (int s = 0; s < 2; s++) {
            int b = ins[s], r = ins[1 - s], i = m->values[b].producer;
            if (b == r || r == m->input || i < 0 || m->nodes[i].op != DT_OP_BN || m->nodes[i].attr.fused_relu >= 0 ||
                m->nodes[i].attr.fused_act >= 0 || m->values[b].consumers != 1)
                continue;
            add->attr.tail_bn = i;
            add->attr.tail_relu = k;
            m->nodes[i].attr.fused_tail = j;
            relu->attr.fused_into_bn = 1;
            break;
        }
    }
    return patterns;
}

/* ---------------------------------------------------------------------------------------------- */
/* parameters                                                                                     */

void *dt_param_data(const dt_model *m, const dt_param *p)
{
    if (p->kind == DT_P_BN_COUNT)
        return NULL;
    return (char *)(dt_param_trainable(p) ? m->weights : m->buffers) + p->boff;
}

void *dt_param_grad(const dt_model *m, const dt_param *p)
{
    return dt_param_trainable(p) ? (char *)m->grads + p->boff : NULL;
}

void dt_get_f32(const dt_backend *be, dt_dtype t, const void *src, size_t n, float *host)
{
    if (t == DT_FLOAT32) {
        be->mem_get(host, src, n * sizeof(float));
        return;
    }
    /* the 16-bit values into the upper half of host, widened in place from the front: each group
     * of values is read before the floats that overlap it are written */
    uint16_t *h = (uint16_t *)(void *)host + n;
    be->mem_get(h, src, n * sizeof(uint16_t));
    if (t == DT_BFLOAT16)
        dt_bf16_to_f32_n(n, h, host);
    else
        dt_f16_to_f32_n(n, h, host);
}

void dt_param_get(const dt_model *m, const dt_param *p, float *host)
{
    dt_get_f32(m->be, p->dtype, dt_param_data(m, p), (size_t)p->numel, host);
}

void dt_param_get_grad(const dt_model *m, const dt_param *p, float *host)
{
    dt_get_f32(m->be, p->dtype, dt_param_grad(m, p), (size_t)p->numel, host);
}

void dt_param_put(const dt_model *m, const dt_param *p, const float *host)
{
    size_t n = (size_t)p->numel;
    if (p->dtype == DT_FLOAT32) {
        m->be->mem_put(dt_param_data(m, p), host, n * sizeof(float));
        return;
    }
    uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
    if (!h) { /* the values one at a time, through a tiny buffer: slow, but they arrive */
        for (size_t i = 0; i < n; i++) {
            uint16_t v = p->dtype == DT_BFLOAT16 ? dt_f32_to_bf16(host[i]) : dt_f32_to_f16(host[i]);
            m->be->mem_put((char *)dt_param_data(m, p) + i * sizeof v, &v, sizeof v);
        }
        return;
    }
    if (p->dtype == DT_BFLOAT16)
        dt_f32_to_bf16_n(n, host, h);
    else
        dt_f32_to_f16_n(n, host, h);
    m->be->mem_put(dt_param_data(m, p), h, n * sizeof(uint16_t));
    free(h);
}

void dt_model_set_dropout(dt_model *m, float p)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_DROPOUT)
            m->nodes[i].attr.drop_prob = p;
}

void dt_model_set_stochastic_depth(dt_model *m, float p)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].op == DT_OP_SDEPTH)
            m->nodes[i].attr.drop_prob = m->nodes[i].attr.depth * p;
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

void dt_param_layout(dt_model *m)
{
    size_t w = 0, b = 0;
    for (int i = 0; i < m->n_params; i++) {
        dt_param *p = &m->params[i];
        size_t bytes = (size_t)p->numel * (p->dtype == DT_FLOAT32 ? 4 : 2);
        if (p->kind == DT_P_BN_COUNT)
            continue;
        if (dt_param_trainable(p)) {
            p->boff = w;
            w += (bytes + 63) & ~(size_t)63; /* each tensor 64-byte aligned */
        } else {
            p->boff = b;
            b += (bytes + 3) & ~(size_t)3;
        }
    }
    m->weights_bytes = w;
    m->buffers_bytes = b;
}

int dt_param_storage(dt_model *m, void **weights, void **grads, void **buffers)
{
    *weights = m->be->mem_alloc(m->weights_bytes ? m->weights_bytes : 1);
    *grads = m->be->mem_alloc(m->weights_bytes ? m->weights_bytes : 1);
    *buffers = m->be->mem_alloc(m->buffers_bytes ? m->buffers_bytes : 1);
    if (*weights && *grads && *buffers)
        return DT_OK;
    m->be->mem_free(*weights);
    m->be->mem_free(*grads);
    m->be->mem_free(*buffers);
    dt_error("model %s: cannot allocate %zu bytes of parameters on %s", m->arch,
             2 * m->weights_bytes + m->buffers_bytes, m->be->name);
    return DT_ERR_NOMEM;
}

/* storage for all parameters (fp32 until dt_model_set_amp), once building has ended (no shape
 * depends on the input size) */
static int alloc_params(dt_model *m)
{
    int64_t nw = 0, nb = 0, nc = 0;
    for (int i = 0; i < m->n_params; i++) {
        dt_param *p = &m->params[i];
        p->dtype = DT_FLOAT32;
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
    dt_param_layout(m);
    if (m->shapes_only)
        return DT_OK;
    DT_TRY(dt_param_storage(m, &m->weights, &m->grads, &m->buffers));
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
            case DT_INIT_KAIMING_FAN_IN: v = sqrt(2.0 / (double)p->fan_in) * dt_rng_normal(&r); break;
            /* kaiming_uniform(a=sqrt(5)) for weights and the matching bias rule: both U(-1/sqrt(fan_in), +) */
            case DT_INIT_TORCH_DEFAULT: v = (2.0 * dt_rng_uniform(&r) - 1.0) * bound; break;
            case DT_INIT_NORMAL_001: v = 0.01 * dt_rng_normal(&r); break;
            case DT_INIT_UNIFORM_FAN_OUT: v = (2.0 * dt_rng_uniform(&r) - 1.0) / sqrt((double)p->fan_out); break;
            case DT_INIT_TRUNC_NORMAL_002:
                do
                    v = 0.02 * dt_rng_normal(&r);
                while (fabs(v) > 2.0);
                break;
            case DT_INIT_CONSTANT: v = p->init_value; break;
            case DT_INIT_NORMAL_STD: v = p->init_value * dt_rng_normal(&r); break;
            case DT_INIT_XAVIER_UNIFORM:
                v = (2.0 * dt_rng_uniform(&r) - 1.0) * sqrt(6.0 / (double)(p->fan_in + p->fan_out));
                break;
            case DT_INIT_TRUNC_NORMAL_FAN_IN: /* torch's cut is at +-2 absolute: never reached at these stds */
                do
                    v = bound * dt_rng_normal(&r);
                while (fabs(v) > 2.0);
                break;
            }
            d[j] = (float)v; /* drawn in O,KH,KW,I order: the distribution is all that matters */
        }
        dt_param_put(m, p, d);
    }
    free(d);
}
