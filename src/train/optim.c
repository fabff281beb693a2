/* optim.c: torch.optim's SGD, Adam, AdamW and RMSprop (contract in optim.h). */
#include "config.h"

#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

int dt_optim_init(dt_optim *o, const dt_model *m, float lr, float momentum, float dampening, float weight_decay,
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

/* n_weights zeros in the backend's memory into *buf (allocated unless it is there) */
static int zeroed_state(dt_optim *o, const dt_model *m, float **buf, const char *what)
{
    const int64_t n = m->n_weights ? m->n_weights : 1;
    if (!*buf && !(*buf = m->be->mem_alloc((size_t)n * sizeof(float)))) {
        dt_error("%s: cannot allocate the %s of %s", dt_optim_name(o), what, m->arch);
        return DT_ERR_NOMEM;
    }
    m->be->fill(n, DT_FLOAT32, 0.0f, *buf);
    return DT_OK;
}

/* two doubles per parameter (the backend's memory): LARS's and LAMB's norms */
static int norms_of(dt_optim *o, const dt_model *m)
{
    if (!o->norms && !(o->norms = m->be->mem_alloc((size_t)(2 * m->n_params + 2) * sizeof(double)))) {
        dt_error("%s: cannot allocate the norms of %s", dt_optim_name(o), m->arch);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
}

int dt_optim_use_adam(dt_optim *o, const dt_model *m, double beta1, double beta2, double eps, int decoupled)
{
    if (o->nesterov) {
        dt_error("--nesterov is SGD's: not with --opt %s", decoupled ? "adamw" : "adam");
        return DT_ERR_INPUT;
    }
    o->kind = decoupled ? DT_OPT_ADAMW : DT_OPT_ADAM;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    DT_TRY(zeroed_state(o, m, &o->momentum_buf, "first moment"));
    return zeroed_state(o, m, &o->second_buf, "second moment");
}

int dt_optim_use_rmsprop(dt_optim *o, const dt_model *m, double alpha, double eps)
{
    if (o->nesterov) {
        dt_error("--nesterov is SGD's: not with --opt rmsprop");
        return DT_ERR_INPUT;
    }
    o->kind = DT_OPT_RMSPROP;
    o->alpha = alpha;
    o->eps = eps;
    if (o->momentum_buf) /* torch's RMSprop starts its momentum buffer at zero */
        DT_TRY(zeroed_state(o, m, &o->momentum_buf, "momentum"));
    return zeroed_state(o, m, &o->second_buf, "square average");
}

int dt_optim_use_lars(dt_optim *o, const dt_model *m, double trust)
{
    if (o->nesterov) {
        dt_error("--nesterov is SGD's: not with --opt lars");
        return DT_ERR_INPUT;
    }
    o->kind = DT_OPT_LARS;
    o->trust = trust;
    DT_TRY(zeroed_state(o, m, &o->momentum_buf, "momentum")); /* LARS's starts at zero */
    return norms_of(o, m);
}

int dt_optim_use_lamb(dt_optim *o, const dt_model *m, double beta1, double beta2, double eps)
{
    DT_TRY(dt_optim_use_adam(o, m, beta1, beta2, eps, 1));
    o->kind = DT_OPT_LAMB;
    return norms_of(o, m);
}

const char *dt_optim_name(const dt_optim *o)
{
    switch (o->kind) {
    case DT_OPT_LARS: return "lars";
    case DT_OPT_LAMB: return "lamb";
    case DT_OPT_ADAM: return "adam";
    case DT_OPT_ADAMW: return "adamw";
    case DT_OPT_RMSPROP: return "rmsprop";
    default: return "sgd";
    }
}

void dt_optim_set_group_decay(dt_optim *o, float norm_weight_decay, float bias_weight_decay)
{
    o->norm_weight_decay = norm_weight_decay;
    o->bias_weight_decay = bias_weight_decay;
}

float dt_optim_decay_of(const dt_optim *o, const dt_param *p)
{
    const int bias = p->kind == DT_P_BIAS || p->kind == DT_P_BN_BIAS;
    const int norm = p->kind == DT_P_BN_WEIGHT || p->kind == DT_P_BN_BIAS;
    if (bias && !isnan(o->bias_weight_decay))
        return o->bias_weight_decay;
    if (norm && !isnan(o->norm_weight_decay))
        return o->norm_weight_decay;
    return o->weight_decay;
}

int dt_optim_set_clip(dt_optim *o, dt_model *m, float max_norm)
{
    dt_scalars b;
    DT_TRY(dt_model_get_scalars(m, &b));
    b.clip_norm = max_norm > 0 ? max_norm : 0.0f;
    o->clip_norm = b.clip_norm;
    return dt_model_put_scalars(m, &b);
}

/* the optimizer's op on n elements of weights w (type wt) and gradients g (type gt), at offset off of
 * the flat layout (where the state is) */
static void update(const dt_optim *o, dt_model *m, const dt_param *p, int64_t n, void *w, dt_dtype wt, const void *g,
                   dt_dtype gt, int64_t off, float wd)
{
    float *m1 = o->momentum_buf ? o->momentum_buf + off : NULL, *m2 = o->second_buf ? o->second_buf + off : NULL;
    double *norms = p && o->norms ? o->norms + 2 * (p - m->params) : NULL;
    switch (o->kind) {
    case DT_OPT_LARS: { /* the tensor's norms, then its update; BN and biases without the trust ratio */
        const int excluded = p->kind != DT_P_WEIGHT;
        m->be->tensor_sumsq(n, w, wt, 0, m->scalars, norms);
        m->be->tensor_sumsq(n, g, gt, 1, m->scalars, norms + 1);
        m->be->lars(n, w, wt, g, gt, m1, o->momentum, wd, excluded ? 0.0 : o->trust, norms, m->scalars);
        break;
    }
    case DT_OPT_LAMB:
        m->be->lamb_moments(n, w, wt, g, gt, m1, m2, o->beta1, o->beta2, o->eps, wd, m->scalars, norms);
        m->be->lamb_apply(n, w, wt, m1, m2, o->beta1, o->beta2, o->eps, wd, norms, m->scalars);
        break;
    case DT_OPT_ADAM:
    case DT_OPT_ADAMW:
        m->be->adam(n, w, wt, g, gt, m1, m2, o->beta1, o->beta2, o->eps, wd, o->kind == DT_OPT_ADAMW, m->scalars);
        break;
    case DT_OPT_RMSPROP:
        m->be->rmsprop(n, w, wt, g, gt, m2, m1, o->alpha, o->eps, wd, o->momentum, m->scalars);
        break;
    default:
        m->be->sgd(n, w, wt, g, gt, m1, o->momentum, o->dampening, wd, o->nesterov, m->scalars);
    }
}

void dt_optim_step(dt_optim *o, dt_model *m, float *master)
{
    const int groups = !isnan(o->norm_weight_decay) || !isnan(o->bias_weight_decay);
    const int per_tensor = o->kind == DT_OPT_LARS || o->kind == DT_OPT_LAMB; /* norms of each tensor */
    const int flat = !groups && !per_tensor && dt_model_params_fp32(m);
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
        update(o, m, NULL, m->n_weights, master ? (void *)master : m->weights, DT_FLOAT32, m->grads, DT_FLOAT32, 0,
               o->weight_decay);
    } else { /* tensor by tensor: each in its type, or with its group's decay */
        for (int i = 0; i < m->n_params; i++) {
            const dt_param *p = &m->params[i];
            if (!dt_param_trainable(p))
                continue;
            void *w = master ? (void *)(master + p->off) : dt_param_data(m, p);
            update(o, m, p, p->numel, w, master ? DT_FLOAT32 : p->dtype, dt_param_grad(m, p), p->dtype, p->off,
                   dt_optim_decay_of(o, p));
        }
    }
    m->be->step_end(m->scalars);
}

void dt_optim_free(dt_optim *o)
{
    if (!o)
        return;
    if (o->momentum_buf)
        o->be->mem_free(o->momentum_buf);
    if (o->second_buf)
        o->be->mem_free(o->second_buf);
    if (o->norms)
        o->be->mem_free(o->norms);
    o->momentum_buf = o->second_buf = NULL;
    o->norms = NULL;
}
