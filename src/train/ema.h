/* ema.h: the model's exponential moving average, as torchvision's reference train.py keeps it
 * (--model-ema: utils.ExponentialMovingAverage, a torch.optim.swa_utils.AveragedModel over the
 * parameters and buffers): every --model-ema-steps optimiser steps (the step's index in its epoch
 * a multiple of it), avg = decay*avg + (1-decay)*value for every parameter and BN running statistic,
 * the first update copying; during the warm-up epochs (--lr-warmup-epochs) each update copies. The
 * decay is train.py's: 1 - min(1, (1 - --model-ema-decay) * world size * batch * steps / epochs).
 * num_batches_tracked is averaged as AveragedModel averages an int64 buffer: in fp32, truncated.
 *
 * The average is fp32 (the master weights' values under O2, whatever the model stores), in the
 * model's flat layouts: avg_w as the fp32 layout of the trainable parameters (dt_param.off), avg_b
 * as the buffers' elements; counts on the host. Validation with the average (dt_ema_swap) puts it
 * into storage of the model's own layout and types and swaps that in for the model's weights and
 * buffers, which are untouched. */
#ifndef DT_TRAIN_EMA_H
#define DT_TRAIN_EMA_H

#include <stdint.h>

#include "nn/model.h"

typedef struct dt_ema {
    double decay;        /* the decay the updates use (train.py's adjusted one) */
    int64_t every;       /* update when the step's index in its epoch is a multiple of this */
    int64_t n_averaged;  /* updates since the last copy (AveragedModel's n_averaged) */
    int64_t empty;       /* 1: no average yet (dt_ema_init; none read from a checkpoint, no update) */
    float *avg_w;        /* n_weights floats, the backend's memory */
    float *avg_b;        /* n_buffers floats, the backend's memory */
    int64_t *counts;     /* n_counts, host */
    void *swap_w, *swap_b; /* the model's layouts, for dt_ema_swap */
    int64_t *swap_counts;
    int swapped;
    const dt_backend *be;
} dt_ema;

/* train.py's adjusted decay: 1 - min(1, (1 - decay) * world_size * batch * every / epochs) */
double dt_ema_adjusted_decay(double decay, int world_size, int batch, int64_t every, int epochs);
/* DT_OK or DT_ERR_NOMEM (one line) */
int dt_ema_init(dt_ema *e, const dt_model *m, double decay, int64_t every);
/* one update from the model (trainable parameters from master when not NULL: fp32 in the fp32
 * layout), issued on the model's backend after the step's update; copy: a first update (n_averaged
 * 0, or during the warm-up) */
void dt_ema_update(dt_ema *e, dt_model *m, const float *master);
/* the average := the model's values now, n_averaged 0: what AveragedModel holds when it is made
 * (a copy of the model), for a run whose checkpoint or --pretrained file has no average */
void dt_ema_start(dt_ema *e, dt_model *m, const float *master);
/* the average in the model's place (its types: rounded as the model stores them), or back */
void dt_ema_swap(dt_ema *e, dt_model *m);
void dt_ema_free(dt_ema *e);

#endif
