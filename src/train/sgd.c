/* sgd.c: torch.optim.SGD (contract in sgd.h). */
#include "config.h"

#include "train/sgd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

int dt_sgd_init(dt_sgd *o, const dt_model *m, float lr, float momentum, float dampening, float weight_decay,
                int nesterov, int no_decay_bn_bias)
{
    memset(o, 0, sizeof *o);
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        dt_error("--nesterov needs a momentum above 0 and no dampening");
        return DT_ERR_INPUT;
    }
    o->lr = lr;
    o->momentum = momentum;
    o->dampening = dampening;
    o->weight_decay = weight_decay;
    o->nesterov = nesterov;
    o->norm_weight_decay = o->bias_weight_decay = no_decay_bn_bias ? 0.0f : NAN;
    o->be = m->be;
    if (momentum != 0 && !(o->momentum_buf = m->be->mem_alloc((size_t)(m->n_weights ? m->n_weights : 1) * sizeof(float)))) {
        dt_error("SGD: cannot allocate the momentum of %s", m->arch);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

void dt_sgd_set_group_decay(dt_sgd *o, float norm_weight_decay, float bias_weight_decay)
{
    o->norm_weight_decay = norm_weight_decay;
    o->bias_weight_decay = bias_weight_decay;
}

float dt_sgd_decay_of(const dt_sgd *o, const dt_param *p)
{
    const int bias = p->kind == DT_P_BIAS || p->kind == DT_P_BN_BIAS;
    const int norm = p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS;
    if (bias && !isnan(o->bias_weight_decay))
        return o->bias_weight_decay;
    if (norm && !isnan(o->norm_weight_decay))
        return o->norm_weight_decay;
    return o->weight_decay;
}

int dt_sgd_set_clip(dt_sgd *o, dt_model *m, float max_norm)
{
    dt_scalars b;
    DT_TRY(dt_model_get_scalars(m, &b));
    b.clip_norm = max_norm > 0 ? max_norm : 0.0f;
    o->clip_norm = b.clip_norm;
    return dt_model_put_scalars(m, &b);
}

void dt_sgd_step(dt_sgd *o, dt_model *m, float *master)
{
    const int groups = !isnan(o->norm_weight_decay) || !isnan(o->bias_weight_decay);
    const int flat = !groups && dt_model_params_fp32(m);
    if (o->clip_norm > 0) { /* the norm of every gradient first: the sgd ops read it */
        if (flat)
            m->be->grad_sumsq(m->n_weights, DT_FLOAT32, m->grads, m->scalars);
        else
            for (int i = 0; i < m->n_params; i++)
                if (dt_param_trainable(&m->params[i]))
                    m->be->grad_sumsq(m->params[i].numel, m->params[i].dtype, dt_param_grad(m, &m->params[i]),
                                      m->scalars);
    }
    if (flat) { /* one pass over the flat arrays (padding stays 0) */
        m->be->sgd(m->n_weights, master ? (void *)master : m->weights, DT_FLOAT32, m->grads, DT_FLOAT32,
                   o->momentum_buf, o->momentum, o->dampening, o->weight_decay, o->nesterov, m->scalars);
    } else { /* tensor by tensor: each in its type, or with its group's decay */
        for (int i = 0; i < m->n_params; i++) {
            const dt_param *p = &m->params[i];
            if (!dt_param_trainable(p))
                continue;
            const float wd = dt_sgd_decay_of(o, p);
            void *w = master ? (void *)(master + p->off) : dt_param_data(m, p);
            m->be->sgd(p->numel, w, master ? DT_FLOAT32 : p->dtype, dt_param_grad(m, p), p->dtype,
                       o->momentum_buf ? o->momentum_buf + p->off : NULL, o->momentum, o->dampening, wd, o->nesterov,
                       m->scalars);
        }
    }
    m->be->step_end(m->scalars);
}

void dt_sgd_free(dt_sgd *o)
{
    if (!o)
        return;
    if (o->momentum_buf)
        o->be->mem_free(o->momentum_buf);
    o->momentum_buf = NULL;
}
