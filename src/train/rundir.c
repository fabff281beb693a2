/* rundir.c: the run directory, checkpoints written into it, and resuming from one (contract in
 * trainer_int.h).
 *
 * A new run gets results/<YYYYmmdd-HHMMSS>-<host>-<arch>-w<W>[-job<id>][-<name>] (unique: -1, -2,
 * ... when taken), made by rank 0 only once every input check has passed on every rank. A resumed
 * run continues in its checkpoint's directory. Either way rank 0 holds an exclusive lock on
 * <run dir>/.lock for as long as it lives, so that two dtrain never write one run. Rank 0 reads the
 * checkpoint and checks that its progress makes sense for this run; the others get the state by
 * broadcast (DDP carries the weights and buffers, dt_rundir_share_resumed the rest). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "train/trainer_int.h"
#include "util/atomic.h"
#include "util/check.h"
#include "util/log.h"

/* results/<YYYYmmdd-HHMMSS>-<host>-<arch>-w<W>[-job<id>][-<name>], unique: rank 0 makes it */
static int make_run_dir(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    if (mkdir(cfg->results, 0777) != 0 && errno != EEXIST) {
        dt_error("--results %s: cannot create it: %s", cfg->results, strerror(errno));
        return DT_ERR_INPUT;
    }
    if (access(cfg->results, W_OK) != 0) {
        dt_error("--results %s: not writable: %s", cfg->results, strerror(errno));
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
        snprintf(r->dir, sizeof r->dir, "%s/%s-%s-%s-w%d%s%s%s%s%s", cfg->results, stamp, host, cfg->arch,
                 r->launch.size, job ? "-job" : "", job ? job : "", cfg->run_name ? "-" : "",
                 cfg->run_name ? cfg->run_name : "", k ? "-" : "");
        if (k)
            snprintf(r->dir + strlen(r->dir), sizeof r->dir - strlen(r->dir), "%d", k);
        if (mkdir(r->dir, 0777) == 0)
            return DT_OK;
        if (errno != EEXIST)
            break;
    }
    dt_error("--results %s: cannot create a run directory %s: %s", cfg->results, r->dir, strerror(errno));
    return DT_ERR_INPUT;
}

/* rank 0: an exclusive lock on <run dir>/.lock for as long as this process lives (a POSIX record
 * lock: released by the kernel however the process ends, and honoured over NFS), holding
 * "pid host". Two processes resuming the same run (two --resume auto on one results directory)
 * would append to one metrics.jsonl and overwrite each other's checkpoints: the second is refused
 * in one line naming the first. DT_OK (also where the file system has no locks: a warning), or
 * DT_ERR_INPUT. */
static int lock_run_dir(dt_run *r)
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

/* rank 0: the checkpoint --resume names (or the newest, for auto and job: *f, kept open by the
 * search; else -1), and its run directory, locked unless only evaluating */
static int find_resume(dt_run *r, hid_t *f)
{
    const dt_train_cfg *cfg = r->cfg;
    if (!strcmp(cfg->resume, "auto")) {
        if (dt_checkpoint_find(cfg->results, cfg->arch, NULL, r->resume_path, sizeof r->resume_path, f) != DT_OK) {
            dt_error("--resume auto: no readable checkpoint of %s in the runs under %s", cfg->arch, cfg->results);
            return DT_ERR_INPUT;
        }
    } else if (!strcmp(cfg->resume, "job")) { /* a batch job, maybe requeued: its own run, or a new one */
        const char *job = getenv("SLURM_JOB_ID");
        if (!job || !*job) {
            dt_error("--resume job: not inside a Slurm job (SLURM_JOB_ID is unset); use --resume auto or PATH");
            return DT_ERR_INPUT;
        }
        if (dt_checkpoint_find(cfg->results, cfg->arch, job, r->resume_path, sizeof r->resume_path, f) != DT_OK) {
            if (cfg->evaluate) {
                dt_error("--resume job: no checkpoint of %s from Slurm job %s under %s", cfg->arch, job, cfg->results);
                return DT_ERR_INPUT;
            }
            dt_info("--resume job: Slurm job %s has no checkpoint of %s under %s yet: a new run", job, cfg->arch,
                    cfg->results);
            return DT_OK;
        }
    } else if (access(cfg->resume, R_OK) != 0) {
        dt_error("--resume %s: %s", cfg->resume, strerror(errno));
        return DT_ERR_INPUT;
    } else
        snprintf(r->resume_path, sizeof r->resume_path, "%s", cfg->resume);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", r->resume_path);
    snprintf(r->dir, sizeof r->dir, "%s", dirname(tmp));
    r->resuming = 1;
    return cfg->evaluate ? DT_OK : lock_run_dir(r); /* two runs on one directory would overwrite each other */
}

const char *dt_run_position(const dt_run *r, char *buf, size_t n)
{
    const dt_progress *p = &r->progress;
    snprintf(buf, n, "step %lld (epoch %lld [%lld/%lld])", (long long)p->global_step, (long long)p->epoch,
             (long long)p->step, (long long)r->steps_per_epoch);
    return buf;
}

/* rank 0: a checkpoint's progress makes sense for this run (the file may be damaged, or edited):
 * DT_OK, or DT_ERR_INPUT after one line naming the file and the value */
static int check_progress(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    const dt_progress *p = &r->progress;
    const dt_epoch_sums *e = &p->sums;
    const char *why = NULL;
    char buf[160];
    if (p->epoch < 0 || p->epoch > (1 << 30))
        snprintf(buf, sizeof buf, "epoch %lld", (long long)p->epoch), why = buf;
    else if (p->step < 0 || (p->step > r->steps_per_epoch && !cfg->evaluate)) /* ==: trained, validation pending */
        snprintf(buf, sizeof buf, "step %lld of an epoch of %lld steps (batch %d on %d rank%s, --accum-steps %d)",
                 (long long)p->step, (long long)r->steps_per_epoch, cfg->batch, r->launch.size,
                 r->launch.size > 1 ? "s" : "", cfg->accum_steps), why = buf;
    else if (p->global_step < 0 || r->opt.steps < 0 || r->model.step > (uint64_t)1 << 62)
        snprintf(buf, sizeof buf, "global step %lld, optimiser steps %lld", (long long)p->global_step,
                 (long long)r->opt.steps), why = buf;
    else if (!isfinite(p->best_top1) || p->best_top1 < -1 || p->best_top1 > 100)
        snprintf(buf, sizeof buf, "best top-1 %g", p->best_top1), why = buf;
    else if (!isfinite(e->loss) || !(e->seconds >= 0) || !(e->data_seconds >= 0) || e->seen < 0 || e->images < 0 ||
             e->steps < 0 || e->hits1 < 0 || e->hits5 < e->hits1 || e->hits5 > e->seen ||
             e->steps > p->step * cfg->accum_steps)
        snprintf(buf, sizeof buf, "the epoch's sums (loss %g, %lld of %lld seen hit, %lld steps)", e->loss,
                 (long long)e->hits1, (long long)e->seen, (long long)e->steps), why = buf;
    if (!why && !cfg->evaluate && (p->epoch > cfg->epochs || (p->epoch == cfg->epochs && p->step > 0))) {
        /* nothing would train, and the run's end would be logged as done: a half-trained epoch as
         * complete (1/1 in dtreport) */
        char at[96];
        dt_error("--epochs %d: %s is at %s, past this run's last epoch (%d): nothing would train (give --epochs %lld "
                 "or more to go on)",
                 cfg->epochs, r->resume_path, dt_run_position(r, at, sizeof at), cfg->epochs - 1,
                 (long long)p->epoch + (p->step > 0));
        return DT_ERR_INPUT;
    }
    if (!why)
        return DT_OK;
    dt_error("%s: cannot resume from %s: the checkpoint is damaged, or from a run with other data, batch or ranks",
             r->resume_path, why);
    return DT_ERR_INPUT;
}

/* one difference between the checkpoint's run and this command, into the line same_run says */
static void differs(char *line, size_t n, const char *what, const char *was, const char *now)
{
    size_t k = strlen(line);
    snprintf(line + k, n - k, "%s%s %s (this command: %s)", k ? "; " : "", what, was, now);
}

/* rank 0, training (not -e): the resumed run is the run its checkpoint continues. What its state was
 * made with, and how the data is cut into steps, must be this command's: the optimizer (its state),
 * the opt level and reduced
 * type, BN's and the master weights' types (the stored tensors), the momentum and Nesterov (the
 * momentum buffer), --model-ema (the average: turned off, it would be dropped; turned on, it would
 * start mid-run), the batch per rank, the ranks and --accum-steps (the step a checkpoint stopped at
 * counts batches of that size: another one skips or repeats images). A difference is refused in one
 * line naming each, both ways alike; --pretrained starts a new run from the weights. Schedules,
 * epochs, lr and the rest steer what comes next and may change. A checkpoint without a record
 * ("{}", or text that is not JSON) is not checked. f: the checkpoint, open, its architecture
 * checked (dt_checkpoint_open). */
static int same_run(dt_run *r, hid_t f)
{
    const dt_train_cfg *cfg = r->cfg;
    char *text = malloc(1 << 16);
    if (!text)
        return DT_ERR_NOMEM;
    int rc = dt_checkpoint_config(f, r->resume_path, text, 1 << 16);
    json_t *j = rc == DT_OK ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (rc != DT_OK || !j)
        return rc;
    char line[1024] = "", was[64], now[64];
    const dt_amp_props *p = &r->amp.props;
    json_t *amp = json_object_get(j, "amp"), *opt = json_object_get(j, "optimizer"), *v;
    static const char *const levels[] = {"O0", "O1", "O2", "O3"};
    if ((v = json_object_get(opt, "name")) && json_is_string(v) && strcmp(json_string_value(v), dt_optim_name(&r->opt)))
        differs(line, sizeof line, "--opt", json_string_value(v), dt_optim_name(&r->opt));
    int level = -1;
    if ((v = json_object_get(amp, "opt_level")) && json_is_integer(v) && (level = (int)json_integer_value(v)) >= 0 &&
        level < 4 && level != p->opt_level)
        differs(line, sizeof line, "--opt-level", levels[level], levels[p->opt_level]);
    const char *prec = p->reduced == DT_BFLOAT16 ? "bf16" : "fp16";
    if (level == p->opt_level && level > 0 && (v = json_object_get(amp, "precision")) && json_is_string(v) &&
        strcmp(json_string_value(v), prec))
        differs(line, sizeof line, "--precision", json_string_value(v), prec);
    if (level == p->opt_level && (v = json_object_get(amp, "keep_batchnorm_fp32")) && json_is_boolean(v) &&
        json_is_true(v) != !!p->keep_batchnorm_fp32)
        differs(line, sizeof line, "--keep-batchnorm-fp32", json_is_true(v) ? "true" : "false",
                p->keep_batchnorm_fp32 ? "true" : "false");
    if (level == p->opt_level && (v = json_object_get(amp, "master_weights")) && json_is_boolean(v) &&
        json_is_true(v) != !!p->master_weights)
        differs(line, sizeof line, "--master-weights", json_is_true(v) ? "true" : "false",
                p->master_weights ? "true" : "false");
    if ((v = json_object_get(opt, "momentum")) && json_is_number(v) &&
        (float)json_number_value(v) != r->opt.momentum) {
        snprintf(was, sizeof was, "%g", (double)(float)json_number_value(v));
        snprintf(now, sizeof now, "%g", (double)r->opt.momentum);
        differs(line, sizeof line, "--momentum", was, now);
    }
    if ((v = json_object_get(opt, "nesterov")) && json_is_boolean(v) && json_is_true(v) != !!r->opt.nesterov)
        differs(line, sizeof line, "--nesterov", json_is_true(v) ? "on" : "off", r->opt.nesterov ? "on" : "off");
    if ((v = json_object_get(j, "model_ema")) && json_is_null(v) == r->have_ema)
        differs(line, sizeof line, "--model-ema", r->have_ema ? "off" : "on", r->have_ema ? "on" : "off");
    static const struct { const char *key, *flag; } ints[] = {
        {"batch_per_rank", "--batch-size"}, {"world_size", "ranks"}};
    const long mine[] = {cfg->batch, r->launch.size};
    for (int i = 0; i < 2; i++)
        if ((v = json_object_get(j, ints[i].key)) && json_is_integer(v) && json_integer_value(v) != mine[i]) {
            snprintf(was, sizeof was, "%lld", (long long)json_integer_value(v));
            snprintf(now, sizeof now, "%ld", mine[i]);
            differs(line, sizeof line, ints[i].flag, was, now);
        }
    if ((v = json_object_get(json_object_get(j, "ddp"), "accum_steps")) && json_is_integer(v) &&
        json_integer_value(v) != cfg->accum_steps) {
        snprintf(was, sizeof was, "%lld", (long long)json_integer_value(v));
        snprintf(now, sizeof now, "%d", cfg->accum_steps);
        differs(line, sizeof line, "--accum-steps", was, now);
    }
    json_decref(j);
    if (!line[0])
        return DT_OK;
    dt_error("--resume %s: the run was trained with %s; a resumed run keeps what its state and steps were made with "
             "(give those again, or start a new run from its weights with --pretrained %s)",
             r->resume_path, line, r->resume_path);
    return DT_ERR_INPUT;
}

int dt_rundir_resume(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    hid_t f = -1;
    int rc = find_resume(r, &f);
    if (rc != DT_OK || !r->resuming) {
        if (f >= 0)
            H5Fclose(f);
        return rc;
    }
    /* the checkpoint opened (and probed) once: its schema and architecture, its record, its state */
    if ((f = dt_checkpoint_open(r->resume_path, f, &r->model)) < 0)
        return DT_ERR_INPUT;
    rc = cfg->evaluate ? DT_OK : same_run(r, f);
    if (rc == DT_OK)
        rc = dt_checkpoint_read(f, r->resume_path, &r->model, &r->opt, &r->amp, r->have_ema ? &r->ema : NULL,
                                &r->progress);
    H5Fclose(f);
    DT_TRY(rc);
    DT_TRY(check_progress(r));
    if (cfg->scale_window) /* given again: it wins over the checkpoint's */
        r->amp.scaler.growth_interval = cfg->scale_window;
    if (cfg->start_epoch)
        dt_warn("--start-epoch %d: ignored, the checkpoint says where to resume", cfg->start_epoch);
    return DT_OK;
}

/* every op issued so far to the backend's compute queue complete (backend.h: a communicator reads
 * its memory next) */
static int ops_complete(const dt_backend *be)
{
    dt_event *e = be->event_create();
    if (!e)
        return DT_ERR_NOMEM;
    be->event_record(e, DT_QUEUE_COMPUTE);
    be->event_sync(e);
    be->event_destroy(e);
    return DT_OK;
}

int dt_rundir_share_resumed(dt_run *r)
{
    dt_comm *comm = r->comm;
    if (comm->size == 1)
        return DT_OK;
    DT_TRY(comm->ops->broadcast(comm, r->model.counts, (size_t)r->model.n_counts, DT_INT64, 0));
    dt_comm *dev = r->device_comm ? r->device_comm : comm; /* the backend's memory: NCCL when it is a device's */
    DT_TRY(ops_complete(r->model.be)); /* what the restore's ops wrote, before the comm reads it */
    if (r->opt.momentum_buf)
        DT_TRY(dev->ops->broadcast(dev, r->opt.momentum_buf, (size_t)r->model.n_weights, DT_FLOAT32, 0));
    if (r->opt.second_buf)
        DT_TRY(dev->ops->broadcast(dev, r->opt.second_buf, (size_t)r->model.n_weights, DT_FLOAT32, 0));
    if (r->have_ema) { /* the average: rank 0's, as the checkpoint holds it */
        DT_TRY(dev->ops->broadcast(dev, r->ema.avg_w, (size_t)r->model.n_weights, DT_FLOAT32, 0));
        DT_TRY(dev->ops->broadcast(dev, r->ema.avg_b, (size_t)r->model.n_buffers, DT_FLOAT32, 0));
        DT_TRY(comm->ops->broadcast(comm, r->ema.counts, (size_t)r->model.n_counts, DT_INT64, 0));
        DT_TRY(comm->ops->broadcast(comm, &r->ema.n_averaged, 1, DT_INT64, 0));
        DT_TRY(comm->ops->broadcast(comm, &r->ema.empty, 1, DT_INT64, 0));
    }
    if (r->amp.master)
        DT_TRY(dev->ops->broadcast(dev, r->amp.master, (size_t)r->model.n_weights, DT_FLOAT32, 0));
    dt_progress *p = &r->progress;
    dt_scaler *s = &r->amp.scaler;
    int64_t iv[9] = {p->epoch,       p->step,      p->global_step, r->opt.steps,       (int64_t)r->model.step,
                     s->clean_steps, s->overflows, s->dynamic,     s->growth_interval};
    double dv[3] = {p->best_top1, s->scale, s->min_scale};
    DT_TRY(comm->ops->broadcast(comm, iv, 9, DT_INT64, 0));
    DT_TRY(comm->ops->broadcast(comm, dv, 3, DT_FLOAT64, 0));
    p->epoch = iv[0]; /* the epoch's metrics so far (progress.sums) stay rank 0's, which logs them */
    p->step = iv[1];
    p->global_step = iv[2];
    p->best_top1 = dv[0];
    r->opt.steps = iv[3];
    r->model.step = (uint64_t)iv[4];
    s->clean_steps = iv[5];
    s->overflows = iv[6];
    s->dynamic = (int)iv[7];
    s->growth_interval = iv[8];
    s->scale = dv[1];
    s->min_scale = dv[2];
    return dt_amp_put_state(s, r->opt.steps, &r->model);
}

int dt_rundir_prepare(dt_run *r)
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

void dt_rundir_discard(dt_run *r)
{
    char path[4400];
    static const char *const sub[] = {"logs", ""};
    for (int i = 0; i < 2; i++) { /* logs/rank-*.log, then the run's own files */
        snprintf(path, sizeof path, "%s/%s", r->dir, sub[i]);
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            const char *n = e->d_name;
            int ours = i == 0 ? !strncmp(n, "rank-", 5) && strstr(n, ".log")
                              : !strcmp(n, "run.json") || !strcmp(n, "metrics.jsonl") || !strcmp(n, ".lock") ||
                                    !strncmp(n, "events.out.tfevents.", 20);
            if (ours && snprintf(path, sizeof path, "%s/%s%s%s", r->dir, sub[i], *sub[i] ? "/" : "", n) <
                            (int)sizeof path)
                unlink(path);
        }
        if (d)
            closedir(d);
    }
    snprintf(path, sizeof path, "%s/logs", r->dir);
    rmdir(path);
    if (rmdir(r->dir) == 0)
        dt_info("%s: removed (the run did not start)", r->dir);
}

int dt_rundir_save(dt_run *r)
{
    if (r->launch.rank != 0)
        return DT_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.h5", r->dir);
    int rc = dt_checkpoint_save(path, &r->model, &r->opt, &r->amp, r->have_ema ? &r->ema : NULL, &r->progress,
                                r->run_json);
    if (rc == DT_ERR_STATE) /* NaN or inf in the state (BN statistics, say): the run is over */
        dt_metrics_end(r, "diverged");
    return rc;
}

int dt_rundir_repair_best(dt_run *r)
{
    const dt_progress *p = &r->progress;
    if (p->step != 0 || p->best_epoch < 0 || p->best_epoch != p->epoch - 1)
        return DT_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/model_best.h5", r->dir);
    if (dt_checkpoint_epoch(path) == p->epoch)
        return DT_OK;
    dt_warn("%s: not written for epoch %lld's best top-1 %.2f%% (the run stopped before): written now from %s, "
            "which holds that state",
            path, (long long)p->best_epoch, p->best_top1, r->resume_path);
    return dt_rundir_save_best(r);
}

int dt_rundir_save_best(dt_run *r)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/model_best.h5", r->dir);
    return dt_checkpoint_save(path, &r->model, &r->opt, &r->amp, r->have_ema ? &r->ema : NULL, &r->progress,
                              r->run_json);
}
