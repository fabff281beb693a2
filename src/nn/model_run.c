/* model_run.c: running a planned model (contract in model.h): the loop over its nodes, forward and
 * backward, and the loss. Each node's work is its kind's (nn/layers/, through dt_kinds); the casts
 * precision planned run around it (layer.h). Building is graph.c's, planning model_plan.c's, the
 * step's numbers step_io.c's, the profile profile.c's. */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "nn/layer.h"
#include "nn/model.h"
#include "nn/model_internal.h"
#include "util/check.h"
#include "util/log.h"

/* the kind of node nd's forward (backward: DT_PROF_BWD + it), or -1 when another node's op does its
 * work (a ReLU or an activation fused into its BN: the BN's; a BN whose residual tail runs at the
 * add's turn: the BN's) */
static int node_prof_kind(const dt_node *nd)
{
    if (dt_node_folded(nd))
        return -1;
    if (nd->op == DT_OP_ADD && nd->attr.tail_bn >= 0)
        return DT_OP_BN;
    return (int)nd->op;
}

void *dt_model_logits(const dt_model *m)
{
    return act_of(m, m->output);
}

void dt_model_get_logits(const dt_model *m, int n, float *host)
{
    dt_get_f32(m->be, vtype(m, m->output), act_of(m, m->output), (size_t)n * (size_t)m->num_classes, host);
}

int dt_model_forward(dt_model *m, const float *x, int n)
{
    if (n < 1 || n > m->plan_n) {
        dt_error("model %s: forward of %d images, planned for at most %d", m->arch, n, m->plan_n);
        return DT_ERR_STATE;
    }
    m->input_data = x;
    for (int i = 0; i < m->n_nodes; i++) {
        dt_node *nd = &m->nodes[i];
        dt_model_prof_mark(m, node_prof_kind(nd));
        if (dt_node_folded(nd)) /* run by another node's op */
            continue;
        dt_node_casts(m, nd, DT_PH_FWD_PRE, n, NULL);
        dt_kinds[nd->op]->forward(m, nd, n);
        dt_node_casts(m, nd, DT_PH_FWD_POST, n, NULL);
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
    if (m->loss_casts) /* the emulation: the gradient rounded */
        dt_run_casts(m, m->loss_cast_at, m->loss_casts, n, NULL);
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

int dt_model_backward(dt_model *m, int n, int accumulate)
{
    for (int v = 0; v < m->n_values; v++)
        m->values[v].grad_ready = 0;
    m->values[m->output].grad_ready = 1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        dt_node *nd = &m->nodes[i];
        /* done by another node's op, or its gradient unused downstream */
        if (dt_node_folded(nd) || !m->values[dt_node_bwd_from(m, nd)].grad_ready)
            continue;
        dt_model_prof_mark(m, DT_PROF_BWD + node_prof_kind(nd)); /* a convolution's: its weight gradient first */
        dt_bwd b = {.accumulate = accumulate};
        dt_node_casts(m, nd, DT_PH_BWD_PRE, n, &b);
        dt_kinds[nd->op]->backward(m, nd, n, &b);
        dt_node_casts(m, nd, DT_PH_BWD_POST, n, &b);
        /* this node's parameter gradients are final (a residual tail's: its BN's) */
        const int owner = nd->op == DT_OP_ADD ? nd->attr.tail_bn : nd->param[DT_NODE_WEIGHT] >= 0 ? i : -1;
        if (m->on_grads && owner >= 0)
            m->on_grads(m->on_grads_ctx, owner);
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
