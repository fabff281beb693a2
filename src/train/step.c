/* step.c: one optimiser step, and a validation pass (contract in trainer_int.h).
 *
 * A step is PyTorch's training loop body with Apex's AMP and DDP, accum_steps times over:
 *
 *     for x, y in loader:                        take_batch, next_batch_upload: uint8 batch and labels
 *                                                uploaded, normalised
 *         out = model(x)                         dt_model_forward
 *         loss = criterion(out, y)               dt_model_loss_async (cross-entropy, label smoothing)
 *         scaler.scale(loss).backward()          dt_ddp_backward_issue, then dt_ddp_reduce after the
 *                                                last: gradients all-reduced in buckets
 *     scaler.step(optimizer); scaler.update()    dt_amp_check, _agree, _update, _finish: unscale,
 *                                                skip on NaN/inf, SGD
 *
 * with the step's numbers on the backend (nn/scalars.h): its lr uploaded at its start, the loss and
 * top-1/top-5 hits summed there by the loss (the host reads the epoch's sums only when it prints or
 * saves), and one download at its end (the agreed overflow and stop signal, the scaler,
 * divergence). The loop is written once (run_step, micro_batch, step_segments), whether the step is
 * issued or launched as graphs: a graph is the same calls, captured (run_graph). A validation pass
 * is the forward half over the validation loader, every image counted once over the ranks. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_int.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/rng.h"

int dt_run_alloc_batch(dt_run *r)
{
    if (r->input)
        return DT_OK;
    const dt_train_cfg *cfg = r->cfg;
    const dt_backend *be = r->model.be;
    int side = r->image_size > r->val_size ? r->image_size : r->val_size; /* the buffers serve both */
    size_t image = (size_t)side * side * r->channels, n = (size_t)cfg->batch;
    r->input = be->mem_alloc(n * image * sizeof(float));
    r->pixels = be->mem_alloc(n * image);
    r->staging = be->host_alloc(n * image);
    r->upload_event = be->event_create();
    r->logits = malloc(n * (size_t)r->classes * sizeof(float));
    r->labels = malloc(n * sizeof(int32_t));
    if (cfg->synthetic)
        r->synthetic = malloc(n * image);
    if (!r->input || !r->pixels || !r->staging || !r->upload_event || !r->logits || !r->labels ||
        (cfg->synthetic && !r->synthetic)) {
        dt_error("out of memory for a batch of %zu images", n);
        return DT_ERR_NOMEM;
    }
    if (cfg->synthetic) { /* random pixels and labels, this rank's own */
        dt_rng g;
        dt_rng_seed(&g, cfg->seed, (uint64_t)r->launch.rank);
        for (size_t i = 0; i < n * image; i++)
            r->synthetic[i] = (uint8_t)dt_rng_below(&g, 256);
        for (size_t i = 0; i < n; i++)
            r->labels[i] = (int32_t)dt_rng_below(&g, (uint64_t)r->classes);
    }
    return DT_OK;
}

/* values uint8 pixels (host, channels last) into the staging buffer, once the last upload from it is
 * done */
static void stage_pixels(dt_run *r, const uint8_t *pixels, int64_t values)
{
    r->model.be->event_sync(r->upload_event);
    memcpy(r->staging, pixels, (size_t)values);
}

/* and from there into the model's input (issued only): uploaded on the copy queue, normalised on the
 * compute queue after it */
static void upload_pixels(dt_run *r, int64_t values)
{
    const dt_backend *be = r->model.be;
    dt_model_prof_mark(&r->model, DT_PROF_UPLOAD);
    be->upload(r->pixels, r->staging, (size_t)values, DT_QUEUE_COPY);
    be->event_record(r->upload_event, DT_QUEUE_COPY);
    be->event_wait(DT_QUEUE_COMPUTE, r->upload_event);
    dt_model_prof_mark(&r->model, DT_PROF_NORMALIZE);
    be->normalize_u8(values, r->channels, r->pixels, r->mean, r->std, DT_FLOAT32, r->input);
}

/* The next training batch into the host buffers, *n images: its labels into the model's, its uint8
 * pixels (channels last) into the staging buffer, each once the last upload from it is done. 1, 0
 * when this rank's loader has no more this epoch, or an error (a label out of range). With
 * --synthetic, the same random batch every time. */
static int next_batch_host(dt_run *r, dt_epoch_sums *sums, int *n)
{
    double t = dt_seconds();
    const uint8_t *pixels = r->synthetic;
    const int32_t *labels = r->labels;
    const dt_mix *mix = NULL;
    *n = r->cfg->batch;
    if (!r->cfg->synthetic) {
        const dt_batch *b;
        int got = dt_loader_next(r->train_loader, &b);
        if (got <= 0)
            return got;
        pixels = b->x;
        labels = b->y;
        *n = b->n;
        mix = &b->mix;
    }
    DT_TRY(dt_model_write_labels(&r->model, labels, *n));
    if (mix) /* mixup or cutmix: the targets as the loader mixed the images */
        dt_model_write_mix(&r->model, mix->kind != DT_MIX_NONE, (float)mix->lambda, (float)(1.0 - mix->lambda));
    stage_pixels(r, pixels, (int64_t)*n * r->image_size * r->image_size * r->channels);
    sums->data_seconds += dt_seconds() - t;
    return 1;
}

/* and from the host buffers into the model's labels and input (issued only) */
static void next_batch_upload(dt_run *r, int n)
{
    dt_model_labels_upload(&r->model, n);
    upload_pixels(r, (int64_t)n * r->image_size * r->image_size * r->channels);
}

/* The step's end as the ranks agreed it (out: the step's out scalars): the stop signal, and for a
 * skipped step (its loss or gradients held a NaN or an inf on some rank) whether the run has
 * diverged: at a static loss scale, after --max-nonfinite such steps in a row; under the dynamic
 * scaler, which halves the scale at each of them, when one arrives with the scale already at its
 * floor (its min_scale, or 2^-24): no smaller scale can help then (both decided on the backend,
 * nn/scalars.h). Rank 0 names each skipped step of a static scale (the dynamic scaler names its
 * own). */
static void step_outcome(dt_run *r, const dt_scalars *out)
{
    const dt_scaler *s = &r->amp.scaler;
    dt_run_note_signal(r, out->agree[DT_AGREE_SIGNAL]);
    r->nonfinite_steps = out->in_a_row;
    if (!out->skipped)
        return;
    if (out->diverged)
        r->diverged = 1;
    if (r->launch.rank != 0)
        return;
    if (!s->dynamic && !out->diverged)
        dt_warn("step %lld: NaN or inf in the loss or the gradients: step skipped, %lld in a row "
                "(--max-nonfinite %ld stops the run)", (long long)out->step + 1, (long long)out->in_a_row,
                r->cfg->max_nonfinite);
    if (out->diverged)
        dt_error("step %lld: the run has diverged: %lld steps in a row with NaN or inf in the loss or the gradients"
                 "%s; stopping without writing a checkpoint (the last one written is intact); a smaller --lr or a "
                 "warm-up usually helps", (long long)out->step + 1, (long long)out->in_a_row,
                 s->dynamic ? ", the last at the loss scale's floor" : "");
}

void dt_run_sums_to_backend(dt_run *r, const dt_epoch_sums *sums)
{
    dt_scalars b = {.loss = NAN, .loss_sum = sums->loss, .hits1 = sums->hits1, .hits5 = sums->hits5, .rows = sums->seen};
    dt_model_put_metrics(&r->model, &b);
}

int dt_run_sums_from_backend(dt_run *r, dt_epoch_sums *sums, double *loss)
{
    dt_scalars b;
    DT_TRY(dt_model_get_scalars(&r->model, &b));
    sums->loss = b.loss_sum;
    sums->hits1 = b.hits1;
    sums->hits5 = b.hits5;
    sums->seen = b.rows;
    if (loss)
        *loss = b.loss;
    return DT_OK;
}

/* --- the step, issued or as graphs (--graph: the default on CUDA; doc/design.md, "CUDA v2") -----------
 * Every step is the same segments, written once; a run without graphs issues them (the micro-batches
 * of gradient accumulation before the last as segment A alone), one with graphs captures them once,
 * at the second full batch of the run, and launches them at every full batch after it (the first is
 * issued: what a library does at its first call, CUDA's lazy loading of a kernel, cuDNN's and
 * cuBLAS's first-use set-up, happens outside the graph):
 *   A  the uploads (in scalars, labels, pixels), normalisation, forward, loss and backward, with each
 *      DDP bucket's event (and its copies into the device wire) at its point;
 *   B  the device wire's averages back into the gradients, the loss scaler's check;
 *   C  the optimiser, the scaler's update and the out scalars' download.
 * Between them, as issued, the step's collectives: DDP's all-reduces (dt_ddp_reduce: each bucket
 * after its event, which every launch of A records at its point, so they overlap the rest of A's
 * backward) and the ranks' agreement (dt_amp_agree); every collective keeps its deadline, which a
 * collective captured inside a graph could not. One rank alone has no collective: one graph holds A,
 * B and C. The host part stays outside: the loader's batch into the host buffers, the lr and the
 * signal into the model's, the wait at the end; the next batch's part is done while the device runs
 * this step's forward (stage_ahead), so the host's copy into the pinned staging buffer and the
 * loader's hand-over cost the device nothing. A step that cannot be captured runs as issued: a
 * short batch (an epoch's last), and a run with gradient accumulation or SyncBN (collectives inside
 * forward and backward) has no graphs at all (dt_run_graphs_wanted). Dropout reads its step from
 * the scalars, so its masks change at every launch. A capture that fails (the backend's line
 * naming what it could not hold: an allocation, a free, a host wait, a cuDNN search; then one
 * warning naming the step) turns graphs off for the run: nothing of the capture ran, so the
 * segment is issued (run_graph puts back what the capture counted on the host), and the rest of
 * the run as without --graph, which it equals bit for bit (tests/train/graph_fallback.sh). */

enum { SEG_A = 1, SEG_B = 2, SEG_C = 4 };

/* DT_PLANT_CAPTURE_FAULT (a test's, tests/train/graph_fallback.sh): inside the run's first capture,
 * after segment A's forward, one call that no capture can hold, made through the backend as a layer
 * would make it: "alloc", an allocation of 4 KiB (freed after the capture), or "hostwait", a host
 * wait on the model's io_event (recorded by the step's upload inside the capture). The capture must
 * then fail with that call as its reason and the step run issued. -1: not read yet, 0: none */
enum { PLANT_NONE, PLANT_ALLOC, PLANT_HOSTWAIT };
static int plant = -1;
static void *planted; /* the planted allocation, freed after the capture */

static int plant_fault(dt_run *r)
{
    if (plant < 0) {
        const char *e = getenv("DT_PLANT_CAPTURE_FAULT");
        plant = !e || !*e                  ? PLANT_NONE
                : !strcmp(e, "alloc")    ? PLANT_ALLOC
                : !strcmp(e, "hostwait") ? PLANT_HOSTWAIT
                                         : -2;
        if (plant == -2) {
            dt_error("DT_PLANT_CAPTURE_FAULT=%s: alloc or hostwait", e);
            plant = PLANT_NONE;
            return DT_ERR_INPUT;
        }
    }
    if (plant == PLANT_ALLOC && !(planted = r->model.be->mem_alloc(4096)))
        return DT_ERR_NOMEM;
    if (plant == PLANT_HOSTWAIT)
        r->model.be->event_sync(r->model.io_event);
    plant = PLANT_NONE; /* once */
    return DT_OK;
}

/* Micro-batch micro of the step (0 to accum_steps - 1) on the n images in the host buffers: the
 * step's in scalars with the first, then uploads, forward, loss and backward, issued; capture:
 * while capturing (DDP then holds its buckets until dt_ddp_reduce). The one spelling of a
 * micro-batch's work, issued or captured: segment A of a step. */
static int micro_batch(dt_run *r, int micro, int n, int capture)
{
    const int accum = r->cfg->accum_steps;
    if (micro == 0) /* the step's lr, number and stop signal */
        dt_model_step_upload(&r->model);
    next_batch_upload(r, n);
    DT_TRY(dt_model_forward(&r->model, r->input, n)); /* out = model(x) */
    if (capture && plant)
        DT_TRY(plant_fault(r));
    DT_TRY(dt_model_loss_async(&r->model, n, (float)r->cfg->label_smoothing)); /* loss = criterion(out, y) */
    /* scaler.scale(loss).backward(): accumulated after the first; the last's buckets are all-reduced */
    return dt_ddp_backward_issue(r->ddp, n, micro > 0, micro == accum - 1, capture);
}

/* segment(s) segs of a step, issued: A, micro-batch micro on n images; B and C, the step's end
 * around the ranks' agreement. capture: while capturing. */
static int issue_segments(dt_run *r, unsigned segs, int micro, int n, int capture)
{
    if (segs & SEG_A)
        DT_TRY(micro_batch(r, micro, n, capture));
    if (segs & SEG_B) {
        dt_ddp_unpack(r->ddp);
        dt_amp_check(&r->model);
    }
    if (segs & SEG_C)
        dt_amp_update(&r->opt, &r->model, r->amp.master);
    return DT_OK;
}

/* the graph of segments segs (slot k): captured the first time, then launched; *failed: the capture
 * failed (one line) and nothing of it ran. Its segment A is the step's one micro-batch (a run with
 * graphs has no accumulation). A capture issues the segments' work once, so the host
 * counts what forward and backward count (BN's batches, the model's step) as it goes; a failed one
 * puts them back as they were, so that the step issued again counts them once. */
static int run_graph(dt_run *r, int k, unsigned segs, int n, int *failed)
{
    const dt_backend *be = r->model.be;
    dt_model *m = &r->model;
    *failed = 0;
    if (r->graph[k]) {
        be->graph_launch(r->graph[k]);
        if (segs & SEG_A) /* what forward and backward count on the host (BN's batches, the model's step) */
            dt_model_host_step(m);
        return DT_OK;
    }
    const uint64_t step = m->step;
    int64_t *counts = malloc((size_t)(m->n_counts ? m->n_counts : 1) * sizeof *counts);
    if (!counts)
        return DT_ERR_NOMEM;
    if (m->n_counts)
        memcpy(counts, m->counts, (size_t)m->n_counts * sizeof *counts);
    if (be->graph_begin() != DT_OK) {
        free(counts);
        *failed = 1;
        return DT_OK;
    }
    int rc = issue_segments(r, segs, 0, n, 1);
    dt_graph *g = be->graph_end();
    if (planted) { /* DT_PLANT_CAPTURE_FAULT=alloc's, now that nothing captures */
        be->mem_free(planted);
        planted = NULL;
    }
    if (rc == DT_OK && !g) {
        m->step = step;
        if (m->n_counts)
            memcpy(m->counts, counts, (size_t)m->n_counts * sizeof *counts);
    }
    free(counts);
    if (rc != DT_OK) {
        be->graph_destroy(g);
        return rc;
    }
    if (!g) {
        *failed = 1;
        return DT_OK;
    }
    r->graph[k] = g;
    if (k == 0 && r->launch.rank == 0) /* what tests/gpu/summary.py looks for */
        dt_info("step %lld: the training step captured as graphs; every full batch from here launches them",
                (long long)r->comm->step + 1); /* the step being run: metrics.jsonl's count after it */
    be->graph_launch(g);
    return DT_OK;
}

int dt_run_graphs_wanted(const dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    const int asked = cfg->graph < 0 ? cfg->cuda : cfg->graph;
    return asked && r->model.be->graph_begin && cfg->accum_steps == 1 && !cfg->sync_bn;
}

void dt_run_graphs_free(dt_run *r)
{
    for (int k = 0; k < 3; k++)
        if (r->graph[k]) {
            r->model.be->graph_destroy(r->graph[k]);
            r->graph[k] = NULL;
        }
}

/* segments segs (graph slot k; A: micro-batch micro) on n images: launched as a graph when graphs is
 * set and the run has them, else issued */
static int segment(dt_run *r, int k, unsigned segs, int micro, int n, int graphs)
{
    if (graphs && r->graphs) {
        int failed;
        int rc = run_graph(r, k, segs, n, &failed);
        if (!failed)
            return rc;
        dt_warn("step %lld: the training step could not be captured as a graph (the line above says why): this "
                "step and the rest of the run without graphs", (long long)r->comm->step + 1);
        r->graphs = 0;
        dt_run_graphs_free(r);
        DT_TRY(dt_metrics_graphs_off(r, r->comm->step + 1)); /* run.json says what the steps ran as */
    }
    return issue_segments(r, segs, micro, n, 0);
}

/* The next batch's host part (the loader's batch into the host buffers: labels, pixels into the
 * staging buffer), done while the device runs this step's forward: each buffer is written once the
 * step's upload from it is done, early in segment A. Kept in r->ahead for the next step: what
 * next_batch_host returned (1 with ahead_n images, 0 the epoch's data is done, or its error, which
 * the next step returns as it would have). train_epoch drops it at an epoch's start. */
static void stage_ahead(dt_run *r, dt_epoch_sums *sums)
{
    r->ahead = next_batch_host(r, sums, &r->ahead_n);
    r->ahead_staged = 1;
}

/* the next batch in the host buffers: the one staged ahead, else next_batch_host's (a run whose
 * capture failed goes on without graphs, after a step that staged one) */
static int take_batch(dt_run *r, dt_epoch_sums *sums, int *n)
{
    if (!r->ahead_staged)
        return next_batch_host(r, sums, n);
    r->ahead_staged = 0;
    *n = r->ahead_n;
    return r->ahead;
}

/* The step's last micro-batch (micro) on n images and the step's end, in segments with the
 * collectives between them; graphs: as graphs where the run has them. ahead: the next batch is
 * staged once segment A is on its way (a step of a run with graphs). */
static int step_segments(dt_run *r, int micro, int n, dt_comm *comm, int graphs, int ahead, dt_epoch_sums *sums)
{
    if (!comm || comm->size < 2) { /* no collective: one graph */
        DT_TRY(segment(r, 0, SEG_A | SEG_B | SEG_C, micro, n, graphs));
        if (ahead)
            stage_ahead(r, sums);
        return DT_OK;
    }
    DT_TRY(segment(r, 0, SEG_A, micro, n, graphs));
    if (ahead)
        stage_ahead(r, sums);
    DT_TRY(dt_ddp_reduce(r->ddp)); /* the gradients averaged over the ranks */
    DT_TRY(segment(r, 1, SEG_B, micro, n, graphs));
    /* scaler.step(optimizer); scaler.update(): skipped on every rank when any saw NaN or inf, which
     * they agree on in the step's one other collective (with the stop signal) */
    DT_TRY(dt_amp_agree(comm, &r->model));
    return segment(r, 2, SEG_C, micro, n, graphs);
}

/* dt_run_step's step (the profile aside): accum_steps micro-batches, the last with the step's end;
 * then the one wait. A run with graphs has one micro-batch, launched as graphs once warm (its
 * second full batch on: the first is issued), a short batch or a profiled step issued. */
static int run_step(dt_run *r, int64_t step, double lr, dt_epoch_sums *sums)
{
    const dt_train_cfg *cfg = r->cfg;
    dt_comm *comm = r->device_comm ? r->device_comm : r->comm;
    const int graphs = r->graphs; /* as the step starts: a capture that fails turns them off inside it */
    /* the step's lr, number and this rank's stop signal into the model's host buffer */
    dt_model_step_write(&r->model, (float)lr, step, dt_run_local_signal());
    r->comm->step = step;
    for (int micro = 0; micro < cfg->accum_steps; micro++) {
        int n, got = take_batch(r, sums, &n); /* x, y = next(loader) */
        if (got <= 0) /* an error, or the epoch's data ran out (not met: an epoch is whole steps) */
            return got;
        sums->images += n;
        sums->steps++;
        DT_TRY(dt_ddp_before_forward(r->ddp));
        if (micro < cfg->accum_steps - 1) { /* gradient accumulation: issued (a run with it has no graphs) */
            DT_TRY(issue_segments(r, SEG_A, micro, n, 0));
            continue;
        }
        int full = n == cfg->batch, warm = r->graph_warm >= 1;
        if (graphs && full && !warm)
            r->graph_warm++;
        DT_TRY(step_segments(r, micro, n, comm, graphs && full && warm && !r->model.profiling, graphs, sums));
    }
    step_outcome(r, dt_amp_finish(&r->amp.scaler, comm, &r->opt, &r->model));
    return DT_OK;
}

int dt_run_step(dt_run *r, int64_t step, double lr, dt_epoch_sums *sums)
{
    /* DT_PROFILE: a profiled step is issued (no graph: its marks are recorded as its ops are issued),
     * and its marks timed once it is done (the step ends with a wait); nothing outside the steps */
    r->model.profiling = r->model.profile && step >= r->prof_from;
    int rc = run_step(r, step, lr, sums);
    if (rc == DT_OK && r->model.profiling)
        dt_model_prof_step_end(&r->model);
    r->model.profiling = 0;
    return rc;
}

/* One row of host logits through the CPU backend's loss into acc (the loss, the hits, the rows that
 * were not finite): the one definition of the criterion and of top-1/top-5, whichever backend
 * trains. */
static void score_row(const dt_run *r, const float *row, int32_t label, dt_scalars *acc)
{
    dt_backend_cpu.xent(1, r->classes, DT_FLOAT32, row, &label, (float)r->cfg->label_smoothing, NULL, acc);
}

/* One pass over the validation set with the model as it is (its weights, or the average swapped in:
 * what names it in the log line): top-1, top-5, loss and seconds per batch into *v's first four; 1
 * when a signal ended it (nothing written then), else DT_OK or an error. */
static int validation_pass(dt_run *r, int epoch, int interruptible, const char *what, dt_validation *v)
{
    int64_t count[4] = {0, 0, 0, 0}; /* top-1 hits, top-5 hits, images, images with non-finite logits */
    double sum[2] = {0, 0};          /* loss sum, seconds */
    int64_t batches = 0;
    if (r->ddp) /* every rank evaluates rank 0's running statistics: the model the checkpoint holds */
        DT_TRY(dt_ddp_sync_buffers(r->ddp));
    r->model.training = 0;
    DT_TRY(dt_model_set_input(&r->model, r->val_size, r->val_size)); /* --val-crop-size, planned with training's */
    DT_TRY(dt_loader_start(r->val_loader, epoch, 0));
    const dt_batch *b;
    int rc;
    double t0 = dt_seconds();
    dt_scalars acc = {.scale_f = 1};
    while ((rc = dt_loader_next(r->val_loader, &b)) == 1) {
        const int64_t values = (int64_t)b->n * b->h * b->w * b->c;
        stage_pixels(r, b->x, values);
        upload_pixels(r, values);
        DT_TRY(dt_model_forward(&r->model, r->input, b->n));
        dt_model_get_logits(&r->model, b->n, r->logits);
        for (int i = 0; i < b->n; i++)
            if (!b->counted || b->counted[i])
                score_row(r, r->logits + (size_t)i * r->classes, b->y[i], &acc);
        batches++;
        if (interruptible && dt_run_agree_signal(r))
            break;
    }
    count[0] = acc.hits1;
    count[1] = acc.hits5;
    count[2] = acc.rows;
    count[3] = acc.nonfinite_rows;
    sum[0] = acc.loss_sum;
    sum[1] = (dt_seconds() - t0) / (double)(batches ? batches : 1);
    r->model.training = 1;
    DT_TRY(dt_model_set_input(&r->model, r->image_size, r->image_size));
    if (rc < 0)
        return rc;
    if (rc == 1) { /* a signal: time is short, the pass is dropped (the checkpoint is written next) */
        if (r->launch.rank == 0)
            dt_info("epoch %d: %s stopped by signal %d after %lld batches; the checkpoint keeps the epoch "
                    "for validation on --resume", epoch, what, r->stopped_by, (long long)batches);
        return 1;
    }
    DT_TRY(r->comm->ops->allreduce(r->comm, count, count, 4, DT_INT64, DT_SUM));
    DT_TRY(r->comm->ops->allreduce(r->comm, sum, sum, 2, DT_FLOAT64, DT_SUM));
    double images = (double)(count[2] ? count[2] : 1);
    v->top1 = 100.0 * (double)count[0] / images;
    v->top5 = 100.0 * (double)count[1] / images;
    v->loss = sum[0] / images;
    v->batch_seconds = sum[1] / r->comm->size;
    if (r->launch.rank == 0)
        dt_info("epoch %d: %s top-1 %.2f%%, top-5 %.2f%%, loss %.6f on %lld images", epoch, what, v->top1, v->top5,
                v->loss, (long long)count[2]);
    if (count[3] && r->launch.rank == 0) /* counted as misses; the loss is not finite then either */
        dt_warn("epoch %d: %s: %lld of %lld images gave NaN or infinite logits (counted as misses): "
                "the model has diverged", epoch, what, (long long)count[3], (long long)count[2]);
    return DT_OK;
}

int dt_run_validate(dt_run *r, int epoch, int interruptible, dt_validation *v)
{
    *v = (dt_validation){-1, -1, -1, 0, -1, -1, -1};
    dt_validation mine = *v, avg = *v;
    int rc = validation_pass(r, epoch, interruptible, "validation", &mine);
    if (rc != DT_OK)
        return rc < 0 ? rc : DT_OK;
    if (r->have_ema) { /* the average in the model's place, then the model back */
        dt_ema_swap(&r->ema, &r->model);
        rc = validation_pass(r, epoch, interruptible, "validation of the model's average (--model-ema)", &avg);
        dt_ema_swap(&r->ema, &r->model);
        if (rc != DT_OK)
            return rc < 0 ? rc : DT_OK;
        mine.ema_top1 = avg.top1;
        mine.ema_top5 = avg.top5;
        mine.ema_loss = avg.loss;
    }
    *v = mine;
    return DT_OK;
}
