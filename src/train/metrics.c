/* metrics.c: what a run records as it goes, all on rank 0 (contract in trainer_int.h).
 *
 * In the run directory: run.json (the resolved configuration and what the command line said, written
 * once at start, whole, and kept in every checkpoint; rewritten only when a failed capture turns the
 * run's graphs off: the record says what the steps ran as), metrics.jsonl (one JSON object a line:
 * "step" lines every print_freq steps, an "epoch" line per epoch with its validation, an "end" line
 * saying why the run stopped) and TensorBoard events (the seed tutorial's scalars per epoch). On the
 * terminal: the progress line of each print_freq steps. JSON has no NaN or infinity: such values are written as null. A failed write to
 * metrics.jsonl is said once and the run goes on (its checkpoints matter more than its log), to exit
 * 1 at the end; TensorBoard events that cannot be written are dropped with a warning. */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/augment.h"
#include "data/image.h"
#include "train/trainer_int.h"
#include "util/atomic.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

/* seconds since the epoch, UTC, with the fraction: when a metrics line was written */
static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a JSON number, or null for NaN and infinities (JSON has no such numbers: jansson refuses them) */
static json_t *jnum(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* run.json: the resolved configuration; its compact text is kept for the checkpoints (r->run_json) */

/* j (taken) as the run's record: run.json replaced whole under a temporary name (a crash or a full
 * disk leaves the one before, or none), then its compact text in r->run_json. DT_OK, or DT_ERR_SYS
 * / DT_ERR_NOMEM after one line. */
static int record_run(dt_run *r, json_t *j)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/run.json", r->dir);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!text) {
        json_decref(j);
        dt_error("%s: out of memory", path);
        return DT_ERR_NOMEM;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    dt_remove_stale_tmp(r->dir, "run.json");
    errno = 0;
    int rc = json_dump_file(j, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? DT_OK : DT_ERR_SYS;
    int err = errno;
    json_decref(j);
    if (rc != DT_OK) {
        dt_error("%s: cannot write: %s", path, err ? strerror(err) : "jansson's json_dump_file failed");
        unlink(tmp);
        free(text);
        return rc;
    }
    if ((rc = dt_commit_file(r->dir, tmp, path)) != DT_OK) {
        free(text);
        return rc;
    }
    free(r->run_json); /* the checkpoints keep the record too */
    r->run_json = text;
    return DT_OK;
}

/* a JSON string of text; bytes that are not UTF-8 (a path's) become '?' (jansson takes UTF-8 only) */
static json_t *json_text(const char *text)
{
    json_t *j = json_string(text);
    char *c = j ? NULL : strdup(text);
    if (c) {
        for (char *p = c; *p; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
        j = json_string(c);
        free(c);
    }
    return j;
}

/* what the command line said: "recipe" (cfg->recipe, or null) and "options" (cfg->options: {name:
 * its text, or true/false for a flag}) into j; 0, or -1 when out of memory */
static int record_options(const dt_train_cfg *cfg, json_t *j)
{
    json_t *opts = json_object();
    int bad = !opts;
    for (int i = 0; i < cfg->n_options && !bad; i++) {
        const dt_train_option *o = &cfg->options[i];
        json_t *v = o->value ? json_text(o->value) : json_boolean(o->on);
        bad = !v || json_object_set_new(opts, o->name, v) != 0; /* a set takes the value, also when it fails */
    }
    if (bad) {
        json_decref(opts);
        return -1;
    }
    /* the options (and DATA) whose value is an environment variable's: {"DT_BATCH": "8", ...} */
    json_t *env = json_object();
    bad = !env || (cfg->data_from_env && json_object_set_new(env, "DT_DATA", json_text(cfg->data)) != 0);
    for (int i = 0; i < cfg->n_options && !bad; i++)
        if (cfg->options[i].env)
            bad = json_object_set_new(env, cfg->options[i].env, cfg->options[i].value ? json_text(cfg->options[i].value)
                                                                                      : json_boolean(cfg->options[i].on)) != 0;
    if (bad)
        json_decref(env);
    if (bad || json_object_set_new(j, "environment", env) != 0) { /* a set takes env, also when it fails */
        json_decref(opts);
        return -1;
    }
    bad = json_object_set_new(j, "recipe", cfg->recipe ? json_text(cfg->recipe) : json_null()) != 0;
    bad |= json_object_set_new(j, "options", opts) != 0;
    return bad ? -1 : 0;
}

/* the optimizer and its settings (run.json's "optimizer") */
static json_t *optimizer_json(const dt_optim *o)
{
    switch (o->kind) {
    case DT_OPT_ADAM:
    case DT_OPT_ADAMW:
        return json_pack("{s:s, s:[f, f], s:f}", "name", dt_optim_name(o), "betas", o->beta1, o->beta2, "eps", o->eps);
    case DT_OPT_LAMB:
        return json_pack("{s:s, s:[f, f], s:f}", "name", dt_optim_name(o), "betas", o->beta1, o->beta2, "eps", o->eps);
    case DT_OPT_LARS:
        return json_pack("{s:s, s:f, s:f}", "name", dt_optim_name(o), "momentum", (double)o->momentum, "trust",
                         o->trust);
    case DT_OPT_RMSPROP:
        return json_pack("{s:s, s:f, s:f, s:f}", "name", dt_optim_name(o), "alpha", o->alpha, "eps", o->eps, "momentum",
                         (double)o->momentum);
    default:
        return json_pack("{s:s, s:f, s:b}", "name", dt_optim_name(o), "momentum", (double)o->momentum, "nesterov",
                         o->nesterov);
    }
}

static int write_run_json(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    const dt_amp_props *p = &r->amp.props;
    json_t *lr_steps = json_array();
    for (int i = 0; i < cfg->n_lr_steps; i++)
        json_array_append_new(lr_steps, json_integer(cfg->lr_steps[i]));
    json_t *j = json_pack(
        "{s:s, s:s, s:s?, s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:s, s:o, s:f, s:f, s:f, s:f, s:I, s:i, "
        "s:{s:i, s:s, s:b, s:b, s:s, s:f}, s:{s:f, s:f, s:b, s:b, s:i}, s:b, s:b, s:s?, s:i, s:s?, s:i, s:i, s:s, "
        "s:s, s:s, s:o}",
        "dtrain", PACKAGE_VERSION, "arch", cfg->arch, "data", cfg->data,
        "launch", dt_launch_kind_name(r->launch.kind), "world_size", r->launch.size,
        "device", cfg->cuda ? "cuda" : "cpu", "batch_per_rank", cfg->batch,
        "global_batch", cfg->batch * r->launch.size * cfg->accum_steps, "epochs", cfg->epochs,
        "workers", cfg->workers, "lr", cfg->lr, "lr_scaled", r->base_lr,
        "lr_schedule", dt_lr_schedule_names[cfg->lr_schedule], "lr_steps", lr_steps,
        "warmup_epochs", cfg->warmup_epochs, "momentum", cfg->momentum, "weight_decay", cfg->wd,
        "label_smoothing", cfg->label_smoothing, "seed", (json_int_t)cfg->seed, "classes", r->classes,
        "amp",
            "opt_level", p->opt_level, "precision", p->reduced == DT_BFLOAT16 ? "bf16" : "fp16",
            "keep_batchnorm_fp32", p->keep_batchnorm_fp32, "master_weights", p->master_weights,
            "loss_scale", p->dynamic_loss_scale ? "dynamic" : "static", "loss_scale_start", p->loss_scale,
        "ddp",
            "bucket_mb", cfg->bucket_mb, "first_bucket_mb", cfg->first_bucket_mb, "overlap", !cfg->no_overlap,
            "sync_bn", cfg->sync_bn, "accum_steps", cfg->accum_steps,
        "deterministic", cfg->deterministic, "graphs", r->graphs, "pretrained", cfg->pretrained, "start_epoch", cfg->start_epoch,
        "slurm_job_id", getenv("SLURM_JOB_ID"), "nodes", r->nodes, "ranks_per_node", r->launch.local_size,
        "dataset", r->dataset_name, "started", r->started, "run_dir", r->dir,
        "desired_acc", cfg->desired_acc > 0 ? json_real(100.0 * cfg->desired_acc) : json_null()); /* percent, as
                                                                                                      * dtreport reads it */
    if (j) { /* the parameter groups' weight decays (null: as weight_decay) */
        json_object_set_new(j, "norm_weight_decay", cfg->norm_wd < 0 ? json_null() : json_real(cfg->norm_wd));
        json_object_set_new(j, "bias_weight_decay", cfg->bias_wd < 0 ? json_null() : json_real(cfg->bias_wd));
        json_object_set_new(j, "clip_grad_norm", cfg->clip_grad_norm > 0 ? json_real(cfg->clip_grad_norm) : json_null());
        json_object_set_new(j, "optimizer", optimizer_json(&r->opt));
        json_object_set_new(j, "ra_reps", cfg->ra_sampler ? json_integer(cfg->ra_reps) : json_null());
        json_object_set_new(j, "mixup_alpha", json_real(cfg->mixup_alpha));
        json_object_set_new(j, "cutmix_alpha", json_real(cfg->cutmix_alpha));
        json_object_set_new(j, "augmentation",
                            json_pack("{s:i, s:i, s:s, s:s?, s:i, s:f}", "train_crop_size", r->image_size,
                                      "val_crop_size", r->val_size, "interpolation",
                                      dt_filter_name(cfg->interpolation < 0 ? DT_FILTER_BILINEAR : cfg->interpolation),
                                      "auto_augment",
                                      cfg->auto_augment ? dt_aug_policy_name(cfg->auto_augment) : NULL,
                                      "ra_magnitude", cfg->ra_magnitude, "random_erase", cfg->random_erase));
        json_object_set_new(j, "model_ema", r->have_ema ? json_pack("{s:I, s:f, s:f}", "steps",
                                                                    (json_int_t)r->ema.every, "decay_option",
                                                                    cfg->model_ema_decay, "decay", r->ema.decay)
                                                        : json_null());
    }
    if (j) /* the schedule's other settings, defaults filled in (train/schedule.c) */
        json_object_set_new(j, "lr_schedule_args",
                            json_pack("{s:f, s:I, s:f, s:f, s:b, s:s, s:f}", "gamma", cfg->lr_gamma, "step_size",
                                      (json_int_t)cfg->lr_step_size, "lr_min", cfg->lr_min, "power", cfg->lr_power,
                                      "per_step", cfg->lr_per_step, "warmup_method",
                                      dt_lr_warmup_names[dt_schedule_warmup_method(cfg)], "warmup_decay",
                                      dt_schedule_warmup_decay(cfg)));
    if (j) /* a failed capture's step (dt_metrics_graphs_off) */
        json_object_set_new(j, "graphs_off_at_step", json_null());
    if (j && record_options(cfg, j) != 0) {
        json_decref(j);
        j = NULL;
    }
    return record_run(r, j);
}

int dt_metrics_graphs_off(dt_run *r, int64_t step)
{
    if (r->launch.rank != 0 || !r->run_json)
        return DT_OK;
    json_t *j = json_loads(r->run_json, 0, NULL);
    if (j && (json_object_set_new(j, "graphs", json_false()) != 0 ||
              json_object_set_new(j, "graphs_off_at_step", json_integer(step)) != 0)) {
        json_decref(j);
        j = NULL;
    }
    return record_run(r, j);
}

int dt_metrics_open(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    const dt_launch *launch = &r->launch;
    dt_amp_print(&r->amp_defaults, &r->amp.props, stdout);
    fflush(stdout);
    dt_info("%s on %d rank%s (%s), %d classes, %dx%dx%d input, batch %d per rank, lr %.4g (for %g images), "
            "%lld steps per epoch",
            cfg->arch, launch->size, launch->size > 1 ? "s" : "", dt_launch_kind_name(launch->kind), r->classes,
            r->image_size, r->image_size, r->channels, cfg->batch, r->base_lr,
            (double)cfg->batch * launch->size * cfg->accum_steps, (long long)r->steps_per_epoch);
    if (cfg->desired_acc > 0) /* the fraction as the tutorials give it, and what it means */
        dt_info("--desired-acc %g: stop at %.2f%% top-1 (validation, at an epoch's end)", cfg->desired_acc,
                100.0 * cfg->desired_acc);
    DT_TRY(write_run_json(r));
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->dir);
    if (!(r->metrics = fopen(path, r->resuming ? "a" : "w"))) {
        dt_error("%s: cannot create: %s", path, strerror(errno));
        return DT_ERR_SYS;
    }
    /* a resumed run adds a new events file beside the old one, as TensorBoard expects */
    return dt_tb_open(&r->tb, r->dir);
}

void dt_metrics_close(dt_run *r)
{
    if (r->metrics)
        fclose(r->metrics);
    r->metrics = NULL;
    dt_tb_close(r->tb);
    r->tb = NULL;
    free(r->run_json);
    r->run_json = NULL;
}

/* one line of metrics.jsonl (j is taken; NULL: a value JSON cannot hold) */
static void metrics_line(dt_run *r, json_t *j)
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
                 (long long)r->progress.global_step);
    r->metrics_lost |= bad;
}

int dt_metrics_due(const dt_run *r, int64_t step_in_epoch)
{
    int print_freq = r->cfg->print_freq;
    return r->launch.rank == 0 && print_freq > 0 &&
           (step_in_epoch % print_freq == 0 || step_in_epoch == r->steps_per_epoch);
}

void dt_metrics_progress(dt_run *r, dt_progress_clock *clock, int epoch, int64_t step_in_epoch, int64_t step,
                         const dt_epoch_sums *sums, double loss, double lr)
{
    int64_t per_epoch = r->steps_per_epoch;
    if (!dt_metrics_due(r, step_in_epoch))
        return;
    double t = dt_seconds(), world = r->launch.size;
    double epoch_rate = (double)sums->images * world / (t - clock->epoch_start);
    double rate = (double)(sums->images - clock->mark_images) * world / (t - clock->mark); /* this interval's */
    double eta = (double)(per_epoch - step_in_epoch) * (t - clock->epoch_start) / (double)step_in_epoch;
    double data_ms = 1e3 * sums->data_seconds / (double)step_in_epoch;
    clock->mark = t;
    clock->mark_images = sums->images;
    dt_info("epoch %d [%lld/%lld] loss %.4f top-1 %.2f%% %.1f img/s data %.1f ms/step lr %.4g scale %g ETA %.0f s",
            epoch, (long long)step_in_epoch, (long long)per_epoch, loss,
            100.0 * (double)sums->hits1 / (double)(sums->seen ? sums->seen : 1), rate, data_ms, lr,
            r->amp.scaler.scale, eta);
    if (r->metrics)
        metrics_line(r, json_pack("{s:s, s:i, s:I, s:I, s:f, s:o, s:f, s:f, s:f, s:f, s:f}", "kind", "step", "epoch",
                                  epoch, "epoch_step", (json_int_t)step_in_epoch, "step", (json_int_t)step, "lr", lr,
                                  "train_loss", jnum(loss), "img_per_s", rate, "epoch_img_per_s", epoch_rate,
                                  "data_ms", data_ms, "loss_scale", r->amp.scaler.scale, "time", wall_now()));
}

void dt_metrics_epoch(dt_run *r, int epoch, const dt_epoch_sums *sums, double lr, const dt_validation *v,
                      double val_images_per_s)
{
    double steps = (double)(sums->steps ? sums->steps : 1), seen = (double)(sums->seen ? sums->seen : 1);
    double loss = sums->loss / steps, top1 = 100.0 * (double)sums->hits1 / seen;
    double top5 = 100.0 * (double)sums->hits5 / seen;
    double rate = (double)sums->images * r->launch.size / sums->seconds;
    double step_time = sums->seconds * r->cfg->accum_steps / steps;
    if (r->tb) { /* the seed tutorial's tags, at step epoch + 1 */
        dt_tb *tb = r->tb;
        int64_t at = epoch + 1;
        int bad = dt_tb_scalar(tb, "Loss/train", at, loss) || dt_tb_scalar(tb, "Top1/train", at, top1) ||
                  dt_tb_scalar(tb, "Top5/train", at, top5) || dt_tb_scalar(tb, "Throughput/train", at, rate) ||
                  dt_tb_scalar(tb, "Time/train", at, step_time) || dt_tb_scalar(tb, "Lr", at, lr) ||
                  dt_tb_scalar(tb, "LossScale", at, r->amp.scaler.scale);
        if (!bad && v)
            bad = dt_tb_scalar(tb, "Loss/val", at, v->loss) || dt_tb_scalar(tb, "Top1/val", at, v->top1) ||
                  dt_tb_scalar(tb, "Top5/val", at, v->top5) ||
                  dt_tb_scalar(tb, "Throughput/val", at, val_images_per_s) ||
                  dt_tb_scalar(tb, "Time/val", at, v->batch_seconds);
        if (!bad && v && v->ema_top1 >= 0) /* the model's average (--model-ema) */
            bad = dt_tb_scalar(tb, "Loss/val_ema", at, v->ema_loss) ||
                  dt_tb_scalar(tb, "Top1/val_ema", at, v->ema_top1) || dt_tb_scalar(tb, "Top5/val_ema", at, v->ema_top5);
        if (bad || dt_tb_flush(tb) != DT_OK) { /* the run goes on: metrics.jsonl has the same */
            dt_warn("TensorBoard events: cannot write any more; continuing without them");
            dt_tb_close(tb);
            r->tb = NULL;
        }
    }
#define VAL(x) (v ? jnum(x) : json_null())
    const int ema = v && v->ema_top1 >= 0;
    metrics_line(r, json_pack("{s:s, s:i, s:I, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:I, s:f, "
                              "s:o, s:o, s:o}",
                              "kind", "epoch", "epoch", epoch, "step", (json_int_t)r->progress.global_step, "lr", lr,
                              "train_loss", jnum(loss), "train_top1", jnum(top1), "train_top5", jnum(top5),
                              "val_loss", VAL(v->loss), "val_top1", VAL(v->top1), "val_top5", VAL(v->top5),
                              "img_per_s", jnum(rate), "val_img_per_s", VAL(val_images_per_s), "time_s",
                              sums->seconds, "step_time_s", step_time, "loss_scale", r->amp.scaler.scale,
                              "overflows", (json_int_t)r->amp.scaler.overflows, "time", wall_now(),
                              "val_ema_loss", ema ? jnum(v->ema_loss) : json_null(),
                              "val_ema_top1", ema ? jnum(v->ema_top1) : json_null(),
                              "val_ema_top5", ema ? jnum(v->ema_top5) : json_null()));
#undef VAL
}

void dt_metrics_end(dt_run *r, const char *reason)
{
    if (!r->metrics)
        return;
    metrics_line(r, json_pack("{s:s, s:s, s:I, s:I, s:I, s:f}", "kind", "end", "reason", reason, "epoch",
                              (json_int_t)r->progress.epoch, "step", (json_int_t)r->progress.global_step, "signal",
                              (json_int_t)r->stopped_by, "time", wall_now()));
}
