/* trainer_int.h: one training run's state, shared by the files that make up dt_train (private to
 * src/train; the public contract is trainer.h).
 *
 *   trainer.c   dt_train: the start-up phases in order, training, the exit code and the cleanup
 *   data.c      the datasets, the normalisation, the loaders and the steps per epoch
 *   epoch.c     the epoch loop: steps, checkpoints, end-of-epoch validation, why the run stops
 *   signals.c   stop signals, and the ranks' agreement on them
 *   step.c      one optimiser step (batch in, forward, loss, backward with DDP, AMP step) and a
 *               validation pass
 *   schedule.c  the learning rate at each step
 *   rundir.c    the run directory and its lock, checkpoints written, and resuming from one
 *   metrics.c   run.json, metrics.jsonl, TensorBoard events and the progress lines
 *
 * "Every rank" functions take part in collectives and must be called by all ranks together; "rank 0"
 * ones are called on rank 0 only (or do nothing elsewhere, as each says). Functions return DT_OK or a
 * dt_status after logging why. */
#ifndef DT_TRAIN_TRAINER_INT_H
#define DT_TRAIN_TRAINER_INT_H

#include <stdint.h>
#include <stdio.h>

#include "data/loader.h"
#include "data/shard.h"
#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/model.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/ddp.h"
#include "train/ema.h"
#include "train/optim.h"
#include "train/tbevents.h"
#include "train/trainer.h"

typedef struct dt_run {
    const dt_train_cfg *cfg;
    dt_launch launch;           /* rank, size, node of this process */
    int launched;               /* dt_launch_init succeeded: dt_launch_finalize is due */
    dt_comm *comm;              /* host collectives (MPI, or NCCL's host side under PMI2 with GPUs) */
    dt_comm *device_comm;       /* --device cuda with several ranks: NCCL for DDP's device buffers, or NULL */
    int device;                 /* --device cuda: the GPU */
    int device_ready;           /* choose_device has run */
    char where[512];            /* this rank's device, for its first log line */
    int nodes;                  /* nodes the ranks run on */

    dt_dataset train_set, val_set;
    int have_train_set, have_val_set;
    dt_loader *train_loader, *val_loader;
    char dataset_name[256];     /* the data directory's name, or "synthetic" */
    float mean[4], std[4];      /* normalisation per channel */
    int channels, image_size, classes; /* the model's training input (image_size x image_size x channels) and output */
    int val_size;               /* validation's input (val_size x val_size; encoded data: --val-crop-size) */
    int64_t steps_per_epoch;    /* optimiser steps (each of accum_steps batches) */

    dt_model model;
    int have_model;
    dt_optim opt;
    dt_ema ema;                 /* --model-ema */
    int have_ema;
    dt_amp amp;
    dt_amp_props amp_defaults;  /* the opt level's own properties, for the start-up print */
    dt_ddp *ddp;
    double base_lr;             /* cfg->lr after scaling to the global batch (schedule.c) */

    float *input;               /* one batch, normalised (the backend's memory) */
    float *logits;              /* its logits (host) */
    int32_t *labels;            /* its labels (host) */
    uint8_t *synthetic;         /* --synthetic: the one random batch every step trains on (host), else NULL */
    uint8_t *pixels;            /* one batch's uint8 pixels (the backend's memory), normalised into input */
    uint8_t *staging;           /* the host buffer they are uploaded from (the backend's host_alloc) */
    dt_event *upload_event;     /* after the last upload from staging */
    int graphs;                 /* the step runs as graphs (step.c; dt_run_graphs_wanted) */
    dt_graph *graph[3];         /* its graphs, captured at the second full batch */
    int graph_warm;             /* full batches issued so far before the capture (one: warm-up) */
    int ahead_staged;           /* with graphs: the next batch is in the host buffers (step.c, stage_ahead) */
    int ahead, ahead_n;         /* ... what staging it returned, its images */
    int64_t prof_last;          /* DT_PROFILE=last[:K]: K (the run's last K steps profiled); 0: every step */
    int64_t prof_from;          /* the first step profiled (a global step, from 0; dt_run_epochs) */

    char dir[4096];             /* results/<run id> (rank 0 writes) */
    int lock_fd;                /* rank 0: the run directory's lock (rundir.c), or -1 */
    char resume_path[4200];     /* the checkpoint to resume from (rank 0) */
    int32_t resuming;           /* from resume_path (--resume job may find none) */
    dt_progress progress;       /* where training stands */
    char started[32];           /* when this invocation started (UTC, ISO 8601) */

    char *run_json;             /* run.json's text, kept in every checkpoint (rank 0) */
    FILE *metrics;              /* metrics.jsonl (rank 0), or NULL */
    dt_tb *tb;                  /* TensorBoard events (rank 0), or NULL */
    int metrics_lost;           /* a write to metrics.jsonl failed: the run goes on and exits 1 */

    int64_t nonfinite_steps;    /* steps skipped in a row for NaN or inf in the loss or the gradients */
    int diverged;               /* stopped on non-finite steps (every rank agreed): exit 1, no checkpoint */
    int stopped_by;             /* the signal every rank agreed to stop on, or 0 */
} dt_run;

/* One validation pass (every image counted once over the ranks). */
typedef struct dt_validation {
    double top1, top5;          /* percent; -1 when a signal ended the pass (not validated) */
    double loss;                /* the mean criterion, with the run's label smoothing */
    double batch_seconds;       /* mean seconds per batch of a rank */
    double ema_top1, ema_top5, ema_loss; /* the same with the model's average (--model-ema); -1: none */
} dt_validation;

/* data.c (every rank, nothing written; DT_ERR_INPUT after one line for bad data) */
/* The training and validation sets (none with --synthetic), checked as dtpack verify checks them,
 * and the model's input (channels, image_size) and classes they imply. */
int dt_run_open_datasets(dt_run *r);
/* After the model is built: the normalisation (r->mean, r->std), the loaders, and steps_per_epoch
 * (DT_ERR_INPUT when the batch leaves none). */
int dt_run_load_data(dt_run *r);
/* The batch sizes a loader gives each rank per epoch: images split over world ranks (the sampler
 * pads each rank to ceil(images / world), so every rank gets the same sizes), in batches of batch.
 * Writes the full batch (when a rank has one) then the last, smaller batch (unless drop_last, or
 * batch divides) to out; returns how many (0..2). */
int dt_batch_sizes(int64_t images, int world, int batch, int drop_last, int out[2]);
/* After dt_run_open_datasets: every batch size this rank's model will run, for planning: the
 * batch, then those of the training and validation loaders (repeats included). Returns how many
 * (1..5) written to out. */
int dt_run_batch_sizes(const dt_run *r, int out[5]);

/* step.c */
/* The batch buffers (input, logits, labels) and, with --synthetic, the random batch (every rank).
 * DT_OK, or DT_ERR_NOMEM after one line. A second call does nothing. */
int dt_run_alloc_batch(dt_run *r);
/* One optimiser step at global step `step` with learning rate lr (every rank). Adds the step's
 * images, batches and data time to *sums; the loss and hits add up in the model's scalars, read
 * with dt_run_sums_from_backend. A step skipped for NaN or inf counts in r->nonfinite_steps, and sets
 * r->diverged when the run cannot recover (said once, by rank 0); a stop signal the ranks agreed on
 * in the step's collective sets r->stopped_by. */
int dt_run_step(dt_run *r, int64_t step, double lr, dt_epoch_sums *sums);
/* 1 when the run's steps are to be graphs: --graph (or --device cuda without --no-graph), a backend
 * with graphs, no gradient accumulation, no SyncBN (step.c, "a step as graphs") */
int dt_run_graphs_wanted(const dt_run *r);
void dt_run_graphs_free(dt_run *r);
/* The epoch's loss and hits so far (*sums: zero, or a resumed epoch's) into the model's scalars,
 * where the steps add to them in order (so that a resumed epoch sums exactly as an uninterrupted
 * one); dt_run_sums_from_backend copies them back into *sums, *loss (may be NULL) the last batch's mean
 * loss. Reads and writes of the backend's memory: at an epoch's start, progress lines, checkpoints
 * and an epoch's end only. */
void dt_run_sums_to_backend(dt_run *r, const dt_epoch_sums *sums);
int dt_run_sums_from_backend(dt_run *r, dt_epoch_sums *sums, double *loss);
/* Validation of the model as rank 0 holds it (every rank). With interruptible, the ranks agree after
 * every batch on a stop signal and one ends the pass at once: *v is then -1s (not validated). */
int dt_run_validate(dt_run *r, int epoch, int interruptible, dt_validation *v);

/* signals.c */
/* SIGTERM, SIGUSR1, SIGINT and SIGHUP ask the run to stop after the current step; SIGPIPE is
 * ignored (a closed stdout fails writes instead). */
void dt_run_catch_signals(void);
/* Any rank signalled (every rank, after every step, so that all stop after the same one)? Sets
 * r->stopped_by; rank 0 says it once. */
int dt_run_agree_signal(dt_run *r);
/* this process's stop signal, or 0 (what a step uploads for its collective to agree on) */
int32_t dt_run_local_signal(void);
/* sig, agreed by the ranks, asks to stop: sets r->stopped_by (rank 0 says it once); returns sig != 0 */
int dt_run_note_signal(dt_run *r, int32_t sig);

/* epoch.c */
/* Training from r->progress to the last epoch, or until a stop (every rank): see epoch.c. */
int dt_run_epochs(dt_run *r);

/* schedule.c (pure) */
/* cfg->lr scaled to the global batch (batch x ranks x accumulation steps, per 256 images) unless
 * --no-lr-scaling. */
double dt_schedule_base_lr(const dt_train_cfg *cfg, int world);
/* Not pure, it logs: one warning line for each schedule that is legal but almost surely not meant:
 * --lr-min above base_lr (the cosine rises), a warm-up as long as the run, a constant warm-up at a
 * factor of 0 (the lr is 0 throughout it). Rank 0 calls it at the start of training, --print-lr
 * before its table. */
void dt_schedule_warn(const dt_train_cfg *cfg, double base_lr);
/* The learning rate at step step_in_epoch of epoch: the warm-up, then the schedule (enum
 * dt_lr_schedule; schedule.c says how each is computed). */
double dt_schedule_lr(const dt_train_cfg *cfg, double base_lr, int64_t steps_per_epoch, int epoch,
                      int64_t step_in_epoch);

/* "step G (epoch E [k/N])": where r->progress stands, in every message's terms (a step is the run's
 * optimiser step count, as metrics.jsonl, TensorBoard and dtreport give it; [k/N] the place in the
 * epoch, as the progress lines give it). Into buf, returned. In rundir.c. */
const char *dt_run_position(const dt_run *r, char *buf, size_t n);

/* rundir.c */
/* Rank 0 with --resume: the checkpoint it names (or the newest, for auto and job), its run directory
 * locked, the state loaded into r and checked. A --resume job without a checkpoint leaves
 * r->resuming 0 (a new run). DT_OK, or DT_ERR_INPUT after one line. */
int dt_rundir_resume(dt_run *r);
/* After rank 0 resumed (every rank): what DDP's broadcast of the weights does not carry (momentum,
 * master weights, BN counts, scaler, progress) goes to the other ranks. */
int dt_rundir_share_resumed(dt_run *r);
/* Rank 0, once every input check has passed: the run directory (new and locked, or the resumed one
 * cleared of what a writer killed mid-checkpoint left) and its logs/. DT_OK or DT_ERR_INPUT. */
int dt_rundir_prepare(dt_run *r);
/* Rank 0, a new run whose start failed (a full disk at run.json, say): the files the start wrote
 * (run.json, metrics.jsonl, the events file, logs/rank-*.log, .lock) and the directory removed, so
 * that no empty run is left for dtreport and --resume auto; anything else in it stays. */
void dt_rundir_discard(dt_run *r);
/* checkpoint.h5 in the run directory, atomically (rank 0; DT_OK elsewhere). A state holding NaN or
 * inf is not written: DT_ERR_STATE, and the run's end line says "diverged". */
int dt_rundir_save(dt_run *r);
/* model_best.h5 beside it (rank 0). */
int dt_rundir_save_best(dt_run *r);
/* Rank 0, resumed: model_best.h5 written now when the checkpoint is the state of a new best at its
 * epoch's end whose model_best.h5 was not written (a full disk after the checkpoint: epoch.c writes
 * the checkpoint, the metrics line, then model_best.h5). DT_OK, or the write's failure. */
int dt_rundir_repair_best(dt_run *r);

/* metrics.c (rank 0) */
/* The start-up print (AMP properties, the run in one line), run.json (written once, whole and
 * atomically: the resolved configuration with what the command line said, "recipe" and "options";
 * its text kept in r->run_json for the checkpoints), metrics.jsonl (appended to when resuming) and
 * a new TensorBoard events file. DT_OK or DT_ERR_SYS / DT_ERR_NOMEM after one line. */
int dt_metrics_open(dt_run *r);
/* A capture failed at step `step` (counted as metrics.jsonl counts) and the run's graphs are off:
 * run.json and r->run_json say so, "graphs" false and "graphs_off_at_step" the step, rewritten
 * whole (rank 0; elsewhere, or before run.json, nothing). DT_OK, or the write's error after one line. */
int dt_metrics_graphs_off(dt_run *r, int64_t step);
void dt_metrics_close(dt_run *r);
/* the progress lines' clock, per epoch */
typedef struct dt_progress_clock {
    double epoch_start;         /* dt_seconds() when the epoch began (less the seconds before a resume) */
    double mark;                /* when the last print interval began */
    int64_t mark_images;        /* the epoch's images then */
} dt_progress_clock;
/* After step step_in_epoch (counted from 1) of epoch, global step `step` next: every print_freq
 * steps and at the epoch's end, the progress line and its metrics.jsonl line (rank 0; elsewhere
 * nothing). */
void dt_metrics_progress(dt_run *r, dt_progress_clock *clock, int epoch, int64_t step_in_epoch, int64_t step,
                         const dt_epoch_sums *sums, double loss, double lr);
/* 1 when step step_in_epoch (1-based) of an epoch gets a progress line on this rank (rank 0, every
 * print_freq steps and the epoch's last) */
int dt_metrics_due(const dt_run *r, int64_t step_in_epoch);
/* An epoch's scalars into TensorBoard and metrics.jsonl (v NULL when it was not validated;
 * val_images_per_s its throughput). */
void dt_metrics_epoch(dt_run *r, int epoch, const dt_epoch_sums *sums, double lr, const dt_validation *v,
                      double val_images_per_s);
/* The run's last metrics.jsonl line, saying why it ended: done, max-steps, desired-acc, signal or
 * diverged (dtreport tells a run that stopped from one still going, or killed). */
void dt_metrics_end(dt_run *r, const char *reason);

#endif
