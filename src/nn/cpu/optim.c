/* optim.c: the optimizer step's ops on the CPU, contracts in nn/backend.h: the loss scaler's overflow
 * check (unscale_check), the gradients' sum of squares for clipping (grad_sumsq), the updates sgd,
 * adam (and AdamW), rmsprop, lars and lamb (lamb_moments, then lamb_apply) with the per-tensor norms
 * LARS reads (tensor_sumsq), the weights' moving average (ema_update), and step_end.
 *
 * The arithmetic's contract, which nn/cuda/optim.cu ports operation for operation: every update reads
 * the gradient as torch does after GradScaler's unscale_ and clip_grad_norm_ (times 1/scale, then
 * times the clip factor, each an fp32 product, rounded), then follows torch's single-tensor formula in
 * fp32, one rounding per operation in its order (no contraction: -ffp-contract=off), with the
 * hyperparameters rounded to fp32 where torch rounds them. The optimizer's state (momentum, moments)
 * is fp32; the parameter and the gradient are of their own types, widened a tile at a time and the
 * parameter rounded once when stored. Sums of squares are in double, in blocks whose size depends on
 * n alone, each block in order and then the blocks in order: the same bits on any number of threads.
 * A skipped step (dt_scalars_skip: the loss scaler found an overflow) changes nothing. */
#include "config.h"

#include <math.h>

#include "nn/cpu/cpu.h"

DT_CLONES
void dt_cpu_unscale_check(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    const float inv_scale = s->inv_scale;
    int bad = 0;
    BEGIN_TILES(n)
    float tile[DT_CPU_TILE];
    const float *v = dt_cpu_view(t, g, i, k, tile);
    int b = 0;
#pragma omp simd reduction(| : b)
    for (int64_t j = 0; j < k; j++) {
        float u = v[j] * inv_scale;
        b |= !(u - u == 0.0f); /* inf - inf and NaN - NaN are NaN; branch-free, so it vectorises */
    }
    if (b) {
#pragma omp atomic
        bad |= b;
    }
    END_TILES
    if (bad)
        s->agree[DT_AGREE_OVERFLOW] = 1;
}

/* the gradients' sum of squares in blocks whose size depends on n alone (64K elements, more when
 * that makes over SUMSQ_PARTS blocks), each summed in order, then the blocks' sums in order: the
 * same bits on any number of threads */
enum { SUMSQ_PARTS = 4096 };

/* start plus the sum of (x[i] * scale, then times clip when clipping)^2 in double, each value
 * rounded to fp32: blocks fixed by n (sumsq_block), each summed in order, then the blocks' sums
 * added to start in order */
static double sumsq_blocks(double start, int64_t n, const void *x, dt_dtype t, float scale, int clipping, float clip);

void dt_cpu_grad_sumsq(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    if (n > 0)
        s->grad_sumsq = sumsq_blocks(s->grad_sumsq, n, g, t, s->inv_scale, 0, 1.0f);
}

/* the gradient as every update reads it: times 1/scale, then clip_grad_norm_'s factor, each rounded */
static inline float unscaled(float g, float inv_scale, int clipping, float clip)
{
    const float d = g * inv_scale;
    return clipping ? d * clip : d;
}

DT_CLONES
void dt_cpu_sgd(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, float momentum,
                float dampening, float wd, int nesterov, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float grad_scale = s->inv_scale, lr = s->lr, clip = dt_scalars_clip_coef(s);
    const int first = s->sgd_steps == 0, clipping = s->clip_norm > 0;
    BEGIN_TILES(n)
    float tp[DT_CPU_TILE], tg[DT_CPU_TILE];
    const float *gv = dt_cpu_view(gt, g, i, k, tg);
    float *pv = dt_cpu_out(pt, p, i, k, tp, 1);
    for (int64_t j = 0; j < k; j++) {
        float d = gv[j] * grad_scale;
        if (clipping) /* torch: unscale_ rounds, then clip_grad_norm_'s multiply rounds */
            d *= clip;
        if (wd != 0.0f)
            d += wd * pv[j];
        if (momentum != 0.0f) {
            float b = first ? d : momentum * buf[i + j] + (1.0f - dampening) * d;
            buf[i + j] = b;
            d = nesterov ? d + momentum * b : b;
        }
        pv[j] -= lr * d;
    }
    dt_cpu_flush(pt, p, i, k, pv);
    END_TILES
}

DT_CLONES
void dt_cpu_adam(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1, float *m2, double beta1,
                 double beta2, double eps, double wd, int decoupled, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_scale = s->inv_scale, clip = dt_scalars_clip_coef(s);
    const int clipping = s->clip_norm > 0, l2 = !decoupled && wd != 0, dec = decoupled && wd != 0;
    BEGIN_TILES(n)
    float tp[DT_CPU_TILE], tg[DT_CPU_TILE];
    const float *gv = dt_cpu_view(gt, g, i, k, tg);
    float *pv = dt_cpu_out(pt, p, i, k, tp, 1);
    for (int64_t j = 0; j < k; j++) {
        float d = unscaled(gv[j], inv_scale, clipping, clip), w = pv[j];
        if (l2) /* Adam: grad.add(param, alpha=weight_decay) */
            d += c.wd * w;
        if (dec) /* AdamW: param.mul_(1 - lr * weight_decay) */
            w *= c.decay;
        const float a = m1[i + j] * c.beta1 + c.one_minus_beta1 * d;
        const float b = m2[i + j] * c.beta2 + (c.one_minus_beta2 * d) * d;
        m1[i + j] = a;
        m2[i + j] = b;
        const float denom = sqrtf(b) / c.bc2_sqrt + c.eps;
        pv[j] = w + (c.neg_step * a) / denom; /* addcdiv_: self + value * t1 / t2, left to right */
    }
    dt_cpu_flush(pt, p, i, k, pv);
    END_TILES
}

DT_CLONES
void dt_cpu_rmsprop(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *sq, float *buf, double alpha,
                    double eps, double wd, double momentum, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float inv_scale = s->inv_scale, clip = dt_scalars_clip_coef(s), neg_lr = -s->lr;
    const float al = (float)alpha, one_minus_al = (float)(1.0 - alpha), ep = (float)eps, wdf = (float)wd,
                mom = (float)momentum;
    const int clipping = s->clip_norm > 0;
    BEGIN_TILES(n)
    float tp[DT_CPU_TILE], tg[DT_CPU_TILE];
    const float *gv = dt_cpu_view(gt, g, i, k, tg);
    float *pv = dt_cpu_out(pt, p, i, k, tp, 1);
    for (int64_t j = 0; j < k; j++) {
        float d = unscaled(gv[j], inv_scale, clipping, clip);
        if (wd != 0) /* grad.add(param, alpha=weight_decay) */
            d += wdf * pv[j];
        const float v = sq[i + j] * al + (one_minus_al * d) * d;
        sq[i + j] = v;
        const float avg = sqrtf(v) + ep;
        if (mom > 0) { /* buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr) */
            const float b = buf[i + j] * mom + d / avg;
            buf[i + j] = b;
            pv[j] += neg_lr * b;
        } else { /* param.addcdiv_(grad, avg, value=-lr) */
            pv[j] += (neg_lr * d) / avg;
        }
    }
    dt_cpu_flush(pt, p, i, k, pv);
    END_TILES
}

DT_CLONES
void dt_cpu_ema_update(int64_t n, float *avg, const void *x, dt_dtype xt, double decay)
{
    const float d = (float)decay, one_minus_d = (float)(1.0 - decay);
    const int copy = decay == 0;
    BEGIN_TILES(n)
    float tx[DT_CPU_TILE];
    const float *xv = dt_cpu_view(xt, x, i, k, tx);
    for (int64_t j = 0; j < k; j++)
        avg[i + j] = copy ? xv[j] : d * avg[i + j] + one_minus_d * xv[j];
    END_TILES
}

/* the block size of the norms' sums: fixed by n alone (grad_sumsq's rule) */
static int64_t sumsq_block(int64_t n)
{
    int64_t block = (int64_t)1 << 16;
    if ((n + block - 1) / block > SUMSQ_PARTS)
        block = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    return block;
}

static double sumsq_blocks(double start, int64_t n, const void *x, dt_dtype t, float scale, int clipping, float clip)
{
    const int64_t block = sumsq_block(n), nb = (n + block - 1) / block;
    double part[SUMSQ_PARTS];
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, hi = lo + block < n ? lo + block : n;
        double acc = 0;
        for (int64_t i = lo; i < hi; i += DT_CPU_TILE) {
            const int64_t k = hi - i < DT_CPU_TILE ? hi - i : DT_CPU_TILE;
            float tile[DT_CPU_TILE];
            const float *v = dt_cpu_view(t, x, i, k, tile);
            for (int64_t j = 0; j < k; j++) {
                const float u = unscaled(v[j], scale, clipping, clip);
                acc += (double)u * (double)u;
            }
        }
        part[b] = acc;
    }
    double sum = start;
    for (int64_t b = 0; b < nb; b++)
        sum += part[b];
    return sum;
}

void dt_cpu_tensor_sumsq(int64_t n, const void *x, dt_dtype t, int unscale, const dt_scalars *s, double *out)
{
    *out = n <= 0 ? 0.0
                  : unscale ? sumsq_blocks(0, n, x, t, s->inv_scale, s->clip_norm > 0, dt_scalars_clip_coef(s))
                            : sumsq_blocks(0, n, x, t, 1.0f, 0, 1.0f);
}

/* LARS's trust ratio from the norms' squares (double, as the ops read it) */
static float lars_trust(const double *norms, double wd, double eta)
{
    const double wn = sqrt(norms[0]), gn = sqrt(norms[1]);
    return eta > 0 && wn > 0 && gn > 0 ? (float)(eta * wn / (gn + wd * wn)) : 1.0f;
}

DT_CLONES
void dt_cpu_lars(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, double momentum, double wd,
                 double eta, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float inv_scale = s->inv_scale, clip = dt_scalars_clip_coef(s), mom = (float)momentum, wdf = (float)wd;
    const float local_lr = s->lr * lars_trust(norms, wd, eta);
    const int clipping = s->clip_norm > 0;
    BEGIN_TILES(n)
    float tp[DT_CPU_TILE], tg[DT_CPU_TILE];
    const float *gv = dt_cpu_view(gt, g, i, k, tg);
    float *pv = dt_cpu_out(pt, p, i, k, tp, 1);
    for (int64_t j = 0; j < k; j++) {
        const float d = unscaled(gv[j], inv_scale, clipping, clip) + wdf * pv[j];
        const float b = mom * buf[i + j] + local_lr * d;
        buf[i + j] = b;
        pv[j] -= b;
    }
    dt_cpu_flush(pt, p, i, k, pv);
    END_TILES
}

/* LAMB's update direction r for one element from its moments (Adam's corrections) and weight */
static inline float lamb_r(float a, float b, float w, const dt_adam_consts *c, float inv_bc1)
{
    return (a * inv_bc1) / (sqrtf(b) / c->bc2_sqrt + c->eps) + c->wd * w;
}

void dt_cpu_lamb_moments(int64_t n, const void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1, float *m2,
                         double beta1, double beta2, double eps, double wd, const dt_scalars *s, double *norms)
{
    norms[0] = norms[1] = 0;
    if (dt_scalars_skip(s) || n <= 0)
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_scale = s->inv_scale, clip = dt_scalars_clip_coef(s);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const int clipping = s->clip_norm > 0;
    const int64_t block = sumsq_block(n), nb = (n + block - 1) / block;
    double part_w[SUMSQ_PARTS], part_r[SUMSQ_PARTS];
#pragma omp parallel for schedule(static)
    for (int64_t bi = 0; bi < nb; bi++) {
        const int64_t lo = bi * block, hi = lo + block < n ? lo + block : n;
        double aw = 0, ar = 0;
        for (int64_t i = lo; i < hi; i += DT_CPU_TILE) {
            const int64_t k = hi - i < DT_CPU_TILE ? hi - i : DT_CPU_TILE;
            float tp[DT_CPU_TILE], tg[DT_CPU_TILE];
            const float *pv = dt_cpu_view(pt, p, i, k, tp), *gv = dt_cpu_view(gt, g, i, k, tg);
            for (int64_t j = 0; j < k; j++) {
                const float d = unscaled(gv[j], inv_scale, clipping, clip);
                const float a = m1[i + j] * c.beta1 + c.one_minus_beta1 * d;
                const float b = m2[i + j] * c.beta2 + (c.one_minus_beta2 * d) * d;
                m1[i + j] = a;
                m2[i + j] = b;
                const float r = lamb_r(a, b, pv[j], &c, inv_bc1);
                aw += (double)pv[j] * (double)pv[j];
                ar += (double)r * (double)r;
            }
        }
        part_w[bi] = aw;
        part_r[bi] = ar;
    }
    for (int64_t bi = 0; bi < nb; bi++) {
        norms[0] += part_w[bi];
        norms[1] += part_r[bi];
    }
}

DT_CLONES
void dt_cpu_lamb_apply(int64_t n, void *p, dt_dtype pt, const float *m1, const float *m2, double beta1, double beta2,
                       double eps, double wd, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const double wn = sqrt(norms[0]), rn = sqrt(norms[1]);
    const float step = s->lr * (wn > 0 && rn > 0 ? (float)(wn / rn) : 1.0f);
    BEGIN_TILES(n)
    float tp[DT_CPU_TILE];
    float *pv = dt_cpu_out(pt, p, i, k, tp, 1);
    for (int64_t j = 0; j < k; j++)
        pv[j] -= step * lamb_r(m1[i + j], m2[i + j], pv[j], &c, inv_bc1);
    dt_cpu_flush(pt, p, i, k, pv);
    END_TILES
}

void dt_cpu_step_end(dt_scalars *s)
{
    dt_scalars_step_end(s);
}
