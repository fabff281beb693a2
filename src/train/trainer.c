/* trainer.c: the training run (contract in trainer.h), as a sequence of phases.
 *
 *   connect_ranks     the launch, the communicators, and the same options on every rank
 *   check_inputs      the data (data.c), the device, the model: every input check, on every rank
 *   resume_or_init    the optimiser, and where training starts (rank 0 reads a --resume checkpoint)
 *   open_run_dir      rank 0 makes (or reopens) the run directory
 *   join_run          every rank logs into it; rank 0 says whether it resumes
 *   start_ddp         rank 0's weights and resumed state to every rank
 *   evaluate          --evaluate: validation only, then the end
 *   start_records     rank 0: the start-up print, run.json, metrics.jsonl, TensorBoard
 *   dt_run_epochs     training (epoch.c, step.c)
 *   finish, release   the exit code; every resource, whichever phase failed
 *
 * Bad input is found on every rank before anything is written: the ranks agree on each start-up
 * verdict (the worst status wins), so it is one line and exit 2 everywhere with nothing written.
 * Failures after the run directory exists are run-time ones (exit 1). The other files of the run
 * are listed in trainer_int.h. */
#include "config.h"

#include <math.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/agree.h"
#include "train/trainer_int.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

/* dt_train_defaults: train/flags.c, from the table of options */

/* every rank's verdict on a start-up phase: the worst status wins (a rank that passed gets
 * DT_ERR_INPUT when another failed) */
static int agree(dt_run *r, int rc)
{
    int32_t v = rc == DT_OK ? 0 : 1;
    if (r->comm && r->comm->size > 1 && r->comm->ops->allreduce(r->comm, &v, &v, 1, DT_INT32, DT_MAX) != DT_OK)
        return DT_ERR_STATE;
    return v ? (rc != DT_OK ? rc : DT_ERR_INPUT) : DT_OK;
}

/* the backend of a --device cuda run: NULL in a build without CUDA */
static const dt_backend *cuda_backend(void)
{
#ifdef HAVE_CUDA
    return &dt_backend_cuda;
#else
    return NULL;
#endif
}

/* this rank's device: --device cuda takes the local rank's GPU (dt_launch_pick_gpu) and makes it
 * current; r->where says where the rank runs, for its first log line. DT_OK or DT_ERR_INPUT. */
static int choose_device(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    const dt_launch *launch = &r->launch;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    r->device_ready = 1;
    snprintf(r->where, sizeof r->where, "cpu, %d compute thread%s%s%s%s", dt_cpu_threads(), dt_cpu_threads() > 1 ? "s" : "",
             cfg->device_why ? " (" : "", cfg->device_why ? cfg->device_why : "", cfg->device_why ? ")" : "");
    if (!cfg->cuda && visible && *visible) { /* a CPU run in a GPU allocation: say what --device cuda would take */
        char gpu[256];
        if (dt_launch_pick_gpu(visible, -1, launch->local_rank, launch->local_size, gpu, sizeof gpu) >= 0)
            snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where),
                     "; its GPU %s stays unused (CUDA_VISIBLE_DEVICES=%s)", gpu, visible);
        else
            snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where), "; with --device cuda: %s", gpu);
    }
    if (!cfg->cuda)
        return DT_OK;
    const dt_backend *be = cuda_backend();
    if (!be) {
        dt_error("--device cuda: this dtrain was built without CUDA (configure --with-cuda)");
        return DT_ERR_INPUT;
    }
    char gpu[256];
    r->device = dt_launch_pick_gpu(visible, dt_gpu_count(), launch->local_rank, launch->local_size, gpu, sizeof gpu);
    if (r->device < 0) {
        dt_error("--device cuda: %s", gpu);
        return DT_ERR_INPUT;
    }
    snprintf(r->where, sizeof r->where, "GPU %s (device %d; CUDA_VISIBLE_DEVICES=%s%s%s)", gpu, r->device,
             visible ? visible : "unset", cfg->device_why ? "; " : "", cfg->device_why ? cfg->device_why : "");
    /* cuDNN's fastest algorithms by default, deterministic ones with --deterministic; how far the search
     * goes to find them: --cudnn-search (the same numbers as dt_backend_options.conv_search) */
    dt_backend_options o = {.device = r->device,
                            .deterministic = cfg->deterministic,
                            .conv_search = cfg->cudnn_search,
                            .conv_search_s = cfg->cudnn_search_s};
    if (be->init && be->init(&o) != DT_OK)
        return DT_ERR_INPUT;
    dt_log_set_device(r->device);
    return DT_OK;
}

int dt_train_check_launch(const dt_train_cfg *cfg, const dt_launch *l)
{
    if (!cfg->world_size || cfg->world_size == l->size)
        return DT_OK;
    if (l->rank == 0) /* the ImageNet example's --world-size counts nodes under --multiprocessing-distributed */
        dt_error("--world-size %d: this launch (%s) has %d rank%s; dtrain's --world-size counts every rank, "
                 "as torchrun's WORLD_SIZE does (give %d, or none)",
                 cfg->world_size, dt_launch_kind_name(l->kind), l->size, l->size > 1 ? "s" : "", l->size);
    return DT_ERR_INPUT;
}

/* The launch (rank and size), the communicators, then the first collective: every rank has the same
 * options. DT_ERR_INPUT (exit 2) when the launch cannot carry this run or the options differ; another
 * status (exit 1) when the launch itself failed or a collective timed out (which ends the job). */
static int connect_ranks(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    dt_launch_set_timeout(cfg->comm_timeout); /* MPI_Init waits for every rank: within the start-up's deadline */
    if (dt_launch_init(&r->launch) != DT_OK)
        return DT_ERR_SYS;
    r->launched = 1;
    DT_TRY(dt_train_check_launch(cfg, &r->launch));
    dt_cpu_set_threads(cfg->threads);
    int rc = DT_OK, device = -1;
    if (cfg->cuda && r->launch.size > 1 && r->launch.kind != DT_LAUNCH_MPI) { /* NCCL needs the GPU first */
        rc = choose_device(r);
        device = r->device;
    }
    if (rc == DT_OK) /* libdt's rule, as dt_init's: GPU ranks without MPI reduce host buffers over NCCL too */
        rc = dt_comm_connect(&r->launch, device, cfg->comm_timeout, &r->comm, &r->device_comm);
    if (rc != DT_OK) /* a launch that cannot carry this run is a bad start */
        return rc == DT_ERR_STATE ? DT_ERR_INPUT : rc;
    /* one deadline for every collective until training */
    dt_comm_startup(r->comm, cfg->comm_timeout - r->launch.waited_s);
    return dt_agree_options(r->comm, cfg);
}

/* DT_PROFILE's steps (model.h, doc/dtrain.1): "last" or "last:K", the run's last K steps (r->prof_last);
 * any other value (not empty, not 0): every step. Outside the steps (validation, -e) nothing is
 * profiled. DT_ERR_INPUT after one line for a K that is not a number from 1. */
static int profile_steps(dt_run *r)
{
    const char *v = getenv("DT_PROFILE");
    r->model.profiling = 0; /* dt_run_step switches it on for the steps profiled */
    r->prof_last = 0;
    if (!r->model.profile || strncmp(v, "last", 4) != 0)
        return DT_OK;
    if (!v[4]) {
        r->prof_last = 1;
        return DT_OK;
    }
    long k;
    if (v[4] != ':') {
        dt_error("DT_PROFILE=%s: expected 1 (every step), last or last:K (the run's last K steps)", v);
        return DT_ERR_INPUT;
    }
    DT_TRY(dt_parse_long("DT_PROFILE=last:K", v + 5, 1, 1L << 40, &k));
    r->prof_last = k;
    return DT_OK;
}

/* the model on this rank's backend: initial (or, on rank 0, --pretrained) weights, mixed precision,
 * and all its memory planned for a batch, the backend prepared for every batch size the loaders
 * will give (an epoch's last batch, validation's tail: none is met unplanned mid-run) */
static int build_model(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    /* --graph on the CPU: its backend with graphs (what CUDA's are, on the CPU: nothing is faster) */
    const dt_backend *be = cfg->graph > 0 ? dt_cpu_graph_backend() : &dt_backend_cpu;
    if (cfg->cuda) /* choose_device has refused a build without CUDA */
        be = cuda_backend();
    /* both input sizes on the layers' shapes alone, before the weights are made (VGG's take seconds) */
    dt_model shapes;
    if (dt_model_create_shapes(&shapes, cfg->arch, r->channels, r->classes, be) != DT_OK)
        return DT_ERR_INPUT;
    int fits = dt_model_check_input(&shapes, r->image_size, r->image_size) == DT_OK &&
               dt_model_check_input(&shapes, r->val_size, r->val_size) == DT_OK;
    dt_model_free(&shapes);
    if (!fits || dt_model_create(&r->model, cfg->arch, r->channels, r->classes, be) != DT_OK)
        return DT_ERR_INPUT;
    r->have_model = 1;
    DT_TRY(profile_steps(r));
    dt_model_init_weights(&r->model, cfg->seed + 1, 0);
    /* rank 0 reads the weights; dt_ddp_create gives them to the others */
    if (cfg->pretrained && r->launch.rank == 0 && dt_checkpoint_load_weights(cfg->pretrained, &r->model) != DT_OK)
        return DT_ERR_INPUT;
    dt_amp_props props;
    if (dt_amp_resolve(cfg->opt_level, &cfg->amp, &props) != DT_OK)
        return DT_ERR_INPUT;
    dt_amp_overrides only_type = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = cfg->amp.bf16};
    dt_amp_resolve(cfg->opt_level, &only_type, &r->amp_defaults); /* the level's defaults, for the print */
    DT_TRY(dt_amp_attach(&r->amp, &r->model, &props));
    if (cfg->scale_window)
        r->amp.scaler.growth_interval = cfg->scale_window;
    r->amp.scaler.max_nonfinite = cfg->max_nonfinite;
    int sizes[5], n_sizes = dt_run_batch_sizes(r, sizes);
    return dt_model_plan_inputs(&r->model, cfg->batch, r->image_size, r->image_size, r->val_size, r->val_size, sizes,
                                n_sizes);
}

/* every input check on this rank (nothing written): the data, the device, the model, the loaders */
static int check_inputs(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    DT_TRY(dt_run_open_datasets(r));
    if (!r->device_ready)
        DT_TRY(choose_device(r));
    DT_TRY(build_model(r));
    DT_TRY(dt_run_load_data(r));
    if (cfg->evaluate && !cfg->resume && !cfg->pretrained) {
        if (r->launch.rank == 0)
            dt_error("--evaluate needs the weights to evaluate (--resume PATH|auto, or --pretrained PATH)");
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

/* the optimiser, and where training starts: --start-epoch, or the checkpoint --resume names (rank 0
 * reads it; the others get its state from start_ddp) */
static int resume_or_init(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    r->base_lr = dt_schedule_base_lr(cfg, r->launch.size);
    const int nesterov = cfg->nesterov || cfg->opt == DT_OPTC_SGD_NESTEROV;
    DT_TRY(dt_optim_init(&r->opt, &r->model, (float)r->base_lr, (float)cfg->momentum, 0, (float)cfg->wd, nesterov, 0));
    if (cfg->opt == DT_OPTC_ADAM || cfg->opt == DT_OPTC_ADAMW)
        DT_TRY(dt_optim_use_adam(&r->opt, &r->model, cfg->adam_beta1, cfg->adam_beta2,
                                 cfg->opt_eps < 0 ? 1e-8 : cfg->opt_eps, cfg->opt == DT_OPTC_ADAMW));
    else if (cfg->opt == DT_OPTC_LARS)
        DT_TRY(dt_optim_use_lars(&r->opt, &r->model, cfg->lars_eta));
    else if (cfg->opt == DT_OPTC_LAMB) /* the paper's eps 1e-6 */
        DT_TRY(dt_optim_use_lamb(&r->opt, &r->model, cfg->adam_beta1, cfg->adam_beta2,
                                 cfg->opt_eps < 0 ? 1e-6 : cfg->opt_eps));
    else if (cfg->opt == DT_OPTC_RMSPROP) /* torchvision's: eps 0.0316, alpha 0.9 */
        DT_TRY(dt_optim_use_rmsprop(&r->opt, &r->model, cfg->rmsprop_alpha, cfg->opt_eps < 0 ? 0.0316 : cfg->opt_eps));
    dt_optim_set_group_decay(&r->opt, cfg->norm_wd < 0 ? NAN : (float)cfg->norm_wd,
                             cfg->bias_wd < 0 ? NAN : (float)cfg->bias_wd);
    if (cfg->clip_grad_norm > 0)
        DT_TRY(dt_optim_set_clip(&r->opt, &r->model, (float)cfg->clip_grad_norm));
    if (cfg->model_ema) { /* train.py's decay, adjusted to the global batch and the epochs */
        double decay = dt_ema_adjusted_decay(cfg->model_ema_decay, r->launch.size, cfg->batch * cfg->accum_steps,
                                             cfg->model_ema_steps, cfg->epochs);
        DT_TRY(dt_ema_init(&r->ema, &r->model, decay, cfg->model_ema_steps));
        r->have_ema = 1;
    }
    r->progress.epoch = cfg->start_epoch;
    r->progress.best_epoch = -1;
    r->progress.global_step = (int64_t)cfg->start_epoch * r->steps_per_epoch;
    if (cfg->resume && r->launch.rank == 0)
        DT_TRY(dt_rundir_resume(r));
    return DT_OK;
}

/* rank 0, unless only evaluating: the run directory (rundir.c) */
static int open_run_dir(dt_run *r)
{
    return r->launch.rank == 0 && !r->cfg->evaluate ? dt_rundir_prepare(r) : DT_OK;
}

/* every rank: rank 0's run directory and whether it resumes; this rank's log file in it, and its
 * first line (where the rank runs) */
static int join_run(dt_run *r)
{
    const dt_launch *launch = &r->launch;
    if (r->comm->size > 1) {
        DT_TRY(r->comm->ops->broadcast(r->comm, r->dir, sizeof r->dir, DT_UINT8, 0));
        DT_TRY(r->comm->ops->broadcast(r->comm, &r->resuming, 1, DT_INT32, 0));
    }
    if (!r->cfg->evaluate) { /* on a node without the shared file system: a warning, stderr only */
        char log[4300];
        snprintf(log, sizeof log, "%s/logs/rank-%d.log", r->dir, launch->rank);
        dt_log_open_file(log);
        dt_info("rank %d of %d: node %d, local rank %d of %d, pid %ld, %s", launch->rank, launch->size, launch->node,
                launch->local_rank, launch->local_size, (long)getpid(), r->where);
    }
    if (r->resuming && launch->rank == 0) {
        char at[96];
        dt_info("resuming from %s at %s", r->resume_path, dt_run_position(r, at, sizeof at));
    }
    return DT_OK;
}

/* --model-ema when the checkpoint or --pretrained file has no average (every rank: the model and
 * the average's emptiness are rank 0's by now). A training run starts the average from the model,
 * as AveragedModel does when made; -e has no average to evaluate and says so: evaluating a copy of
 * the model as "the average" (or, before, an average of zeros) would report what does not exist. */
static int start_average(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    if (!r->have_ema || !r->ema.empty)
        return DT_OK;
    const char *from = r->resuming ? r->resume_path : cfg->pretrained;
    if (cfg->evaluate) {
        if (r->launch.rank == 0)
            dt_warn("--model-ema: %s holds no model average (%s): evaluating the model alone", from,
                    r->resuming ? "trained without --model-ema" : "--pretrained reads the weights alone; "
                                                                  "--resume PATH evaluates a checkpoint's average");
        r->have_ema = 0;
        return DT_OK;
    }
    if (from && r->launch.rank == 0)
        dt_warn("--model-ema: %s holds no model average (%s): the average starts from its weights", from,
                r->resuming ? "trained without --model-ema" : "--pretrained reads the weights alone");
    dt_ema_start(&r->ema, &r->model, r->amp.master);
    return DT_OK;
}

/* data parallelism: DDP gives rank 0's weights and buffers to every rank (over NCCL when gradients
 * live in device memory), then the rest of a resumed state follows */
static int start_ddp(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    dt_ddp_cfg ddp_cfg = {.bucket_bytes = (size_t)(cfg->bucket_mb * 1048576.0),
                          .first_bucket_bytes = (size_t)(cfg->first_bucket_mb * 1048576.0),
                          .no_overlap = cfg->no_overlap, .sync_bn = cfg->sync_bn,
                          .grad_scale = 1.0f / (float)cfg->accum_steps, .wire = r->amp.props.allreduce_type};
    if (!r->device_comm && !r->model.be->host_memory && r->comm->size > 1)
        DT_TRY(dt_comm_nccl(&r->device_comm, &r->launch, r->device, cfg->comm_timeout));
    DT_TRY(dt_ddp_create(&r->ddp, &r->model, r->device_comm ? r->device_comm : r->comm, &ddp_cfg));
    if (r->resuming)
        DT_TRY(dt_rundir_share_resumed(r));
    if (cfg->pretrained) /* O2's master copy of the weights rank 0 loaded */
        dt_amp_master_from_model(&r->amp, &r->model);
    DT_TRY(start_average(r));
    r->graphs = dt_run_graphs_wanted(r);
    if (r->launch.rank == 0)
        dt_debug("training steps %s", r->graphs ? "as graphs (captured at the second full batch)" : "issued op by op");
    /* the scaler (as set, or resumed) and the optimiser's step count where the step's ops read them */
    return dt_amp_put_state(&r->amp.scaler, r->opt.steps, &r->model);
}

/* --evaluate: validation of the checkpoint's (or --pretrained) weights; rank 0 prints the result */
static int evaluate(dt_run *r)
{
    dt_validation v = {0, 0, 0, 0, -1, -1, -1};
    if (r->have_val_set && r->val_loader) {
        DT_TRY(dt_run_alloc_batch(r));
        DT_TRY(dt_run_validate(r, (int)r->progress.epoch, 0, &v));
    }
    if (r->launch.rank == 0)
        printf("evaluate %s: top-1 %.2f%%, top-5 %.2f%%\n", r->resuming ? r->resume_path : r->cfg->pretrained, v.top1,
               v.top5);
    if (r->launch.rank == 0 && v.ema_top1 >= 0)
        printf("evaluate %s: the model's average (--model-ema): top-1 %.2f%%, top-5 %.2f%%\n",
               r->resuming ? r->resume_path : r->cfg->pretrained, v.ema_top1, v.ema_top5);
    return DT_OK;
}

/* what run.json records about the run (every rank takes part), then rank 0 prints the start and
 * opens the run's records (metrics.c) */
static int start_records(dt_run *r)
{
    const dt_train_cfg *cfg = r->cfg;
    int32_t last_node = r->launch.node; /* nodes: the highest node index over the ranks, plus one */
    if (r->comm->size > 1)
        DT_TRY(r->comm->ops->allreduce(r->comm, &last_node, &last_node, 1, DT_INT32, DT_MAX));
    r->nodes = last_node + 1;
    if (cfg->synthetic)
        snprintf(r->dataset_name, sizeof r->dataset_name, "synthetic");
    else {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", cfg->data);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/')
            tmp[--n] = 0;
        snprintf(r->dataset_name, sizeof r->dataset_name, "%s", basename(tmp));
    }
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(r->started, sizeof r->started, "%Y-%m-%dT%H:%M:%SZ", &utc);
    if (r->launch.rank == 0)
        dt_schedule_warn(cfg, r->base_lr);
    if (r->launch.rank != 0)
        return DT_OK;
    return dt_metrics_open(r);
}

/* the exit code after training (trainer.h) */
static int finish(dt_run *r, int rc)
{
    if (rc == DT_OK && r->model.profile && r->launch.rank == 0)
        dt_model_profile_report(&r->model, stderr);
    int exit_code = 0;
    if (rc != DT_OK)
        exit_code = 1;
    else if (r->stopped_by)
        exit_code = r->stopped_by == SIGINT ? DT_EXIT_INTERRUPTED : DT_EXIT_RESUMABLE;
    /* a failed rank ends the job: the others would wait for it until their timeout */
    if (exit_code == 1 && r->comm->size > 1 && !r->diverged)
        r->comm->ops->abort(r->comm, 1);
    if (r->metrics_lost && exit_code == 0) { /* trained, but its record is incomplete */
        dt_error("%s/metrics.jsonl is incomplete (see the write error above): exit 1", r->dir);
        exit_code = 1;
    }
    return exit_code;
}

/* everything r holds, whichever phase it got to */
static void release(dt_run *r)
{
    dt_metrics_close(r);
    dt_log_close_file();
    if (r->lock_fd >= 0)
        close(r->lock_fd);
    if (r->have_model)
        dt_run_graphs_free(r);
    dt_ddp_free(r->ddp);
    dt_loader_free(r->train_loader);
    dt_loader_free(r->val_loader);
    if (r->input)
        r->model.be->mem_free(r->input);
    if (r->upload_event) {
        r->model.be->event_sync(r->upload_event);
        r->model.be->event_destroy(r->upload_event);
    }
    if (r->pixels)
        r->model.be->mem_free(r->pixels);
    if (r->staging)
        r->model.be->host_free(r->staging);
    if (r->have_model) {
        dt_optim_free(&r->opt);
        dt_ema_free(&r->ema);
        dt_amp_free(&r->amp);
        dt_model_free(&r->model);
    }
    if (r->have_train_set)
        dt_dataset_close(&r->train_set);
    if (r->have_val_set)
        dt_dataset_close(&r->val_set);
    free(r->logits);
    free(r->labels);
    free(r->synthetic);
    dt_comm_free(r->comm);
    dt_comm_free(r->device_comm);
    if (r->launched)
        dt_launch_finalize(&r->launch);
}

int dt_train(const dt_train_cfg *cfg)
{
    dt_run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.lock_fd = -1;
    int rc = connect_ranks(&r);
    /* start: every input check, on every rank, agreed; nothing is written until all have passed */
    if (rc == DT_OK)
        rc = agree(&r, check_inputs(&r));
    if (rc == DT_OK)
        rc = agree(&r, resume_or_init(&r));
    if (rc == DT_OK)
        rc = agree(&r, open_run_dir(&r));
    if (rc != DT_OK) {
        release(&r);
        return rc == DT_ERR_INPUT ? 2 : 1;
    }
    /* from here on, failures are run-time ones (exit 1) */
    rc = join_run(&r);
    if (rc == DT_OK)
        rc = start_ddp(&r);
    if (rc == DT_OK && cfg->evaluate) { /* nothing written */
        rc = evaluate(&r);
        release(&r);
        return rc == DT_OK ? 0 : 1;
    }
    dt_run_catch_signals();
    if (rc == DT_OK)
        rc = start_records(&r);
    rc = agree(&r, rc); /* a rank that failed above fails every rank here */
    if (rc != DT_OK && !r.resuming && r.launch.rank == 0 && r.dir[0]) /* a start that failed leaves no run */
        dt_rundir_discard(&r);
    if (rc == DT_OK)
        rc = dt_run_epochs(&r);
    int exit_code = finish(&r, rc);
    release(&r);
    return exit_code;
}
