/* schedule.c: the learning rate at each step (contract in trainer_int.h).
 *
 * As the seed tutorial's ImageNet script: the lr is given for a global batch of 256 and scaled
 * linearly to the run's (batch x ranks x accumulation steps); a linear warm-up from 0 over
 * warmup_epochs (per step); then either x0.1 at each of lr_steps (whole epochs) or, per step, a
 * cosine from the lr to 0 at the end of the last epoch. Pure functions of the options: every rank
 * computes the same value, and a resumed run the same as an uninterrupted one. */
#include "config.h"

#include <math.h>

#include "train/trainer_int.h"

double dt_schedule_base_lr(const dt_train_cfg *cfg, int world)
{
    double global = (double)cfg->batch * world * cfg->accum_steps;
    return cfg->no_lr_scaling ? cfg->lr : cfg->lr * global / 256.0;
}

double dt_schedule_lr(const dt_train_cfg *cfg, double base_lr, int64_t steps_per_epoch, int epoch,
                      int64_t step_in_epoch)
{
    double at = epoch + (double)step_in_epoch / (double)steps_per_epoch; /* in epochs */
    double lr = base_lr;
    if (cfg->warmup_epochs > 0 && at < cfg->warmup_epochs)
        return lr * at / cfg->warmup_epochs;
    if (cfg->lr_schedule == DT_LR_COSINE) {
        double t = (at - cfg->warmup_epochs) / (cfg->epochs - cfg->warmup_epochs);
        return lr * 0.5 * (1 + cos(M_PI * (t < 1 ? t : 1)));
    }
    for (int i = 0; i < cfg->n_lr_steps; i++)
        if (epoch >= cfg->lr_steps[i])
            lr *= 0.1;
    return lr;
}
