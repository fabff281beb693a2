/* epoch.c: the epoch loop and why a run stops (contract in trainer_int.h).
 *
 * Each epoch: its steps (step.c), a progress line every print_freq steps, then validation, the
 * checkpoint to resume at the next epoch, the epoch's metrics and model_best.h5 on a new best top-1,
 * in that order (end_epoch: a failure at any of them leaves a state resume completes).
 * A run stops at its last epoch, or after the step where one of these happened, on every rank at
 * once: --max-steps reached, --desired-acc reached at validation, a signal on any rank (agreed in
 * every step's collective and after every validation batch), or divergence (NaN or inf steps in a
 * row, which every rank sees the same). Stopped inside an epoch, the checkpoint is written there, so
 * that --resume continues at the very next step; stopped by a signal before or during an epoch's
 * validation, it keeps the epoch to be validated on resume; a diverged run writes none (the last one
 * is intact).
 * --checkpoint-every N also writes one every N steps. */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_int.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

/* where the loop stands, and why it stops (besides r->diverged and r->stopped_by) */
typedef struct loop_state {
    int64_t global_step;
    int64_t steps_run;          /* optimiser steps of this invocation: what --max-steps counts */
    double best_top1;           /* the best validation top-1 so far */
    int64_t best_epoch;         /* its epoch (-1: none) */
    int stop;
    int max_steps_reached, desired_acc_reached;
} loop_state;

/* The steps of one epoch, from r->progress's step when it is this epoch (resumed in its middle):
 * each step, its progress line, the stop checks, and the checkpoints written inside the epoch.
 * *sums: the epoch's metrics; *lr: the last step's learning rate. */
static int train_epoch(dt_run *r, loop_state *L, int epoch, dt_epoch_sums *sums, double *lr)
{
    const dt_train_cfg *cfg = r->cfg;
    int64_t first = epoch == r->progress.epoch ? r->progress.step : 0, per_epoch = r->steps_per_epoch;
    r->ahead_staged = 0; /* a batch staged ahead belongs to the epoch before (or is --synthetic's) */
    if (!cfg->synthetic)
        DT_TRY(dt_loader_start(r->train_loader, epoch, first * cfg->accum_steps));
    memset(sums, 0, sizeof *sums);
    if (first > 0) /* resumed inside this epoch: its metrics so far */
        *sums = r->progress.sums;
    dt_progress_clock clock;
    clock.epoch_start = dt_seconds() - sums->seconds;
    /* the last step's: resumed after the epoch's last step (stopped in its validation), no step runs
     * here and the epoch's line must carry the lr that step had, not the next one's */
    *lr = dt_schedule_lr(cfg, r->base_lr, per_epoch, epoch, first > 0 ? first - 1 : 0);
    clock.mark = dt_seconds();
    clock.mark_images = sums->images;
    dt_run_sums_to_backend(r, sums);
    for (int64_t s = first; s < per_epoch && !L->stop; s++) {
        double loss = NAN;
        *lr = dt_schedule_lr(cfg, r->base_lr, per_epoch, epoch, s);
        DT_TRY(dt_run_step(r, L->global_step, *lr, sums));
        L->stop |= r->diverged;
        if (r->have_ema && !r->diverged && s % r->ema.every == 0) { /* train.py: after the step, i % steps == 0 */
            dt_ema_update(&r->ema, &r->model, r->amp.master);
            if (epoch < cfg->warmup_epochs) /* during the warm-up the average keeps copying the model */
                r->ema.n_averaged = 0;
        }
        L->global_step++;
        L->steps_run++;
        if (cfg->max_steps && L->steps_run >= cfg->max_steps)
            L->stop = L->max_steps_reached = 1;
        if (r->stopped_by) /* agreed by the step's collective */
            L->stop = 1;
        int every = cfg->checkpoint_every && L->global_step % cfg->checkpoint_every == 0;
        int save = s + 1 < per_epoch && (L->stop || every) && !r->diverged;
        /* the loss and hits are read back only for a progress line, a checkpoint and the epoch's end */
        if (dt_metrics_due(r, s + 1) || save || s + 1 == per_epoch || r->diverged)
            DT_TRY(dt_run_sums_from_backend(r, sums, &loss));
        dt_metrics_progress(r, &clock, epoch, s + 1, L->global_step, sums, loss, *lr);
        if (r->diverged) /* every rank knows: the state holds NaN or inf, and is not saved */
            break;
        sums->seconds = dt_seconds() - clock.epoch_start;
        r->progress = (dt_progress){epoch, s + 1, L->global_step, L->best_top1, *sums, L->best_epoch};
        if (save) /* stopped inside the epoch: resume exactly here */
            DT_TRY(dt_rundir_save(r));
    }
    return DT_OK;
}

/* A complete epoch: validation (unless a signal asks to stop: time is short), the checkpoint to
 * resume at the next epoch, model_best.h5 on a new best, the epoch's metrics, --desired-acc. */
static int end_epoch(dt_run *r, loop_state *L, int epoch, const dt_epoch_sums *sums, double lr)
{
    const dt_train_cfg *cfg = r->cfg;
    int rank = r->launch.rank;
    dt_validation v = {-1, -1, -1, 0, -1, -1, -1};
    double val_seconds = dt_seconds();
    int validated = r->have_val_set && !r->stopped_by;
    if (validated)
        DT_TRY(dt_run_validate(r, epoch, 1, &v));
    validated = validated && !r->stopped_by;
    if (r->have_val_set && !validated) {
        /* a signal before or during validation: time is short. The checkpoint keeps the epoch trained
         * and not yet validated (its last step, its sums): --resume validates it and logs its line as
         * an uninterrupted run would have, so a stopped run's metrics equal an uninterrupted one's. */
        r->progress = (dt_progress){epoch, r->steps_per_epoch, L->global_step, L->best_top1, *sums, L->best_epoch};
        L->stop = 1;
        return dt_rundir_save(r);
    }
    val_seconds = dt_seconds() - val_seconds;
    int improved = validated && isfinite(v.loss) && v.top1 > L->best_top1; /* a diverged model is never the best */
    if (improved) {
        L->best_top1 = v.top1;
        L->best_epoch = epoch;
    }
    r->progress = (dt_progress){
        .epoch = epoch + 1, .global_step = L->global_step, .best_top1 = L->best_top1, .best_epoch = L->best_epoch};
    /* The records in the order that leaves, after any failure (a full disk), a state resume completes:
     * the checkpoint that says the epoch is done, its metrics line, then model_best.h5. A failed
     * checkpoint keeps the one before (resume trains to here again, bit for bit, and writes all
     * three); a failed model_best.h5 is written on resume from the checkpoint, which holds the same
     * state (dt_rundir_repair_best). Written between the two, its failure lost the epoch's metrics
     * line for good: resume started at the next epoch. */
    DT_TRY(dt_rundir_save(r));
    if (validated && cfg->desired_acc > 0 && v.top1 >= 100.0 * cfg->desired_acc) { /* top1 in percent */
        if (rank == 0)
            dt_info("validation top-1 %.2f%% reached --desired-acc %g (%.2f%%): stopping", v.top1, cfg->desired_acc,
                    100.0 * cfg->desired_acc);
        L->stop = L->desired_acc_reached = 1;
    }
    if (rank == 0)
        dt_metrics_epoch(r, epoch, sums, lr, validated ? &v : NULL,
                         validated && val_seconds > 0 ? (double)r->val_set.count / val_seconds : 0);
    if (improved && rank == 0)
        DT_TRY(dt_rundir_save_best(r));
    if (!L->stop && dt_run_agree_signal(r)) /* a signal during validation: the checkpoint is already written */
        L->stop = 1;
    return DT_OK;
}

/* rank 0: the run's last lines, in metrics.jsonl and the log */
static void say_why_it_ended(dt_run *r, const loop_state *L)
{
    const char *reason = "done";
    if (r->diverged)
        reason = "diverged";
    else if (r->stopped_by)
        reason = "signal";
    else if (L->desired_acc_reached)
        reason = "desired-acc";
    else if (L->max_steps_reached)
        reason = "max-steps";
    dt_metrics_end(r, reason);
    if (r->diverged)
        return; /* said when it happened */
    char at[96];
    dt_run_position(r, at, sizeof at);
    if (r->stopped_by)
        dt_info("stopped by signal %d at %s: checkpoint in %s; continue with --resume auto%s", r->stopped_by, at, r->dir,
                getenv("SLURM_JOB_ID") && r->stopped_by == SIGUSR1
                    ? " (at a time limit, a batch job under dtrain-srun requeues and continues by itself)"
                    : "");
    else if (L->max_steps_reached)
        dt_info("stopped after --max-steps %ld at %s: checkpoint in %s; continue with --resume auto", r->cfg->max_steps,
                at, r->dir);
    else if (r->have_val_set)
        dt_info("done: best validation top-1 %.2f%%; results in %s", L->best_top1, r->dir);
    else
        dt_info("done: results in %s", r->dir);
}

int dt_run_epochs(dt_run *r)
{
    DT_TRY(dt_run_alloc_batch(r));
    if (r->resuming && r->launch.rank == 0)
        DT_TRY(dt_rundir_repair_best(r));
    loop_state L = {.global_step = r->progress.global_step, .best_top1 = r->progress.best_top1,
                    .best_epoch = r->progress.best_epoch};
    /* DT_PROFILE=last:K: the last K of the steps --epochs and --max-steps leave to this invocation */
    int64_t end = (int64_t)r->cfg->epochs * r->steps_per_epoch;
    if (r->cfg->max_steps && L.global_step + r->cfg->max_steps < end)
        end = L.global_step + r->cfg->max_steps;
    r->prof_from = r->prof_last ? end - r->prof_last : 0;
    for (int epoch = (int)r->progress.epoch; epoch < r->cfg->epochs && !L.stop; epoch++) {
        dt_epoch_sums sums;
        double lr;
        DT_TRY(train_epoch(r, &L, epoch, &sums, &lr));
        if (r->diverged || r->progress.step < r->steps_per_epoch) /* a partial epoch: no validation, no epoch line */
            break;
        DT_TRY(end_epoch(r, &L, epoch, &sums, lr));
    }
    if (r->launch.rank == 0)
        say_why_it_ended(r, &L);
    return r->diverged ? DT_ERR_STATE : DT_OK; /* diverged: said by rank 0 */
}
