/* sgd.c: torch.optim.SGD (contract in sgd.h). */
#include "config.h"

#include "train/sgd.h"

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
    o->no_decay_bn_bias = no_decay_bn_bias;
    o->be = m->be;
    if (momentum != 0 && !(o->momentum_buf = m->be->mem_alloc((size_t)(m->n_weights ? m->n_weights : 1) * sizeof(float)))) {
        dt_error("SGD: cannot allocate the momentum of %s", m->arch);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

void dt_sgd_step(dt_sgd *o, dt_model *m, float *master)
{
    if (!o->no_decay_bn_bias && dt_model_params_fp32(m)) { /* one pass over the flat arrays (padding stays 0) */
        m->be->sgd(m->n_weights, master ? (void *)master : m->weights, DT_FLOAT32, m->grads, DT_FLOAT32,
                   o->momentum_buf, o->momentum, o->dampening, o->weight_decay, o->nesterov, m->scalars);
    } else { /* tensor by tensor: each in its type, or the decay only on conv and linear weights */
        for (int i = 0; i < m->n_params; i++) {
            const dt_param *p = &m->params[i];
            if (!dt_param_trainable(p))
                continue;
            float wd = !o->no_decay_bn_bias || p->kind == DT_P_WEIGHT ? o->weight_decay : 0.0f;
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
