/* flags.h: dtrain's options, one table. Each row of DT_FLAGS is one setting of a run: its long name,
 * short key, value name and alias, how its text is parsed and which dt_train_cfg field it sets
 * (train/cfg.h), its default, its environment name, whether the ranks must agree on it, and its line
 * in dtrain --help. From the table come the getopt_long table and the parser (src/bin/dtrain.c),
 * the defaults (dt_train_defaults), the usage text, the ranks' agreement fingerprint
 * (train/agree.c), run.json's "options" record (dt_flags_note) and the man page's check
 * (tests/unit/test_flags.c: every name here is in doc/dtrain.1, every option doc/dtrain.1 lists is
 * here). Adding an option: doc/design.md, "Adding an option".
 *
 * A row is X(ID, designated initializers of dt_flag). The kind macros below fill .kind and the
 * field; omitted members are 0/NULL. Rows are in --help's order; .section starts a group there.
 *   .def       the default of a numeric, choice or switch field (as the field's type)
 *   .def_text  the default of a text or list field (a list's is parsed as the flag's value would be)
 *   .env       the environment variable whose value, when set and not empty, is the option's default:
 *              the command line (and a --recipe's flags) over the environment over .def (dtrain.c's
 *              apply_env; a bad value is one line naming the variable, exit 2)
 *   .fp        how the ranks compare it (enum dt_flag_fp); 0: by its kind, under --name
 *   .help      its text in --help after the value's column; '\n' continues at that column;
 *              "; also --ALIAS" is added. An off switch (.off) is named in .help itself.
 * Special rows keep a hook: DT_OWN's parse function (train/flags.c), DT_PROGRAM's case in dtrain.c
 * (--recipe, --print-lr, --print-config, --nproc-per-node: not settings of cfg), DT_COMMON's
 * dt_cli_common (--help, --version, --log-level), --amp, recorded as the --opt-level it means
 * (dtrain.c), and DT_REFUSED: a PyTorch launcher's flag that dtrain has no use for, refused in one
 * line that is its .help ("--rank: ..."). */
#ifndef DT_TRAIN_FLAGS_H
#define DT_TRAIN_FLAGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "train/cfg.h"

#ifdef __cplusplus
extern "C" {
#endif

enum dt_flag_kind {
    DT_FK_LONG = 1, /* a decimal integer in [lo, hi] (util/cli.h) into an int, long or uint64_t field */
    DT_FK_DOUBLE,   /* a decimal number in [lo, hi] */
    DT_FK_CHOICE,   /* one of .choices: its index (.nocase: in any case) */
    DT_FK_BOOL,     /* true/false, yes/no, on/off, 1/0 into an int field whose -1 is "not given" */
    DT_FK_TEXT,     /* the text itself (a name, a path) */
    DT_FK_LIST,     /* increasing integers in [lo, hi], comma-separated, into a long array and its count */
    DT_FK_SWITCH,   /* no value: the field 1; its off switch (.off) 0 */
    DT_FK_OWN,      /* parsed by .parse (train/flags.c), for a value the kinds above cannot say */
    DT_FK_PROGRAM,  /* the program's own (src/bin/dtrain.c's switch), not a field */
    DT_FK_COMMON,   /* dt_cli_common's (util/cli.h): --help, --version, --log-level */
    DT_FK_OPERAND,  /* not a flag: the command line's operand (DATA) */
    DT_FK_REFUSED,  /* a PyTorch launcher's flag with no meaning here: refused, its .help the line */
};
/* the type of the field, from _Generic: how a value is stored */
enum dt_flag_type { DT_FT_NONE = 0, DT_FT_INT, DT_FT_LONG, DT_FT_U64, DT_FT_DOUBLE, DT_FT_TEXT };
/* how the ranks compare an option (train/agree.h) */
enum dt_flag_fp {
    DT_FP_FIELD = 0, /* its field, by kind, under --name: "with --lr 0.1", "without --sync-bn"; an integer
                      * at a default below its range (0 for --crop) is "not given": "without --crop" */
    DT_FP_SHORT,     /* the same, under its short name: "with -a resnet50" */
    DT_FP_OWN,       /* agree.c's own text (a value whose meaning depends on another option) */
    DT_FP_NOT,       /* not compared: each rank's own (-j, --threads ...), or one another row holds */
};

typedef struct dt_flag dt_flag;
struct dt_flag {
    int id;                   /* enum dt_flag_id: its row */
    const char *name;         /* the long name without "--" ("DATA" for the operand) */
    char key;                 /* the short option, or 0 */
    const char *meta;         /* the value's name in --help; NULL: the flag takes no value */
    const char *alias;        /* another name (torchvision's train.py's), or NULL */
    const char *off;          /* DT_FK_SWITCH: the off switch's name, or NULL */
    int kind;                 /* enum dt_flag_kind */
    int type;                 /* enum dt_flag_type */
    size_t offset, count;     /* the field in dt_train_cfg; a list's count (an int) */
    double lo, hi;            /* the range of a number or a list's items */
    const char *const *choices; /* DT_FK_CHOICE: NULL-terminated */
    int nocase;
    /* DT_FK_OWN: text into cfg, or one line naming flag ("--name", or the environment variable) */
    int (*parse)(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
    double def;
    const char *def_text;
    const char *env;
    int fp;                   /* enum dt_flag_fp */
    const char *section;      /* --help: the heading printed before this row */
    int column;               /* with .section: the column help starts at (0: 28) */
    void (*usage_front)(FILE *out, int column); /* --help: printed before .help (the list of models) */
    const char *help;
};

#define DT_FLAG_FIELD_(f)                                                                                  \
    .offset = offsetof(dt_train_cfg, f),                                                                  \
    .type = _Generic(((dt_train_cfg *)0)->f, int: DT_FT_INT, long: DT_FT_LONG, uint64_t: DT_FT_U64,      \
                     double: DT_FT_DOUBLE, const char *: DT_FT_TEXT, default: DT_FT_NONE)
#define DT_LONG(f, lo_, hi_) .kind = DT_FK_LONG, DT_FLAG_FIELD_(f), .lo = (lo_), .hi = (hi_)
#define DT_DOUBLE(f, lo_, hi_) .kind = DT_FK_DOUBLE, DT_FLAG_FIELD_(f), .lo = (lo_), .hi = (hi_)
#define DT_CHOICE(f, names) .kind = DT_FK_CHOICE, DT_FLAG_FIELD_(f), .choices = (names)
#define DT_BOOL(f) .kind = DT_FK_BOOL, DT_FLAG_FIELD_(f)
#define DT_TEXT(f) .kind = DT_FK_TEXT, DT_FLAG_FIELD_(f)
#define DT_LIST(f, n, lo_, hi_) .kind = DT_FK_LIST, DT_FLAG_FIELD_(f), .count = offsetof(dt_train_cfg, n), .lo = (lo_), .hi = (hi_)
#define DT_SWITCH(f) .kind = DT_FK_SWITCH, DT_FLAG_FIELD_(f)
#define DT_OWN(f, fn) .kind = DT_FK_OWN, DT_FLAG_FIELD_(f), .parse = (fn)
#define DT_PROGRAM .kind = DT_FK_PROGRAM
#define DT_COMMON .kind = DT_FK_COMMON
#define DT_REFUSED .kind = DT_FK_REFUSED, .fp = DT_FP_NOT

/* clang-format off */
#define DT_FLAGS(X)                                                                                        \
X(ARCH, .name = "arch", .key = 'a', .meta = "NAME", .alias = "model", DT_TEXT(arch), .def_text = "resnet50",    \
  .env = "DT_ARCH", .fp = DT_FP_SHORT, .section = "Model and data:", .usage_front = dt_flags_usage_models,       \
  .help = " (default resnet50)")                                                                               \
X(DATA, .name = "DATA", .kind = DT_FK_OPERAND, DT_FLAG_FIELD_(data), .env = "DT_DATA")                          \
X(WORKERS, .name = "workers", .key = 'j', .meta = "N", DT_LONG(workers, 1, 1024), .def = 4, .env = "DT_WORKERS",   \
  .fp = DT_FP_NOT, .help = "loader threads per rank (default 4)")                                              \
X(BATCH_SIZE, .name = "batch-size", .key = 'b', .meta = "N", DT_LONG(batch, 1, 65536), .def = 64,                  \
  .env = "DT_BATCH", .fp = DT_FP_SHORT, .help = "images per rank and step (default 64)")                         \
X(RECIPE, .name = "recipe", .meta = "NAME", DT_PROGRAM, .env = "DT_RECIPE", .fp = DT_FP_NOT,                       \
  .help = "a documented recipe's flags (torchvision's for resnet50 ...) before the\n"                         \
          "ones given here, which win; --recipe list shows them (doc/recipes.md);\n"                            \
          "one recipe (two different --recipe flags are refused)")                                             \
X(CROP, .name = "crop", .meta = "N", .alias = "train-crop-size", DT_LONG(crop, 8, 4096), .env = "DT_CROP",         \
  .help = "training crop of encoded images (default 224; raw shards: their size)")                             \
X(VAL_CROP_SIZE, .name = "val-crop-size", .meta = "N", DT_LONG(val_crop, 8, 4096), .env = "DT_VAL_CROP_SIZE",      \
  .help = "validation's centre crop of encoded images (default: the training crop)")                          \
X(VAL_RESIZE_SIZE, .name = "val-resize-size", .meta = "N", DT_LONG(val_resize, 8, 8192),                           \
  .env = "DT_VAL_RESIZE_SIZE", .help = "validation's resize of the shorter side first (default: 256/224 x crop)") \
X(INTERPOLATION, .name = "interpolation", .meta = "M", DT_OWN(interpolation, dt_flags_parse_interpolation),         \
  .def = -1, .env = "DT_INTERPOLATION",                                                                        \
  .help = "the resizes' filter, PIL's: nearest, bilinear (default), bicubic, box,\nhamming, lanczos")            \
X(AUTO_AUGMENT, .name = "auto-augment", .meta = "P", DT_OWN(auto_augment, dt_flags_parse_auto_augment),           \
  .env = "DT_AUTO_AUGMENT",                                                                                    \
  .help = "imagenet, cifar10, svhn (AutoAugment's policies), ra (RandAugment,\n"                                 \
          "--ra-magnitude N, default 9) or ta_wide (TrivialAugmentWide)")                                       \
X(RA_MAGNITUDE, .name = "ra-magnitude", .meta = "N", DT_LONG(ra_magnitude, 0, 30), .def = 9,                        \
  .env = "DT_RA_MAGNITUDE", .help = "RandAugment's magnitude bin, 0..30 (default 9; --auto-augment ra)")          \
X(RANDOM_ERASE, .name = "random-erase", .meta = "P", DT_DOUBLE(random_erase, 0, 1), .env = "DT_RANDOM_ERASE",      \
  .help = "RandomErasing's probability (default 0)")                                                          \
X(CROP_PADDING, .name = "crop-padding", .meta = "N", DT_OWN(crop_padding, dt_flags_parse_crop_padding),            \
  .env = "DT_CROP_PADDING", .fp = DT_FP_OWN,                                                                   \
  .help = "raw shards: zero padding of the random crop (default 4; 0: none)")                                  \
X(SYNTHETIC, .name = "synthetic", DT_SWITCH(synthetic), .env = "DT_SYNTHETIC",                                     \
  .help = "random batches, no data (benchmark)")                                                               \
X(EPOCHS, .name = "epochs", .meta = "N", DT_LONG(epochs, 1, 1000000), .def = 90, .env = "DT_EPOCHS",               \
  .section = "Optimisation:", .help = "(default 90)")                                                         \
X(START_EPOCH, .name = "start-epoch", .meta = "N", DT_LONG(start_epoch, 0, 1000000), .env = "DT_START_EPOCH",     \
  .help = "begin at epoch N: its schedule and shuffle (default 0; --resume: the checkpoint's)")                \
X(LR, .name = "lr", .meta = "X", DT_DOUBLE(lr, 0, 1e6), .def = 0.1, .env = "DT_LR",                                \
  .help = "for a global batch of 256, scaled by global batch / 256 (default 0.1)")                            \
X(NO_LR_SCALING, .name = "no-lr-scaling", .off = "lr-scaling", DT_SWITCH(no_lr_scaling), .env = "DT_NO_LR_SCALING", \
  .help = "use --lr as it is (--lr-scaling: scale it, the default)")                                          \
X(WARMUP_EPOCHS, .name = "warmup-epochs", .meta = "X", .alias = "lr-warmup-epochs", DT_DOUBLE(warmup_epochs, 0, 1e6), \
  .env = "DT_WARMUP_EPOCHS", .help = "warm-up epochs (default 0)")                                             \
X(LR_SCHEDULE, .name = "lr-schedule", .meta = "S", .alias = "lr-scheduler",                                       \
  DT_CHOICE(lr_schedule, dt_lr_schedule_names), .def = DT_LR_STEP, .env = "DT_LR_SCHEDULE",                       \
  .help = "the seed tutorial's step (x --lr-gamma at --lr-steps) or cosine (per step,\n"                       \
          "to --lr-min), or torch.optim.lr_scheduler's as torchvision's train.py\n"                              \
          "chains them after the warm-up: steplr, multisteplr, cosineannealinglr,\n"                            \
          "exponentiallr, polynomiallr (default step)")                                                       \
X(LR_STEPS, .name = "lr-steps", .meta = "LIST", .alias = "lr-milestones", DT_LIST(lr_steps, n_lr_steps, 1, 1000000), \
  .def_text = "30,60,80", .env = "DT_LR_STEPS", .fp = DT_FP_OWN,                                               \
  .help = "epochs of step and multisteplr (default 30,60,80)")                                                 \
X(LR_GAMMA, .name = "lr-gamma", .meta = "X", DT_DOUBLE(lr_gamma, 1e-12, 1e6), .def = 0.1, .env = "DT_LR_GAMMA",   \
  .help = "step, steplr, multisteplr, exponentiallr factor (default 0.1)")                                     \
X(LR_STEP_SIZE, .name = "lr-step-size", .meta = "N", DT_LONG(lr_step_size, 1, 1000000), .def = 30,                 \
  .env = "DT_LR_STEP_SIZE", .help = "steplr's period in epochs (default 30)")                                  \
X(LR_MIN, .name = "lr-min", .meta = "X", DT_DOUBLE(lr_min, 0, 1e6), .env = "DT_LR_MIN",                            \
  .help = "the cosines' floor (default 0)")                                                                   \
X(LR_POWER, .name = "lr-power", .meta = "X", DT_DOUBLE(lr_power, 0, 1e6), .def = 1, .env = "DT_LR_POWER",          \
  .help = "polynomiallr's power (default 1)")                                                                  \
X(LR_PER_STEP, .name = "lr-per-step", .off = "no-lr-per-step", DT_SWITCH(lr_per_step), .env = "DT_LR_PER_STEP",  \
  .help = "torchvision's schedules at every step, not every epoch (--no-lr-per-step)")                         \
X(LR_WARMUP_METHOD, .name = "lr-warmup-method", .meta = "M", DT_CHOICE(warmup_method, dt_lr_warmup_names),         \
  .def = -1, .env = "DT_LR_WARMUP_METHOD", .fp = DT_FP_OWN,                                                    \
  .help = "linear (from --lr-warmup-decay) or constant (default: linear for step and\n"                         \
          "cosine, constant for torchvision's)")                                                              \
X(LR_WARMUP_DECAY, .name = "lr-warmup-decay", .meta = "X", DT_DOUBLE(warmup_decay, 0, 1), .def = -1,              \
  .env = "DT_LR_WARMUP_DECAY", .fp = DT_FP_OWN,                                                                \
  .help = "the warm-up's first factor (default: 0 for step and cosine, 0.01 else)")                            \
X(PRINT_LR, .name = "print-lr", .meta = "N", DT_PROGRAM, .fp = DT_FP_NOT,                                          \
  .help = "print the lr of every step for N steps per epoch, and exit (the command\n"                          \
          "line checked as for a run; no DATA needed, none read)")                                            \
X(OPT, .name = "opt", .meta = "NAME", DT_CHOICE(opt, dt_opt_names), .nocase = 1, .env = "DT_OPT",                  \
  .help = "sgd (default), sgd_nesterov, adam, adamw, rmsprop (torch.optim's), lars, lamb\n"                     \
          "(in any case, as torchvision's: SGD is sgd)")                                                      \
X(LARS_ETA, .name = "lars-eta", .meta = "X", DT_DOUBLE(lars_eta, 1e-12, 1e3), .def = 0.001, .env = "DT_LARS_ETA",  \
  .help = "LARS's trust coefficient (default 0.001)")                                                         \
X(ADAM_BETA1, .name = "adam-beta1", .meta = "X", DT_DOUBLE(adam_beta1, 0, 0.999999), .def = 0.9,                   \
  .env = "DT_ADAM_BETA1", .help = "Adam's, AdamW's and LAMB's first beta (default 0.9)")                         \
X(ADAM_BETA2, .name = "adam-beta2", .meta = "X", DT_DOUBLE(adam_beta2, 0, 0.999999), .def = 0.999,                 \
  .env = "DT_ADAM_BETA2", .help = "their second beta (default 0.999)")                                         \
X(RMSPROP_ALPHA, .name = "rmsprop-alpha", .meta = "X", DT_DOUBLE(rmsprop_alpha, 0, 0.999999), .def = 0.9,          \
  .env = "DT_RMSPROP_ALPHA", .help = "RMSprop's smoothing constant (default 0.9)")                              \
X(OPT_EPS, .name = "opt-eps", .meta = "X", DT_DOUBLE(opt_eps, 1e-30, 1), .def = -1, .env = "DT_OPT_EPS",           \
  .help = "(default: Adam's 1e-8, RMSprop's 0.0316, LAMB's 1e-6)")                                           \
X(MOMENTUM, .name = "momentum", .meta = "X", DT_DOUBLE(momentum, 0, 1), .def = 0.9, .env = "DT_MOMENTUM",           \
  .help = "(default 0.9)")                                                                                     \
X(WD, .name = "wd", .meta = "X", .alias = "weight-decay", DT_DOUBLE(wd, 0, 1), .def = 1e-4, .env = "DT_WD",          \
  .help = "weight decay (default 1e-4)")                                                                      \
X(MODEL_EMA, .name = "model-ema", .off = "no-model-ema", DT_SWITCH(model_ema), .env = "DT_MODEL_EMA",             \
  .help = "keep and validate the weights' moving average (torchvision's); --no-model-ema")                     \
X(RA_SAMPLER, .name = "ra-sampler", .off = "no-ra-sampler", DT_SWITCH(ra_sampler), .env = "DT_RA_SAMPLER",        \
  .help = "repeated augmentation (torchvision's RASampler); --no-ra-sampler")                                  \
X(RA_REPS, .name = "ra-reps", .meta = "N", DT_LONG(ra_reps, 1, 64), .def = 3, .env = "DT_RA_REPS",                 \
  .help = "--ra-sampler's copies of each image (default 3)")                                                   \
X(MIXUP_ALPHA, .name = "mixup-alpha", .meta = "X", DT_DOUBLE(mixup_alpha, 0, 1e3), .env = "DT_MIXUP_ALPHA",        \
  .help = "mix each training batch (torchvision's MixUp; with --cutmix-alpha,\none of the two per batch)")      \
X(CUTMIX_ALPHA, .name = "cutmix-alpha", .meta = "X", DT_DOUBLE(cutmix_alpha, 0, 1e3), .env = "DT_CUTMIX_ALPHA",    \
  .help = "cut and mix each training batch (torchvision's)")                                                  \
X(MODEL_EMA_STEPS, .name = "model-ema-steps", .meta = "N", DT_LONG(model_ema_steps, 1, 1L << 40), .def = 32,       \
  .env = "DT_MODEL_EMA_STEPS", .help = "update it every N steps (default 32)")                                 \
X(MODEL_EMA_DECAY, .name = "model-ema-decay", .meta = "X", DT_DOUBLE(model_ema_decay, 0, 1), .def = 0.99998,       \
  .env = "DT_MODEL_EMA_DECAY", .help = "(default 0.99998, adjusted to the global batch as train.py)")           \
X(NORM_WEIGHT_DECAY, .name = "norm-weight-decay", .meta = "X", DT_DOUBLE(norm_wd, 0, 1), .def = -1,                 \
  .env = "DT_NORM_WEIGHT_DECAY", .fp = DT_FP_OWN, .help = "BN's weights and biases' own weight decay (default: --wd)") \
X(BIAS_WEIGHT_DECAY, .name = "bias-weight-decay", .meta = "X", DT_DOUBLE(bias_wd, 0, 1), .def = -1,                 \
  .env = "DT_BIAS_WEIGHT_DECAY", .fp = DT_FP_OWN,                                                              \
  .help = "every bias's own (BN's too; before --norm-weight-decay) (default: --wd)")                            \
X(CLIP_GRAD_NORM, .name = "clip-grad-norm", .meta = "X", DT_DOUBLE(clip_grad_norm, 1e-12, 1e12),                    \
  .env = "DT_CLIP_GRAD_NORM", .help = "clip the gradients' global L2 norm to X before each update")              \
X(NESTEROV, .name = "nesterov", .off = "no-nesterov", DT_SWITCH(nesterov), .env = "DT_NESTEROV",                   \
  .help = "Nesterov momentum (--no-nesterov)")                                                                \
X(LABEL_SMOOTHING, .name = "label-smoothing", .meta = "X", DT_DOUBLE(label_smoothing, 0, 1),                        \
  .env = "DT_LABEL_SMOOTHING", .help = "(default 0)")                                                          \
X(ACCUM_STEPS, .name = "accum-steps", .meta = "N", DT_LONG(accum_steps, 1, 1024), .def = 1, .env = "DT_ACCUM_STEPS", \
  .help = "gradient accumulation (default 1)")                                                                \
X(MAX_STEPS, .name = "max-steps", .meta = "N", DT_LONG(max_steps, 1, 1L << 40), .env = "DT_MAX_STEPS",             \
  .help = "stop after N optimiser steps")                                                                     \
X(DESIRED_ACC, .name = "desired-acc", .meta = "X", DT_OWN(desired_acc, dt_flags_parse_desired_acc),               \
  .env = "DT_DESIRED_ACC",                                                                                     \
  .help = "stop once validation top-1 reaches the fraction X (0.75: 75%; the\n"                                \
          "tutorials' unit; above 1 is refused)")                                                             \
X(SEED, .name = "seed", .meta = "N", DT_LONG(seed, 0, 2147483647L), .env = "DT_SEED", .help = "(default 0)")       \
X(DETERMINISTIC, .name = "deterministic", DT_SWITCH(deterministic), .env = "DT_DETERMINISTIC",                     \
  .help = "bit-reproducible runs (CPU runs always are, for the same ranks and --threads;\n"                    \
          "on GPUs it keeps cuDNN to deterministic algorithms, else the fastest)")                              \
X(PRETRAINED, .name = "pretrained", .meta = "PATH", DT_TEXT(pretrained), .env = "DT_PRETRAINED",                    \
  .help = "start from these weights: a dtrain checkpoint or a file written by\n"                               \
          "tools/dt-export-torchvision (torchvision's names and shapes)")                                     \
X(OPT_LEVEL, .name = "opt-level", .meta = "O0|O1|O2|O3", DT_CHOICE(opt_level, dt_flags_opt_levels),                \
  .env = "DT_OPT_LEVEL", .section = "Mixed precision (Apex's opt levels):", .column = 36,                      \
  .help = "(default O0)")                                                                                      \
X(AMP, .name = "amp", .off = "no-amp", DT_SWITCH(opt_level), .env = "DT_AMP", .fp = DT_FP_NOT,                     \
  .help = "O1 (torchvision's torch.amp autocast); --no-amp: O0\n(not with --opt-level)")                      \
X(PRECISION, .name = "precision", .meta = "fp16|bf16", DT_CHOICE(amp.bf16, dt_flags_precisions),                    \
  .env = "DT_PRECISION", .help = "the reduced type (default fp16; bf16 needs no loss scaling)")                  \
X(KEEP_BATCHNORM_FP32, .name = "keep-batchnorm-fp32", .meta = "BOOL", DT_BOOL(amp.keep_batchnorm_fp32), .def = -1,  \
  .env = "DT_KEEP_BATCHNORM_FP32", .help = "(O2, O3)")                                                         \
X(MASTER_WEIGHTS, .name = "master-weights", .meta = "BOOL", DT_BOOL(amp.master_weights), .def = -1,                  \
  .env = "DT_MASTER_WEIGHTS", .help = "(O2, O3)")                                                              \
X(LOSS_SCALE, .name = "loss-scale", .meta = "dynamic|X", DT_OWN(amp.loss_scale, dt_flags_parse_loss_scale),         \
  .env = "DT_LOSS_SCALE", .help = "(default: the level's)")                                                    \
X(LOSS_SCALE_WINDOW, .name = "loss-scale-window", .meta = "N", DT_LONG(scale_window, 1, 1L << 40),                  \
  .env = "DT_LOSS_SCALE_WINDOW", .help = "dynamic: clean steps before the scale doubles (default 2000)")          \
X(ALLREDUCE_FP32, .name = "allreduce-fp32", DT_SWITCH(amp.allreduce_fp32), .env = "DT_ALLREDUCE_FP32",               \
  .help = "all-reduce gradients in fp32 at every level")                                                      \
X(MAX_NONFINITE, .name = "max-nonfinite", .meta = "N", DT_LONG(max_nonfinite, 1, 1L << 40), .def = 10,              \
  .env = "DT_MAX_NONFINITE",                                                                                   \
  .help = "stop the run after N steps in a row whose loss or gradients\n"                                      \
          "hold NaN/inf (default 10; under a dynamic loss scale: when\n"                                         \
          "the scale is at its floor, 2^-24)")                                                                 \
X(BUCKET_MB, .name = "bucket-mb", .meta = "X", DT_DOUBLE(bucket_mb, 1e-3, 1e5), .def = 25, .env = "DT_BUCKET_MB",  \
  .section = "Data parallelism:", .help = "gradient bucket size (default 25)")                                \
X(FIRST_BUCKET_MB, .name = "first-bucket-mb", .meta = "X", DT_DOUBLE(first_bucket_mb, 1e-3, 1e5), .def = 1,         \
  .env = "DT_FIRST_BUCKET_MB", .help = "the first bucket's (default 1)")                                        \
X(NO_OVERLAP, .name = "no-overlap", DT_SWITCH(no_overlap), .env = "DT_NO_OVERLAP",                                 \
  .help = "all-reduce after backward instead of during it")                                                   \
X(GRAPH, .name = "graph", .off = "no-graph", DT_SWITCH(graph), .def = -1, .env = "DT_GRAPH",                       \
  .help = "each step as captured graphs launched again (default: on with --device\n"                          \
          "cuda; not with --accum-steps or --sync-bn; on the CPU only for tests);\n--no-graph: not")             \
X(SYNC_BN, .name = "sync-bn", .off = "no-sync-bn", DT_SWITCH(sync_bn), .env = "DT_SYNC_BN",                        \
  .help = "batch-norm statistics over all ranks (--no-sync-bn)")                                              \
X(COMM_TIMEOUT, .name = "comm-timeout", .meta = "S", DT_DOUBLE(comm_timeout, 1, 1e7), .def = 600,                   \
  .env = "DT_COMM_TIMEOUT", .fp = DT_FP_NOT, .help = "seconds before a collective fails (default 600)")           \
X(NPROC_PER_NODE, .name = "nproc-per-node", .meta = "N", .alias = "nproc_per_node", DT_PROGRAM, .fp = DT_FP_NOT, \
  .help = "without Slurm: run N workers here, one per GPU (CPU runs use mpirun;\n"                              \
          "no environment default: its workers inherit the environment)")                                      \
X(WORLD_SIZE, .name = "world-size", .meta = "N", DT_LONG(world_size, 1, 1L << 24), .fp = DT_FP_NOT,                \
  .section = "PyTorch scripts' launch flags (dtrain.1, MIGRATING FROM PYTORCH SCRIPTS):",                      \
  .help = "checked: the launch must have N ranks in all (else one line, exit 2)")                             \
X(DIST_BACKEND, .name = "dist-backend", .meta = "nccl|mpi", DT_CHOICE(dist_backend, dt_flags_dist_backends),        \
  .def = -1, .fp = DT_FP_NOT,                                                                                  \
  .help = "checked: nccl is --device cuda's, mpi --device cpu's (gloo: use mpi)")                               \
X(DIST_URL, .name = "dist-url", .meta = "env://", DT_OWN(dist_url, dt_flags_parse_dist_url), .fp = DT_FP_NOT,     \
  .help = "env:// only (the ranks meet as their launcher says); another address is\n"                         \
          "refused: the launcher has it (torchrun --master_addr/--master_port, srun)")                        \
X(RANK, .name = "rank", .meta = "R", DT_REFUSED,                                                                  \
  .help = "refused: each rank comes from its launcher (srun, mpirun, torchrun's\n"                             \
          "RANK, --nproc-per-node); give none")                                                               \
X(MULTIPROCESSING_DISTRIBUTED, .name = "multiprocessing-distributed", DT_REFUSED,                                 \
  .help = "refused: one process per GPU is the launch's: srun --ntasks-per-node=GPUS,\n"                        \
          "or dtrain --nproc-per-node GPUS")                                                                   \
X(GPU, .name = "gpu", .meta = "N", DT_REFUSED,                                                                    \
  .help = "refused: each rank takes its local rank's GPU; for one chosen GPU:\n"                                \
          "CUDA_VISIBLE_DEVICES=N dtrain ...")                                                                 \
X(MASTER_ADDR, .name = "master_addr", .meta = "HOST", DT_REFUSED,                                                 \
  .help = "refused: torchrun's, not dtrain's: torchrun --master_addr=HOST ... --no-python\n"                    \
          "dtrain ...")                                                                                       \
X(MASTER_PORT, .name = "master_port", .meta = "PORT", DT_REFUSED,                                                 \
  .help = "refused: torchrun's, not dtrain's: torchrun --master_port=PORT ... --no-python\n"                    \
          "dtrain ...")                                                                                       \
X(PRINT_FREQ, .name = "print-freq", .key = 'p', .meta = "N", DT_LONG(print_freq, 0, 1000000), .def = 10,           \
  .env = "DT_PRINT_FREQ", .fp = DT_FP_NOT, .section = "Output:", .help = "steps between progress lines (default 10)") \
X(PRINT_CONFIG, .name = "print-config", DT_PROGRAM, .fp = DT_FP_NOT,                                              \
  .help = "print every setting with its source (command line, recipe, environment,\n"                          \
          "default) and the launch's plan (ranks, nodes, devices), and exit (no data read)")                    \
X(RESULTS, .name = "results", .meta = "DIR", .alias = "output-dir", DT_TEXT(results), .def_text = "results",       \
  .env = "DT_RESULTS", .fp = DT_FP_NOT, .help = "runs go to DIR/<run id>/ (default results)")                    \
X(RUN_NAME, .name = "run-name", .meta = "NAME", DT_OWN(run_name, dt_flags_parse_run_name), .env = "DT_RUN_NAME",    \
  .fp = DT_FP_NOT, .help = "appended to the run id")                                                           \
X(RESUME, .name = "resume", .meta = "PATH|auto|job", DT_TEXT(resume), .env = "DT_RESUME",                          \
  .help = "continue from a checkpoint (auto: the newest of this arch under\n"                                   \
          "--results; job: this Slurm job's, if it wrote one, else a new run)")                                  \
X(CHECKPOINT_EVERY, .name = "checkpoint-every", .meta = "N", DT_LONG(checkpoint_every, 1, 1L << 40),               \
  .env = "DT_CHECKPOINT_EVERY", .help = "also write the checkpoint every N steps (default: at epoch ends)")       \
X(EVALUATE, .name = "evaluate", .key = 'e', .alias = "test-only", DT_SWITCH(evaluate),                             \
  .help = "validate the --resume checkpoint (or --pretrained weights) and exit\n(nothing written)")            \
X(THREADS, .name = "threads", .meta = "N", DT_LONG(threads, 1, 4096), .env = "DT_THREADS", .fp = DT_FP_NOT,        \
  .help = "compute threads per rank (default: OMP_NUM_THREADS or all cores)")                                  \
X(DEVICE, .name = "device", .meta = "auto|cpu|cuda", DT_CHOICE(cuda, dt_flags_devices), .def = DT_DEVICE_AUTO,     \
  .env = "DT_DEVICE",                                                                                          \
  .help = "where to compute; cuda: the local rank's GPU (a CUDA build); auto (default):\n"                      \
          "cuda in a CUDA build that sees a GPU, else cpu (the first log line says why)")                       \
X(CUDNN_SEARCH, .name = "cudnn-search", .meta = "MODE", DT_OWN(cudnn_search, dt_flags_parse_cudnn_search), .def = 1, \
  .env = "DT_CUDNN_SEARCH", .fp = DT_FP_NOT,                                                                   \
  .help = "how cuDNN's convolution algorithms are chosen (--device cuda): heuristic\n"                          \
          "(cuDNN's heuristics, nothing timed), bounded[:S] (their first candidates\n"                          \
          "timed, at most S seconds per convolution shape; default bounded:1) or\n"                             \
          "exhaustive (every algorithm timed, as PyTorch's cudnn.benchmark)")                                    \
X(LOG_LEVEL, .name = "log-level", .meta = "LEVEL", DT_COMMON, .env = "DT_LOG_LEVEL", .fp = DT_FP_NOT,               \
  .help = "error, warn, info or debug (default info, or $DT_LOG_LEVEL)")                                       \
X(HELP, .name = "help", .key = 'h', DT_COMMON, .fp = DT_FP_NOT, .help = "this help")                             \
X(VERSION, .name = "version", .key = 'V', DT_COMMON, .fp = DT_FP_NOT, .help = "the version and the parts built in")
/* clang-format on */

enum dt_flag_id {
#define DT_FLAG_ID_(id, ...) DT_FLAG_##id,
    DT_FLAGS(DT_FLAG_ID_)
#undef DT_FLAG_ID_
    DT_FLAG_COUNT
};

/* the table, indexed by enum dt_flag_id (train/flags.c) */
extern const dt_flag dt_flags[DT_FLAG_COUNT];
/* the choices the table names that have no other home */
extern const char *const dt_flags_opt_levels[], *const dt_flags_precisions[], *const dt_flags_devices[],
    *const dt_flags_dist_backends[];

/* getopt_long's values: a row with a key returns it; the others DT_FLAG_VAL(id), their off switch
 * DT_FLAG_OFF_VAL(id) */
#define DT_FLAG_VAL(id) (256 + (id))
#define DT_FLAG_OFF_VAL(id) (256 + DT_FLAG_COUNT + (id))
/* the flags, aliases and off switches as getopt_long's table (DT_FLAGS_MAX_OPTS entries at most,
 * the last all zeros) and its short options (":hVe..."; DT_FLAGS_MAX_SHORT bytes at most) */
#define DT_FLAGS_MAX_OPTS (3 * DT_FLAG_COUNT + 1)
#define DT_FLAGS_MAX_SHORT 64
struct option;
void dt_flags_getopt(struct option *opts, char *shortopts);
/* the row of a value getopt_long returned (*off: 1 for its off switch), or NULL */
const dt_flag *dt_flags_of_val(int val, int *off);

/* Sets f's field from text (NULL for a switch; off: its off switch) as the command line gives it:
 * DT_OK, or DT_ERR_INPUT after one line naming --NAME (util/cli.h's rules). DT_FK_PROGRAM,
 * DT_FK_COMMON and the operand are not set here (DT_ERR_INPUT, no line: a caller's mistake). */
int dt_flags_set(const dt_flag *f, const char *text, int off, dt_train_cfg *cfg);
/* The same, its line naming flag instead of --NAME (an environment variable's default: "environment
 * variable DT_BATCH"); text must be there for a switch too (true/false, yes/no, on/off, 1/0: its
 * on or off form). A DT_FK_REFUSED row: its line, DT_ERR_INPUT. */
int dt_flags_set_as(const dt_flag *f, const char *flag, const char *text, int off, dt_train_cfg *cfg);
/* f's value in cfg as text into buf (--print-config): "-" for a field at its "not given" value
 * (below the range, -1, NULL); DT_FK_OWN rows "-" unless the command line or the environment gave
 * them (their text, from cfg->options). Returns buf. */
const char *dt_flags_format(const dt_flag *f, const dt_train_cfg *cfg, char *buf, size_t n);
/* --device auto: 1 (cuda) when this build has CUDA and sees a GPU, else 0 (cpu); why into buf */
int dt_flags_device_auto(char *why, size_t n);
/* run.json's record: f given with text (NULL: a switch, on 1 or its off switch 0), under f's name,
 * replacing what an earlier one of the same option gave (the last value is the one in force) */
void dt_flags_note(dt_train_cfg *cfg, const dt_flag *f, const char *text, int on);
/* the options' part of --help: every row but the operand, by section, in the table's order */
void dt_flags_usage(FILE *out);

/* the rows' own parsers and --help's list of models (DT_OWN, .usage_front) */
int dt_flags_parse_interpolation(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_auto_augment(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_crop_padding(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_loss_scale(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_run_name(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_cudnn_search(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_desired_acc(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
int dt_flags_parse_dist_url(const dt_flag *f, const char *flag, const char *text, dt_train_cfg *cfg);
void dt_flags_usage_models(FILE *out, int column);

#ifdef __cplusplus
}
#endif
#endif
