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

#include "libdt/comm.h"
#include "libdt/spawn.h"
#include "nn/model.h"
#include "data/augment.h"
#include "data/image.h"
#include "train/recipe.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/cli.h"
#include "util/log.h"

enum { EXIT_USAGE = 2 };
enum {
    OPT_LOG_LEVEL = 256, OPT_NPROC, OPT_EPOCHS, OPT_LR, OPT_NO_LR_SCALING, OPT_WARMUP, OPT_SCHEDULE, OPT_LR_STEPS,
    OPT_MOMENTUM, OPT_WD, OPT_NESTEROV, OPT_SMOOTH, OPT_DESIRED, OPT_SEED, OPT_SYNTHETIC, OPT_MAX_STEPS, OPT_THREADS,
    OPT_CROP, OPT_RESULTS, OPT_RUN_NAME, OPT_OPT_LEVEL, OPT_KEEP_BN, OPT_LOSS_SCALE, OPT_MASTER, OPT_PRECISION,
    OPT_AR_FP32, OPT_BUCKET, OPT_FIRST_BUCKET, OPT_NO_OVERLAP, OPT_GRAPH, OPT_NO_GRAPH, OPT_SYNC_BN, OPT_ACCUM, OPT_TIMEOUT, OPT_DEVICE,
    OPT_PADDING, OPT_RESUME, OPT_CKPT_EVERY, OPT_START_EPOCH, OPT_PRETRAINED, OPT_DETERMINISTIC, OPT_SCALE_WINDOW,
    OPT_MAX_NONFINITE, OPT_LR_GAMMA, OPT_LR_STEP_SIZE, OPT_LR_MIN, OPT_LR_POWER, OPT_LR_PER_STEP, OPT_WARMUP_METHOD,
    OPT_WARMUP_DECAY, OPT_PRINT_LR, OPT_NORM_WD, OPT_BIAS_WD, OPT_CLIP, OPT_OPT, OPT_OPT_EPS, OPT_BETA1, OPT_BETA2,
    OPT_ALPHA, OPT_EMA, OPT_EMA_STEPS, OPT_EMA_DECAY, OPT_RA, OPT_RA_REPS, OPT_MIXUP, OPT_CUTMIX, OPT_LARS_ETA,
    OPT_VAL_CROP, OPT_VAL_RESIZE, OPT_INTERP, OPT_AUTO_AUG, OPT_RA_MAG, OPT_ERASE, OPT_AMP, OPT_CUDNN_SEARCH
};
/* the off switches of the on/off flags (a recipe's come before the command line's, so these undo
 * them), and the end of the option values, for where each came from (enum from_where) */
enum {
    OPT_NO_EMA = 512, OPT_NO_RA, OPT_NO_NESTEROV, OPT_LR_SCALING, OPT_NO_LR_PER_STEP, OPT_NO_SYNC_BN, OPT_NO_AMP,
    OPT_END
};
_Static_assert((int)OPT_AMP < (int)OPT_NO_EMA, "the off switches' values follow the other options'");
/* where an option's value came from: its default, the --recipe's flags, or the command line */
enum from_where { FROM_DEFAULT = 0, FROM_RECIPE, FROM_USER };

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: dtrain [OPTIONS] DATA\n"
            "Data-parallel, mixed-precision training of torchvision's CNNs. DATA is a directory packed by\n"
            "dtpack (splits train and val). One process per rank: srun --mpi=pmix or mpirun for CPU ranks.\n"
            "\n"
            "Model and data:\n"
            "  -a, --arch NAME           ");
    dt_model_print_names(out, 28, 28, 80); /* the table in nn/models.c; room left for the default */
    fprintf(out, " (default resnet50); also --model\n"
            "  -j, --workers N           loader threads per rank (default 4)\n"
            "  -b, --batch-size N        images per rank and step (default 64)\n"
            "      --recipe NAME         a documented recipe's flags (torchvision's for resnet50 ...) before the\n"
            "                            ones given here, which win; --recipe list shows them (doc/recipes.md);\n"
            "                            one recipe (two different --recipe flags are refused)\n"
            "      --crop N              training crop of encoded images (default 224; raw shards: their size);\n"
            "                            also --train-crop-size\n"
            "      --val-crop-size N     validation's centre crop of encoded images (default: the training crop)\n"
            "      --val-resize-size N   validation's resize of the shorter side first (default: 256/224 x crop)\n"
            "      --interpolation M     the resizes' filter, PIL's: nearest, bilinear (default), bicubic, box,\n"
            "                            hamming, lanczos\n"
            "      --auto-augment P      imagenet, cifar10, svhn (AutoAugment's policies), ra (RandAugment,\n"
            "                            --ra-magnitude N, default 9) or ta_wide (TrivialAugmentWide)\n"
            "      --random-erase P      RandomErasing's probability (default 0)\n"
            "      --crop-padding N      raw shards: zero padding of the random crop (default 4; 0: none)\n"
            "      --synthetic           random batches, no data (benchmark)\n"
            "Optimisation:\n"
            "      --epochs N            (default 90)\n"
            "      --start-epoch N       begin at epoch N: its schedule and shuffle (default 0; --resume: the checkpoint's)\n"
            "      --lr X                for a global batch of 256, scaled by global batch / 256 (default 0.1)\n"
            "      --no-lr-scaling       use --lr as it is (--lr-scaling: scale it, the default)\n"
            "      --warmup-epochs X     warm-up epochs (default 0); also --lr-warmup-epochs\n"
            "      --lr-schedule S       the seed tutorial's step (x --lr-gamma at --lr-steps) or cosine (per step,\n"
            "                            to --lr-min), or torch.optim.lr_scheduler's as torchvision's train.py\n"
            "                            chains them after the warm-up: steplr, multisteplr, cosineannealinglr,\n"
            "                            exponentiallr, polynomiallr (default step); also --lr-scheduler\n"
            "      --lr-steps LIST       epochs of step and multisteplr (default 30,60,80); also --lr-milestones\n"
            "      --lr-gamma X          step, steplr, multisteplr, exponentiallr factor (default 0.1)\n"
            "      --lr-step-size N      steplr's period in epochs (default 30)\n"
            "      --lr-min X            the cosines' floor (default 0)    --lr-power X  polynomiallr's (default 1)\n"
            "      --lr-per-step         torchvision's schedules at every step, not every epoch (--no-lr-per-step)\n"
            "      --lr-warmup-method M  linear (from --lr-warmup-decay) or constant (default: linear for step and\n"
            "                            cosine, constant for torchvision's)\n"
            "      --lr-warmup-decay X   the warm-up's first factor (default: 0 for step and cosine, 0.01 else)\n"
            "      --print-lr N          print the lr of every step for N steps per epoch, and exit (the command\n"
            "                            line checked as for a run; no DATA needed, none read)\n"
            "      --opt NAME            sgd (default), sgd_nesterov, adam, adamw, rmsprop (torch.optim's), lars, lamb\n"
            "                            (in any case, as torchvision's: SGD is sgd)\n"
            "      --lars-eta X          LARS's trust coefficient (default 0.001)\n"
            "      --adam-beta1 X, --adam-beta2 X  Adam's and AdamW's betas (default 0.9, 0.999)\n"
            "      --rmsprop-alpha X     (default 0.9)    --opt-eps X  (default: Adam's 1e-8, RMSprop's 0.0316,\n"
            "                            LAMB's 1e-6)\n"
            "      --momentum X          (default 0.9)    --wd X  weight decay (default 1e-4)\n"
            "      --model-ema           keep and validate the weights' moving average (torchvision's); --no-model-ema\n"
            "      --ra-sampler          repeated augmentation (torchvision's RASampler), --ra-reps N copies (3);\n"
            "                            --no-ra-sampler\n"
            "      --mixup-alpha X, --cutmix-alpha X  mix each training batch (torchvision's; one per batch)\n"
            "      --model-ema-steps N   update it every N steps (default 32)\n"
            "      --model-ema-decay X   (default 0.99998, adjusted to the global batch as train.py)\n"
            "      --norm-weight-decay X BN's weights and biases' own weight decay (default: --wd)\n"
            "      --bias-weight-decay X every bias's own (BN's too; before --norm-weight-decay) (default: --wd)\n"
            "      --clip-grad-norm X    clip the gradients' global L2 norm to X before each update\n"
            "      --nesterov            Nesterov momentum (--no-nesterov)\n"
            "      --label-smoothing X   (default 0)\n"
            "      --accum-steps N       gradient accumulation (default 1)\n"
            "      --max-steps N         stop after N optimiser steps\n"
            "      --desired-acc X       stop once validation top-1 reaches X percent\n"
            "      --seed N              (default 0)\n"
            "      --deterministic       bit-reproducible runs (CPU runs always are, for the same ranks and --threads;\n"
            "                            on GPUs it keeps cuDNN to deterministic algorithms, else the fastest)\n"
            "      --pretrained PATH     start from these weights: a dtrain checkpoint or a file written by\n"
            "                            tools/dt-export-torchvision (torchvision's names and shapes)\n"
            "Mixed precision (Apex's opt levels):\n"
            "      --opt-level O0|O1|O2|O3       (default O0); --amp: O1 (torchvision's torch.amp autocast),\n"
            "                                    --no-amp: O0 (not with --opt-level)\n"
            "      --precision fp16|bf16         the reduced type (default fp16; bf16 needs no loss scaling)\n"
            "      --keep-batchnorm-fp32 BOOL    (O2, O3)\n"
            "      --master-weights BOOL         (O2, O3)\n"
            "      --loss-scale dynamic|X        (default: the level's)\n"
            "      --loss-scale-window N         dynamic: clean steps before the scale doubles (default 2000)\n"
            "      --allreduce-fp32              all-reduce gradients in fp32 at every level\n"
            "      --max-nonfinite N             stop the run after N steps in a row whose loss or gradients\n"
            "                                    hold NaN/inf (default 10; under a dynamic loss scale: when\n"
            "                                    the scale is at its floor, 2^-24)\n"
            "Data parallelism:\n"
            "      --bucket-mb X         gradient bucket size (default 25)   --first-bucket-mb X (default 1)\n"
            "      --no-overlap          all-reduce after backward instead of during it\n"
            "      --graph, --no-graph   each step as captured graphs launched again (default: on with --device\n"
            "                            cuda; not with --accum-steps or --sync-bn; on the CPU only for tests)\n"
            "      --sync-bn             batch-norm statistics over all ranks (--no-sync-bn)\n"
            "      --comm-timeout S      seconds before a collective fails (default 600)\n"
            "      --nproc-per-node N    without Slurm: run N workers here, one per GPU (CPU runs use mpirun)\n"
            "Output:\n"
            "  -p, --print-freq N        steps between progress lines (default 10)\n"
            "      --results DIR         runs go to DIR/<run id>/ (default results); also --output-dir\n"
            "      --run-name NAME       appended to the run id\n"
            "      --resume PATH|auto|job  continue from a checkpoint (auto: the newest of this arch under\n"
            "                            --results; job: this Slurm job's, if it wrote one, else a new run)\n"
            "      --checkpoint-every N  also write the checkpoint every N steps (default: at epoch ends)\n"
            "  -e, --evaluate            validate the --resume checkpoint (or --pretrained weights) and exit;\n"
            "                            also --test-only\n"
            "                            (nothing written)\n"
            "      --threads N           compute threads per rank (default: OMP_NUM_THREADS or all cores)\n"
            "      --device cpu|cuda     where to compute (default cpu); cuda: the local rank's GPU (a CUDA build)\n"
            "      --cudnn-search MODE   how cuDNN's convolution algorithms are chosen (--device cuda): heuristic\n"
            "                            (cuDNN's heuristics, nothing timed), bounded[:S] (their first candidates\n"
            "                            timed, at most S seconds per convolution shape; default bounded:1) or\n"
            "                            exhaustive (every algorithm timed, as PyTorch's cudnn.benchmark)\n"
            "      --log-level LEVEL     error, warn, info or debug (default info, or $DT_LOG_LEVEL)\n"
            "  -h, --help                this help    -V, --version  the version and the parts built in\n"
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

static int num(const char *flag, const char *v, double lo, double hi, double *out)
{
    return dt_parse_double(flag, v, lo, hi, out);
}

/* --cudnn-search MODE: heuristic, bounded, bounded:SECONDS or exhaustive (cfg->cudnn_search, and
 * cfg->cudnn_search_s for bounded). DT_OK, or DT_ERR_INPUT after one line. */
static int parse_cudnn_search(const char *text, dt_train_cfg *cfg)
{
    static const char *const modes[] = {"heuristic", "bounded", "exhaustive", NULL};
    const char *colon = strchr(text, ':');
    char mode[16], e[160];
    if (!colon) { /* bounded alone: the default cap (dt_train_defaults), whatever an earlier flag gave */
        cfg->cudnn_search_s = 1;
        return dt_parse_choice("--cudnn-search", text, modes, &cfg->cudnn_search);
    }
    if ((size_t)(colon - text) >= sizeof mode || strncmp(text, "bounded:", 8) != 0) {
        snprintf(mode, sizeof mode, "%.*s", (int)(colon - text), text);
        if (dt_parse_choice("--cudnn-search", mode, modes, &cfg->cudnn_search) == DT_OK)
            dt_error("--cudnn-search %s: only bounded takes a time cap (bounded:SECONDS)",
                     dt_cli_escape(text, e, sizeof e));
        return DT_ERR_INPUT;
    }
    cfg->cudnn_search = 1;
    return num("--cudnn-search bounded:SECONDS", colon + 1, 0.001, 3600, &cfg->cudnn_search_s);
}

/* the option whose source an option's value is recorded under: an off switch's is its flag's */
static int slot_of(int c)
{
    switch (c) {
    case OPT_NO_EMA: return OPT_EMA;
    case OPT_NO_RA: return OPT_RA;
    case OPT_NO_NESTEROV: return OPT_NESTEROV;
    case OPT_LR_SCALING: return OPT_NO_LR_SCALING;
    case OPT_NO_LR_PER_STEP: return OPT_LR_PER_STEP;
    case OPT_NO_SYNC_BN: return OPT_SYNC_BN;
    case OPT_NO_AMP: return OPT_AMP;
    case OPT_NO_GRAPH: return OPT_GRAPH;
    default: return c;
    }
}

/* The rule for a flag that would have no effect (doc/dtrain.1, OPTIONS), called where it would have
 * none: refused with one line naming it and why, wherever it came from, except a --recipe's flag
 * when the command line itself set what it depends on (parent_by_user): overriding a recipe's
 * choice (--no-model-ema, --opt sgd) leaves the recipe's flags that went with it unused. Returns 1
 * after the line, else 0. */
static int no_effect(const unsigned char *from, int opt, const char *flag, int parent_by_user, const char *why)
{
    if (from[opt] == FROM_DEFAULT || (from[opt] == FROM_RECIPE && parent_by_user))
        return 0;
    dt_error("%s%s has no effect %s", flag, from[opt] == FROM_RECIPE ? " (from --recipe)" : "", why);
    return 1;
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
    if (USER(OPT_AMP) && USER(OPT_OPT_LEVEL)) {
        dt_error("--amp (or --no-amp) and --opt-level: give one (--amp is --opt-level O1, --no-amp O0)");
        return 1;
    }
    /* sub-flags whose parent is off */
    REFUSE(!cfg->model_ema, OPT_EMA_STEPS, "--model-ema-steps", USER(OPT_EMA), "without --model-ema");
    REFUSE(!cfg->model_ema, OPT_EMA_DECAY, "--model-ema-decay", USER(OPT_EMA), "without --model-ema");
    REFUSE(!cfg->ra_sampler, OPT_RA_REPS, "--ra-reps", USER(OPT_RA), "without --ra-sampler");
    REFUSE(cfg->auto_augment != DT_AUG_RA, OPT_RA_MAG, "--ra-magnitude", USER(OPT_AUTO_AUG),
           "without --auto-augment ra");
    /* the optimiser's own settings */
    const int opt = cfg->opt, adam_like = opt == DT_OPTC_ADAM || opt == DT_OPTC_ADAMW || opt == DT_OPTC_LAMB;
    REFUSE(opt != DT_OPTC_LARS, OPT_LARS_ETA, "--lars-eta", USER(OPT_OPT), "without --opt lars");
    REFUSE(!adam_like, OPT_BETA1, "--adam-beta1", USER(OPT_OPT), "without --opt adam, adamw or lamb");
    REFUSE(!adam_like, OPT_BETA2, "--adam-beta2", USER(OPT_OPT), "without --opt adam, adamw or lamb");
    REFUSE(opt != DT_OPTC_RMSPROP, OPT_ALPHA, "--rmsprop-alpha", USER(OPT_OPT), "without --opt rmsprop");
    REFUSE(!adam_like && opt != DT_OPTC_RMSPROP, OPT_OPT_EPS, "--opt-eps", USER(OPT_OPT),
           "without --opt adam, adamw, lamb or rmsprop");
    REFUSE(adam_like, OPT_MOMENTUM, "--momentum", USER(OPT_OPT),
           "with --opt adam, adamw or lamb (their momentum is --adam-beta1)");
    /* the schedule's */
    const int s = cfg->lr_schedule, cosine = s == DT_LR_COSINE || s == DT_LR_COSINEANNEALINGLR;
    REFUSE(s != DT_LR_STEP && s != DT_LR_MULTISTEPLR, OPT_LR_STEPS, "--lr-steps", USER(OPT_SCHEDULE),
           "without --lr-schedule step or multisteplr");
    REFUSE(cosine || s == DT_LR_POLYNOMIALLR, OPT_LR_GAMMA, "--lr-gamma", USER(OPT_SCHEDULE),
           "without --lr-schedule step, steplr, multisteplr or exponentiallr");
    REFUSE(s != DT_LR_STEPLR, OPT_LR_STEP_SIZE, "--lr-step-size", USER(OPT_SCHEDULE), "without --lr-schedule steplr");
    REFUSE(!cosine, OPT_LR_MIN, "--lr-min", USER(OPT_SCHEDULE), "without --lr-schedule cosine or cosineannealinglr");
    REFUSE(s != DT_LR_POLYNOMIALLR, OPT_LR_POWER, "--lr-power", USER(OPT_SCHEDULE),
           "without --lr-schedule polynomiallr");
    REFUSE(cfg->lr_per_step && s <= DT_LR_COSINE, OPT_LR_PER_STEP, "--lr-per-step", USER(OPT_SCHEDULE),
           "with --lr-schedule step or cosine (their warm-up and cosine run per step already, step's "
           "milestones are whole epochs)");
    REFUSE(cfg->warmup_epochs <= 0, OPT_WARMUP_METHOD, "--lr-warmup-method", USER(OPT_WARMUP),
           "without --warmup-epochs above 0");
    REFUSE(cfg->warmup_epochs <= 0, OPT_WARMUP_DECAY, "--lr-warmup-decay", USER(OPT_WARMUP),
           "without --warmup-epochs above 0");
    /* mixed precision's */
    const int level = cfg->opt_level, level_user = USER(OPT_OPT_LEVEL) || USER(OPT_AMP);
    const int dynamic = cfg->amp.loss_scale ? !strcmp(cfg->amp.loss_scale, "dynamic")
                                            : (level == 1 || level == 2) && !cfg->amp.bf16;
    REFUSE(level == 0, OPT_PRECISION, "--precision", level_user, "at --opt-level O0 (fp32 throughout)");
    REFUSE(level < 2, OPT_KEEP_BN, "--keep-batchnorm-fp32", level_user,
           "below --opt-level O2 (O0 and O1 keep every weight in fp32)");
    REFUSE(level < 2, OPT_MASTER, "--master-weights", level_user,
           "below --opt-level O2 (O0 and O1 have fp32 weights only)");
    REFUSE(level < 2, OPT_AR_FP32, "--allreduce-fp32", level_user,
           "below --opt-level O2 (O0 and O1 all-reduce fp32 gradients already)");
    REFUSE(!dynamic, OPT_SCALE_WINDOW, "--loss-scale-window",
           level_user || USER(OPT_LOSS_SCALE) || USER(OPT_PRECISION),
           "without a dynamic loss scale (O1 or O2 with fp16, or --loss-scale dynamic)");
    /* only the CUDA backend has convolution algorithms to choose */
    REFUSE(!cfg->cuda, OPT_CUDNN_SEARCH, "--cudnn-search", USER(OPT_DEVICE), "without --device cuda");
    /* graphs capture a step of one forward and backward with rank-local BN */
    REFUSE(cfg->graph > 0 && (cfg->accum_steps > 1 || cfg->sync_bn), OPT_GRAPH, "--graph",
           USER(OPT_ACCUM) || USER(OPT_SYNC_BN),
           "with --accum-steps above 1 or --sync-bn (no step of theirs is captured)");
    /* --synthetic reads no images and validates nothing */
    static const struct { int opt; const char *flag; } data_flags[] = {
        {OPT_INTERP, "--interpolation"}, {OPT_AUTO_AUG, "--auto-augment"}, {OPT_ERASE, "--random-erase"},
        {OPT_PADDING, "--crop-padding"}, {OPT_VAL_CROP, "--val-crop-size"}, {OPT_VAL_RESIZE, "--val-resize-size"},
        {OPT_MIXUP, "--mixup-alpha"}, {OPT_CUTMIX, "--cutmix-alpha"}, {OPT_RA, "--ra-sampler"},
        {OPT_DESIRED, "--desired-acc"},
    };
    for (size_t i = 0; i < sizeof data_flags / sizeof data_flags[0]; i++) {
        const int on = data_flags[i].opt != OPT_RA || cfg->ra_sampler; /* --no-ra-sampler is no data flag */
        REFUSE(cfg->synthetic && on, data_flags[i].opt, data_flags[i].flag, USER(OPT_SYNTHETIC),
               "with --synthetic (no images are read, nothing is validated)");
    }
#undef REFUSE
#undef USER
    return 0;
}

/* --recipe NAME, which main() expanded and left in argv: only its name is read here */
enum { OPT_RECIPE = 1024 };

/* The option getopt_long just returned (c, with optarg) into cfg->options, run.json's record: under
 * its first name in opts (an alias's too; an off switch's under its flag's, as false), replacing what
 * an earlier one of the same option gave, so that each is there once with the value in force. --amp
 * and --no-amp are recorded as the --opt-level they mean. */
static void note_option(dt_train_cfg *cfg, const struct option *opts, int c, const char *arg)
{
    int slot = c == OPT_AMP || c == OPT_NO_AMP ? OPT_OPT_LEVEL : slot_of(c);
    const char *value = c == OPT_AMP ? "O1" : c == OPT_NO_AMP ? "O0" : arg;
    const struct option *o = opts;
    while (o->name && o->val != slot)
        o++;
    if (!o->name)
        return;
    int i = 0;
    while (i < cfg->n_options && strcmp(cfg->options[i].name, o->name))
        i++;
    if (i == cfg->n_options && cfg->n_options == DT_TRAIN_MAX_OPTIONS)
        return; /* not reached: fewer options than that exist */
    cfg->n_options += i == cfg->n_options;
    cfg->options[i] = (dt_train_option){.name = o->name, .value = o->has_arg ? value : NULL, .on = c == slot};
}

/* argv[1 .. recipe_args] are the flags of --recipe (main), the rest the command line's */
static int run(int argc, char **argv, int recipe_args)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"arch", required_argument, NULL, 'a'},
        {"workers", required_argument, NULL, 'j'},
        {"batch-size", required_argument, NULL, 'b'},
        {"evaluate", no_argument, NULL, 'e'},
        {"print-freq", required_argument, NULL, 'p'},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"nproc-per-node", required_argument, NULL, OPT_NPROC},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"lr", required_argument, NULL, OPT_LR},
        {"no-lr-scaling", no_argument, NULL, OPT_NO_LR_SCALING},
        {"warmup-epochs", required_argument, NULL, OPT_WARMUP},
        {"lr-schedule", required_argument, NULL, OPT_SCHEDULE},
        {"lr-steps", required_argument, NULL, OPT_LR_STEPS},
        {"lr-milestones", required_argument, NULL, OPT_LR_STEPS},
        {"lr-scheduler", required_argument, NULL, OPT_SCHEDULE},
        {"lr-warmup-epochs", required_argument, NULL, OPT_WARMUP},
        {"lr-gamma", required_argument, NULL, OPT_LR_GAMMA},
        {"lr-step-size", required_argument, NULL, OPT_LR_STEP_SIZE},
        {"lr-min", required_argument, NULL, OPT_LR_MIN},
        {"lr-power", required_argument, NULL, OPT_LR_POWER},
        {"lr-per-step", no_argument, NULL, OPT_LR_PER_STEP},
        {"lr-warmup-method", required_argument, NULL, OPT_WARMUP_METHOD},
        {"lr-warmup-decay", required_argument, NULL, OPT_WARMUP_DECAY},
        {"print-lr", required_argument, NULL, OPT_PRINT_LR},
        {"momentum", required_argument, NULL, OPT_MOMENTUM},
        {"wd", required_argument, NULL, OPT_WD},
        {"weight-decay", required_argument, NULL, OPT_WD},
        {"norm-weight-decay", required_argument, NULL, OPT_NORM_WD},
        {"bias-weight-decay", required_argument, NULL, OPT_BIAS_WD},
        {"clip-grad-norm", required_argument, NULL, OPT_CLIP},
        {"opt", required_argument, NULL, OPT_OPT},
        {"model-ema", no_argument, NULL, OPT_EMA},
        {"ra-sampler", no_argument, NULL, OPT_RA},
        {"mixup-alpha", required_argument, NULL, OPT_MIXUP},
        {"cutmix-alpha", required_argument, NULL, OPT_CUTMIX},
        {"ra-reps", required_argument, NULL, OPT_RA_REPS},
        {"model-ema-steps", required_argument, NULL, OPT_EMA_STEPS},
        {"model-ema-decay", required_argument, NULL, OPT_EMA_DECAY},
        {"opt-eps", required_argument, NULL, OPT_OPT_EPS},
        {"lars-eta", required_argument, NULL, OPT_LARS_ETA},
        {"adam-beta1", required_argument, NULL, OPT_BETA1},
        {"adam-beta2", required_argument, NULL, OPT_BETA2},
        {"rmsprop-alpha", required_argument, NULL, OPT_ALPHA},
        {"nesterov", no_argument, NULL, OPT_NESTEROV},
        {"label-smoothing", required_argument, NULL, OPT_SMOOTH},
        {"desired-acc", required_argument, NULL, OPT_DESIRED},
        {"seed", required_argument, NULL, OPT_SEED},
        {"synthetic", no_argument, NULL, OPT_SYNTHETIC},
        {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"crop", required_argument, NULL, OPT_CROP},
        {"train-crop-size", required_argument, NULL, OPT_CROP},
        {"val-crop-size", required_argument, NULL, OPT_VAL_CROP},
        {"val-resize-size", required_argument, NULL, OPT_VAL_RESIZE},
        {"interpolation", required_argument, NULL, OPT_INTERP},
        {"auto-augment", required_argument, NULL, OPT_AUTO_AUG},
        {"ra-magnitude", required_argument, NULL, OPT_RA_MAG},
        {"random-erase", required_argument, NULL, OPT_ERASE},
        {"model", required_argument, NULL, 'a'},
        {"test-only", no_argument, NULL, 'e'},
        {"amp", no_argument, NULL, OPT_AMP},
        {"crop-padding", required_argument, NULL, OPT_PADDING},
        {"results", required_argument, NULL, OPT_RESULTS},
        {"output-dir", required_argument, NULL, OPT_RESULTS},
        {"recipe", required_argument, NULL, OPT_RECIPE},
        {"run-name", required_argument, NULL, OPT_RUN_NAME},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY},
        {"opt-level", required_argument, NULL, OPT_OPT_LEVEL},
        {"keep-batchnorm-fp32", required_argument, NULL, OPT_KEEP_BN},
        {"loss-scale", required_argument, NULL, OPT_LOSS_SCALE},
        {"master-weights", required_argument, NULL, OPT_MASTER},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"allreduce-fp32", no_argument, NULL, OPT_AR_FP32},
        {"bucket-mb", required_argument, NULL, OPT_BUCKET},
        {"first-bucket-mb", required_argument, NULL, OPT_FIRST_BUCKET},
        {"no-overlap", no_argument, NULL, OPT_NO_OVERLAP},
        {"graph", no_argument, NULL, OPT_GRAPH},
        {"no-graph", no_argument, NULL, OPT_NO_GRAPH},
        {"sync-bn", no_argument, NULL, OPT_SYNC_BN},
        {"no-sync-bn", no_argument, NULL, OPT_NO_SYNC_BN},
        {"no-model-ema", no_argument, NULL, OPT_NO_EMA},
        {"no-ra-sampler", no_argument, NULL, OPT_NO_RA},
        {"no-nesterov", no_argument, NULL, OPT_NO_NESTEROV},
        {"lr-scaling", no_argument, NULL, OPT_LR_SCALING},
        {"no-lr-per-step", no_argument, NULL, OPT_NO_LR_PER_STEP},
        {"no-amp", no_argument, NULL, OPT_NO_AMP},
        {"accum-steps", required_argument, NULL, OPT_ACCUM},
        {"comm-timeout", required_argument, NULL, OPT_TIMEOUT},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"start-epoch", required_argument, NULL, OPT_START_EPOCH},
        {"pretrained", required_argument, NULL, OPT_PRETRAINED},
        {"deterministic", no_argument, NULL, OPT_DETERMINISTIC},
        {"loss-scale-window", required_argument, NULL, OPT_SCALE_WINDOW},
        {"max-nonfinite", required_argument, NULL, OPT_MAX_NONFINITE},
        {"cudnn-search", required_argument, NULL, OPT_CUDNN_SEARCH},
        {NULL, 0, NULL, 0},
    };
    static const char *const opt_levels[] = {"O0", "O1", "O2", "O3", NULL};
    static const char *const precisions[] = {"fp16", "bf16", NULL};
    static const char *const devices[] = {"cpu", "cuda", NULL};
    /* HDF5 1.10's exit handler crashes on a file whose H5Fclose failed (a full disk while writing a
     * checkpoint: SIGSEGV after the error was said). dtrain closes every file itself, so the handler
     * has nothing to do; this must come before any other HDF5 call. */
    H5dont_atexit();
    dt_train_cfg cfg;
    dt_train_defaults(&cfg);
    opterr = 0; /* our own one-line messages */
    int c, bad = 0;
    long nproc = 0, print_lr = 0, v;
    double d;
    bool bv;
    unsigned char from[OPT_END] = {0}; /* enum from_where, by option (slot_of) */
    while (!bad && (c = getopt_long(argc, argv, ":hVea:j:b:p:", opts, NULL)) != -1) {
        int common = dt_cli_common(c, OPT_LOG_LEVEL, "dtrain", argv, opts, usage);
        if (common == DT_CLI_GO_ON)
            continue;
        if (common != DT_CLI_MINE)
            return common;
        /* getopt_long reads argv in order and the recipe's flags come first (with no operand among
         * them): an option whose value ends within them is the recipe's */
        if (c >= 0 && c < OPT_END)
            from[slot_of(c)] = optind <= recipe_args + 1 ? FROM_RECIPE : FROM_USER;
        if (c != OPT_RECIPE)
            note_option(&cfg, opts, c, optarg);
        switch (c) {
        case 'a': cfg.arch = optarg; break;
        case 'e': cfg.evaluate = 1; break;
        case 'j': bad = dt_parse_long("--workers", optarg, 1, 1024, &v) || ((cfg.workers = (int)v), 0); break;
        case 'b': bad = dt_parse_long("--batch-size", optarg, 1, 65536, &v) || ((cfg.batch = (int)v), 0); break;
        case 'p': bad = dt_parse_long("--print-freq", optarg, 0, 1000000, &v) || ((cfg.print_freq = (int)v), 0); break;
        case OPT_NPROC: bad = dt_parse_long("--nproc-per-node", optarg, 1, 1024, &nproc); break;
        case OPT_EPOCHS: bad = dt_parse_long("--epochs", optarg, 1, 1000000, &v) || ((cfg.epochs = (int)v), 0); break;
        case OPT_LR: bad = num("--lr", optarg, 0, 1e6, &cfg.lr); break;
        case OPT_START_EPOCH:
            bad = dt_parse_long("--start-epoch", optarg, 0, 1000000, &v) || ((cfg.start_epoch = (int)v), 0);
            break;
        case OPT_PRETRAINED: cfg.pretrained = optarg; break;
        case OPT_DETERMINISTIC: cfg.deterministic = 1; break;
        case OPT_SCALE_WINDOW: bad = dt_parse_long("--loss-scale-window", optarg, 1, 1L << 40, &cfg.scale_window); break;
        case OPT_MAX_NONFINITE: bad = dt_parse_long("--max-nonfinite", optarg, 1, 1L << 40, &cfg.max_nonfinite); break;
        case OPT_NO_LR_SCALING: cfg.no_lr_scaling = 1; break;
        case OPT_WARMUP: bad = num("--warmup-epochs", optarg, 0, 1e6, &cfg.warmup_epochs); break;
        case OPT_SCHEDULE: bad = dt_parse_choice("--lr-schedule", optarg, dt_lr_schedule_names, &cfg.lr_schedule); break;
        case OPT_LR_GAMMA: bad = num("--lr-gamma", optarg, 1e-12, 1e6, &cfg.lr_gamma); break;
        case OPT_LR_STEP_SIZE: bad = dt_parse_long("--lr-step-size", optarg, 1, 1000000, &cfg.lr_step_size); break;
        case OPT_LR_MIN: bad = num("--lr-min", optarg, 0, 1e6, &cfg.lr_min); break;
        case OPT_LR_POWER: bad = num("--lr-power", optarg, 0, 1e6, &cfg.lr_power); break;
        case OPT_LR_PER_STEP: cfg.lr_per_step = 1; break;
        case OPT_WARMUP_METHOD:
            bad = dt_parse_choice("--lr-warmup-method", optarg, dt_lr_warmup_names, &cfg.warmup_method);
            break;
        case OPT_WARMUP_DECAY: bad = num("--lr-warmup-decay", optarg, 0, 1, &cfg.warmup_decay); break;
        case OPT_PRINT_LR: bad = dt_parse_long("--print-lr", optarg, 1, 100000000, &print_lr); break;
        case OPT_LR_STEPS:
            bad = dt_parse_long_list("--lr-steps", optarg, 1, 1000000, cfg.lr_steps, 16, &cfg.n_lr_steps);
            break;
        case OPT_MOMENTUM: bad = num("--momentum", optarg, 0, 1, &cfg.momentum); break;
        case OPT_WD: bad = num("--wd", optarg, 0, 1, &cfg.wd); break;
        case OPT_NORM_WD: bad = num("--norm-weight-decay", optarg, 0, 1, &cfg.norm_wd); break;
        case OPT_BIAS_WD: bad = num("--bias-weight-decay", optarg, 0, 1, &cfg.bias_wd); break;
        case OPT_CLIP: bad = num("--clip-grad-norm", optarg, 1e-12, 1e12, &cfg.clip_grad_norm); break;
        case OPT_NESTEROV: cfg.nesterov = 1; break;
        case OPT_OPT: /* any case, as torchvision's train.py lower-cases it: --opt SGD */
            bad = dt_parse_choice_nocase("--opt", optarg, dt_opt_names, &cfg.opt);
            break;
        case OPT_EMA: cfg.model_ema = 1; break;
        case OPT_RA: cfg.ra_sampler = 1; break;
        case OPT_MIXUP: bad = num("--mixup-alpha", optarg, 0, 1e3, &cfg.mixup_alpha); break;
        case OPT_CUTMIX: bad = num("--cutmix-alpha", optarg, 0, 1e3, &cfg.cutmix_alpha); break;
        case OPT_RA_REPS: bad = dt_parse_long("--ra-reps", optarg, 1, 64, &v) || ((cfg.ra_reps = (int)v), 0); break;
        case OPT_EMA_STEPS: bad = dt_parse_long("--model-ema-steps", optarg, 1, 1L << 40, &cfg.model_ema_steps); break;
        case OPT_EMA_DECAY: bad = num("--model-ema-decay", optarg, 0, 1, &cfg.model_ema_decay); break;
        case OPT_OPT_EPS: bad = num("--opt-eps", optarg, 1e-30, 1, &cfg.opt_eps); break;
        case OPT_LARS_ETA: bad = num("--lars-eta", optarg, 1e-12, 1e3, &cfg.lars_eta); break;
        case OPT_BETA1: bad = num("--adam-beta1", optarg, 0, 0.999999, &cfg.adam_beta1); break;
        case OPT_BETA2: bad = num("--adam-beta2", optarg, 0, 0.999999, &cfg.adam_beta2); break;
        case OPT_ALPHA: bad = num("--rmsprop-alpha", optarg, 0, 0.999999, &cfg.rmsprop_alpha); break;
        case OPT_SMOOTH: bad = num("--label-smoothing", optarg, 0, 1, &cfg.label_smoothing); break;
        case OPT_DESIRED: bad = num("--desired-acc", optarg, 0, 100, &cfg.desired_acc); break;
        case OPT_SEED: bad = dt_parse_long("--seed", optarg, 0, 2147483647L, &v) || ((cfg.seed = (uint64_t)v), 0); break;
        case OPT_SYNTHETIC: cfg.synthetic = 1; break;
        case OPT_MAX_STEPS: bad = dt_parse_long("--max-steps", optarg, 1, 1L << 40, &cfg.max_steps); break;
        case OPT_THREADS: bad = dt_parse_long("--threads", optarg, 1, 4096, &v) || ((cfg.threads = (int)v), 0); break;
        case OPT_CROP: bad = dt_parse_long("--crop", optarg, 8, 4096, &v) || ((cfg.crop = (int)v), 0); break;
        case OPT_VAL_CROP:
            bad = dt_parse_long("--val-crop-size", optarg, 8, 4096, &v) || ((cfg.val_crop = (int)v), 0);
            break;
        case OPT_VAL_RESIZE:
            bad = dt_parse_long("--val-resize-size", optarg, 8, 8192, &v) || ((cfg.val_resize = (int)v), 0);
            break;
        case OPT_INTERP:
            if ((cfg.interpolation = dt_filter_parse(optarg)) < 0) {
                dt_error("--interpolation %s: nearest, bilinear, bicubic, box, hamming or lanczos", optarg);
                bad = 1;
            }
            break;
        case OPT_AUTO_AUG:
            if ((cfg.auto_augment = dt_aug_policy_parse(optarg)) < 0) {
                dt_error("--auto-augment %s: imagenet, cifar10, svhn, ra or ta_wide (augmix is not built)", optarg);
                bad = 1;
            }
            break;
        case OPT_RA_MAG: bad = dt_parse_long("--ra-magnitude", optarg, 0, 30, &v) || ((cfg.ra_magnitude = (int)v), 0); break;
        case OPT_ERASE: bad = num("--random-erase", optarg, 0, 1, &cfg.random_erase); break;
        case OPT_PADDING:
            bad = dt_parse_long("--crop-padding", optarg, 0, 64, &v) || ((cfg.crop_padding = v ? (int)v : -1), 0);
            break;
        case OPT_RESULTS: cfg.results = optarg; break;
        case OPT_RESUME: cfg.resume = optarg; break;
        case OPT_CKPT_EVERY: bad = dt_parse_long("--checkpoint-every", optarg, 1, 1L << 40, &cfg.checkpoint_every); break;
        case OPT_RUN_NAME:
            if (!*optarg || strchr(optarg, '/')) {
                dt_error("--run-name %s: a plain name, without '/'", optarg);
                bad = 1;
            }
            cfg.run_name = optarg;
            break;
        case OPT_OPT_LEVEL: bad = dt_parse_choice("--opt-level", optarg, opt_levels, &cfg.opt_level); break;
        case OPT_AMP: cfg.opt_level = 1; break; /* torchvision's --amp: torch.amp's autocast, Apex's O1 */
        case OPT_KEEP_BN:
            bad = dt_parse_bool("--keep-batchnorm-fp32", optarg, &bv) || ((cfg.amp.keep_batchnorm_fp32 = bv), 0);
            break;
        case OPT_MASTER: bad = dt_parse_bool("--master-weights", optarg, &bv) || ((cfg.amp.master_weights = bv), 0); break;
        case OPT_LOSS_SCALE:
            if (strcmp(optarg, "dynamic") != 0)
                bad = num("--loss-scale", optarg, 1e-30, 1e30, &d);
            cfg.amp.loss_scale = optarg;
            break;
        case OPT_PRECISION: bad = dt_parse_choice("--precision", optarg, precisions, &cfg.amp.bf16); break;
        case OPT_AR_FP32: cfg.amp.allreduce_fp32 = 1; break;
        case OPT_BUCKET: bad = num("--bucket-mb", optarg, 1e-3, 1e5, &cfg.bucket_mb); break;
        case OPT_FIRST_BUCKET: bad = num("--first-bucket-mb", optarg, 1e-3, 1e5, &cfg.first_bucket_mb); break;
        case OPT_NO_OVERLAP: cfg.no_overlap = 1; break;
        case OPT_GRAPH: cfg.graph = 1; break;
        case OPT_NO_GRAPH: cfg.graph = 0; break;
        case OPT_SYNC_BN: cfg.sync_bn = 1; break;
        case OPT_NO_SYNC_BN: cfg.sync_bn = 0; break;
        case OPT_NO_EMA: cfg.model_ema = 0; break;
        case OPT_NO_RA: cfg.ra_sampler = 0; break;
        case OPT_NO_NESTEROV: cfg.nesterov = 0; break;
        case OPT_LR_SCALING: cfg.no_lr_scaling = 0; break;
        case OPT_NO_LR_PER_STEP: cfg.lr_per_step = 0; break;
        case OPT_NO_AMP: cfg.opt_level = 0; break;
        case OPT_ACCUM: bad = dt_parse_long("--accum-steps", optarg, 1, 1024, &v) || ((cfg.accum_steps = (int)v), 0); break;
        case OPT_TIMEOUT: bad = num("--comm-timeout", optarg, 1, 1e7, &cfg.comm_timeout); break;
        case OPT_DEVICE: bad = dt_parse_choice("--device", optarg, devices, &cfg.cuda); break;
        case OPT_CUDNN_SEARCH: bad = parse_cudnn_search(optarg, &cfg); break;
        case OPT_RECIPE: { /* main() expanded "--recipe NAME" and "--recipe=NAME", not an abbreviation */
            const char *flag = optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
            char e[160];
            if (strcmp(flag, "--recipe") && strncmp(flag, "--recipe=", 9)) {
                dt_error("%s: give --recipe in full (an abbreviation of it is not expanded)",
                         dt_cli_escape(flag, e, sizeof e));
                bad = 1;
            }
            cfg.recipe = optarg;
            break;
        }
        }
    }
    if (bad)
        return EXIT_USAGE;
#ifndef HAVE_CUDA
    if (cfg.cuda) { /* a fact of this command line: said before any launch (under srun --kill-on-bad-exit,
                     * a rank refusing later would get its slower peers killed, exit 143, not 2) */
        dt_error("--device cuda: this dtrain was built without CUDA (configure --with-cuda)");
        return EXIT_USAGE;
    }
#endif
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
    if (nproc) { /* the workers run this program with the same arguments, less this option */
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
            if (len > 3 && !strncmp(a, "--nproc-per-node", len)) {
                i += a[len] ? 0 : 1;
                continue;
            }
            child[k++] = argv[i];
        }
        int rc = dt_spawn_local((int)nproc, child, dt_gpu_count() > 0, 30.0);
        free(child);
        return rc;
    }
    if (optind == argc - 1)
        cfg.data = argv[optind];
    else if (!cfg.synthetic) {
        dt_error("no data directory: give one packed by dtpack, or --synthetic (see dtrain --help)");
        return EXIT_USAGE;
    }
    stdout_is_answer = cfg.evaluate;
    return dt_train(&cfg);
}

int main(int argc, char **argv)
{
    dt_log_init();
    int n, recipe_args;
    char **expanded, *strings;
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
