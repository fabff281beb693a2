/* dtrain.c: the training program's command line (the work is dt_train, src/train/trainer.h).
 * Flags follow the seed tutorial's ImageNet script where it has them. Exit codes: 0 success, 1 a
 * failure at run time, 2 a bad command line or bad input found at start (nothing written), 3 and
 * 130 after SIGTERM/SIGUSR1 and SIGINT with the checkpoint written (trainer.h). */
#include "config.h"

#include <getopt.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "libdt/spawn.h"
#include "nn/model.h"
#include "data/augment.h"
#include "data/image.h"
#include "train/flags.h"
#include "train/recipe.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

enum { EXIT_USAGE = 2 };
/* where an option's value came from, each over the one before: its default, its environment
 * variable (the row's .env), the --recipe's flags, or the command line */
enum from_where { FROM_DEFAULT = 0, FROM_ENV, FROM_RECIPE, FROM_USER };
/* the recipe came from $DT_RECIPE, not the command line (main) */
static int recipe_from_env;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: dtrain [OPTIONS] DATA\n"
            "GPUs on Slurm (2 nodes of 4 GPUs; one task per GPU, or one per node):\n"
            "  srun -N2 --ntasks-per-node=4 --gpus-per-node=4 --mpi=pmi2 dtrain DATA\n"
            "  srun -N2 --gpus-per-node=4 dtrain DATA   (one task per node: each starts a worker per GPU)\n"
            "Data-parallel, mixed-precision training of torchvision's CNNs. DATA is a directory packed by\n"
            "dtpack (splits train and val), or $DT_DATA when none is given. One process per rank: srun\n"
            "--mpi=pmi2 for GPU ranks, srun --mpi=pmix or mpirun for CPU ranks.\n"
            "Defaults come from the environment where an option names a variable (dtrain.1, ENVIRONMENT:\n"
            "DT_ARCH, DT_BATCH, DT_EPOCHS ...): the command line over a --recipe over the environment over\n"
            "the built-in default; --print-config shows which gave each setting.\n"
            "\n");
    dt_flags_usage(out); /* every option, from the table in train/flags.h */
    fprintf(out,
            "\n"
            "A flag that would have no effect (--ra-magnitude without --auto-augment ra, --precision at O0,\n"
            "--crop-padding on encoded images ...) is refused, exit 2; from a --recipe it is left unused\n"
            "when the command line set what it depends on (--recipe vit_b_16 --no-model-ema).\n"
            "Numbers are decimal (90, 0.1, 1e-4, 1e-310; not 0x10, inf or nan); one past the flag's range, or\n"
            "past what the type holds (2^63, 1e999), is out of range. No value or DATA may hold a control\n"
            "character. Flags without a value take none (--nesterov=0 is refused).\n"
            "Exit codes: 0 done; 1 a failure at run time, or standard output not written; 2 a bad command\n"
            "line or bad input (nothing written); 3 stopped by SIGTERM or SIGUSR1 after writing the\n"
            "checkpoint (run again with --resume auto); 130 stopped by SIGINT, checkpoint written.\n");
}

/* A training run's records are its files; its standard output (Apex's table of the mixed-precision
 * properties) is a courtesy: lost into a closed pipe (SIGPIPE is ignored), the run still ends as it
 * ended (the man page's SIGNALS). Every other answer (-e, --print-lr, --help ...) is its standard
 * output, checked at exit. */
static int stdout_is_answer = 1;

/* The rule for a flag that would have no effect (doc/dtrain.1, OPTIONS), called where it would have
 * none: refused with one line naming it and why, wherever it came from, except a --recipe's flag
 * when the command line itself set what it depends on (parent_by_user): overriding a recipe's
 * choice (--no-model-ema, --opt sgd) leaves the recipe's flags that went with it unused. Returns 1
 * after the line, else 0. */
static int no_effect(const unsigned char *from, int opt, const char *flag, int parent_by_user, const char *why)
{
    if (from[opt] == FROM_DEFAULT || ((from[opt] == FROM_RECIPE || from[opt] == FROM_ENV) && parent_by_user))
        return 0;
    char env[64];
    snprintf(env, sizeof env, " (from the environment's %s)", dt_flags[opt].env ? dt_flags[opt].env : "");
    dt_error("%s%s has no effect %s", flag, from[opt] == FROM_RECIPE ? " (from --recipe)" : from[opt] == FROM_ENV ? env : "",
             why);
    return 1;
}

/* "environment variable DT_BATCH": what an environment default's messages name */
static const char *env_label(const dt_flag *f, char *buf, size_t n)
{
    snprintf(buf, n, "environment variable %s", f->env);
    return buf;
}

/* Every row's environment default (train/flags.h, .env), set and not empty, into cfg before the
 * command line is read: what the command line then sets wins. A bad value is one line naming the
 * variable. The launch's rows are not read here: --nproc-per-node, whose workers inherit the
 * environment, has none; --recipe's (DT_RECIPE) is main's; --log-level's dt_log_init's; DATA's the
 * operand's place (run). 0, or 1 after the line. */
static int apply_env(dt_train_cfg *cfg, unsigned char *from)
{
    char label[96];
    for (int i = 0; i < DT_FLAG_COUNT; i++) {
        const dt_flag *f = &dt_flags[i];
        const char *text = f->env ? getenv(f->env) : NULL;
        if (!text || !*text || f->kind == DT_FK_PROGRAM || f->kind == DT_FK_COMMON || f->kind == DT_FK_OPERAND ||
            f->kind == DT_FK_REFUSED)
            continue;
        if (dt_parse_text(env_label(f, label, sizeof label), text) != DT_OK ||
            dt_flags_set_as(f, label, text, 0, cfg) != DT_OK)
            return 1;
        from[i] = FROM_ENV;
        if (f->id == DT_FLAG_AMP) /* as the command line's --amp: the --opt-level it means */
            dt_flags_note(cfg, &dt_flags[DT_FLAG_OPT_LEVEL], cfg->opt_level ? "O1" : "O0", 0);
        else
            dt_flags_note(cfg, f, text, 1);
        cfg->options[cfg->n_options - 1].env = f->env; /* the note just made, or the one it replaced */
        for (int k = 0; k < cfg->n_options; k++)
            if (!strcmp(cfg->options[k].name, f->id == DT_FLAG_AMP ? "opt-level" : f->name))
                cfg->options[k].env = f->env;
    }
    if (from[DT_FLAG_AMP] == FROM_ENV && from[DT_FLAG_OPT_LEVEL] == FROM_ENV) { /* as on the command line */
        dt_error("environment variables DT_AMP and DT_OPT_LEVEL: give one (DT_AMP=1 is O1, DT_AMP=0 O0)");
        return 1;
    }
    return 0;
}

/* where row id's value came from, for --print-config */
static const char *source(const unsigned char *from, int id, const dt_train_cfg *cfg, char *buf, size_t n)
{
    switch (from[id]) {
    case FROM_ENV: snprintf(buf, n, "environment %s", dt_flags[id].env); break;
    case FROM_RECIPE: snprintf(buf, n, "recipe %s", cfg->recipe ? cfg->recipe : ""); break;
    case FROM_USER: snprintf(buf, n, "command line"); break;
    default: snprintf(buf, n, "default"); break;
    }
    return buf;
}

/* --print-config: every setting with its source, then the launch's plan as this run would have it
 * (the launch is started and ended as a run starts it: srun's PMI2, MPI, Slurm's environment, a
 * single process; or --nproc-per-node's workers, not started). Rank 0 prints; DATA is looked at
 * (a directory or not), never opened. 0 (exit 0), or 2 after one line for what the run would
 * refuse here: no DATA, a --world-size the launch does not have, GPUs the ranks would share. */
static int print_config(const dt_train_cfg *cfg, const unsigned char *from, long nproc)
{
    dt_launch l = {.kind = DT_LAUNCH_LOCAL, .size = (int)nproc, .local_size = (int)nproc};
    if (!nproc) {
        dt_launch_set_timeout(cfg->comm_timeout);
        if (dt_launch_init(&l) != DT_OK)
            return EXIT_FAILURE;
    }
    int rc = dt_train_check_launch(cfg, &l) == DT_OK ? EXIT_SUCCESS : EXIT_USAGE;
    if (l.rank == 0 && rc == EXIT_SUCCESS) {
        char v[4096], src[96];
        printf("dtrain %s: settings (value, source: command line, recipe, environment VARIABLE or default)\n",
               PACKAGE_VERSION);
        for (int i = 0; i < DT_FLAG_COUNT; i++) {
            const dt_flag *f = &dt_flags[i];
            char name[64];
            if (f->kind == DT_FK_REFUSED || f->id == DT_FLAG_AMP || f->id == DT_FLAG_HELP || f->id == DT_FLAG_VERSION ||
                f->id == DT_FLAG_PRINT_LR || f->id == DT_FLAG_PRINT_CONFIG)
                continue; /* no setting (--amp's is --opt-level's) */
            snprintf(name, sizeof name, "%s%s", f->kind == DT_FK_OPERAND ? "" : "--", f->name);
            if (f->id == DT_FLAG_RECIPE)
                snprintf(v, sizeof v, "%s", cfg->recipe ? cfg->recipe : "-");
            else if (f->id == DT_FLAG_NPROC_PER_NODE)
                snprintf(v, sizeof v, nproc ? "%ld" : "-", nproc);
            else if (f->id == DT_FLAG_LOG_LEVEL)
                snprintf(v, sizeof v, "%s", dt_log_level_name(dt_log_get_level()));
            else
                dt_flags_format(f, cfg, v, sizeof v);
            source(from, i, cfg, src, sizeof src);
            if (f->id == DT_FLAG_RECIPE && from[i] == FROM_USER)
                snprintf(src, sizeof src, "command line");
            if (f->id == DT_FLAG_OPT_LEVEL && from[DT_FLAG_AMP] > from[i])
                source(from, DT_FLAG_AMP, cfg, src, sizeof src), snprintf(src + strlen(src), sizeof src - strlen(src), " (--amp)");
            if (f->id == DT_FLAG_DEVICE && cfg->device_why)
                snprintf(src + strlen(src), sizeof src - strlen(src), " (%s)", cfg->device_why + strlen("--device "));
            struct stat st;
            if (f->kind == DT_FK_OPERAND && cfg->data)
                snprintf(v + strlen(v), sizeof v - strlen(v), " (%s)", stat(cfg->data, &st) ? "not found" :
                         S_ISDIR(st.st_mode) ? "a directory; not read here" : "not a directory");
            printf("  %-26s %-16s %s\n", name, v, src);
        }
        /* the plan: this node's ranks, the nodes as Slurm gives them (else as if each had this many) */
        const char *sn = getenv("SLURM_STEP_NUM_NODES");
        sn = sn ? sn : getenv("SLURM_NNODES");
        int nodes = nproc || l.kind == DT_LAUNCH_SINGLE || !sn || atoi(sn) < 1 ? (l.size + l.local_size - 1) / l.local_size
                                                                              : atoi(sn);
        printf("launch: %s: %d rank%s on %d node%s, %d on this node\n", dt_launch_kind_name(l.kind), l.size,
               l.size > 1 ? "s" : "", nodes, nodes > 1 ? "s" : "", l.local_size);
        if (!cfg->cuda)
            printf("  local ranks 0..%d: cpu, %s compute threads each\n", l.local_size - 1,
                   cfg->threads ? (snprintf(v, sizeof v, "%d", cfg->threads), v) : "OMP_NUM_THREADS's or all cores'");
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        int gpus = cfg->cuda ? dt_gpu_count() : 0;
        /* idle GPUs: the workers this task would start (a run on the CPU: what --device cuda would
         * start, from the GPUs Slurm granted, which a CPU build or a node without a driver cannot count) */
        dt_node_plan p;
        char why[512];
        int planned = nproc ? 0 : dt_launch_node_plan(cfg->cuda ? gpus : dt_launch_visible_count(), &p, why, sizeof why);
        if (planned < 0 && (cfg->cuda || dt_spawn_cpu_allowed())) {
            dt_error("--device %s: %s", cfg->cuda ? "cuda" : "cpu (DT_SPAWN_CPU=1)", why);
            rc = EXIT_USAGE;
        } else if (planned < 0)
            printf("  GPUs granted here stay idle: %s; with --device cuda: %s\n",
                   cfg->device_why ? cfg->device_why : "--device cpu", why);
        if (planned > 0) {
            int run_it = cfg->cuda || dt_spawn_cpu_allowed();
            printf("plan%s: %d workers on %d node%s, %d on this node (node %d), started by dtrain, one per GPU; "
                   "rendezvous at %s:%d\n", run_it ? "" : " with --device cuda in a CUDA build", p.workers * p.nodes,
                   p.nodes, p.nodes > 1 ? "s" : "", p.workers, p.node, p.master_addr, p.master_port);
            if (!run_it)
                printf("  this run: the CPU (%s), one rank per task: this node's %d GPUs (CUDA_VISIBLE_DEVICES=%s) "
                       "stay idle\n", cfg->device_why ? cfg->device_why : "--device cpu", p.workers,
                       visible ? visible : "unset");
            for (int r = 0; r < p.workers; r++) {
                dt_launch_pick_gpu(visible, p.workers, r, p.workers, v, sizeof v);
                printf("  local rank %d: GPU %s (rank %d)\n", r, v, p.node * p.workers + r);
            }
        }
        for (int r = 0; cfg->cuda && !planned && r < l.local_size && rc == EXIT_SUCCESS; r++) {
            if (dt_launch_pick_gpu(visible, gpus, r, l.local_size, v, sizeof v) < 0) {
                dt_error("--device cuda: %s", v);
                rc = EXIT_USAGE;
            } else
                printf("  local rank %d: GPU %s\n", r, v);
        }
        /* (a plan said what becomes of them above) */
        if (!planned && cfg->cuda && gpus > l.local_size && l.local_size > 1)
            printf("  %d of this node's %d GPUs idle: one task per GPU (srun --ntasks-per-node=%d)\n",
                   gpus - l.local_size, gpus, gpus);
        else if (!planned && cfg->cuda && gpus > 1 && l.local_size == 1)
            printf("  GPU 0 only, %d idle: one task per GPU (srun --ntasks-per-node=%d, or --nproc-per-node %d)\n",
                   gpus - 1, gpus, gpus);
        if (!cfg->data && !cfg->synthetic) {
            dt_error("no data directory: give one packed by dtpack, set DT_DATA, or --synthetic (see dtrain --help)");
            rc = EXIT_USAGE;
        }
    }
    if (!nproc)
        dt_launch_finalize(&l);
    return rc;
}

/* Every check of the command line that needs no data (the data's are dt_train's): 1 after one line
 * for the first combination refused, else 0. */
static int check_flags(const dt_train_cfg *cfg, const unsigned char *from, int argc, char **argv)
{
#define USER(o) (from[o] == FROM_USER)
#define REFUSE(cond, opt, flag, parent_by_user, why) \
    if ((cond) && no_effect(from, opt, flag, parent_by_user, why)) \
        return 1
    if (optind < argc - 1) {
        dt_error("%s: unexpected argument: dtrain takes one data directory (see dtrain --help)", argv[optind + 1]);
        return 1;
    }
    if (cfg->start_epoch >= cfg->epochs) {
        dt_error("--start-epoch %d: must be below --epochs %d", cfg->start_epoch, cfg->epochs);
        return 1;
    }
    if (cfg->lr_schedule > DT_LR_COSINE && cfg->warmup_epochs > 0 && dt_schedule_warmup_decay(cfg) <= 0) {
        /* torch's LinearLR and ConstantLR refuse a factor of 0: the schedule would not be theirs */
        dt_error("--lr-warmup-decay 0 with --lr-schedule %s: torch.optim.lr_scheduler's warm-up starts above 0 "
                 "(give one in (0, 1], or the seed tutorial's step or cosine, which warm up from 0)",
                 dt_lr_schedule_names[cfg->lr_schedule]);
        return 1;
    }
    if (cfg->nesterov && cfg->opt > DT_OPTC_SGD_NESTEROV) {
        dt_error("--nesterov is SGD's momentum: not with --opt %s", dt_opt_names[cfg->opt]);
        return 1;
    }
    if (cfg->pretrained && cfg->resume) {
        dt_error("--pretrained and --resume: give one (a resumed run has its weights in the checkpoint)");
        return 1;
    }
    /* two spellings of the opt level: on one command line, one would silently override the other */
    if (USER(DT_FLAG_AMP) && USER(DT_FLAG_OPT_LEVEL)) {
        dt_error("--amp (or --no-amp) and --opt-level: give one (--amp is --opt-level O1, --no-amp O0)");
        return 1;
    }
    /* sub-flags whose parent is off */
    REFUSE(!cfg->model_ema, DT_FLAG_MODEL_EMA_STEPS, "--model-ema-steps", USER(DT_FLAG_MODEL_EMA), "without --model-ema");
    REFUSE(!cfg->model_ema, DT_FLAG_MODEL_EMA_DECAY, "--model-ema-decay", USER(DT_FLAG_MODEL_EMA), "without --model-ema");
    REFUSE(!cfg->ra_sampler, DT_FLAG_RA_REPS, "--ra-reps", USER(DT_FLAG_RA_SAMPLER), "without --ra-sampler");
    REFUSE(cfg->auto_augment != DT_AUG_RA, DT_FLAG_RA_MAGNITUDE, "--ra-magnitude", USER(DT_FLAG_AUTO_AUGMENT),
           "without --auto-augment ra");
    /* the optimiser's own settings */
    const int opt = cfg->opt, adam_like = opt == DT_OPTC_ADAM || opt == DT_OPTC_ADAMW || opt == DT_OPTC_LAMB;
    REFUSE(opt != DT_OPTC_LARS, DT_FLAG_LARS_ETA, "--lars-eta", USER(DT_FLAG_OPT), "without --opt lars");
    REFUSE(!adam_like, DT_FLAG_ADAM_BETA1, "--adam-beta1", USER(DT_FLAG_OPT), "without --opt adam, adamw or lamb");
    REFUSE(!adam_like, DT_FLAG_ADAM_BETA2, "--adam-beta2", USER(DT_FLAG_OPT), "without --opt adam, adamw or lamb");
    REFUSE(opt != DT_OPTC_RMSPROP, DT_FLAG_RMSPROP_ALPHA, "--rmsprop-alpha", USER(DT_FLAG_OPT), "without --opt rmsprop");
    REFUSE(!adam_like && opt != DT_OPTC_RMSPROP, DT_FLAG_OPT_EPS, "--opt-eps", USER(DT_FLAG_OPT),
           "without --opt adam, adamw, lamb or rmsprop");
    REFUSE(adam_like, DT_FLAG_MOMENTUM, "--momentum", USER(DT_FLAG_OPT),
           "with --opt adam, adamw or lamb (their momentum is --adam-beta1)");
    /* the schedule's */
    const int s = cfg->lr_schedule, cosine = s == DT_LR_COSINE || s == DT_LR_COSINEANNEALINGLR;
    REFUSE(s != DT_LR_STEP && s != DT_LR_MULTISTEPLR, DT_FLAG_LR_STEPS, "--lr-steps", USER(DT_FLAG_LR_SCHEDULE),
           "without --lr-schedule step or multisteplr");
    REFUSE(cosine || s == DT_LR_POLYNOMIALLR, DT_FLAG_LR_GAMMA, "--lr-gamma", USER(DT_FLAG_LR_SCHEDULE),
           "without --lr-schedule step, steplr, multisteplr or exponentiallr");
    REFUSE(s != DT_LR_STEPLR, DT_FLAG_LR_STEP_SIZE, "--lr-step-size", USER(DT_FLAG_LR_SCHEDULE), "without --lr-schedule steplr");
    REFUSE(!cosine, DT_FLAG_LR_MIN, "--lr-min", USER(DT_FLAG_LR_SCHEDULE), "without --lr-schedule cosine or cosineannealinglr");
    REFUSE(s != DT_LR_POLYNOMIALLR, DT_FLAG_LR_POWER, "--lr-power", USER(DT_FLAG_LR_SCHEDULE),
           "without --lr-schedule polynomiallr");
    REFUSE(cfg->lr_per_step && s <= DT_LR_COSINE, DT_FLAG_LR_PER_STEP, "--lr-per-step", USER(DT_FLAG_LR_SCHEDULE),
           "with --lr-schedule step or cosine (their warm-up and cosine run per step already, step's "
           "milestones are whole epochs)");
    REFUSE(cfg->warmup_epochs <= 0, DT_FLAG_LR_WARMUP_METHOD, "--lr-warmup-method", USER(DT_FLAG_WARMUP_EPOCHS),
           "without --warmup-epochs above 0");
    REFUSE(cfg->warmup_epochs <= 0, DT_FLAG_LR_WARMUP_DECAY, "--lr-warmup-decay", USER(DT_FLAG_WARMUP_EPOCHS),
           "without --warmup-epochs above 0");
    /* mixed precision's */
    const int level = cfg->opt_level, level_user = USER(DT_FLAG_OPT_LEVEL) || USER(DT_FLAG_AMP);
    const int dynamic = cfg->amp.loss_scale ? !strcmp(cfg->amp.loss_scale, "dynamic")
                                            : (level == 1 || level == 2) && !cfg->amp.bf16;
    REFUSE(level == 0, DT_FLAG_PRECISION, "--precision", level_user, "at --opt-level O0 (fp32 throughout)");
    REFUSE(level < 2, DT_FLAG_KEEP_BATCHNORM_FP32, "--keep-batchnorm-fp32", level_user,
           "below --opt-level O2 (O0 and O1 keep every weight in fp32)");
    REFUSE(level < 2, DT_FLAG_MASTER_WEIGHTS, "--master-weights", level_user,
           "below --opt-level O2 (O0 and O1 have fp32 weights only)");
    REFUSE(level < 2, DT_FLAG_ALLREDUCE_FP32, "--allreduce-fp32", level_user,
           "below --opt-level O2 (O0 and O1 all-reduce fp32 gradients already)");
    REFUSE(!dynamic, DT_FLAG_LOSS_SCALE_WINDOW, "--loss-scale-window",
           level_user || USER(DT_FLAG_LOSS_SCALE) || USER(DT_FLAG_PRECISION),
           "without a dynamic loss scale (O1 or O2 with fp16, or --loss-scale dynamic)");
    /* only the CUDA backend has convolution algorithms to choose */
    REFUSE(!cfg->cuda, DT_FLAG_CUDNN_SEARCH, "--cudnn-search", USER(DT_FLAG_DEVICE), "without --device cuda");
    /* graphs capture a step of one forward and backward with rank-local BN */
    REFUSE(cfg->graph > 0 && (cfg->accum_steps > 1 || cfg->sync_bn), DT_FLAG_GRAPH, "--graph",
           USER(DT_FLAG_ACCUM_STEPS) || USER(DT_FLAG_SYNC_BN),
           "with --accum-steps above 1 or --sync-bn (no step of theirs is captured)");
    /* --synthetic reads no images and validates nothing */
    static const struct { int opt; const char *flag; } data_flags[] = {
        {DT_FLAG_INTERPOLATION, "--interpolation"}, {DT_FLAG_AUTO_AUGMENT, "--auto-augment"}, {DT_FLAG_RANDOM_ERASE, "--random-erase"},
        {DT_FLAG_CROP_PADDING, "--crop-padding"}, {DT_FLAG_VAL_CROP_SIZE, "--val-crop-size"}, {DT_FLAG_VAL_RESIZE_SIZE, "--val-resize-size"},
        {DT_FLAG_MIXUP_ALPHA, "--mixup-alpha"}, {DT_FLAG_CUTMIX_ALPHA, "--cutmix-alpha"}, {DT_FLAG_RA_SAMPLER, "--ra-sampler"},
        {DT_FLAG_DESIRED_ACC, "--desired-acc"},
    };
    for (size_t i = 0; i < sizeof data_flags / sizeof data_flags[0]; i++) {
        const int on = data_flags[i].opt != DT_FLAG_RA_SAMPLER || cfg->ra_sampler; /* --no-ra-sampler is no data flag */
        REFUSE(cfg->synthetic && on, data_flags[i].opt, data_flags[i].flag, USER(DT_FLAG_SYNTHETIC),
               "with --synthetic (no images are read, nothing is validated)");
    }
#undef REFUSE
#undef USER
    return 0;
}

/* argv[1 .. recipe_args] are the flags of --recipe (main), the rest the command line's */
static int run(int argc, char **argv, int recipe_args)
{
    struct option opts[DT_FLAGS_MAX_OPTS];
    char shortopts[DT_FLAGS_MAX_SHORT];
    dt_flags_getopt(opts, shortopts); /* every flag, alias and off switch of the table (train/flags.h) */
    /* HDF5 1.10's exit handler crashes on a file whose H5Fclose failed (a full disk while writing a
     * checkpoint: SIGSEGV after the error was said). dtrain closes every file itself, so the handler
     * has nothing to do; this must come before any other HDF5 call. */
    H5dont_atexit();
    dt_train_cfg cfg;
    dt_train_defaults(&cfg);
    opterr = 0; /* our own one-line messages */
    int c, bad = 0, off, print_config_asked = 0;
    long nproc = 0, print_lr = 0;
    unsigned char from[DT_FLAG_COUNT] = {0}; /* enum from_where, by row (an off switch's: its flag's) */
    if (getenv("DT_LOG_LEVEL") && *getenv("DT_LOG_LEVEL")) /* dt_log_init read it */
        from[DT_FLAG_LOG_LEVEL] = FROM_ENV;
    if (apply_env(&cfg, from))
        return EXIT_USAGE;
    while (!bad && (c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        int common = dt_cli_common(c, DT_FLAG_VAL(DT_FLAG_LOG_LEVEL), "dtrain", argv, opts, usage);
        if (common == DT_CLI_GO_ON) {
            from[DT_FLAG_LOG_LEVEL] = optind <= recipe_args + 1 ? FROM_RECIPE : FROM_USER;
            continue;
        }
        if (common != DT_CLI_MINE)
            return common;
        const dt_flag *f = dt_flags_of_val(c, &off); /* getopt_long returns only the table's values */
        if (!f)
            return EXIT_USAGE;
        /* getopt_long reads argv in order and the recipe's flags come first (with no operand among
         * them): an option whose value ends within them is the recipe's */
        from[f->id] = optind <= recipe_args + 1 ? FROM_RECIPE : FROM_USER;
        /* run.json's record; --amp and --no-amp as the --opt-level they mean */
        if (f->id == DT_FLAG_AMP)
            dt_flags_note(&cfg, &dt_flags[DT_FLAG_OPT_LEVEL], off ? "O0" : "O1", 0);
        else if (f->id != DT_FLAG_RECIPE)
            dt_flags_note(&cfg, f, optarg, !off);
        switch (f->id) { /* the program's own (DT_PROGRAM); the others set their field */
        case DT_FLAG_NPROC_PER_NODE: bad = dt_parse_long("--nproc-per-node", optarg, 1, 1024, &nproc); break;
        case DT_FLAG_PRINT_LR: bad = dt_parse_long("--print-lr", optarg, 1, 100000000, &print_lr); break;
        case DT_FLAG_PRINT_CONFIG: print_config_asked = 1; break;
        case DT_FLAG_RECIPE: { /* main() expanded "--recipe NAME" and "--recipe=NAME", not an abbreviation */
            const char *flag = optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
            char e[160];
            if (strcmp(flag, "--recipe") && strncmp(flag, "--recipe=", 9)) {
                dt_error("%s: give --recipe in full (an abbreviation of it is not expanded)",
                         dt_cli_escape(flag, e, sizeof e));
                bad = 1;
            }
            cfg.recipe = optarg;
            if (recipe_from_env)
                from[DT_FLAG_RECIPE] = FROM_ENV;
            break;
        }
        default: bad = dt_flags_set(f, optarg, off, &cfg) != DT_OK; break;
        }
    }
    if (bad)
        return EXIT_USAGE;
    static char device_why[160];
    if (cfg.cuda == DT_DEVICE_AUTO) { /* before every check that reads cfg.cuda; the reason is the first log line's */
        cfg.cuda = dt_flags_device_auto(device_why, sizeof device_why);
        cfg.device_why = device_why;
    }
#ifndef HAVE_CUDA
    if (cfg.cuda) { /* a fact of this command line: said before any launch (under srun --kill-on-bad-exit,
                     * a rank refusing later would get its slower peers killed, exit 143, not 2) */
        dt_error("%s: this dtrain was built without CUDA (configure --with-cuda)",
                 from[DT_FLAG_DEVICE] == FROM_ENV ? "environment variable DT_DEVICE=cuda" : "--device cuda");
        return EXIT_USAGE;
    }
#endif
    if (cfg.dist_backend >= 0 && cfg.dist_backend != !cfg.cuda) { /* nccl is 0 and needs cuda, mpi 1 and cpu */
        dt_error("--dist-backend %s: dtrain's %s ranks communicate over %s (--device %s)",
                 dt_flags_dist_backends[cfg.dist_backend], cfg.cuda ? "GPU" : "CPU", cfg.cuda ? "NCCL" : "MPI",
                 cfg.cuda ? "cuda" : "cpu");
        return EXIT_USAGE;
    }
    for (int i = optind; i < argc; i++) /* DATA goes into messages and run.json: no control bytes */
        if (dt_parse_text("DATA", argv[i]) != DT_OK)
            return EXIT_USAGE;
    /* every check of the command line alone, before any work: --print-lr's table too comes from a
     * command line a run would take, and --nproc-per-node's workers are not started to refuse it */
    if (check_flags(&cfg, from, argc, argv))
        return EXIT_USAGE;
    if (print_lr) { /* no data directory needed (none is read: its checks are the run's) */
        dt_train_print_lr(&cfg, print_lr, stdout);
        return EXIT_SUCCESS;
    }
    if (optind == argc - 1) {
        cfg.data = argv[optind];
        from[DT_FLAG_DATA] = FROM_USER;
    } else if (!cfg.synthetic && getenv("DT_DATA") && *getenv("DT_DATA")) { /* --synthetic reads none */
        if (dt_parse_text("environment variable DT_DATA", getenv("DT_DATA")) != DT_OK)
            return EXIT_USAGE;
        cfg.data = getenv("DT_DATA");
        cfg.data_from_env = 1;
        from[DT_FLAG_DATA] = FROM_ENV;
    }
    if (print_config_asked)
        return print_config(&cfg, from, nproc);
    if (!cfg.data && !cfg.synthetic) {
        dt_error("no data directory: give one packed by dtpack, set DT_DATA, or --synthetic (see dtrain --help)");
        return EXIT_USAGE;
    }
    /* idle GPUs: one srun task per node, more GPUs: this task starts a worker per GPU (launch.h) */
    dt_node_plan plan;
    int planned = 0;
    if (!nproc && (cfg.cuda || dt_spawn_cpu_allowed())) {
        char why[512];
        planned = dt_launch_node_plan(cfg.cuda ? dt_gpu_count() : dt_launch_visible_count(), &plan, why, sizeof why);
        if (planned < 0) {
            dt_error("--device %s: %s", cfg.cuda ? "cuda" : "cpu (DT_SPAWN_CPU=1)", why);
            return EXIT_USAGE;
        }
    }
    if (nproc || planned) { /* the workers run this program with the same arguments, less this option */
        char **child = calloc((size_t)argc + 1, sizeof *child);
        if (!child)
            return EXIT_FAILURE;
        int k = 0;
        child[k++] = "/proc/self/exe";
        for (int i = 1 + recipe_args; i < argc; i++) { /* the command line as given: they expand --recipe */
            /* the option in any form getopt_long took it: --nproc-per-node N, --nproc=N, --npr N ... */
            const char *a = argv[i];
            size_t len = strcspn(a, "=");
            if (!strcmp(a, "--")) /* the rest are operands */
                for (; i < argc; i++)
                    child[k++] = argv[i];
            if (i >= argc)
                break;
            if (len > 3 && (!strncmp(a, "--nproc-per-node", len) || !strncmp(a, "--nproc_per_node", len))) {
                i += a[len] ? 0 : 1;
                continue;
            }
            child[k++] = argv[i];
        }
        int rc = nproc ? dt_spawn_local((int)nproc, child, dt_gpu_count() > 0, 30.0)
                       : dt_spawn_nodes(plan.workers, child, cfg.cuda, plan.node, plan.nodes, plan.master_addr,
                                        plan.master_port, 30.0);
        free(child);
        return rc;
    }
    stdout_is_answer = cfg.evaluate;
    return dt_train(&cfg);
}

/* DT_RECIPE: "--recipe NAME" put first when the command line names no recipe (the command line's wins) */
static char **recipe_env(int *argc, char **argv)
{
    char *name = getenv("DT_RECIPE");
    if (!name || !*name)
        return argv;
    for (int i = 1; i < *argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--recipe") || !strncmp(argv[i], "--recipe=", 9))
            return argv;
    if (dt_parse_text("environment variable DT_RECIPE", name) != DT_OK)
        return NULL;
    if (!dt_recipe_find(name)) {
        dt_error("environment variable DT_RECIPE: '%s' is no recipe (dtrain --recipe list shows them)", name);
        return NULL;
    }
    char **out = calloc((size_t)*argc + 3, sizeof *out);
    if (!out)
        return NULL;
    out[0] = argv[0];
    out[1] = "--recipe";
    out[2] = name;
    memcpy(out + 3, argv + 1, (size_t)(*argc - 1) * sizeof *out);
    *argc += 2;
    recipe_from_env = 1;
    return out;
}

int main(int argc, char **argv)
{
    dt_log_init();
    int n, recipe_args;
    char **expanded, *strings;
    if (!(argv = recipe_env(&argc, argv))) /* a new argv with DT_RECIPE's, kept to the end: options point into it */
        return dt_cli_exit(EXIT_USAGE);
    int got = dt_recipe_expand(argc, argv, &n, &expanded, &strings, &recipe_args); /* --recipe NAME: its flags first */
    if (got != 1) { /* every answer's exit checks that what went to standard output was written (cli.h) */
        int rc = got < 0 ? EXIT_USAGE : got == 2 ? EXIT_SUCCESS : run(argc, argv, 0);
        return stdout_is_answer ? dt_cli_exit(rc) : rc;
    }
    int rc = run(n, expanded, recipe_args);
    free(expanded);
    free(strings);
    return stdout_is_answer ? dt_cli_exit(rc) : rc;
}
