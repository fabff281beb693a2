/* step.c: one optimiser step, and a validation pass (contract in trainer_int.h).
 *
 * A step is PyTorch's training loop body with Apex's AMP and DDP, accum_steps times over:
 *
 *     for x, y in loader:                        next_batch: uint8 batch, normalised into the model's input
 *         out = model(x)                         dt_model_forward
 *         loss = criterion(out, y)               dt_model_loss (cross-entropy, label smoothing)
 *         scaler.scale(loss).backward()          dt_ddp_backward: gradients all-reduced in buckets
 *     scaler.step(optimizer); scaler.update()    dt_amp_step: unscale, skip on NaN/inf, SGD
 *
 * plus the training metrics (the mean loss, top-1/top-5 from the logits) and the divergence check. A
 * validation pass is the forward half over the validation loader, every image counted once over the
 * ranks. */
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
    size_t image = (size_t)r->image_size * r->image_size * r->channels, n = (size_t)cfg->batch;
    r->input = r->model.be->mem_alloc(n * image * sizeof(float));
    r->logits = malloc(n * (size_t)r->classes * sizeof(float));
    r->labels = malloc(n * sizeof(int32_t));
    if (cfg->synthetic)
        r->synthetic = malloc(n * image);
    if (!r->input || !r->logits || !r->labels || (cfg->synthetic && !r->synthetic)) {
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

/* values uint8 pixels (host, channels last) into the model's input */
static void normalise(const dt_run *r, const uint8_t *pixels, int64_t values, float *input)
{
    r->model.be->normalize_u8(values, r->channels, pixels, r->mean, r->std, DT_FLOAT32, input);
}

/* The next training batch into r->input and r->labels, *n images: 1, 0 when this rank's loader has
 * no more this epoch, or an error. With --synthetic, the same random batch every time. */
static int next_batch(dt_run *r, dt_epoch_sums *sums, int *n)
{
    double t = dt_seconds();
    const uint8_t *pixels = r->synthetic;
    *n = r->cfg->batch;
    if (!r->cfg->synthetic) {
        const dt_batch *b;
        int got = dt_loader_next(r->train_loader, &b);
        if (got <= 0)
            return got;
        pixels = b->x;
        *n = b->n;
        memcpy(r->labels, b->y, (size_t)b->n * sizeof(int32_t));
    }
    normalise(r, pixels, (int64_t)*n * r->image_size * r->image_size * r->channels, r->input);
    sums->data_seconds += dt_seconds() - t;
    return 1;
}

/* Top-1 and top-5 hits of n rows of k logits (host), only the rows marked in counted (NULL: all). A
 * row holding a NaN or an infinity is a miss: every comparison with a NaN is false and inf is not
 * above inf, so such a row would otherwise count as a hit (a diverged model scored 87%, one with inf
 * weights 100%). Returns the rows that were not finite. */
static int64_t count_hits(const float *logits, const int32_t *labels, const uint8_t *counted, int n, int k,
                          int64_t *hits1, int64_t *hits5, int64_t *seen)
{
    int64_t bad = 0;
    for (int i = 0; i < n; i++) {
        if (counted && !counted[i])
            continue;
        const float *row = logits + (size_t)i * k;
        int above = 0, finite = 1;
        for (int j = 0; j < k; j++) {
            above += row[j] > row[labels[i]];
            finite &= isfinite(row[j]) != 0;
        }
        *hits1 += finite && above == 0;
        *hits5 += finite && above < 5;
        bad += !finite;
        (*seen)++;
    }
    return bad;
}

/* After a skipped step (its loss or gradients held a NaN or an inf on some rank; every rank knows
 * the same): has the run diverged? At a static loss scale, after --max-nonfinite such steps in a
 * row; under the dynamic scaler, which halves the scale at each of them, when one arrives with the
 * scale already at its floor (its min_scale, or 2^-24): no smaller scale can help then. Rank 0
 * names each skipped step of a static scale (the dynamic scaler names its own). */
static int diverged(const dt_run *r, int64_t step, double loss, double scale_before)
{
    const dt_scaler *s = &r->amp.scaler;
    int64_t in_a_row = r->nonfinite_steps;
    double floor = s->min_scale > 0 ? s->min_scale : 0x1p-24;
    int stop = s->dynamic ? scale_before <= floor : in_a_row >= r->cfg->max_nonfinite;
    if (r->launch.rank != 0)
        return stop;
    if (!s->dynamic && !stop)
        dt_warn("step %lld: NaN or inf in the loss or the gradients (loss %g on rank 0): step skipped, %lld in a row "
                "(--max-nonfinite %ld stops the run)", (long long)step, loss, (long long)in_a_row,
                r->cfg->max_nonfinite);
    if (stop)
        dt_error("step %lld: the run has diverged: %lld steps in a row with NaN or inf in the loss or the gradients "
                 "(loss %g on rank 0)%s; stopping without writing a checkpoint (the last one written is intact); a "
                 "smaller --lr or a warm-up usually helps", (long long)step, (long long)in_a_row, loss,
                 s->dynamic ? ", the last at the loss scale's floor" : "");
    return stop;
}

/* the training metrics of one batch: its mean loss, and top-1/top-5 from its logits (host copy) */
static void add_metrics(dt_run *r, int n, double loss, dt_epoch_sums *sums)
{
    dt_model_get_logits(&r->model, n, r->logits);
    count_hits(r->logits, r->labels, NULL, n, r->classes, &sums->hits1, &sums->hits5, &sums->seen);
    sums->loss += loss;
    sums->images += n;
    sums->steps++;
}

int dt_run_step(dt_run *r, int64_t step, double lr, dt_epoch_sums *sums, double *loss)
{
    const dt_train_cfg *cfg = r->cfg;
    float label_smoothing = (float)cfg->label_smoothing;
    int n, loss_nonfinite = 0;
    *loss = 0;
    for (int micro = 0; micro < cfg->accum_steps; micro++) { /* gradient accumulation: sync after the last */
        int got = next_batch(r, sums, &n);                  /* x, y = next(loader) */
        if (got < 0)
            return got;
        if (got == 0) /* the epoch's data ran out: the step ends with the batches it had */
            break;
        DT_TRY(dt_ddp_before_forward(r->ddp));
        DT_TRY(dt_model_forward(&r->model, r->input, n));   /* out = model(x) */
        DT_TRY(dt_model_loss(&r->model, r->labels, n, label_smoothing, loss)); /* loss = criterion(out, y) */
        loss_nonfinite |= !isfinite(*loss);
        add_metrics(r, n, *loss, sums);
        int sync = micro == cfg->accum_steps - 1;
        DT_TRY(dt_ddp_backward(r->ddp, n, micro > 0, sync)); /* scaler.scale(loss).backward(), all-reduce */
    }
    /* scaler.step(optimizer); scaler.update(): skipped on every rank when any saw NaN or inf */
    int skipped;
    double scale_before = r->amp.scaler.scale;
    r->comm->step = step;
    DT_TRY(dt_amp_step(&r->amp.scaler, r->comm, &r->opt, &r->model, r->amp.master, (float)lr, step, loss_nonfinite,
                       &skipped));
    r->nonfinite_steps = skipped ? r->nonfinite_steps + 1 : 0;
    if (skipped && diverged(r, step, *loss, scale_before))
        r->diverged = 1;
    return DT_OK;
}

/* The criterion of one row of logits (host): the CPU backend's cross-entropy, the one definition
 * (n = 1, so its mean is the row's loss; logits on the host whichever backend trains) */
static double row_loss(const dt_run *r, const float *row, int32_t label)
{
    return dt_backend_cpu.xent(1, r->classes, DT_FLOAT32, row, &label, (float)r->cfg->label_smoothing, 1.0f, NULL);
}

int dt_run_validate(dt_run *r, int epoch, int interruptible, dt_validation *v)
{
    int64_t count[4] = {0, 0, 0, 0}; /* top-1 hits, top-5 hits, images, images with non-finite logits */
    double sum[2] = {0, 0};          /* loss sum, seconds */
    int64_t batches = 0;
    *v = (dt_validation){-1, -1, -1, 0};
    if (r->ddp) /* every rank evaluates rank 0's running statistics: the model the checkpoint holds */
        DT_TRY(dt_ddp_sync_buffers(r->ddp));
    r->model.training = 0;
    DT_TRY(dt_loader_start(r->val_loader, epoch, 0));
    const dt_batch *b;
    int rc;
    double t0 = dt_seconds();
    while ((rc = dt_loader_next(r->val_loader, &b)) == 1) {
        normalise(r, b->x, (int64_t)b->n * b->h * b->w * b->c, r->input);
        DT_TRY(dt_model_forward(&r->model, r->input, b->n));
        dt_model_get_logits(&r->model, b->n, r->logits);
        count[3] += count_hits(r->logits, b->y, b->counted, b->n, r->classes, &count[0], &count[1], &count[2]);
        for (int i = 0; i < b->n; i++)
            if (!b->counted || b->counted[i])
                sum[0] += row_loss(r, r->logits + (size_t)i * r->classes, b->y[i]);
        batches++;
        if (interruptible && dt_run_agree_signal(r))
            break;
    }
    sum[1] = (dt_seconds() - t0) / (double)(batches ? batches : 1);
    r->model.training = 1;
    if (rc < 0)
        return rc;
    if (rc == 1) { /* a signal: time is short, the pass is dropped (the checkpoint is written next) */
        if (r->launch.rank == 0)
            dt_info("epoch %d: validation stopped by signal %d after %lld batches; not validated", epoch,
                    r->stopped_by, (long long)batches);
        return DT_OK;
    }
    DT_TRY(r->comm->ops->allreduce(r->comm, count, count, 4, DT_INT64, DT_SUM));
    DT_TRY(r->comm->ops->allreduce(r->comm, sum, sum, 2, DT_FLOAT64, DT_SUM));
    double images = (double)(count[2] ? count[2] : 1);
    v->top1 = 100.0 * (double)count[0] / images;
    v->top5 = 100.0 * (double)count[1] / images;
    v->loss = sum[0] / images;
    v->batch_seconds = sum[1] / r->comm->size;
    if (r->launch.rank == 0)
        dt_info("epoch %d: validation top-1 %.2f%%, top-5 %.2f%%, loss %.6f on %lld images", epoch, v->top1, v->top5,
                v->loss, (long long)count[2]);
    if (count[3] && r->launch.rank == 0) /* counted as misses; the loss is not finite then either */
        dt_warn("epoch %d: validation: %lld of %lld images gave NaN or infinite logits (counted as misses): "
                "the model has diverged", epoch, (long long)count[3], (long long)count[2]);
    return DT_OK;
}
