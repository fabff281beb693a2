/* checkpoint.h: a training run's state in one HDF5 file (schema "dtrain-checkpoint" version 1),
 * written by rank 0 under a temporary name, synced and renamed: a crash while writing leaves the
 * previous checkpoint intact.
 *   /model/<state_dict name>   the weights and BN buffers under torchvision's names and layouts
 *   /optimizer/momentum        SGD's momentum buffer (our flat layout), attribute steps
 *   /amp/master                O2's fp32 master weights (flat), when there are any
 *   /scaler                    the loss scaler's state (attributes)
 *   root attributes            schema, version, arch, epoch and step to resume at, global step,
 *                              the model's step counter (dropout), best top-1, the run's config
 *   /progress                  the metrics of the epoch under way (attributes; absent in older
 *                              checkpoints: zeros)
 * Loading checks the schema, the architecture and every tensor's name and shape, with one line
 * naming the file and what is wrong. */
#ifndef DT_TRAIN_CHECKPOINT_H
#define DT_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "nn/model.h"
#include "train/amp.h"
#include "train/ema.h"
#include "train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The training metrics of an epoch so far (rank 0's), kept so that an epoch resumed in its middle
 * reports what it would have reported uninterrupted. */
typedef struct dt_epoch_sums {
    double loss;          /* sum of the steps' mean losses */
    double seconds, data_seconds;
    int64_t hits1, hits5, seen, images, steps;
} dt_epoch_sums;

typedef struct dt_progress {
    int64_t epoch;        /* the epoch to run next (or the one under way) */
    int64_t step;         /* its next step */
    int64_t global_step;
    double best_top1;
    dt_epoch_sums sums;   /* of the epoch under way (zero at an epoch's start) */
    int64_t best_epoch;   /* the epoch whose validation gave best_top1 (-1: none, or not recorded) */
} dt_progress;

/* ema: the model's average (--model-ema: /model_ema), or NULL */
int dt_checkpoint_save(const char *path, const dt_model *m, const dt_optim *opt, const dt_amp *amp,
                       const dt_ema *ema, const dt_progress *pr, const char *config_json);
int dt_checkpoint_load(const char *path, dt_model *m, dt_optim *opt, dt_amp *amp, dt_ema *ema, dt_progress *pr);
/* A checkpoint opened once for a resume, its record and its state read from the one open file (so
 * it is probed once: dt_h5_probe forks a child that reads all of its metadata): f, the file
 * dt_checkpoint_find kept open, or -1 to open path (probed, read-only); then its schema and
 * architecture checked (m's). The file (the caller closes it with H5Fclose), or -1 after one line
 * (f closed). */
hid_t dt_checkpoint_open(const char *path, hid_t f, const dt_model *m);
/* dt_checkpoint_load's reads from an open checkpoint f (path names it in messages) */
int dt_checkpoint_read(hid_t f, const char *path, dt_model *m, dt_optim *opt, dt_amp *amp, dt_ema *ema,
                       dt_progress *pr);
/* Only the weights (/model) of a checkpoint, or of a weights file (schema "dtrain-weights" version 1,
 * as tools/dt-export-torchvision writes from a torchvision model or state_dict; its arch attribute is
 * optional), for --pretrained. Names and shapes are checked; DT_OK or DT_ERR_INPUT after one line. */
int dt_checkpoint_load_weights(const char *path, dt_model *m);
/* The run.json text the open checkpoint f (path) was written with (its "config" attribute; "{}" in
 * one written without) into buf, cut to n - 1 bytes; DT_OK, or DT_ERR_INPUT after one line */
int dt_checkpoint_config(hid_t f, const char *path, char *buf, size_t n);
/* The epoch attribute of a checkpoint (model_best.h5: the epoch after the best one), or -1 when path
 * is absent (nothing logged) or cannot be read (one line) */
int64_t dt_checkpoint_epoch(const char *path);
/* The newest readable checkpoint.h5 of this architecture in a run directory under results, into out; with
 * job, only in the directories of that Slurm job (names with -job<job>). DT_OK, or DT_ERR_INPUT (nothing
 * logged) when there is none. file (or NULL): the one found, kept open (probed) for dt_checkpoint_open,
 * else -1. */
int dt_checkpoint_find(const char *results, const char *arch, const char *job, char *out, size_t n, hid_t *file);

#ifdef __cplusplus
}
#endif
#endif
