/* scalars.h: the step's numbers, kept in backend memory (op table v2: no host round trip in a step).
 *
 * One dt_scalars block per model, allocated with the backend's memory. Ops read the learning rate
 * and the loss scale from it and write the step's loss, top-1/top-5 hits and overflow flag into it;
 * the loss scaler's update and the skip of an overflowed step run on the backend too (step_end).
 * The host touches the block only through the backend's asynchronous copies and at the times it
 * chooses:
 *   - at a step's start it uploads the "in" part (lr, step, the model's step that seeds dropout,
 *     this rank's stop signal) from a host
 *     buffer the backend allocated (dt_model_step_begin);
 *   - after the step it downloads the "out" part: the agreed flags of the step's one collective
 *     (overflow and stop signal, max over the ranks) and the scaler's state after the update, which
 *     the host mirrors (dt_amp_step);
 *   - the metrics part (loss and hits summed since the host last cleared them) only when it prints
 *     a progress line and at an epoch's end (mem_get).
 * The layout is fixed (both backends and the host share it); the update is one function,
 * dt_scalars_step_end, which the CPU backend runs as it is and the CUDA backend in a one-thread
 * kernel. */
#ifndef DT_NN_SCALARS_H
#define DT_NN_SCALARS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* the step's collective: one int32 array all-reduced with max over the ranks after the gradients */
enum { DT_AGREE_OVERFLOW, DT_AGREE_SIGNAL, DT_AGREE_N };

typedef struct dt_scalars {
    /* --- in: uploaded at a step's start (dt_model_step_begin) --- */
    int32_t agree[DT_AGREE_N]; /* overflow 0 (xent and unscale_check set it), this rank's stop signal */
    float lr;                  /* the step's learning rate (sgd reads it) */
    int32_t in_reserved;
    int64_t step;              /* the global step being run (for the host's messages) */
    int64_t model_step;        /* the model's training forwards before this step's first (dropout's seeds) */
    int32_t mixing;            /* 1: the batch is mixed (mixup or cutmix): xent's targets are mix_lam on
                                * each row's label plus mix_rest on the label of the row before (the
                                * batch rolled by one, as torchvision's RandomMixup/RandomCutmix) */
    float mix_lam, mix_rest;   /* (float)lambda and (float)(1 - lambda), as torch rounds them */
    int32_t in_reserved2;
    /* --- out: step_end's results, downloaded after the step (agree above is part of it too) --- */
    int32_t skipped;  /* the step was skipped: NaN or inf in the loss or a gradient on some rank */
    int32_t diverged; /* sticky: no smaller loss scale can help, or max_nonfinite skips in a row */
    double scale;     /* the loss scaler: its scale and state, after the update */
    int64_t clean_steps, overflows, sgd_steps, in_a_row;
    /* --- read by ops: set with the scaler's state and by step_end --- */
    float scale_f;   /* the loss scale as xent multiplies the gradient by it */
    float inv_scale; /* 1/scale: how sgd and unscale_check unscale the gradients */
    int32_t dynamic; /* 1: the dynamic scaler; 0: a static scale (a skipped step leaves it) */
    int32_t reserved;
    double growth, backoff, max_scale, min_scale; /* min_scale 0: none (the floor is then 2^-24) */
    int64_t growth_interval, max_nonfinite;
    double grad_sumsq; /* the sum of the unscaled gradients' squares this step (grad_sumsq ops; step_end clears it) */
    float clip_norm;   /* clip the gradients' global L2 norm to this (torch's clip_grad_norm_); 0: no clipping */
    int32_t reserved2;
    /* --- metrics: added to by xent, set by the host (dt_model_put_metrics) --- */
    double loss;     /* the last batch's mean loss */
    double loss_sum; /* the sum of the batches' mean losses */
    int64_t hits1, hits5, rows, nonfinite_rows;
} dt_scalars;

/* the bytes of the in part, and of the in and out parts together (what a step downloads) */
#define DT_SCALARS_IN_BYTES offsetof(dt_scalars, skipped)
#define DT_SCALARS_OUT_BYTES offsetof(dt_scalars, scale_f)

/* the label a mixed row's top-1/top-5 counts against (torchvision's accuracy on the mixed target:
 * its argmax, the lower class on a tie) */
DT_HOST_DEVICE static inline int32_t dt_scalars_mix_label(const dt_scalars *s, int32_t y, int32_t y_before)
{
    if (s->mix_lam > s->mix_rest)
        return y;
    if (s->mix_rest > s->mix_lam)
        return y_before;
    return y < y_before ? y : y_before;
}

/* The end of a step, after sgd (which skipped when agree[DT_AGREE_OVERFLOW] or diverged): the loss
 * scaler's update as Apex's and torch.amp's (dynamic: halve on an overflow down to min_scale, double
 * after growth_interval clean steps up to max_scale; static: unchanged), the skipped-step count,
 * divergence, the optimiser's step count, the ops' scale and 1/scale; then the gradients' sum of
 * squares (clipping) is cleared, and the overflow flag is
 * cleared for the next step (so a step that uploads no in part still starts clean). */
/* the factor clipping multiplies the unscaled gradients by: torch's clip_grad_norm_, min(1,
 * max_norm / (total_norm + 1e-6)), computed in fp32 as torch computes it for fp32 gradients */
DT_HOST_DEVICE static inline float dt_scalars_clip_coef(const dt_scalars *s)
{
    if (!(s->clip_norm > 0))
        return 1.0f;
    const float total = (float)sqrt(s->grad_sumsq);
    const float coef = s->clip_norm / (total + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

/* The constants of one Adam/AdamW update (the adam op), as torch.optim's single-tensor Adam has them:
 * the corrections in double from the step t = sgd_steps + 1 and the Python floats, each rounded to
 * fp32 where torch hands it to a float tensor's op. */
typedef struct dt_adam_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd, decay, neg_step, bc2_sqrt;
} dt_adam_consts;

DT_HOST_DEVICE static inline dt_adam_consts dt_adam_consts_of(const dt_scalars *s, double beta1, double beta2,
                                                              double eps, double wd)
{
    const double t = (double)(s->sgd_steps + 1), lr = s->lr;
    dt_adam_consts k;
    k.beta1 = (float)beta1;
    k.one_minus_beta1 = (float)(1.0 - beta1);
    k.beta2 = (float)beta2;
    k.one_minus_beta2 = (float)(1.0 - beta2);
    k.eps = (float)eps;
    k.wd = (float)wd;
    k.decay = (float)(1.0 - lr * wd);           /* AdamW: param.mul_(1 - lr * weight_decay) */
    k.neg_step = (float)(-(lr / (1.0 - pow(beta1, t)))); /* -lr / bias_correction1 */
    k.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, t));
    return k;
}

DT_HOST_DEVICE static inline void dt_scalars_step_end(dt_scalars *s)
{
    const int overflow = s->agree[DT_AGREE_OVERFLOW] != 0;
    const double before = s->scale, floor = s->min_scale > 0 ? s->min_scale : 0x1p-24;
    if (overflow && s->dynamic) {
        double next = s->scale * s->backoff;
        s->scale = s->min_scale > 0 && next < s->min_scale ? s->min_scale : next;
        s->clean_steps = 0;
        s->overflows++;
    } else if (!overflow && s->dynamic && ++s->clean_steps >= s->growth_interval) {
        s->scale = s->scale * s->growth > s->max_scale ? s->max_scale : s->scale * s->growth;
        s->clean_steps = 0;
    }
    s->in_a_row = overflow ? s->in_a_row + 1 : 0;
    if (overflow && (s->dynamic ? before <= floor : s->in_a_row >= s->max_nonfinite))
        s->diverged = 1;
    s->skipped = overflow || s->diverged;
    if (!s->skipped)
        s->sgd_steps++;
    s->scale_f = (float)s->scale;
    s->inv_scale = (float)(1.0 / s->scale);
    s->agree[DT_AGREE_OVERFLOW] = 0;
    s->grad_sumsq = 0; /* the next step's norm starts from nothing */
}

/* what sgd asks: is this step skipped (an overflow agreed, or the run has diverged)? */
DT_HOST_DEVICE static inline int dt_scalars_skip(const dt_scalars *s)
{
    return s->agree[DT_AGREE_OVERFLOW] != 0 || s->diverged;
}

#ifdef __cplusplus
}
#endif
#endif
