/* cfg.h: dt_train_cfg, the settings of a training run, and the choices its fields index.
 * src/train/flags.h's table (DT_FLAGS) says which option sets each field, how its text is parsed,
 * its default and its environment name; dt_train_defaults fills a cfg from that table. */
#ifndef DT_TRAIN_CFG_H
#define DT_TRAIN_CFG_H

#include <stdint.h>

#include "train/amp.h"

#ifdef __cplusplus
extern "C" {
#endif
/* --lr-schedule / --lr-scheduler: the values are the indices of its choices (dt_lr_schedule_names).
 * The first two are the seed tutorial's (their epochs counted from the run's start, warm-up per
 * step); the others are torch.optim.lr_scheduler's, built as torchvision's reference train.py
 * builds them (train/schedule.c): after a warm-up of warmup_epochs, the main schedule counts its
 * own epochs from the warm-up's end, stepped per epoch (or per step with lr_per_step). */
enum dt_lr_schedule {
    DT_LR_STEP = 0,             /* x lr_gamma (0.1) at each of lr_steps (epochs from the start) */
    DT_LR_COSINE = 1,           /* per step, cosine from the (warmed-up) lr to lr_min at the last epoch's end */
    DT_LR_STEPLR = 2,           /* StepLR: x lr_gamma every lr_step_size epochs */
    DT_LR_MULTISTEPLR = 3,      /* MultiStepLR: x lr_gamma at each of lr_steps */
    DT_LR_COSINEANNEALINGLR = 4, /* CosineAnnealingLR: to lr_min over the epochs after the warm-up */
    DT_LR_EXPONENTIALLR = 5,    /* ExponentialLR: x lr_gamma every epoch */
    DT_LR_POLYNOMIALLR = 6,     /* PolynomialLR: (1 - t/T)^lr_power to 0 over the epochs after the warm-up */
};
/* --device auto: cfg->cuda's value before dtrain.c resolves it */
#define DT_DEVICE_AUTO 2

/* --lr-warmup-method */
enum dt_lr_warmup { DT_WARMUP_LINEAR = 0, DT_WARMUP_CONSTANT = 1 };
/* --opt: torchvision's names (its train.py: "sgd" and any other name starting with sgd, with Nesterov
 * when it holds "nesterov"; "rmsprop"; "adamw"), Adam, and LARS and LAMB (train/optim.h) */
enum dt_opt_choice {
    DT_OPTC_SGD = 0, DT_OPTC_SGD_NESTEROV = 1, DT_OPTC_ADAM = 2, DT_OPTC_ADAMW = 3, DT_OPTC_RMSPROP = 4, DT_OPTC_LARS = 5,
    DT_OPTC_LAMB = 6
};
/* the choices' names, in enum order, NULL-terminated */
extern const char *const dt_opt_names[];
extern const char *const dt_lr_schedule_names[];
extern const char *const dt_lr_warmup_names[];

/* One option as the command line gave it, for run.json's record (dt_flags_note fills them) */
typedef struct dt_train_option {
    const char *name;           /* its row's long name, without "--" (an alias's too: train/flags.h) */
    const char *value;          /* its text as given, or NULL for a flag that takes none */
    int on;                     /* such a flag: 1 given, 0 its off switch given (--no-model-ema) */
    const char *env;            /* the environment variable it came from (DT_BATCH), or NULL: the command line */
} dt_train_option;
#define DT_TRAIN_MAX_OPTIONS 128 /* more than dtrain has */

typedef struct dt_train_cfg {
    const char *data;           /* packed dataset directory (dtpack); NULL with synthetic */
    int data_from_env;          /* data is $DT_DATA (no operand given) */
    const char *arch;
    int workers;                /* loader threads per rank */
    int epochs;
    int batch;                  /* per rank */
    double lr;                  /* for a global batch of 256 (scaled unless no_lr_scaling) */
    int no_lr_scaling;
    double warmup_epochs;
    int lr_schedule;            /* enum dt_lr_schedule */
    long lr_steps[16];          /* DT_LR_STEP, DT_LR_MULTISTEPLR: the milestones (epochs) */
    int n_lr_steps;
    double lr_gamma;            /* the factor of the step, multistep and exponential schedules (0.1) */
    long lr_step_size;          /* DT_LR_STEPLR's period in epochs (30) */
    double lr_min;              /* the cosines' floor (0) */
    double lr_power;            /* DT_LR_POLYNOMIALLR's power (1) */
    int lr_per_step;            /* torchvision's schedules at fractional epochs, each step (0: whole epochs) */
    int warmup_method;          /* enum dt_lr_warmup; -1: the schedule's default (linear for the tutorial's
                                 * two, constant for torchvision's, as its train.py) */
    double warmup_decay;        /* the warm-up's first factor; < 0: the default (0 for the tutorial's two,
                                 * torchvision's 0.01 for the others) */
    double momentum, wd, label_smoothing;
    double norm_wd, bias_wd;    /* torchvision's --norm-weight-decay, --bias-weight-decay; < 0: as wd */
    double clip_grad_norm;      /* > 0: clip the gradients' global L2 norm to it before each update */
    int nesterov;
    int opt;                    /* --opt (enum dt_opt_choice) */
    double adam_beta1, adam_beta2, opt_eps; /* Adam/AdamW's betas, Adam's and RMSprop's eps (< 0: torch's
                                             * defaults, torchvision's 0.0316 for RMSprop) */
    double rmsprop_alpha;       /* RMSprop's smoothing constant (< 0: torchvision's 0.9) */
    double lars_eta;            /* LARS's trust coefficient (0.001) */
    double mixup_alpha, cutmix_alpha; /* --mixup-alpha, --cutmix-alpha: mix each batch (data/mix.h); 0: off */
    int ra_sampler;             /* --ra-sampler: torchvision's repeated augmentation sampler (data/sampler.h) */
    int ra_reps;                /* --ra-reps: its repetitions (3) */
    int model_ema;              /* --model-ema: keep and validate the model's average (train/ema.h) */
    long model_ema_steps;       /* update it every this many steps (32) */
    double model_ema_decay;     /* its decay before train.py's adjustment (0.99998) */
    int print_freq;             /* steps between progress lines */
    double desired_acc;         /* stop once validation top-1 reaches this fraction (0.75: 75%); 0: never */
    uint64_t seed;
    int synthetic;              /* benchmark: random batches, no data */
    long max_steps;             /* stop after this many optimiser steps; 0: no limit */
    int threads;                /* compute threads per rank; 0: OMP_NUM_THREADS or all cores */
    int crop;                   /* encoded images: training crop (224); raw shards: their size */
    int val_crop;               /* encoded images: validation's centre crop (0: the training crop) */
    int val_resize;             /* encoded images: validation's resize of the shorter side (0: 256/224 of the crop) */
    int interpolation;          /* the resizes' filter (enum dt_filter, data/image.h); -1: not given, bilinear */
    int auto_augment;           /* --auto-augment (enum dt_aug_policy, data/augment.h; 0: none) */
    int ra_magnitude;           /* RandAugment's magnitude bin (9) */
    double random_erase;        /* RandomErasing's probability (0: off) */
    int crop_padding;           /* raw shards: the random crop's zero padding (0: 4; -1: none) */
    const char *results;        /* results root ("results") */
    const char *resume;         /* a checkpoint to continue from, or "auto" (the newest under results) */
    long checkpoint_every;      /* also write a checkpoint every N steps (0: at epoch ends only) */
    int evaluate;               /* only validate the --resume checkpoint (or --pretrained weights), write nothing */
    int start_epoch;            /* without resume: the epoch to begin at (schedule, shuffle) */
    const char *pretrained;     /* weights to start from (checkpoint or exported torchvision weights) */
    int cuda;                   /* --device: 0 cpu, 1 cuda (the CUDA backend on the local rank's GPU), 2
                                 * (DT_DEVICE_AUTO, the default) auto, made 0 or 1 by dtrain.c before the run */
    const char *device_why;     /* why --device auto chose what it chose (the first log line), or NULL */
    int world_size;             /* --world-size: the ranks the launch must have (0: not given) */
    int dist_backend;           /* --dist-backend: -1 not given, 0 nccl (needs cuda), 1 mpi (needs cpu) */
    const char *dist_url;       /* --dist-url: "env://" or NULL (another is refused) */
    int deterministic;          /* bit-reproducible: CPU runs are; recorded, and the CUDA backend's algorithm choice */
    int cudnn_search;           /* --cudnn-search: 0 heuristic, 1 bounded (default), 2 exhaustive (nn/backend.h's
                                 * dt_backend_options.conv_search) */
    double cudnn_search_s;      /* bounded's cap, seconds per convolution shape (1) */
    const char *run_name;       /* appended to the run id */
    int opt_level;              /* AMP */
    dt_amp_overrides amp;
    long scale_window;          /* dynamic loss scaling: clean steps before the scale doubles (0: 2000) */
    long max_nonfinite;         /* a static loss scale: stop after this many non-finite steps in a row (10) */
    double bucket_mb, first_bucket_mb;
    int no_overlap, sync_bn, accum_steps;
    int graph;                  /* the step as graphs: 1 --graph, 0 --no-graph, -1 (default) on with --device cuda */
    double comm_timeout;
    /* what run.json records of the command line: the --recipe (NULL: none) and each option given,
     * the recipe's and then the user's, once each with the last value given (the one in force) */
    const char *recipe;
    dt_train_option options[DT_TRAIN_MAX_OPTIONS];
    int n_options;
} dt_train_cfg;

/* The defaults, from each row of train/flags.h's table (Apex-like: resnet50, 90 epochs, batch 64 per
 * rank, lr 0.1 per 256, step schedule at 30/60/80, momentum 0.9, wd 1e-4, print every 10 steps, O0,
 * 25/1 MiB buckets, 600 s timeout); every other field zero. In train/flags.c. */
void dt_train_defaults(dt_train_cfg *cfg);

#ifdef __cplusplus
}
#endif
#endif
