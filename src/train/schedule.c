/* schedule.c: the learning rate at each step (contract in trainer_int.h and trainer.h).
 *
 * The lr is given for a global batch of 256 and scaled linearly to the run's (batch x ranks x
 * accumulation steps), as the seed tutorial's ImageNet script does, unless --no-lr-scaling. Then:
 *   - the seed tutorial's two schedules: a linear warm-up from 0 over warmup_epochs (per step), then
 *     x gamma at each of lr_steps (whole epochs, counted from the run's start), or, per step, a cosine
 *     from the lr to lr_min at the end of the last epoch;
 *   - torch.optim.lr_scheduler's, chained as torchvision's reference train.py chains them: during
 *     the warm-up (epoch e < W) the lr is lr x f, f = decay + (1 - decay) e / W (LinearLR from
 *     decay) or decay (ConstantLR); after it, the main schedule runs on its own epoch count
 *     e' = e - W (SequentialLR): StepLR gamma^floor(e' / step_size), MultiStepLR gamma^(milestones
 *     passed), CosineAnnealingLR lr_min + (lr - lr_min)(1 + cos(pi e' / T)) / 2, ExponentialLR
 *     gamma^e', PolynomialLR (1 - e' / T)^power, T = epochs - W. As train.py steps them, e is the
 *     whole epoch; with lr_per_step it is the fractional epoch at each step (e + step / steps),
 *     which is the same schedules stepped per iteration with their periods in iterations.
 * Pure functions of the options: every rank computes the same value, and a resumed run the same as an
 * uninterrupted one. tests/train/schedule.sh checks them against torch.optim.lr_scheduler. */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "train/trainer_int.h"
#include "util/log.h"

const char *const dt_lr_schedule_names[] = {"step",         "cosine",        "steplr",       "multisteplr",
                                            "cosineannealinglr", "exponentiallr", "polynomiallr", NULL};
const char *const dt_lr_warmup_names[] = {"linear", "constant", NULL};
const char *const dt_opt_names[] = {"sgd", "sgd_nesterov", "adam", "adamw", "rmsprop", "lars", "lamb", NULL};

double dt_schedule_base_lr(const dt_train_cfg *cfg, int world)
{
    double global = (double)cfg->batch * world * cfg->accum_steps;
    return cfg->no_lr_scaling ? cfg->lr : cfg->lr * global / 256.0;
}

static int tutorial(const dt_train_cfg *cfg)
{
    return cfg->lr_schedule == DT_LR_STEP || cfg->lr_schedule == DT_LR_COSINE;
}

int dt_schedule_warmup_method(const dt_train_cfg *cfg)
{
    if (cfg->warmup_method >= 0)
        return cfg->warmup_method;
    return tutorial(cfg) ? DT_WARMUP_LINEAR : DT_WARMUP_CONSTANT;
}

double dt_schedule_warmup_decay(const dt_train_cfg *cfg)
{
    if (cfg->warmup_decay >= 0)
        return cfg->warmup_decay;
    return tutorial(cfg) ? 0.0 : 0.01;
}

/* gamma^k for a whole k: the product torch's chained form takes, one factor at a time */
static double times_gamma(double lr, double gamma, long k)
{
    for (long i = 0; i < k; i++)
        lr *= gamma;
    return lr;
}

double dt_schedule_lr(const dt_train_cfg *cfg, double base_lr, int64_t steps_per_epoch, int epoch,
                      int64_t step_in_epoch)
{
    const double frac = epoch + (double)step_in_epoch / (double)steps_per_epoch; /* in epochs */
    const double w = cfg->warmup_epochs;
    /* the tutorial's warm-up and cosine are per step; torchvision's per epoch unless asked */
    const double at = tutorial(cfg) || cfg->lr_per_step ? frac : (double)epoch;
    if (w > 0 && at < w) {
        const double decay = dt_schedule_warmup_decay(cfg);
        if (dt_schedule_warmup_method(cfg) == DT_WARMUP_CONSTANT)
            return base_lr * decay;
        if (decay == 0) /* the tutorial's warm-up from 0, rounded as it always was */
            return base_lr * at / w;
        return base_lr * (decay + (1 - decay) * at / w);
    }
    const double t = at - w, T = cfg->epochs - w; /* the main schedule's own epoch count and length */
    switch (cfg->lr_schedule) {
    case DT_LR_COSINE:
    case DT_LR_COSINEANNEALINGLR: {
        const double x = T > 0 ? (t < T ? t / T : 1) : 1;
        return cfg->lr_min + (base_lr - cfg->lr_min) * 0.5 * (1 + cos(M_PI * x));
    }
    case DT_LR_STEPLR: return times_gamma(base_lr, cfg->lr_gamma, (long)floor(t / (double)cfg->lr_step_size));
    case DT_LR_EXPONENTIALLR: return base_lr * pow(cfg->lr_gamma, t);
    case DT_LR_POLYNOMIALLR: {
        const double x = T > 0 ? (t < T ? t / T : 1) : 1;
        return base_lr * pow(1 - x, cfg->lr_power);
    }
    case DT_LR_MULTISTEPLR:
    case DT_LR_STEP:
    default: {
        /* the tutorial's milestones count from the run's start, MultiStepLR's from the warm-up's end */
        const double e = cfg->lr_schedule == DT_LR_STEP ? (double)epoch : t;
        long passed = 0;
        for (int i = 0; i < cfg->n_lr_steps; i++)
            passed += e >= (double)cfg->lr_steps[i];
        return times_gamma(base_lr, cfg->lr_gamma, passed);
    }
    }
}

void dt_schedule_warn(const dt_train_cfg *cfg, double base_lr)
{
    const int s = cfg->lr_schedule;
    if ((s == DT_LR_COSINE || s == DT_LR_COSINEANNEALINGLR) && cfg->lr_min > base_lr)
        dt_warn("--lr-min %g is above the learning rate %g (--lr scaled to the global batch): the cosine rises "
                "to it", cfg->lr_min, base_lr);
    if (cfg->warmup_epochs > 0 && cfg->warmup_epochs >= cfg->epochs)
        dt_warn("--warmup-epochs %g is not below --epochs %d: the whole run is warm-up, the schedule never starts",
                cfg->warmup_epochs, cfg->epochs);
    if (cfg->warmup_epochs > 0 && dt_schedule_warmup_method(cfg) == DT_WARMUP_CONSTANT &&
        dt_schedule_warmup_decay(cfg) == 0)
        dt_warn("--lr-warmup-method constant with a warm-up factor of 0 (--lr-warmup-decay; 0 is step's and cosine's "
                "default): the learning rate is 0, nothing trains, for the %g warm-up epochs", cfg->warmup_epochs);
}

void dt_train_print_lr(const dt_train_cfg *cfg, int64_t steps_per_epoch, FILE *out)
{
    const double base = dt_schedule_base_lr(cfg, 1);
    dt_schedule_warn(cfg, base);
    fprintf(out, "# dtrain's learning rate at each step: epoch step lr (base lr %.17g, %lld steps per epoch, one rank)\n",
            base, (long long)steps_per_epoch);
    for (int e = cfg->start_epoch; e < cfg->epochs; e++)
        for (int64_t s = 0; s < steps_per_epoch; s++)
            fprintf(out, "%d %lld %.17g\n", e, (long long)s, dt_schedule_lr(cfg, base, steps_per_epoch, e, s));
}
