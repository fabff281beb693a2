/* optim.h: the optimizer over a model's trainable parameters: torch.optim.SGD (the default), Adam,
 * AdamW and RMSprop, as torchvision's reference train.py builds them (--opt sgd, adam, adamw,
 * rmsprop). SGD's lr, momentum, dampening, nesterov and weight decay as PyTorch defines them. Every
 * optimizer has the parameter groups of torchvision's reference recipe: a weight decay of its own
 * for biases (every parameter named "bias", BN's included: --bias-weight-decay) and for BN's other
 * parameters (--norm-weight-decay), as its set_weight_decay builds the optimizer's groups (a
 * bias's own decay comes first). The state (SGD's momentum, Adam's two moments, RMSprop's square average and
 * momentum) has the layout of the model's flat weights, so each part can be checkpointed and
 * broadcast as one array. */
#ifndef DT_TRAIN_OPTIM_H
#define DT_TRAIN_OPTIM_H

#include <stdint.h>

#include "nn/model.h"

typedef enum { DT_OPT_SGD, DT_OPT_ADAM, DT_OPT_ADAMW, DT_OPT_RMSPROP, DT_OPT_LARS, DT_OPT_LAMB } dt_opt_kind;

typedef struct dt_optim {
    dt_opt_kind kind;
    float lr, momentum, dampening, weight_decay;
    double beta1, beta2; /* Adam, AdamW: torch's betas */
    double alpha, eps;   /* RMSprop's smoothing constant; Adam's, LAMB's and RMSprop's eps */
    double trust;        /* LARS's trust coefficient (eta) */
    double *norms;       /* LARS, LAMB: two doubles per parameter (the backend's memory) */
    int nesterov;
    float norm_weight_decay; /* BN's parameters (its bias: unless bias_weight_decay is set); NAN: weight_decay */
    float bias_weight_decay; /* every bias, conv, linear and BN; NAN: as the rest */
    float clip_norm;         /* > 0: the gradients' global L2 norm clipped to it first (dt_optim_set_clip) */
    float *momentum_buf;  /* n_weights floats (the backend's memory): SGD's and RMSprop's momentum
                           * (NULL when momentum is 0), Adam's first moment (exp_avg) */
    float *second_buf;    /* n_weights floats: Adam's exp_avg_sq, RMSprop's square_avg; NULL for SGD */
    const dt_backend *be; /* whose memory the state is */
    int64_t steps;        /* updates done: the first one starts the momentum buffer (the host's copy of the
                           * model's scalars' sgd_steps, read after each step and put back on resume) */
} dt_optim;

/* DT_OK, DT_ERR_INPUT for nesterov without momentum or dampening (as PyTorch refuses), DT_ERR_NOMEM.
 * no_decay_bn_bias: weight decay only on conv and linear weights (norm and bias decays 0). */
int dt_optim_init(dt_optim *o, const dt_model *m, float lr, float momentum, float dampening, float weight_decay,
                  int nesterov, int no_decay_bn_bias);
/* Adam (decoupled 0) or AdamW (1) instead of SGD, with torch's betas and eps (its defaults: 0.9,
 * 0.999, 1e-8); momentum and dampening are not used. RMSprop with its alpha and eps (torchvision's
 * recipe: 0.9, 0.0316), momentum as dt_optim_init had it (without nesterov). Both allocate the state
 * (zeros); DT_OK, DT_ERR_INPUT (nesterov with either), DT_ERR_NOMEM. */
int dt_optim_use_adam(dt_optim *o, const dt_model *m, double beta1, double beta2, double eps, int decoupled);
int dt_optim_use_rmsprop(dt_optim *o, const dt_model *m, double alpha, double eps);
/* LARS (MLPerf's: momentum as dt_optim_init had it, trust coefficient eta; BN's parameters and
 * biases without the trust ratio) and LAMB (Adam's moments, the trust ratio |w| / |r| on every
 * tensor): the nn/backend.h ops of the same names, tensor by tensor. */
int dt_optim_use_lars(dt_optim *o, const dt_model *m, double trust);
int dt_optim_use_lamb(dt_optim *o, const dt_model *m, double beta1, double beta2, double eps);
/* "sgd", "adam", "adamw", "rmsprop", "lars", "lamb" */
const char *dt_optim_name(const dt_optim *o);
/* the groups' decays (NAN: not a group of their own) */
void dt_optim_set_group_decay(dt_optim *o, float norm_weight_decay, float bias_weight_decay);
/* the weight decay parameter p gets */
float dt_optim_decay_of(const dt_optim *o, const dt_param *p);
/* torch.nn.utils.clip_grad_norm_(params, max_norm) before every update, as torchvision's train.py
 * does after GradScaler's unscale_: the norm of all the unscaled gradients (grad_sumsq ops), each
 * gradient times min(1, max_norm / (norm + 1e-6)) (in the update's op). 0: none. Writes the
 * model's scalars (planned: a host copy, at set-up); DT_OK or the put's error. */
int dt_optim_set_clip(dt_optim *o, dt_model *m, float max_norm);
/* One update (of the optimizer's kind) of every trainable parameter from its gradient times the
 * loss scaler's 1/scale, at the learning rate, both read by the ops from the model's scalars
 * (nn/scalars.h: the step's lr is uploaded by dt_model_step_begin), or none when the step is
 * skipped there (an overflow agreed); then the step's end on the backend (the scaler's update, the
 * optimiser's step count). Of the model's weights, or with master (fp32 copies in the fp32 layout,
 * n_weights floats; AMP's master weights) of those. The gradients are not changed. o->steps counts
 * the steps issued, not those taken: the model's scalars count those (sgd_steps, which Adam's bias
 * corrections read). */
void dt_optim_step(dt_optim *o, dt_model *m, float *master);
void dt_optim_free(dt_optim *o);

#endif
