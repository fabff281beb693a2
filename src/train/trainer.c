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
#include <fcntl.h>
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
#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/model.h"
#ifdef HAVE_CUDA
#include "nn/cuda/cuda.h"
#endif
#include "train/agree.h"
#include "train/checkpoint.h"
#include "train/ddp.h"
#include "train/sgd.h"
#include "train/tbevents.h"
#include "util/atomic.h"
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
    c->max_nonfinite = 10;
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
    float *x;                   /* one batch, normalised (the backend's memory) */
    float *z;                   /* its logits (host) */
    int32_t *y;
    char dir[4096];             /* results/<run id> (rank 0 writes) */
    FILE *metrics;
    dt_tb *tb;                  /* TensorBoard events (rank 0) */
    char *config;               /* run.json's text, kept in every checkpoint (rank 0) */
    double lr0;                 /* after scaling */
    int64_t steps_per_epoch;
    char ckpt_in[4200];         /* the checkpoint to resume from (rank 0) */
    int32_t resuming;           /* from ckpt_in (--resume job may find none) */
    dt_progress pr;             /* where training stands */
    int stopped_by;             /* the signal every rank agreed to stop on, or 0 */
    int device;                 /* --device cuda: the GPU */
    char where[512];            /* this rank's device, for its first log line */
    int device_ready;           /* choose_device has run */
    int nodes;                  /* nodes the ranks run on */
    char dataset[256];          /* the data directory's name, or "synthetic" */
    char started[32];           /* when this invocation started (UTC, ISO 8601) */
    dt_comm *dc;                /* --device cuda with several ranks: NCCL for DDP's device buffers */
    int metrics_lost;           /* a write to metrics.jsonl failed: the run goes on and exits 1 */
    int diverged;               /* stopped on non-finite steps (every rank agreed): exit 1, no checkpoint */
    int lock_fd;                /* rank 0: the run directory's lock (lock_run_dir), or -1 */
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

/* seconds since the epoch, UTC, with the fraction: when a metrics line was written */
static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void normalise(const run *r, const uint8_t *u, int64_t n, float *x)
{
    r->m.be->normalize_u8(n, r->in_c, u, r->mean, r->std, x);
}

/* the batch buffers: input (the backend's memory), logits and labels (host) */
static int alloc_batch(run *r)
{
    if (r->x)
        return DT_OK;
    size_t img = (size_t)r->size * r->size * r->in_c, n = (size_t)r->cfg->batch;
    r->x = r->m.be->mem_alloc(n * img * sizeof(float));
    r->z = malloc(n * (size_t)r->classes * sizeof(float));
    r->y = malloc(n * sizeof(int32_t));
    if (!r->x || !r->z || !r->y) {
        dt_error("out of memory for a batch of %zu images", n);
        return DT_ERR_NOMEM;
    }
    return DT_OK;
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
        "s:{s:i, s:s, s:b, s:b, s:s, s:f}, s:{s:f, s:f, s:b, s:b, s:i}, s:b, s:s?, s:i, s:s?, s:i, s:i, s:s, s:s, "
        "s:s, s:o}",
        "dtrain", PACKAGE_VERSION, "arch", c->arch, "data", c->data, "launch", dt_launch_kind_name(r->l.kind),
        "world_size", r->l.size, "device", c->cuda ? "cuda" : "cpu", "batch_per_rank", c->batch, "global_batch",
        c->batch * r->l.size * c->accum_steps, "epochs", c->epochs, "workers", c->workers, "lr", c->lr, "lr_scaled",
        r->lr0, "lr_schedule", c->cosine ? "cosine" : "step", "lr_steps", lr_steps, "warmup_epochs", c->warmup_epochs,
        "momentum", c->momentum, "weight_decay", c->wd, "label_smoothing", c->label_smoothing, "seed",
        (json_int_t)c->seed, "classes", r->classes, "amp", "opt_level", p->opt_level, "precision",
        p->reduced == DT_BFLOAT16 ? "bf16" : "fp16", "keep_batchnorm_fp32", p->keep_batchnorm_fp32, "master_weights",
        p->master_weights, "loss_scale", p->dynamic_loss_scale ? "dynamic" : "static", "loss_scale_start",
        p->loss_scale, "ddp", "bucket_mb", c->bucket_mb, "first_bucket_mb", c->first_bucket_mb, "overlap",
        !c->no_overlap, "sync_bn", c->sync_bn, "accum_steps", c->accum_steps, "deterministic", c->deterministic,
        "pretrained", c->pretrained, "start_epoch", c->start_epoch, "slurm_job_id", getenv("SLURM_JOB_ID"), "nodes", r->nodes,
        "ranks_per_node", r->l.local_size, "dataset", r->dataset, "started", r->started,
        "run_dir", r->dir, "desired_acc", c->desired_acc > 0 ? json_real(c->desired_acc) : json_null());
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", r->dir);
    int rc = j && json_dump_file(j, path, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? DT_OK : DT_ERR_SYS;
    if (rc != DT_OK)
        dt_error("%s: cannot write", path);
    else if (!(r->config = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)))
        rc = DT_ERR_NOMEM;
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

/* cross-entropy with label smoothing eps of one row of k logits, in double */
static double row_loss(const float *z, int32_t y, int k, double eps)
{
    double mx = z[0], se = 0, sz = 0;
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < k; j++) {
        se += exp((double)z[j] - mx);
        sz += (double)z[j];
    }
    double lse = mx + log(se);
    return (1 - eps) * (lse - (double)z[y]) + eps * (lse - sz / k);
}

/* top-1 and top-5 hits of a batch of logits. A row holding a NaN or an infinity is a miss: every
 * comparison with a NaN is false and inf is not above inf, so such a row would otherwise count as a
 * hit (a diverged model scored 87%, one with inf weights 100%). Returns the rows that were not
 * finite. */
static int64_t hits(const float *z, const int32_t *y, const uint8_t *counted, int n, int k, int64_t *h1, int64_t *h5,
                    int64_t *seen)
{
    int64_t bad = 0;
    for (int i = 0; i < n; i++) {
        if (counted && !counted[i])
            continue;
        const float *zi = z + (size_t)i * k;
        int above = 0, finite = 1;
        for (int j = 0; j < k; j++) {
            above += zi[j] > zi[y[i]];
            finite &= isfinite(zi[j]) != 0;
        }
        *h1 += finite && above == 0;
        *h5 += finite && above < 5;
        bad += !finite;
        (*seen)++;
    }
    return bad;
}

/* validation over every rank, each image counted once; *loss is the mean criterion (with the run's
 * label smoothing, as the seed's script does), *batch_time the mean seconds per batch of a rank.
 * With `interruptible`, the ranks agree after every batch on a stop signal (every rank has as many
 * batches: the sampler pads), and one ends the pass at once: *top1 is then -1 (not validated). */
static int validate(run *r, int epoch, int interruptible, double *top1, double *top5, double *loss,
                    double *batch_time)
{
    int64_t v[4] = {0, 0, 0, 0}; /* top-1 hits, top-5 hits, images, images with non-finite logits */
    double sum[2] = {0, 0};   /* loss sum, seconds */
    int64_t batches = 0;
    if (r->ddp) /* every rank evaluates rank 0's running statistics: the model the checkpoint holds */
        DT_TRY(dt_ddp_sync_buffers(r->ddp));
    r->m.training = 0;
    DT_TRY(dt_loader_start(r->vl, epoch, 0));
    const dt_batch *b;
    int rc;
    double t0 = dt_seconds();
    while ((rc = dt_loader_next(r->vl, &b)) == 1) {
        normalise(r, b->x, (int64_t)b->n * b->h * b->w * b->c, r->x);
        DT_TRY(dt_model_forward(&r->m, r->x, b->n));
        const float *z = r->z;
        dt_model_get_logits(&r->m, b->n, r->z);
        v[3] += hits(z, b->y, b->counted, b->n, r->classes, &v[0], &v[1], &v[2]);
        for (int i = 0; i < b->n; i++)
            if (!b->counted || b->counted[i])
                sum[0] += row_loss(z + (size_t)i * r->classes, b->y[i], r->classes, r->cfg->label_smoothing);
        batches++;
        if (interruptible && agree_signal(r))
            break;
    }
    sum[1] = (dt_seconds() - t0) / (double)(batches ? batches : 1);
    r->m.training = 1;
    if (rc < 0)
        return rc;
    if (rc == 1) { /* a signal: time is short, the pass is dropped (the checkpoint comes next) */
        if (r->l.rank == 0)
            dt_info("epoch %d: validation stopped by signal %d after %lld batches; not validated", epoch,
                    r->stopped_by, (long long)batches);
        *top1 = *top5 = *loss = -1;
        return DT_OK;
    }
    DT_TRY(r->c->ops->allreduce(r->c, v, v, 4, DT_INT64, DT_SUM));
    DT_TRY(r->c->ops->allreduce(r->c, sum, sum, 2, DT_FLOAT64, DT_SUM));
    *top1 = 100.0 * (double)v[0] / (double)(v[2] ? v[2] : 1);
    *top5 = 100.0 * (double)v[1] / (double)(v[2] ? v[2] : 1);
    *loss = sum[0] / (double)(v[2] ? v[2] : 1);
    *batch_time = sum[1] / r->c->size;
    if (r->l.rank == 0)
        dt_info("epoch %d: validation top-1 %.2f%%, top-5 %.2f%%, loss %.6f on %lld images", epoch, *top1, *top5, *loss,
                (long long)v[2]);
    if (v[3] && r->l.rank == 0) /* counted as misses; the loss is not finite then either */
        dt_warn("epoch %d: validation: %lld of %lld images gave NaN or infinite logits (counted as misses): "
                "the model has diverged", epoch, (long long)v[3], (long long)v[2]);
    return DT_OK;
}

/* this rank's device: --device cuda takes the local rank's GPU (dt_launch_pick_gpu) and makes it
 * current; r->where says where the rank runs, for its first log line. DT_OK or DT_ERR_INPUT. */
static int choose_device(run *r)
{
    const dt_train_cfg *c = r->cfg;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    r->device_ready = 1;
    snprintf(r->where, sizeof r->where, "cpu, %d compute thread%s", dt_cpu_threads(), dt_cpu_threads() > 1 ? "s" : "");
    if (!c->cuda && visible && *visible) { /* a CPU run in a GPU allocation: say what --device cuda would take */
        char gpu[256];
        if (dt_launch_pick_gpu(visible, -1, r->l.local_rank, r->l.local_size, gpu, sizeof gpu) >= 0)
            snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where),
                     "; its GPU %s stays unused (CUDA_VISIBLE_DEVICES=%s)", gpu, visible);
        else
            snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where), "; with --device cuda: %s", gpu);
    }
    if (!c->cuda)
        return DT_OK;
#ifdef HAVE_CUDA
    char gpu[256];
    r->device = dt_launch_pick_gpu(visible, dt_gpu_count(), r->l.local_rank, r->l.local_size, gpu, sizeof gpu);
    if (r->device < 0) {
        dt_error("--device cuda: %s", gpu);
        return DT_ERR_INPUT;
    }
    snprintf(r->where, sizeof r->where, "GPU %s (device %d; CUDA_VISIBLE_DEVICES=%s)", gpu, r->device,
             visible ? visible : "unset");
    if (dt_cuda_init(r->device) != DT_OK)
        return DT_ERR_INPUT;
    dt_log_set_device(r->device);
    return DT_OK;
#else
    dt_error("--device cuda: this dtrain was built without CUDA (configure --with-cuda)");
    return DT_ERR_INPUT;
#endif
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
        if (dt_dataset_check_splits(&r->train, &r->val) != DT_OK) /* as dtpack verify: kind, classes, size */
            return DT_ERR_INPUT;
        r->classes = r->train.num_classes;
        r->in_c = r->train.kind == DT_SHARD_RAW ? r->train.c : 3;
        r->size = r->train.kind == DT_SHARD_RAW ? r->train.h : (c->crop ? c->crop : 224);
    } else {
        r->classes = 1000;
        r->in_c = 3;
        r->size = c->crop ? c->crop : 224;
    }
    if (!r->device_ready)
        DT_TRY(choose_device(r));
    const dt_backend *be = &dt_backend_cpu;
#ifdef HAVE_CUDA
    if (c->cuda)
        be = &dt_backend_cuda;
#endif
    if ((rc = dt_model_create(&r->m, c->arch, r->in_c, r->classes, be)) != DT_OK)
        return DT_ERR_INPUT;
    r->have_model = 1;
    dt_model_init_weights(&r->m, c->seed + 1, 0);
    /* rank 0 reads the weights; dt_ddp_create gives them to the others */
    if (c->pretrained && r->l.rank == 0 && dt_checkpoint_load_weights(c->pretrained, &r->m) != DT_OK)
        return DT_ERR_INPUT;
    dt_amp_props props;
    if ((rc = dt_amp_resolve(c->opt_level, &c->amp, &props)) != DT_OK)
        return DT_ERR_INPUT;
    dt_amp_overrides only_type = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = c->amp.bf16};
    dt_amp_resolve(c->opt_level, &only_type, &r->defaults); /* the level's defaults, for the print */
    if ((rc = dt_amp_attach(&r->amp, &r->m, &props)) != DT_OK)
        return rc;
    if (c->scale_window)
        r->amp.scaler.growth_interval = c->scale_window;
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
    dt_comm *dev = r->dc ? r->dc : c; /* the backend's memory: NCCL when it is a device's */
    if (r->opt.momentum_buf)
        DT_TRY(dev->ops->broadcast(dev, r->opt.momentum_buf, (size_t)r->m.n_weights, DT_FLOAT32, 0));
    if (r->amp.master)
        DT_TRY(dev->ops->broadcast(dev, r->amp.master, (size_t)r->m.n_weights, DT_FLOAT32, 0));
    int64_t iv[9] = {r->pr.epoch,         r->pr.step,                r->pr.global_step,
                     r->opt.steps,        (int64_t)r->m.step,        r->amp.scaler.clean_steps,
                     r->amp.scaler.overflows, r->amp.scaler.dynamic, r->amp.scaler.growth_interval};
    double dv[3] = {r->pr.best_top1, r->amp.scaler.scale, r->amp.scaler.min_scale};
    DT_TRY(c->ops->broadcast(c, iv, 9, DT_INT64, 0));
    DT_TRY(c->ops->broadcast(c, dv, 3, DT_FLOAT64, 0));
    r->pr.epoch = iv[0]; /* the epoch's metrics so far (pr.sums) stay rank 0's, which logs them */
    r->pr.step = iv[1];
    r->pr.global_step = iv[2];
    r->pr.best_top1 = dv[0];
    r->opt.steps = iv[3];
    r->m.step = (uint64_t)iv[4];
    r->amp.scaler.clean_steps = iv[5];
    r->amp.scaler.overflows = iv[6];
    r->amp.scaler.dynamic = (int)iv[7];
    r->amp.scaler.growth_interval = iv[8];
    r->amp.scaler.scale = dv[1];
    r->amp.scaler.min_scale = dv[2];
    r->m.loss_scale = (float)dv[1];
    return DT_OK;
}

static void log_end(run *r, const char *reason);

/* rank 0: checkpoint.h5 in the run directory, atomically */
static int save(run *r)
{
    if (r->l.rank != 0)
        return DT_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.h5", r->dir);
    int rc = dt_checkpoint_save(path, &r->m, &r->opt, &r->amp, &r->pr, r->config);
    if (rc == DT_ERR_STATE) /* NaN or inf in the state (BN statistics, say): the run is over */
        log_end(r, "diverged");
    return rc;
}

/* a JSON number, or null for NaN and infinities (JSON has no such numbers: jansson refuses them) */
static json_t *jnum(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* rank 0: one line of metrics.jsonl (j is taken). A failed write is said once, in one line; the
 * run goes on (its checkpoints matter more than its log) and dtrain exits 1 at the end. */
static void metrics_line(run *r, json_t *j)
{
    if (!r->metrics) {
        json_decref(j);
        return;
    }
    errno = 0;
    int bad = !j || json_dumpf(j, r->metrics, JSON_COMPACT) != 0 || fputc('\n', r->metrics) == EOF ||
              fflush(r->metrics) != 0;
    json_decref(j);
    if (bad && !r->metrics_lost)
        dt_error("%s/metrics.jsonl: cannot write (%s) at step %lld: its later lines are lost; training goes on, "
                 "dtrain will exit 1", r->dir, j ? strerror(errno ? errno : EIO) : "a value JSON cannot hold",
                 (long long)r->pr.global_step);
    r->metrics_lost |= bad;
}

/* rank 0: an epoch's scalars into TensorBoard (the seed tutorial's tags at step epoch + 1, and the
 * loss scale) and metrics.jsonl (validation values null when it did not run) */
static int log_epoch(run *r, int epoch, const dt_epoch_sums *e, double lr, int validated, double top1, double top5,
                     double vloss, double vrate, double vtime)
{
    double steps = (double)(e->steps ? e->steps : 1), seen = (double)(e->seen ? e->seen : 1);
    double tloss = e->loss / steps, ttop1 = 100.0 * (double)e->hits1 / seen, ttop5 = 100.0 * (double)e->hits5 / seen;
    double rate = (double)e->images * r->l.size / e->seconds, step_time = e->seconds * r->cfg->accum_steps / steps;
    if (r->tb) {
        int64_t at = epoch + 1;
        int bad = dt_tb_scalar(r->tb, "Loss/train", at, tloss) || dt_tb_scalar(r->tb, "Top1/train", at, ttop1) ||
                  dt_tb_scalar(r->tb, "Top5/train", at, ttop5) || dt_tb_scalar(r->tb, "Throughput/train", at, rate) ||
                  dt_tb_scalar(r->tb, "Time/train", at, step_time) || dt_tb_scalar(r->tb, "Lr", at, lr) ||
                  dt_tb_scalar(r->tb, "LossScale", at, r->amp.scaler.scale);
        if (!bad && validated)
            bad = dt_tb_scalar(r->tb, "Loss/val", at, vloss) || dt_tb_scalar(r->tb, "Top1/val", at, top1) ||
                  dt_tb_scalar(r->tb, "Top5/val", at, top5) || dt_tb_scalar(r->tb, "Throughput/val", at, vrate) ||
                  dt_tb_scalar(r->tb, "Time/val", at, vtime);
        if (bad || dt_tb_flush(r->tb) != DT_OK) { /* the run goes on: metrics.jsonl has the same */
            dt_warn("TensorBoard events: cannot write any more; continuing without them");
            dt_tb_close(r->tb);
            r->tb = NULL;
        }
    }
#define VAL(x) (validated ? jnum(x) : json_null())
    json_t *j = json_pack("{s:s, s:i, s:I, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:I, s:f}", "kind",
                          "epoch", "epoch", epoch, "step", (json_int_t)r->pr.global_step, "lr", lr, "train_loss",
                          jnum(tloss), "train_top1", jnum(ttop1), "train_top5", jnum(ttop5), "val_loss", VAL(vloss),
                          "val_top1", VAL(top1), "val_top5", VAL(top5), "img_per_s", jnum(rate), "val_img_per_s",
                          VAL(vrate), "time_s", e->seconds, "step_time_s", step_time, "loss_scale",
                          r->amp.scaler.scale, "overflows", (json_int_t)r->amp.scaler.overflows, "time", wall_now());
#undef VAL
    metrics_line(r, j);
    return DT_OK;
}

/* rank 0: the run's last line in metrics.jsonl, saying why it ended (dtreport tells a run that
 * stopped from one still going, or killed): reason done, max-steps, desired-acc or signal */
static void log_end(run *r, const char *reason)
{
    if (!r->metrics)
        return;
    metrics_line(r, json_pack("{s:s, s:s, s:I, s:I, s:I, s:f}", "kind", "end", "reason", reason, "epoch",
                              (json_int_t)r->pr.epoch, "step", (json_int_t)r->pr.global_step, "signal",
                              (json_int_t)r->stopped_by, "time", wall_now()));
}

/* After a skipped step (its loss or gradients held a NaN or an inf on some rank; every rank knows
 * the same): has the run diverged? At a static loss scale, after --max-nonfinite such steps in a
 * row; under the dynamic scaler, which halves the scale at each of them, when one comes with the
 * scale already at its floor (its min_scale, or 2^-24): no smaller scale can help then. Rank 0
 * names each skipped step of a static scale (the dynamic scaler names its own). */
static int diverged(const run *r, int64_t step, int64_t in_a_row, double loss, double scale_before)
{
    const dt_scaler *s = &r->amp.scaler;
    double floor = s->min_scale > 0 ? s->min_scale : 0x1p-24;
    int stop = s->dynamic ? scale_before <= floor : in_a_row >= r->cfg->max_nonfinite;
    if (r->l.rank != 0)
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

static int train_loop(run *r)
{
    const dt_train_cfg *c = r->cfg;
    size_t img = (size_t)r->size * r->size * r->in_c;
    DT_TRY(alloc_batch(r));
    uint8_t *syn = c->synthetic ? malloc((size_t)c->batch * img) : NULL;
    if (c->synthetic && !syn)
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
    int stop = 0, why_max = 0, why_acc = 0; /* why_*: what stopped the run, for its end line */
    int64_t nonfinite = 0;                  /* skipped steps in a row */
    for (int epoch = (int)r->pr.epoch; epoch < c->epochs && !stop; epoch++) {
        int64_t first = epoch == r->pr.epoch ? r->pr.step : 0;
        if (!c->synthetic)
            DT_TRY(dt_loader_start(r->tl, epoch, first * c->accum_steps));
        dt_epoch_sums e;
        memset(&e, 0, sizeof e);
        if (first > 0) /* resumed inside this epoch: its metrics so far */
            e = r->pr.sums;
        double t0 = dt_seconds() - e.seconds, lr = lr_at(r, epoch, first), t_mark = dt_seconds();
        int64_t img_mark = e.images; /* where the last print interval began */
        for (int64_t s = first; s < r->steps_per_epoch && !stop; s++) {
            lr = lr_at(r, epoch, s);
            int n = c->batch, loss_bad = 0;
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
                e.data_seconds += dt_seconds() - td;
                DT_TRY(dt_ddp_before_forward(r->ddp));
                DT_TRY(dt_model_forward(&r->m, r->x, n));
                DT_TRY(dt_model_loss(&r->m, r->y, n, (float)c->label_smoothing, &loss));
                loss_bad |= !isfinite(loss);
                dt_model_get_logits(&r->m, n, r->z);
                hits(r->z, r->y, NULL, n, r->classes, &e.hits1, &e.hits5, &e.seen);
                DT_TRY(dt_ddp_backward(r->ddp, n, a > 0, a == c->accum_steps - 1));
                e.loss += loss;
                e.images += n;
                e.steps++;
            }
            int skipped;
            double scale_before = r->amp.scaler.scale;
            r->c->step = global_step;
            DT_TRY(dt_amp_step(&r->amp.scaler, r->c, &r->opt, &r->m, r->amp.master, (float)lr, global_step, loss_bad,
                               &skipped));
            nonfinite = skipped ? nonfinite + 1 : 0;
            if (skipped && diverged(r, global_step, nonfinite, loss, scale_before))
                stop = r->diverged = 1;
            global_step++;
            total++;
            if (r->l.rank == 0 && c->print_freq > 0 && ((s + 1) % c->print_freq == 0 || s + 1 == r->steps_per_epoch)) {
                double t = dt_seconds(), avg = (double)e.images * r->l.size / (t - t0);
                double rate = (double)(e.images - img_mark) * r->l.size / (t - t_mark); /* this interval's */
                double eta = (double)(r->steps_per_epoch - s - 1) * (t - t0) / (double)(s + 1);
                t_mark = t;
                img_mark = e.images;
                dt_info("epoch %d [%lld/%lld] loss %.4f top-1 %.2f%% %.1f img/s data %.1f ms/step lr %.4g scale %g "
                        "ETA %.0f s",
                        epoch, (long long)(s + 1), (long long)r->steps_per_epoch, loss,
                        100.0 * (double)e.hits1 / (double)(e.seen ? e.seen : 1), rate,
                        1e3 * e.data_seconds / (double)(s + 1), lr,
                        r->amp.scaler.scale, eta);
                if (r->metrics)
                    metrics_line(r, json_pack("{s:s, s:i, s:I, s:I, s:f, s:o, s:f, s:f, s:f, s:f, s:f}", "kind", "step",
                                              "epoch", epoch, "epoch_step", (json_int_t)(s + 1), "step",
                                              (json_int_t)global_step, "lr", lr, "train_loss", jnum(loss), "img_per_s",
                                              rate, "epoch_img_per_s", avg, "data_ms",
                                              1e3 * e.data_seconds / (double)(s + 1), "loss_scale",
                                              r->amp.scaler.scale, "time", wall_now()));
            }
            if (r->diverged) /* every rank knows: the state holds NaN or inf, and is not saved */
                break;
            if (c->max_steps && total >= c->max_steps)
                stop = why_max = 1;
            if (agree_signal(r))
                stop = 1;
            e.seconds = dt_seconds() - t0;
            r->pr = (dt_progress){epoch, s + 1, global_step, best, e};
            if (stop && s + 1 < r->steps_per_epoch) /* stopped inside the epoch: resume exactly here */
                DT_TRY(save(r));
            else if (c->checkpoint_every && global_step % c->checkpoint_every == 0 && s + 1 < r->steps_per_epoch)
                DT_TRY(save(r));
        }
        if (r->diverged || r->pr.step < r->steps_per_epoch) /* a partial epoch: no validation, no epoch line */
            break;
        /* the epoch is complete: validation (unless a signal asks to stop: time is short), the checkpoint
         * to resume at the next epoch, the epoch's metrics */
        double top1 = -1, top5 = -1, vloss = -1, vtime = 0, tv = dt_seconds();
        int validated = r->have_val && !r->stopped_by;
        if (validated)
            DT_TRY(validate(r, epoch, 1, &top1, &top5, &vloss, &vtime));
        validated = validated && !r->stopped_by; /* a signal during validation drops it */
        tv = dt_seconds() - tv;
        int improved = validated && isfinite(vloss) && top1 > best; /* a diverged model is never the best */
        if (improved)
            best = top1;
        r->pr = (dt_progress){.epoch = epoch + 1, .global_step = global_step, .best_top1 = best};
        DT_TRY(save(r));
        if (improved && r->l.rank == 0) {
            char path[4200];
            snprintf(path, sizeof path, "%s/model_best.h5", r->dir);
            DT_TRY(dt_checkpoint_save(path, &r->m, &r->opt, &r->amp, &r->pr, r->config));
        }
        if (validated && c->desired_acc > 0 && top1 >= c->desired_acc) {
            if (r->l.rank == 0)
                dt_info("validation top-1 %.2f%% reached --desired-acc %.2f: stopping", top1, c->desired_acc);
            stop = why_acc = 1;
        }
        if (r->l.rank == 0)
            DT_TRY(log_epoch(r, epoch, &e, lr, validated, top1, top5, vloss, validated && tv > 0 ? (double)r->val.count / tv : 0,
                             vtime));
        if (!stop && agree_signal(r)) /* a signal during validation: the checkpoint is already written */
            stop = 1;
    }
    if (r->l.rank == 0)
        log_end(r, r->diverged ? "diverged" : r->stopped_by ? "signal" : why_acc ? "desired-acc" : why_max ? "max-steps" : "done");
    if (r->diverged) {
        free(syn);
        return DT_ERR_STATE; /* said above, by rank 0 */
    }
    if (r->l.rank == 0 && r->stopped_by)
        dt_info("stopped by signal %d at epoch %lld, step %lld: checkpoint in %s; continue with --resume auto%s",
                r->stopped_by, (long long)r->pr.epoch, (long long)r->pr.step, r->dir,
                getenv("SLURM_JOB_ID") && r->stopped_by == SIGUSR1
                    ? " (at a time limit, a batch job under dtrain-srun requeues and continues by itself)"
                    : "");
    else if (r->l.rank == 0 && r->pr.step > 0)
        dt_info("stopped after --max-steps %ld at epoch %lld, step %lld: checkpoint in %s; continue with --resume auto",
                c->max_steps, (long long)r->pr.epoch, (long long)r->pr.step, r->dir);
    else if (r->l.rank == 0 && r->have_val)
        dt_info("done: best validation top-1 %.2f%%; results in %s", best, r->dir);
    else if (r->l.rank == 0)
        dt_info("done: results in %s", r->dir);
    free(syn);
    return DT_OK;
}

/* the data side of the start: normalisation, loaders, steps per epoch (every rank; nothing written) */
static int setup_data(run *r)
{
    const dt_train_cfg *c = r->cfg;
    DT_TRY(measure_norm(r));
    dt_loader_cfg lc = {.batch = c->batch, .train = 1, .workers = c->workers, .seed = c->seed, .rank = r->l.rank,
                        .world = r->l.size, .drop_last = 1, .out_h = r->size, .out_w = r->size, .pad = c->crop_padding};
    if (!c->synthetic)
        DT_TRY(dt_loader_create(&r->tl, &r->train, &lc));
    lc.train = 0;
    lc.drop_last = 0;
    if (r->have_val)
        DT_TRY(dt_loader_create(&r->vl, &r->val, &lc));
    r->steps_per_epoch = c->synthetic ? (c->max_steps ? c->max_steps : 100) : dt_loader_steps(r->tl) / c->accum_steps;
    if (r->steps_per_epoch < 1) {
        dt_error("%s: a batch of %d x %d accumulation steps x %d ranks leaves no step in an epoch", c->data, c->batch,
                 c->accum_steps, r->l.size);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

/* rank 0: the checkpoint --resume names (or the newest, for auto), and its run directory */
/* rank 0: an exclusive lock on <run dir>/.lock for as long as this process lives (a POSIX record
 * lock: released by the kernel however the process ends, and honoured over NFS), holding
 * "pid host". Two processes resuming the same run (two --resume auto on one results directory)
 * would append to one metrics.jsonl and overwrite each other's checkpoints: the second is refused
 * in one line naming the first. DT_OK (also where the file system has no locks: a warning), or
 * DT_ERR_INPUT. */
static int lock_run_dir(run *r)
{
    char path[4200], host[64] = "?", held[128] = "";
    snprintf(path, sizeof path, "%s/.lock", r->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) {
        dt_error("%s: cannot create: %s", path, strerror(errno));
        return DT_ERR_INPUT;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EACCES) {
            ssize_t n = pread(fd, held, sizeof held - 1, 0);
            held[n > 0 ? n : 0] = 0;
            held[strcspn(held, "\n")] = 0;
            close(fd);
            dt_error("%s is in use by another dtrain (pid and host: %s): one run directory takes one run at a time",
                     r->dir, held[0] ? held : "unknown");
            return DT_ERR_INPUT;
        }
        dt_warn("%s: cannot lock (%s): nothing stops a second dtrain from resuming this run at the same time", path,
                strerror(e));
    }
    gethostname(host, sizeof host - 1);
    int len = snprintf(held, sizeof held, "%ld %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, held, (size_t)len, 0) != len)
        dt_warn("%s: cannot write: %s", path, strerror(errno));
    r->lock_fd = fd; /* kept open: closing any descriptor of the file would drop the lock */
    return DT_OK;
}

static int find_resume(run *r)
{
    const dt_train_cfg *c = r->cfg;
    if (!strcmp(c->resume, "auto")) {
        if (dt_checkpoint_find(c->results, c->arch, NULL, r->ckpt_in, sizeof r->ckpt_in) != DT_OK) {
            dt_error("--resume auto: no readable checkpoint of %s in the runs under %s", c->arch, c->results);
            return DT_ERR_INPUT;
        }
    } else if (!strcmp(c->resume, "job")) { /* a batch job, maybe requeued: its own run, or a new one */
        const char *job = getenv("SLURM_JOB_ID");
        if (!job || !*job) {
            dt_error("--resume job: not inside a Slurm job (SLURM_JOB_ID is unset); use --resume auto or PATH");
            return DT_ERR_INPUT;
        }
        if (dt_checkpoint_find(c->results, c->arch, job, r->ckpt_in, sizeof r->ckpt_in) != DT_OK) {
            if (c->evaluate) {
                dt_error("--resume job: no checkpoint of %s from Slurm job %s under %s", c->arch, job, c->results);
                return DT_ERR_INPUT;
            }
            dt_info("--resume job: Slurm job %s has no checkpoint of %s under %s yet: a new run", job, c->arch,
                    c->results);
            return DT_OK;
        }
    } else if (access(c->resume, R_OK) != 0) {
        dt_error("--resume %s: %s", c->resume, strerror(errno));
        return DT_ERR_INPUT;
    } else
        snprintf(r->ckpt_in, sizeof r->ckpt_in, "%s", c->resume);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", r->ckpt_in);
    snprintf(r->dir, sizeof r->dir, "%s", dirname(tmp));
    r->resuming = 1;
    return c->evaluate ? DT_OK : lock_run_dir(r); /* two runs on one directory would overwrite each other */
}

/* rank 0: a checkpoint's progress makes sense for this run (the file may be damaged, or edited):
 * DT_OK, or DT_ERR_INPUT after one line naming the file and the value */
static int check_progress(run *r)
{
    const dt_progress *p = &r->pr;
    const dt_epoch_sums *e = &p->sums;
    const char *why = NULL;
    char buf[160];
    if (p->epoch < 0 || p->epoch > (1 << 30))
        snprintf(buf, sizeof buf, "epoch %lld", (long long)p->epoch), why = buf;
    else if (p->step < 0 || (p->step >= r->steps_per_epoch && !r->cfg->evaluate))
        snprintf(buf, sizeof buf, "step %lld of an epoch of %lld steps (batch %d on %d rank%s, --accum-steps %d)",
                 (long long)p->step, (long long)r->steps_per_epoch, r->cfg->batch, r->l.size, r->l.size > 1 ? "s" : "",
                 r->cfg->accum_steps), why = buf;
    else if (p->global_step < 0 || r->opt.steps < 0 || r->m.step > (uint64_t)1 << 62)
        snprintf(buf, sizeof buf, "global step %lld, optimiser steps %lld", (long long)p->global_step,
                 (long long)r->opt.steps), why = buf;
    else if (!isfinite(p->best_top1) || p->best_top1 < -1 || p->best_top1 > 100)
        snprintf(buf, sizeof buf, "best top-1 %g", p->best_top1), why = buf;
    else if (!isfinite(e->loss) || !(e->seconds >= 0) || !(e->data_seconds >= 0) || e->seen < 0 || e->images < 0 ||
             e->steps < 0 || e->hits1 < 0 || e->hits5 < e->hits1 || e->hits5 > e->seen || e->steps > p->step * r->cfg->accum_steps)
        snprintf(buf, sizeof buf, "the epoch's sums (loss %g, %lld of %lld seen hit, %lld steps)", e->loss,
                 (long long)e->hits1, (long long)e->seen, (long long)e->steps), why = buf;
    if (!why)
        return DT_OK;
    dt_error("%s: cannot resume from %s: the checkpoint is damaged, or from a run with other data, batch or ranks",
             r->ckpt_in, why);
    return DT_ERR_INPUT;
}

/* rank 0, once every input check has passed: the run directory (new, or the resumed checkpoint's,
 * cleared of what a writer killed mid-checkpoint left) and its logs/ */
static int prepare_run_dir(run *r)
{
    if (r->resuming) {
        dt_remove_stale_tmp(r->dir, "checkpoint.h5");
        dt_remove_stale_tmp(r->dir, "model_best.h5");
    } else {
        DT_TRY(make_run_dir(r));
        DT_TRY(lock_run_dir(r)); /* so that a --resume auto started meanwhile waits for this run's end */
    }
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/logs", r->dir);
    if (mkdir(logs, 0777) != 0 && errno != EEXIST) {
        dt_error("%s: cannot create: %s", logs, strerror(errno));
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

int dt_train(const dt_train_cfg *c)
{
    run r;
    memset(&r, 0, sizeof r);
    r.cfg = c;
    r.lock_fd = -1;
    dt_launch_set_timeout(c->comm_timeout); /* MPI_Init waits for every rank: within the start-up's deadline */
    if (dt_launch_init(&r.l) != DT_OK)
        return 1;
    dt_cpu_set_threads(c->threads);
    int rc;
    if (c->cuda && r.l.size > 1 && r.l.kind != DT_LAUNCH_MPI) {
        /* GPU ranks without MPI (srun --mpi=pmi2): NCCL carries the few host collectives too */
        rc = choose_device(&r);
        if (rc == DT_OK)
            rc = dt_comm_nccl(&r.dc, &r.l, r.device, c->comm_timeout);
        if (rc == DT_OK)
            rc = dt_comm_nccl_host(&r.c, r.dc);
    } else
        rc = dt_comm_host(&r.c, &r.l, c->comm_timeout);
    if (rc != DT_OK) { /* a launch that cannot carry this run is a bad start (exit 2) */
        dt_comm_free(r.dc);
        dt_launch_finalize(&r.l);
        return rc == DT_ERR_INPUT || rc == DT_ERR_STATE ? 2 : 1;
    }
    dt_comm_startup(r.c, c->comm_timeout - r.l.waited_s); /* one deadline for every collective until training */
    if ((rc = dt_agree_options(r.c, c)) != DT_OK) { /* the first collective: every rank has the same options */
        dt_comm_free(r.c); /* after a timeout this ends the job (exit 1) */
        dt_comm_free(r.dc);
        dt_launch_finalize(&r.l);
        return rc == DT_ERR_INPUT ? 2 : 1;
    }
    /* start: every input check, on every rank, agreed; nothing is written until all have passed */
    rc = setup(&r);
    if (rc == DT_OK)
        rc = setup_data(&r);
    if (rc == DT_OK && c->evaluate && !c->resume && !c->pretrained) {
        if (r.l.rank == 0)
            dt_error("--evaluate needs the weights to evaluate (--resume PATH|auto, or --pretrained PATH)");
        rc = DT_ERR_INPUT;
    }
    rc = agree(&r, rc);
    double global = (double)c->batch * r.l.size * c->accum_steps;
    r.lr0 = c->no_lr_scaling ? c->lr : c->lr * global / 256.0;
    if (rc == DT_OK)
        rc = dt_sgd_init(&r.opt, &r.m, (float)r.lr0, (float)c->momentum, 0, (float)c->wd, c->nesterov, 0);
    r.pr.epoch = c->start_epoch;
    r.pr.global_step = (int64_t)c->start_epoch * r.steps_per_epoch;
    if (rc == DT_OK && c->resume && r.l.rank == 0) { /* rank 0 reads the file, the others get it by broadcast */
        rc = find_resume(&r);
        if (rc == DT_OK && r.resuming)
            rc = dt_checkpoint_load(r.ckpt_in, &r.m, &r.opt, &r.amp, &r.pr);
        if (rc == DT_OK && r.resuming)
            rc = check_progress(&r);
        if (rc == DT_OK && r.resuming && c->scale_window) /* given again: it wins over the checkpoint's */
            r.amp.scaler.growth_interval = c->scale_window;
        if (rc == DT_OK && r.resuming && c->start_epoch)
            dt_warn("--start-epoch %d: ignored, the checkpoint says where to resume", c->start_epoch);
    }
    rc = agree(&r, rc);
    if (rc == DT_OK && r.l.rank == 0 && !c->evaluate)
        rc = prepare_run_dir(&r);
    rc = agree(&r, rc);
    int exit_code = rc == DT_ERR_INPUT ? 2 : rc == DT_OK ? 0 : 1;
    if (rc != DT_OK)
        goto done;
    /* from here on, failures are run-time ones (exit 1) */
    if (r.c->size > 1) /* every rank logs into the run directory */
        rc = r.c->ops->broadcast(r.c, r.dir, sizeof r.dir, DT_UINT8, 0);
    if (rc == DT_OK && r.c->size > 1)
        rc = r.c->ops->broadcast(r.c, &r.resuming, 1, DT_INT32, 0);
    if (rc == DT_OK && !c->evaluate) { /* on a node without the shared file system: a warning, stderr only */
        char log[4300];
        snprintf(log, sizeof log, "%s/logs/rank-%d.log", r.dir, r.l.rank);
        dt_log_open_file(log);
    }
    if (rc == DT_OK && !c->evaluate) /* every rank: where it runs, first in its log */
        dt_info("rank %d of %d: node %d, local rank %d of %d, pid %ld, %s", r.l.rank, r.l.size, r.l.node,
                r.l.local_rank, r.l.local_size, (long)getpid(), r.where);
    if (rc == DT_OK && r.resuming && r.l.rank == 0)
        dt_info("resuming from %s at epoch %lld, step %lld", r.ckpt_in, (long long)r.pr.epoch, (long long)r.pr.step);
    dt_ddp_cfg dc = {.bucket_bytes = (size_t)(c->bucket_mb * 1048576.0),
                     .first_bucket_bytes = (size_t)(c->first_bucket_mb * 1048576.0), .no_overlap = c->no_overlap,
                     .sync_bn = c->sync_bn, .grad_scale = 1.0f / (float)c->accum_steps,
                     .wire = r.amp.props.allreduce_type};
    if (rc == DT_OK && !r.dc && !r.m.be->host_memory && r.c->size > 1) /* gradients in device memory: NCCL */
        rc = dt_comm_nccl(&r.dc, &r.l, r.device, c->comm_timeout);
    if (rc == DT_OK)
        rc = dt_ddp_create(&r.ddp, &r.m, r.dc ? r.dc : r.c, &dc); /* rank 0's weights and buffers to all */
    if (rc == DT_OK && r.resuming)
        rc = share_state(&r);
    if (rc == DT_OK && c->pretrained && r.amp.master) /* O2's master copy of the weights rank 0 loaded */
        r.m.be->copy_grad(r.m.n_weights, r.m.weights, r.amp.master, 0);
    if (rc == DT_OK && c->evaluate) { /* validation of the checkpoint, nothing written */
        double t1 = 0, t5 = 0;
        if (r.have_val && r.vl) {
            double vl, vt;
            rc = alloc_batch(&r);
            if (rc == DT_OK)
                rc = validate(&r, (int)r.pr.epoch, 0, &t1, &t5, &vl, &vt);
        }
        if (rc == DT_OK && r.l.rank == 0)
            printf("evaluate %s: top-1 %.2f%%, top-5 %.2f%%\n", r.resuming ? r.ckpt_in : c->pretrained, t1, t5);
        exit_code = rc == DT_OK ? 0 : 1;
        goto done;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a dropped ssh session: checkpoint and exit 3, as SIGTERM */
    sa.sa_handler = SIG_IGN;      /* a closed stdout (dtrain | head): writes fail with EPIPE instead */
    sigaction(SIGPIPE, &sa, NULL);
    int32_t last_node = r.l.node; /* nodes: the highest node index over the ranks, plus one */
    if (rc == DT_OK && r.c->size > 1)
        rc = r.c->ops->allreduce(r.c, &last_node, &last_node, 1, DT_INT32, DT_MAX);
    r.nodes = last_node + 1;
    if (c->synthetic)
        snprintf(r.dataset, sizeof r.dataset, "synthetic");
    else {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", c->data);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/')
            tmp[--n] = 0;
        snprintf(r.dataset, sizeof r.dataset, "%s", basename(tmp));
    }
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(r.started, sizeof r.started, "%Y-%m-%dT%H:%M:%SZ", &utc);
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
        if (rc == DT_OK && !(r.metrics = fopen(path, r.resuming ? "a" : "w"))) {
            dt_error("%s: cannot create: %s", path, strerror(errno));
            rc = DT_ERR_SYS;
        }
        if (rc == DT_OK) /* a resumed run adds a new events file beside the old one, as TensorBoard expects */
            rc = dt_tb_open(&r.tb, r.dir);
    }
    rc = agree(&r, rc);
    if (rc == DT_OK)
        rc = train_loop(&r);
    if (rc == DT_OK && r.m.profile && r.l.rank == 0)
        dt_model_profile_report(&r.m, stderr);
    exit_code = rc != DT_OK ? 1 : !r.stopped_by ? 0 : r.stopped_by == SIGINT ? DT_EXIT_INTERRUPTED : DT_EXIT_RESUMABLE;
    if (exit_code == 1 && r.c->size > 1 && !r.diverged) /* the others would wait for this rank until their timeout */
        r.c->ops->abort(r.c, 1);
    if (r.metrics_lost && exit_code == 0) { /* trained, but its record is incomplete */
        dt_error("%s/metrics.jsonl is incomplete (see the write error above): exit 1", r.dir);
        exit_code = 1;
    }
done:
    if (r.metrics)
        fclose(r.metrics);
    dt_tb_close(r.tb);
    free(r.config);
    dt_log_close_file();
    if (r.lock_fd >= 0)
        close(r.lock_fd);
    dt_ddp_free(r.ddp);
    dt_loader_free(r.tl);
    dt_loader_free(r.vl);
    if (r.x)
        r.m.be->mem_free(r.x);
    if (r.have_model) {
        dt_sgd_free(&r.opt);
        dt_amp_free(&r.amp);
        dt_model_free(&r.m);
    }
    if (r.have_train)
        dt_dataset_close(&r.train);
    if (r.have_val)
        dt_dataset_close(&r.val);
    free(r.z);
    free(r.y);
    dt_comm_free(r.c);
    dt_comm_free(r.dc);
    dt_launch_finalize(&r.l);
    return exit_code;
}
