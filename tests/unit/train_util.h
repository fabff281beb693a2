/* train_util.h: one training step of a model on a random batch, for the tests that train two
 * models the same way and compare them bit for bit (test_fusion, test_concat). */
#ifndef DT_TESTS_TRAIN_UTIL_H
#define DT_TESTS_TRAIN_UTIL_H

#include <math.h>
#include <stdint.h>

#include "nn/model.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/rng.h"

/* Step s (lr 0.05, label smoothing 0.1) of model m on batch s: nx normal inputs into x (the model's
 * n images) and n labels below classes, both drawn from seed (99, s); forward, loss, backward and
 * the scaler's step. Returns 1 when every call succeeded, the loss in *loss. */
static inline int train_util_step(dt_model *m, dt_optim *opt, dt_amp *amp, float *x, size_t nx, int n, int classes,
                                  int s, double *loss)
{
    dt_rng g;
    dt_rng_seed(&g, 99, (uint64_t)s);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)dt_rng_normal(&g);
    int32_t y[64];
    for (int i = 0; i < n && i < 64; i++)
        y[i] = (int32_t)dt_rng_below(&g, classes);
    const dt_scalars *out;
    *loss = NAN;
    dt_model_step_begin(m, 0.05f, s, 0);
    return n <= 64 && dt_model_forward(m, x, n) == DT_OK && dt_model_loss(m, y, n, 0.1f, loss) == DT_OK &&
           dt_model_backward(m, n, 0) == DT_OK && dt_amp_step(&amp->scaler, NULL, opt, m, amp->master, &out) == DT_OK;
}

#endif
