/* trainer.c: the training run (contract in trainer.h).
 *
 * Start-up checks everything that can be wrong with the input on every rank (the architecture,
 * the data, the results directory on rank 0) and agrees on the verdict, so bad input is one line
 * and exit 2 with nothing written. Then each epoch: the loader's batches (uint8) are normalised,
 * forward, loss (times the loss scale), backward with the buckets' all-reduce, and the AMP step;
 * rank 0 prints a progress line every print_freq steps; validation counts every image once over
 * the ranks; rank 0 appends one JSON line per epoch to metrics.jsonl. */
#include "config.h"

#include "train/trainer.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/loader.h"
#include "data/shard.h"
#include "dist/comm.h"
#include "dist/launch.h"
#include "nn/model.h"
#include "train/checkpoint.h"
#include "train/ddp.h"
#include "train/sgd.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/rng.h"

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

void dt_train_defaults(dt_train_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->arch = "resnet50";
    c->workers = 4;
    c->epochs = 90;
    c->batch = 64;
    c->lr = 0.1;
    c->lr_steps[0] = 30;
    c->lr_steps[1] = 60;
    c->lr_steps[2] = 80;
    c->n_lr_steps = 3;
    c->momentum = 0.9;
    c->wd = 1e-4;
    c->print_freq = 10;
    c->results = "results";
    c->amp = (dt_amp_overrides){.keep_batchnorm_fp32 = -1, .master_weights = -1};
    c->bucket_mb = 25;
    c->first_bucket_mb = 1;
    c->accum_steps = 1;
    c->comm_timeout = 600;
}

typedef struct run {
    const dt_train_cfg *cfg;
    dt_launch l;
    dt_comm *c;
    dt_dataset train, val;
    int have_train, have_val;
    dt_loader *tl, *vl;
    dt_model m;
    int have_model;
    dt_sgd opt;
    dt_amp amp;
    dt_amp_props defaults;
    dt_ddp *ddp;
    float mean[4], std[4];      /* normalisation per channel */
    int in_c, size, classes;
    float *x;                   /* one batch, normalised */
    int32_t *y;
    char dir[4096];             /* results/<run id> (rank 0 writes) */
    FILE *metrics;
    double lr0;                 /* after scaling */
    int64_t steps_per_epoch;
    char ckpt_in[4200];         /* the checkpoint to resume from (rank 0) */
    dt_progress pr;             /* where training stands */
    int stopped_by;             /* the signal every rank agreed to stop on, or 0 */
} run;

/* any rank signalled? every rank asks after every step, so all stop after the same one */
static int agree_signal(run *r)
{
    int32_t sig = stop_signal;
    if (r->c->size > 1 && r->c->ops->allreduce(r->c, &sig, &sig, 1, DT_INT32, DT_MAX) != DT_OK)
        return 0;
    if (sig && !r->stopped_by && r->l.rank == 0)
        dt_warn("signal %d: stopping after this step, writing the checkpoint", sig);
    r->stopped_by = sig;
    return sig != 0;
}

/* every rank's verdict on the start: the worst status wins */
static int agree(run *r, int rc)
{
    int32_t v = rc == DT_OK ? 0 : 1;
    if (r->c && r->c->size > 1 && r->c->ops->allreduce(r->c, &v, &v, 1, DT_INT32, DT_MAX) != DT_OK)
        return DT_ERR_STATE;
    return v ? (rc != DT_OK ? rc : DT_ERR_INPUT) : DT_OK;
}

/* per-channel mean and standard deviation of the training images, for normalisation: ImageNet's
 * for encoded data (torchvision's constants); measured on up to 10000 images for raw shards */
static int measure_norm(run *r)
{
    static const float im_mean[3] = {0.485f, 0.456f, 0.406f}, im_std[3] = {0.229f, 0.224f, 0.225f};
    if (r->cfg->synthetic || r->train.kind == DT_SHARD_ENCODED) {
        for (int c = 0; c < 3; c++) {
            r->mean[c] = im_mean[c];
            r->std[c] = im_std[c];
        }
        return DT_OK;
    }
    int64_t n = r->train.count < 10000 ? r->train.count : 10000;
    size_t bytes = (size_t)r->train.h * r->train.w * r->train.c;
    uint8_t *buf = malloc(bytes);
    double s[4] = {0}, q[4] = {0};
    if (!buf)
        return DT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (dt_dataset_read(&r->train, i * (r->train.count / n), buf) != DT_OK) {
            free(buf);
            return DT_ERR_INPUT;
        }
        for (size_t k = 0; k < bytes; k++) {
            double v = buf[k] / 255.0;
            s[k % r->train.c] += v;
            q[k % r->train.c] += v * v;
        }
    }
    free(buf);
    double per = (double)n * (double)bytes / r->train.c;
    for (int c = 0; c < r->train.c; c++) {
        double mu = s[c] / per, var = q[c] / per - mu * mu;
        r->mean[c] = (float)mu;
        r->std[c] = (float)sqrt(var > 1e-8 ? var : 1e-8);
    }
    return DT_OK;
}

static void normalise(const run *r, const uint8_t *u, int64_t n, float *x)
{
    int c = r->in_c;
    for (int64_t i = 0; i < n; i++) {
        int ch = (int)(i % c);
        x[i] = ((float)u[i] * (1.0f / 255.0f) - r->mean[ch]) / r->std[ch];
    }
}

/* results/<YYYYmmdd-HHMMSS>-<host>-<arch>-w<W>[-job<id>][-<name>], unique: rank 0 makes it */
static int make_run_dir(run *r)
{
    const dt_train_cfg *c = r->cfg;
    if (mkdir(c->results, 0777) != 0 && errno != EEXIST) {
        dt_error("--results %s: cannot create it: %s", c->results, strerror(errno));
        return DT_ERR_INPUT;
    }
    if (access(c->results, W_OK) != 0) {
        dt_error("--results %s: not writable: %s", c->results, strerror(errno));
        return DT_ERR_INPUT;
    }
    char stamp[32], host[64] = "host";
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = 0;
    const char *job = getenv("SLURM_JOB_ID");
    for (int k = 0; k < 100; k++) {
        snprintf(r->dir, sizeof r->dir, "%s/%s-%s-%s-w%d%s%s%s%s%s", c->results, stamp, host, c->arch, r->l.size,
                 job ? "-job" : "", job ? job : "", c->run_name ? "-" : "", c->run_name ? c->run_name : "",
                 k ? "-" : "");
        if (k)
            snprintf(r->dir + strlen(r->dir), sizeof r->dir - strlen(r->dir), "%d", k);
        if (mkdir(r->dir, 0777) == 0)
            return DT_OK;
        if (errno != EEXIST)
            break;
    }
    dt_error("--results %s: cannot create a run directory %s: %s", c->results, r->dir, strerror(errno));
    return DT_ERR_INPUT;
}

static int write_run_json(run *r)
{
    const dt_train_cfg *c = r->cfg;
    const dt_amp_props *p = &r->amp.props;
    json_t *lr_steps = json_array();
    for (int i = 0; i < c->n_lr_steps; i++)
        json_array_append_new(lr_steps, json_integer(c->lr_steps[i]));
    json_t *j = json_pack(
        "{s:s, s:s, s:s?, s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:s, s:o, s:f, s:f, s:f, s:f, s:I, s:i, "
        "s:{s:i, s:s, s:b, s:b, s:s, s:f}, s:{s:f, s:f, s:b, s:b, s:i}}",
        "dtrain", PACKAGE_VERSION, "arch", c->arch, "data", c->data, "launch", dt_launch_kind_name(r->l.kind),
        "world_size", r->l.size, "device", "cpu", "batch_per_rank", c->batch, "global_batch",
        c->batch * r->l.size * c->accum_steps, "epochs", c->epochs, "workers", c->workers, "lr", c->lr, "lr_scaled",
        r->lr0, "lr_schedule", c->cosine ? "cosine" : "step", "lr_steps", lr_steps, "warmup_epochs", c->warmup_epochs,
        "momentum", c->momentum, "weight_decay", c->wd, "label_smoothing", c->label_smoothing, "seed",
        (json_int_t)c->seed, "classes", r->classes, "amp", "opt_level", p->opt_level, "precision",
        p->reduced == DT_BFLOAT16 ? "bf16" : "fp16", "keep_batchnorm_fp32", p->keep_batchnorm_fp32, "master_weights",
        p->master_weights, "loss_scale", p->dynamic_loss_scale ? "dynamic" : "static", "loss_scale_start",
        p->loss_scale, "ddp", "bucket_mb", c->bucket_mb, "first_bucket_mb", c->first_bucket_mb, "overlap",
        !c->no_overlap, "sync_bn", c->sync_bn, "accum_steps", c->accum_steps);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", r->dir);
    int rc = j && json_dump_file(j, path, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? DT_OK : DT_ERR_SYS;
    if (rc != DT_OK)
        dt_error("%s: cannot write", path);
    json_decref(j);
    return rc;
}

static double lr_at(const run *r, int epoch, int64_t step_in_epoch)
{
    const dt_train_cfg *c = r->cfg;
    double e = epoch + (double)step_in_epoch / (double)r->steps_per_epoch;
    double lr = r->lr0;
    if (c->warmup_epochs > 0 && e < c->warmup_epochs)
        return lr * e / c->warmup_epochs;
    if (c->cosine) {
        double t = (e - c->warmup_epochs) / (c->epochs - c->warmup_epochs);
        return lr * 0.5 * (1 + cos(M_PI * (t < 1 ? t : 1)));
    }
    for (int i = 0; i < c->n_lr_steps; i++)
        if (epoch >= c->lr_steps[i])
            lr *= 0.1;
    return lr;
}

/* top-1 and top-5 hits of a batch of logits */
static void hits(const float *z, const int32_t *y, const uint8_t *counted, int n, int k, int64_t *h1, int64_t *h5,
                 int64_t *seen)
{
    for (int i = 0; i < n; i++) {
        if (counted && !counted[i])
            continue;
        const float *zi = z + (size_t)i * k;
        int above = 0;
        for (int j = 0; j < k; j++)
            above += zi[j] > zi[y[i]];
        *h1 += above == 0;
        *h5 += above < 5;
        (*seen)++;
    }
}

static int validate(run *r, int epoch, double *top1, double *top5)
{
    int64_t v[3] = {0, 0, 0}; /* top-1 hits, top-5 hits, images */
    r->m.training = 0;
    DT_TRY(dt_loader_start(r->vl, epoch, 0));
    const dt_batch *b;
    int rc;
    while ((rc = dt_loader_next(r->vl, &b)) == 1) {
        normalise(r, b->x, (int64_t)b->n * b->h * b->w * b->c, r->x);
        DT_TRY(dt_model_forward(&r->m, r->x, b->n));
        hits(dt_model_logits(&r->m), b->y, b->counted, b->n, r->classes, &v[0], &v[1], &v[2]);
    }
    r->m.training = 1;
    if (rc < 0)
        return rc;
    DT_TRY(r->c->ops->allreduce(r->c, v, v, 3, DT_INT64, DT_SUM));
    *top1 = 100.0 * (double)v[0] / (double)(v[2] ? v[2] : 1);
    *top5 = 100.0 * (double)v[1] / (double)(v[2] ? v[2] : 1);
    if (r->l.rank == 0)
        dt_info("epoch %d: validation top-1 %.2f%%, top-5 %.2f%% on %lld images", epoch, *top1, *top5, (long long)v[2]);
    return DT_OK;
}

static int setup(run *r)
{
    const dt_train_cfg *c = r->cfg;
    int rc = DT_OK;
    if (!c->synthetic) {
        if (!c->data) {
            dt_error("no data directory given (a directory packed by dtpack, or --synthetic)");
            return DT_ERR_INPUT;
        }
        if ((rc = dt_dataset_open(&r->train, c->data, "train", 0)) != DT_OK)
            return DT_ERR_INPUT;
        r->have_train = 1;
        if ((rc = dt_dataset_open(&r->val, c->data, "val", 0)) != DT_OK)
            return DT_ERR_INPUT;
        r->have_val = 1;
        int same = r->val.num_classes == r->train.num_classes && r->val.kind == r->train.kind;
        for (int i = 0; same && i < r->train.num_classes; i++)
            same = !strcmp(r->val.classes[i], r->train.classes[i]);
        if (!same) {
            dt_error("%s: the val split's classes or kind differ from the train split's", c->data);
            return DT_ERR_INPUT;
        }
        r->classes = r->train.num_classes;
        r->in_c = r->train.kind == DT_SHARD_RAW ? r->train.c : 3;
        r->size = r->train.kind == DT_SHARD_RAW ? r->train.h : (c->crop ? c->crop : 224);
    } else {
        r->classes = 1000;
        r->in_c = 3;
        r->size = c->crop ? c->crop : 224;
    }
    if ((rc = dt_model_create(&r->m, c->arch, r->in_c, r->classes, &dt_backend_cpu)) != DT_OK)
        return DT_ERR_INPUT;
    r->have_model = 1;
    dt_model_init_weights(&r->m, c->seed + 1, 0);
    dt_amp_props props;
    if ((rc = dt_amp_resolve(c->opt_level, &c->amp, &props)) != DT_OK)
        return DT_ERR_INPUT;
    dt_amp_overrides only_type = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = c->amp.bf16};
    dt_amp_resolve(c->opt_level, &only_type, &r->defaults); /* the level's defaults, for the print */
    if ((rc = dt_amp_attach(&r->amp, &r->m, &props)) != DT_OK)
        return rc;
    if ((rc = dt_model_plan(&r->m, c->batch, r->size, r->size)) != DT_OK)
        return rc == DT_ERR_INPUT ? DT_ERR_INPUT : rc;
    return DT_OK;
}

/* after rank 0 loaded a checkpoint: what DDP's broadcast does not carry goes to the other ranks */
static int share_state(run *r)
{
    dt_comm *c = r->c;
    if (c->size == 1)
        return DT_OK;
    DT_TRY(c->ops->broadcast(c, r->m.counts, (size_t)r->m.n_counts, DT_INT64, 0));
    if (r->opt.momentum_buf)
        DT_TRY(c->ops->broadcast(c, r->opt.momentum_buf, (size_t)r->m.n_weights, DT_FLOAT32, 0));
    if (r->amp.master)
        DT_TRY(c->ops->broadcast(c, r->amp.master, (size_t)r->m.n_weights, DT_FLOAT32, 0));
    int64_t iv[8] = {r->pr.epoch, r->pr.step, r->pr.global_step, r->opt.steps, (int64_t)r->m.step,
                     r->amp.scaler.clean_steps, r->amp.scaler.overflows, r->amp.scaler.dynamic};
    double dv[3] = {r->pr.best_top1, r->amp.scaler.scale, r->amp.scaler.min_scale};
    DT_TRY(c->ops->broadcast(c, iv, 8, DT_INT64, 0));
    DT_TRY(c->ops->broadcast(c, dv, 3, DT_FLOAT64, 0));
    r->pr = (dt_progress){iv[0], iv[1], iv[2], dv[0]};
    r->opt.steps = iv[3];
    r->m.step = (uint64_t)iv[4];
    r->amp.scaler.clean_steps = iv[5];
    r->amp.scaler.overflows = iv[6];
    r->amp.scaler.dynamic = (int)iv[7];
    r->amp.scaler.scale = dv[1];
    r->amp.scaler.min_scale = dv[2];
    r->m.loss_scale = (float)dv[1];
    return DT_OK;
}

/* rank 0: checkpoint.h5 in the run directory, atomically */
static int save(run *r)
{
    if (r->l.rank != 0)
        return DT_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.h5", r->dir);
    return dt_checkpoint_save(path, &r->m, &r->opt, &r->amp, &r->pr, NULL);
}

static int train_loop(run *r)
{
    const dt_train_cfg *c = r->cfg;
    size_t img = (size_t)r->size * r->size * r->in_c;
    r->x = malloc((size_t)c->batch * img * sizeof(float));
    r->y = malloc((size_t)c->batch * sizeof(int32_t));
    uint8_t *syn = c->synthetic ? malloc((size_t)c->batch * img) : NULL;
    if (!r->x || !r->y || (c->synthetic && !syn))
        return DT_ERR_NOMEM;
    if (syn) {
        dt_rng g;
        dt_rng_seed(&g, c->seed, (uint64_t)r->l.rank);
        for (size_t i = 0; i < (size_t)c->batch * img; i++)
            syn[i] = (uint8_t)dt_rng_below(&g, 256);
        for (int i = 0; i < c->batch; i++)
            r->y[i] = (int32_t)dt_rng_below(&g, (uint64_t)r->classes);
    }
    int64_t total = 0, global_step = r->pr.global_step;
    double best = r->pr.best_top1;
    int stop = 0;
    for (int epoch = (int)r->pr.epoch; epoch < c->epochs && !stop; epoch++) {
        int64_t first = epoch == r->pr.epoch ? r->pr.step : 0;
        if (!c->synthetic)
            DT_TRY(dt_loader_start(r->tl, epoch, first * c->accum_steps));
        double t0 = dt_seconds(), data_time = 0, loss_sum = 0;
        int64_t h1 = 0, h5 = 0, seen = 0, images = 0, done = 0;
        for (int64_t s = first; s < r->steps_per_epoch && !stop; s++) {
            double lr = lr_at(r, epoch, s);
            int n = c->batch;
            double loss = 0;
            for (int a = 0; a < c->accum_steps; a++) {
                double td = dt_seconds();
                const uint8_t *u = syn;
                if (!c->synthetic) {
                    const dt_batch *b;
                    int got = dt_loader_next(r->tl, &b);
                    if (got < 0)
                        return got;
                    if (got == 0)
                        break;
                    u = b->x;
                    n = b->n;
                    memcpy(r->y, b->y, (size_t)n * sizeof(int32_t));
                }
                normalise(r, u, (int64_t)n * (int64_t)img, r->x);
                data_time += dt_seconds() - td;
                DT_TRY(dt_ddp_before_forward(r->ddp));
                DT_TRY(dt_model_forward(&r->m, r->x, n));
                DT_TRY(dt_model_loss(&r->m, r->y, n, (float)c->label_smoothing, &loss));
                hits(dt_model_logits(&r->m), r->y, NULL, n, r->classes, &h1, &h5, &seen);
                DT_TRY(dt_ddp_backward(r->ddp, n, a > 0, a == c->accum_steps - 1));
                loss_sum += loss;
                images += n;
                done++;
            }
            int skipped;
            r->c->step = global_step;
            DT_TRY(dt_amp_step(&r->amp.scaler, r->c, &r->opt, &r->m, r->amp.master, (float)lr, global_step, &skipped));
            global_step++;
            total++;
            if (r->l.rank == 0 && c->print_freq > 0 && ((s + 1) % c->print_freq == 0 || s + 1 == r->steps_per_epoch)) {
                double t = dt_seconds(), rate = (double)images * r->l.size / (t - t0);
                double eta = (double)(r->steps_per_epoch - s - 1) * (t - t0) / (double)(s + 1);
                dt_info("epoch %d [%lld/%lld] loss %.4f top-1 %.2f%% %.1f img/s data %.1f ms/step lr %.4g scale %g "
                        "ETA %.0f s",
                        epoch, (long long)(s + 1), (long long)r->steps_per_epoch, loss,
                        100.0 * (double)h1 / (double)(seen ? seen : 1), rate, 1e3 * data_time / (double)(s + 1), lr,
                        r->amp.scaler.scale, eta);
            }
            if (c->max_steps && total >= c->max_steps)
                stop = 1;
            if (agree_signal(r))
                stop = 1;
            r->pr = (dt_progress){epoch, s + 1, global_step, best};
            if (stop && s + 1 < r->steps_per_epoch) /* stopped inside the epoch: resume exactly here */
                DT_TRY(save(r));
            else if (c->checkpoint_every && global_step % c->checkpoint_every == 0 && s + 1 < r->steps_per_epoch)
                DT_TRY(save(r));
        }
        double secs = dt_seconds() - t0, top1 = -1, top5 = -1;
        if (r->have_val && !r->stopped_by) /* after a signal, time is short: the checkpoint first */
            DT_TRY(validate(r, epoch, &top1, &top5));
        int improved = top1 > best;
        if (improved)
            best = top1;
        if (!stop || r->pr.step >= r->steps_per_epoch) { /* the epoch is complete: the next one is where to resume */
            r->pr = (dt_progress){epoch + 1, 0, global_step, best};
            DT_TRY(save(r));
            if (improved && r->l.rank == 0) {
                char path[4200];
                snprintf(path, sizeof path, "%s/model_best.h5", r->dir);
                DT_TRY(dt_checkpoint_save(path, &r->m, &r->opt, &r->amp, &r->pr, NULL));
            }
        }
        if (c->desired_acc > 0 && top1 >= c->desired_acc) {
            if (r->l.rank == 0)
                dt_info("validation top-1 %.2f%% reached --desired-acc %.2f: stopping", top1, c->desired_acc);
            stop = 1;
        }
        if (r->l.rank == 0 && r->metrics) {
            json_t *j = json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I}", "epoch", epoch, "step",
                                  (json_int_t)global_step, "train_loss", loss_sum / (double)(done ? done : 1),
                                  "train_top1", 100.0 * (double)h1 / (double)(seen ? seen : 1), "val_top1", top1,
                                  "val_top5", top5, "img_per_s", (double)images * r->l.size / secs, "time_s", secs,
                                  "loss_scale", r->amp.scaler.scale, "overflows", (json_int_t)r->amp.scaler.overflows);
            if (j) {
                json_dumpf(j, r->metrics, JSON_COMPACT);
                fputc('\n', r->metrics);
                fflush(r->metrics);
                json_decref(j);
            }
        }
    }
    if (r->l.rank == 0 && r->stopped_by)
        dt_info("stopped by signal %d at epoch %lld, step %lld: checkpoint in %s; continue with --resume auto",
                r->stopped_by, (long long)r->pr.epoch, (long long)r->pr.step, r->dir);
    else if (r->l.rank == 0 && r->have_val)
        dt_info("done: best validation top-1 %.2f%%; results in %s", best, r->dir);
    else if (r->l.rank == 0)
        dt_info("done: results in %s", r->dir);
    free(syn);
    return DT_OK;
}

int dt_train(const dt_train_cfg *c)
{
    run r;
    memset(&r, 0, sizeof r);
    r.cfg = c;
    if (dt_launch_init(&r.l) != DT_OK)
        return 1;
    if (dt_comm_host(&r.c, &r.l, c->comm_timeout) != DT_OK) {
        dt_launch_finalize(&r.l);
        return 1;
    }
    dt_cpu_set_threads(c->threads);
    int rc = agree(&r, setup(&r));
    if (rc == DT_OK && c->evaluate && !c->resume) {
        if (r.l.rank == 0)
            dt_error("--evaluate needs the checkpoint to evaluate (--resume PATH or auto)");
        rc = DT_ERR_INPUT;
    }
    if (rc == DT_OK && r.l.rank == 0 && c->resume) { /* continue in the checkpoint's run directory */
        if (!strcmp(c->resume, "auto"))
            rc = dt_checkpoint_find(c->results, c->arch, r.ckpt_in, sizeof r.ckpt_in);
        else if (access(c->resume, R_OK) != 0) {
            dt_error("--resume %s: %s", c->resume, strerror(errno));
            rc = DT_ERR_INPUT;
        } else
            snprintf(r.ckpt_in, sizeof r.ckpt_in, "%s", c->resume);
        if (rc == DT_OK) {
            char tmp[4200];
            snprintf(tmp, sizeof tmp, "%s", r.ckpt_in);
            snprintf(r.dir, sizeof r.dir, "%s", dirname(tmp));
        }
    } else if (rc == DT_OK && r.l.rank == 0)
        rc = make_run_dir(&r);
    rc = agree(&r, rc);
    int exit_code = rc == DT_ERR_INPUT ? 2 : rc == DT_OK ? 0 : 1;
    if (rc == DT_OK) { /* from here on, failures are run-time ones (exit 1) */
        rc = measure_norm(&r);
        dt_loader_cfg lc = {.batch = c->batch, .train = 1, .workers = c->workers, .seed = c->seed,
                            .rank = r.l.rank, .world = r.l.size, .drop_last = 1, .out_h = r.size, .out_w = r.size,
                            .pad = c->crop_padding};
        if (rc == DT_OK && !c->synthetic)
            rc = dt_loader_create(&r.tl, &r.train, &lc);
        lc.train = 0;
        lc.drop_last = 0;
        if (rc == DT_OK && r.have_val)
            rc = dt_loader_create(&r.vl, &r.val, &lc);
        r.steps_per_epoch = c->synthetic ? (c->max_steps ? c->max_steps : 100) : dt_loader_steps(r.tl) / c->accum_steps;
        if (r.steps_per_epoch < 1) {
            dt_error("a batch of %d x %d accumulation steps leaves no step in an epoch", c->batch, c->accum_steps);
            rc = DT_ERR_INPUT;
        }
        double global = (double)c->batch * r.l.size * c->accum_steps;
        r.lr0 = c->no_lr_scaling ? c->lr : c->lr * global / 256.0;
        dt_ddp_cfg dc = {.bucket_bytes = (size_t)(c->bucket_mb * 1048576.0),
                         .first_bucket_bytes = (size_t)(c->first_bucket_mb * 1048576.0), .no_overlap = c->no_overlap,
                         .sync_bn = c->sync_bn, .grad_scale = 1.0f / (float)c->accum_steps,
                         .wire = r.amp.props.allreduce_type};
        if (rc == DT_OK)
            rc = dt_sgd_init(&r.opt, &r.m, (float)r.lr0, (float)c->momentum, 0, (float)c->wd, c->nesterov, 0);
        if (rc == DT_OK && c->resume) { /* rank 0 reads the file, the others get it by broadcast */
            int lrc = r.l.rank == 0 ? dt_checkpoint_load(r.ckpt_in, &r.m, &r.opt, &r.amp, &r.pr) : DT_OK;
            rc = agree(&r, lrc);
            if (rc != DT_OK)
                exit_code = 2;
            else if (r.l.rank == 0)
                dt_info("resuming from %s at epoch %lld, step %lld", r.ckpt_in, (long long)r.pr.epoch,
                        (long long)r.pr.step);
        }
        if (rc == DT_OK)
            rc = dt_ddp_create(&r.ddp, &r.m, r.c, &dc); /* rank 0's weights and buffers to all */
        if (rc == DT_OK && c->resume)
            rc = share_state(&r);
        if (rc == DT_OK && c->evaluate) { /* validation of the checkpoint, nothing written */
            double t1 = 0, t5 = 0;
            if (r.have_val && r.vl) {
                size_t img = (size_t)r.size * r.size * r.in_c;
                r.x = malloc((size_t)c->batch * img * sizeof(float));
                rc = r.x ? validate(&r, (int)r.pr.epoch, &t1, &t5) : DT_ERR_NOMEM;
            }
            if (rc == DT_OK && r.l.rank == 0)
                printf("evaluate %s: top-1 %.2f%%, top-5 %.2f%%\n", r.ckpt_in, t1, t5);
            exit_code = rc == DT_OK ? 0 : 1;
            goto done;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        if (rc == DT_OK && r.l.rank == 0) {
            dt_amp_print(&r.defaults, &r.amp.props, stdout);
            fflush(stdout);
            dt_info("%s on %d rank%s (%s), %d classes, %dx%dx%d input, batch %d per rank, lr %.4g (for %g images), "
                    "%lld steps per epoch",
                    c->arch, r.l.size, r.l.size > 1 ? "s" : "", dt_launch_kind_name(r.l.kind), r.classes, r.size, r.size,
                    r.in_c, c->batch, r.lr0, global, (long long)r.steps_per_epoch);
            rc = write_run_json(&r);
            char path[4200];
            snprintf(path, sizeof path, "%s/metrics.jsonl", r.dir);
            if (rc == DT_OK && !(r.metrics = fopen(path, c->resume ? "a" : "w"))) {
                dt_error("%s: cannot create: %s", path, strerror(errno));
                rc = DT_ERR_SYS;
            }
        }
        rc = agree(&r, rc);
        if (rc == DT_OK)
            rc = train_loop(&r);
        if (exit_code != 2)
            exit_code = rc != DT_OK ? 1 : !r.stopped_by ? 0 : r.stopped_by == SIGINT ? DT_EXIT_INTERRUPTED : DT_EXIT_RESUMABLE;
        if (exit_code == 1 && r.c->size > 1) /* the others would wait for this rank until their timeout */
            r.c->ops->abort(r.c, 1);
    }
done:
    if (r.metrics)
        fclose(r.metrics);
    dt_ddp_free(r.ddp);
    dt_loader_free(r.tl);
    dt_loader_free(r.vl);
    if (r.have_model) {
        dt_sgd_free(&r.opt);
        dt_amp_free(&r.amp);
        dt_model_free(&r.m);
    }
    if (r.have_train)
        dt_dataset_close(&r.train);
    if (r.have_val)
        dt_dataset_close(&r.val);
    free(r.x);
    free(r.y);
    dt_comm_free(r.c);
    dt_launch_finalize(&r.l);
    return exit_code;
}
