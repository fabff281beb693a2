/* amp.h: mixed precision as Apex's opt levels defined it, and the loss scaler.
 *
 *   level  weights   per-op casts            BatchNorm   fp32 master weights  loss scale
 *   O0     fp32      no                      fp32        no                   1.0 (static)
 *   O1     fp32      conv/linear reduced,    fp32        no (weights fp32)    dynamic
 *                    softmax/loss/norms fp32
 *   O2     reduced   no                      fp32        yes                  dynamic
 *   O3     reduced   no                      reduced     no                   1.0 (static)
 * "Reduced" is fp16, or bf16 with --precision bf16 (which needs no loss scaling: its default is a
 * static 1.0). Overrides (keep_batchnorm_fp32, master_weights, loss_scale) apply as Apex applied
 * them. Gradients are all-reduced in the reduced type under O2/O3 (as Apex DDP did), in fp32
 * under O0/O1, or always in fp32 when asked.
 *
 * The dynamic scaler: start 2^16; a step whose gradients hold an inf or NaN on any rank is
 * skipped on every rank (weights and momentum untouched) and the scale halves (not below the
 * floor); after growth_interval clean steps in a row it doubles (not above 2^24). Rank 0 logs
 * each overflow as Apex did, with the step. Its state is saved with checkpoints. */
#ifndef DT_TRAIN_AMP_H
#define DT_TRAIN_AMP_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

#include "libdt/comm.h"
#include "nn/model.h"
#include "train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_amp_props {
    int opt_level;               /* 0..3 */
    dt_dtype reduced;            /* DT_FLOAT16 or DT_BFLOAT16 */
    dt_dtype model_type;         /* the weights' storage: DT_FLOAT32, or reduced under O2/O3 */
    int cast_ops;                /* O1: conv and linear compute in the reduced type */
    int keep_batchnorm_fp32;
    int master_weights;
    int dynamic_loss_scale;
    double loss_scale;           /* the static scale, or the dynamic one's start */
    dt_dtype allreduce_type;     /* gradients on the wire */
} dt_amp_props;

/* What the user said; -1 (or NULL text) for "not given". */
typedef struct dt_amp_overrides {
    int keep_batchnorm_fp32;     /* -1, 0, 1 */
    int master_weights;          /* -1, 0, 1 */
    const char *loss_scale;      /* NULL, "dynamic" or a number > 0 */
    int bf16;                    /* 0 fp16, 1 bf16 */
    int allreduce_fp32;          /* 1: gradients all-reduced in fp32 whatever the level */
} dt_amp_overrides;

/* Apex's defaults for the level, then the overrides; one line (naming the flag) for a combination
 * Apex refused: keep_batchnorm_fp32 under O0/O1, master_weights false under O2 or true under O0/O1,
 * a loss scale that is not "dynamic" or a positive number. */
int dt_amp_resolve(int opt_level, const dt_amp_overrides *o, dt_amp_props *p);
/* The resolved properties, as Apex printed them at start (rank 0). */
void dt_amp_print(const dt_amp_props *defaults, const dt_amp_props *p, FILE *f);

typedef struct dt_scaler {
    int dynamic;
    double scale;
    int64_t clean_steps;         /* since the last overflow or growth */
    int64_t growth_interval;     /* 2000 */
    double growth, backoff;      /* 2, 0.5 */
    double max_scale, min_scale; /* 2^24; the floor (0: none) */
    int64_t overflows;           /* steps skipped so far */
    int64_t in_a_row;            /* steps skipped in a row, up to the last one */
    int64_t max_nonfinite;       /* a static scale: so many skipped steps in a row mean divergence */
} dt_scaler;

/* The host's copy of the scaler whose state lives in a model's scalars (nn/scalars.h), where the
 * update runs (dt_scalars_step_end); dt_amp_step keeps the copy current after every step. */
void dt_scaler_init(dt_scaler *s, const dt_amp_props *p);
/* The update of one step on the host copy (dt_scalars_step_end: one definition): returns 1 when the
 * step is skipped (overflow). Rank 0 (rank == 0) logs an overflow of the dynamic scale with the step. */
int dt_scaler_update(dt_scaler *s, int overflow, int64_t step, int rank);
/* The scaler's state and the optimiser's step count (sgd_steps) into the model's scalars (mem_put:
 * setup and resume; s NULL leaves the scaler's part); divergence cleared. DT_OK or DT_ERR_NOMEM. */
int dt_amp_put_state(const dt_scaler *s, int64_t sgd_steps, dt_model *m);
/* Mixed precision on a model: its storage types (dt_model_set_amp), fp32 master weights under O2
 * (a copy of the rounded weights), the scaler, and the loss scale the model seeds backward with. */
typedef struct dt_amp {
    dt_amp_props props;
    dt_scaler scaler;
    float *master;               /* O2: n_weights fp32 master weights (the backend's memory), else NULL */
    const dt_backend *be;        /* whose memory master is */
} dt_amp;
/* Call before dt_model_plan. DT_OK or DT_ERR_NOMEM. */
int dt_amp_attach(dt_amp *a, dt_model *m, const dt_amp_props *p);
/* The master weights (when there are any) become a copy of the model's weights again: after the
 * weights were replaced (--pretrained, read by rank 0 and broadcast by DDP). */
void dt_amp_master_from_model(dt_amp *a, dt_model *m);
void dt_amp_free(dt_amp *a);

/* The end of a training step under a scaler, issued to the backend without reading anything back
 * until its last line: the gradients (of the loss times the scale) are checked (unscale_check sets
 * the overflow flag in the model's scalars, where xent set it for a loss that is not finite); the
 * ranks agree on it (comm may be NULL: one process) in the step's one collective, which also
 * carries the stop signal each rank uploaded with dt_model_step_begin; then the optimiser steps
 * (on the master weights when there are any, then rounded into the model) unless the step is
 * skipped, which touches nothing (weights, momentum, step count); the scaler updates on the
 * backend. Then the step's out part is downloaded (the one wait): *out points at the host copy
 * (skipped, diverged, the agreed signal, the scaler's state), s and opt->steps follow it, and rank
 * 0 logs an overflow of the dynamic scale. comm must be able to reduce the backend's memory (a
 * device's communicator for a device backend). */
int dt_amp_step(dt_scaler *s, dt_comm *comm, dt_optim *opt, dt_model *m, float *master, const dt_scalars **out);
/* dt_amp_step in its four parts, as train/step.c runs every step (issued or captured as graphs):
 * the ones that only issue ops (check, update: a capture keeps them) apart from the collective
 * (agree) and the wait (finish, which returns *out's pointer). */
void dt_amp_check(dt_model *m);
int dt_amp_agree(dt_comm *comm, dt_model *m);
void dt_amp_update(dt_optim *opt, dt_model *m, float *master);
const dt_scalars *dt_amp_finish(dt_scaler *s, dt_comm *comm, dt_optim *opt, dt_model *m);
/* Checkpoint state: attributes of group g. Load names the file in its one-line errors. */
int dt_scaler_save(const dt_scaler *s, hid_t g);
int dt_scaler_load(dt_scaler *s, hid_t g, const char *source);

#ifdef __cplusplus
}
#endif
#endif
