/* sgd.h: torch.optim.SGD over a model's trainable parameters.
 * lr, momentum, dampening, nesterov and weight decay as PyTorch defines them, with the parameter
 * groups of torchvision's reference recipe: a weight decay of its own for biases (every parameter
 * named "bias", BN's included: --bias-weight-decay) and for BN's other parameters
 * (--norm-weight-decay), as its set_weight_decay builds torch.optim.SGD's groups (a bias's own
 * decay comes first). The momentum buffer has the layout
 * of the model's flat weights, so it can be checkpointed and broadcast as one array. */
#ifndef DT_TRAIN_SGD_H
#define DT_TRAIN_SGD_H

#include <stdint.h>

#include "nn/model.h"

typedef struct dt_sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    float norm_weight_decay; /* BN's parameters (its bias: unless bias_weight_decay is set); NAN: weight_decay */
    float bias_weight_decay; /* every bias, conv, linear and BN; NAN: as the rest */
    float clip_norm;         /* > 0: the gradients' global L2 norm clipped to it first (dt_sgd_set_clip) */
    float *momentum_buf;  /* n_weights floats (the backend's memory), or NULL when momentum is 0 */
    const dt_backend *be; /* whose memory momentum_buf is */
    int64_t steps;        /* updates done: the first one starts the momentum buffer (the host's copy of the
                           * model's scalars' sgd_steps, read after each step and put back on resume) */
} dt_sgd;

/* DT_OK, DT_ERR_INPUT for nesterov without momentum or dampening (as PyTorch refuses), DT_ERR_NOMEM.
 * no_decay_bn_bias: weight decay only on conv and linear weights (norm and bias decays 0). */
int dt_sgd_init(dt_sgd *o, const dt_model *m, float lr, float momentum, float dampening, float weight_decay,
                int nesterov, int no_decay_bn_bias);
/* the groups' decays (NAN: not a group of their own) */
void dt_sgd_set_group_decay(dt_sgd *o, float norm_weight_decay, float bias_weight_decay);
/* the weight decay parameter p gets */
float dt_sgd_decay_of(const dt_sgd *o, const dt_param *p);
/* torch.nn.utils.clip_grad_norm_(params, max_norm) before every update, as torchvision's train.py
 * does after GradScaler's unscale_: the norm of all the unscaled gradients (grad_sumsq ops), each
 * gradient times min(1, max_norm / (norm + 1e-6)) (the sgd op). 0: none. Writes the model's scalars
 * (planned: a host copy, at set-up); DT_OK or the put's error. */
int dt_sgd_set_clip(dt_sgd *o, dt_model *m, float max_norm);
/* One update of every trainable parameter from its gradient times the loss scaler's 1/scale, at
 * the learning rate, both read by the ops from the model's scalars (nn/scalars.h: the step's lr is
 * uploaded by dt_model_step_begin), or none when the step is skipped there (an overflow agreed);
 * then the step's end on the backend (the scaler's update, the optimiser's step count). Of the
 * model's weights, or with master (fp32 copies in the fp32 layout, n_weights floats; AMP's master
 * weights) of those. The gradients are not changed. o->steps counts the steps issued, not those
 * taken: the model's scalars count those (sgd_steps). */
void dt_sgd_step(dt_sgd *o, dt_model *m, float *master);
void dt_sgd_free(dt_sgd *o);

#endif
