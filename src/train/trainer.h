/* trainer.h: dtrain's training run: data, model, mixed precision and data parallelism put together.
 * The command line (src/bin/dtrain.c) fills a dt_train_cfg; dt_train runs it on every rank. */
#ifndef DT_TRAIN_TRAINER_H
#define DT_TRAIN_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "train/cfg.h" /* dt_train_cfg */

#ifdef __cplusplus
extern "C" {
#endif

/* --print-lr: the learning rate at every step of every epoch (start_epoch to epochs) for
 * steps_per_epoch steps per epoch on one rank, one line each ("epoch step lr"), after a comment line */
void dt_train_print_lr(const dt_train_cfg *cfg, int64_t steps_per_epoch, FILE *out);
/* the warm-up's method (enum dt_lr_warmup) and first factor, the schedule's defaults filled in */
int dt_schedule_warmup_method(const dt_train_cfg *cfg);
double dt_schedule_warmup_decay(const dt_train_cfg *cfg);

/* Exit codes of dtrain. SIGTERM or SIGUSR1 (Slurm's --signal before a time limit, preemption) on
 * any rank: every rank finishes its step, rank 0 writes the checkpoint, all exit 3 (run again with
 * --resume auto). SIGINT: the same, exit 130. */
#define DT_EXIT_RESUMABLE 3
#define DT_EXIT_INTERRUPTED 130

/* Runs training (rank, size and communicator from the launch). Returns the process exit code:
 * 0 done, 1 a failure at run time (one line), 2 bad input found at start (one line, nothing
 * written), DT_EXIT_RESUMABLE or DT_EXIT_INTERRUPTED after a signal (checkpoint written). */
int dt_train(const dt_train_cfg *cfg);

struct dt_launch;
/* The launch against what the command line says of it (--world-size): DT_OK, or DT_ERR_INPUT after
 * one line (rank 0's; every rank has the same size) */
int dt_train_check_launch(const dt_train_cfg *cfg, const struct dt_launch *l);

#ifdef __cplusplus
}
#endif
#endif
