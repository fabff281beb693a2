/* sgd.h: torch.optim.SGD over a model's trainable parameters.
 * lr, momentum, dampening, nesterov and weight decay as PyTorch defines them; optionally no weight
 * decay on BN parameters and biases (a common ImageNet recipe). The momentum buffer has the layout
 * of the model's flat weights, so it can be checkpointed and broadcast as one array. */
#ifndef DT_TRAIN_SGD_H
#define DT_TRAIN_SGD_H

#include <stdint.h>

#include "nn/model.h"

typedef struct dt_sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov;
    int no_decay_bn_bias; /* 1: weight decay only on conv and linear weights */
    float *momentum_buf;  /* n_weights floats (the backend's memory), or NULL when momentum is 0 */
    const dt_backend *be; /* whose memory momentum_buf is */
    int64_t steps;        /* updates done: the first one starts the momentum buffer (the host's copy of the
                           * model's scalars' sgd_steps, read after each step and put back on resume) */
} dt_sgd;

/* DT_OK, DT_ERR_INPUT for nesterov without momentum or dampening (as PyTorch refuses), DT_ERR_NOMEM. */
int dt_sgd_init(dt_sgd *o, const dt_model *m, float lr, float momentum, float dampening, float weight_decay,
                int nesterov, int no_decay_bn_bias);
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
