/* eltwise.c: CPU element-wise ops, helpers, dropout, flatten and the SGD update. normalize_u8 reads
 * the host batch where it is: no scratch (normalize_scratch is 0). */
#include "config.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "nn/cpu/cpu.h"
#include "util/half.h"
#include "util/rng.h"

int dt_omp_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

int dt_omp_thread(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Element-wise loops over tiles of DT_CPU_TILE elements (in parallel): each operand a view of fp32
 * values (its own memory when fp32, else widened into a tile on the stack), each result stored
 * through a tile when its type is reduced. BEGIN_TILES opens the loop with `i` (the first element)
 * and `k` (the count); END_TILES closes it. */
#define BEGIN_TILES(n)                                                                                          \
    _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < (n); i += DT_CPU_TILE)                \
    {                                                                                                           \
        const int64_t k = (n) - i < DT_CPU_TILE ? (n) - i : DT_CPU_TILE;
#define END_TILES }

void dt_cpu_zero(int64_t n, float *x)
{
    dt_cpu_fill(n, DT_FLOAT32, 0.0f, x);
}

DT_CLONES
void dt_cpu_fill(int64_t n, dt_dtype t, float value, void *x)
{
    BEGIN_TILES(n)
    float tile[DT_CPU_TILE];
    float *o = dt_cpu_out(t, x, i, k, tile, 0);
#pragma omp simd
    for (int64_t j = 0; j < k; j++)
        o[j] = value;
    dt_cpu_flush(t, x, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_scale(int64_t n, dt_dtype t, float a, void *x)
{
    BEGIN_TILES(n)
    float tile[DT_CPU_TILE];
    float *o = dt_cpu_out(t, x, i, k, tile, 1);
#pragma omp simd
    for (int64_t j = 0; j < k; j++)
        o[j] *= a;
    dt_cpu_flush(t, x, i, k, o);
    END_TILES
}

void dt_cpu_round_half(int64_t n, float *x, int bf16)
{
    dt_round_half(x, n, bf16);
}

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

void dt_cpu_add_into(int64_t n, const float *src, float *dst)
{
    dt_cpu_copy_grad(n, src, DT_FLOAT32, dst, DT_FLOAT32, 1);
}

size_t dt_cpu_normalize_scratch(int64_t n)
{
    (void)n;
    return 0;
}

void dt_cpu_normalize_u8(int64_t n, int c, const uint8_t *u, const float *mean, const float *std, dt_dtype t, void *x)
{
    BEGIN_TILES(n)
    float tile[DT_CPU_TILE];
    float *o = dt_cpu_out(t, x, i, k, tile, 0);
    for (int64_t j = 0; j < k; j++) {
        int ch = (int)((i + j) % c);
        o[j] = ((float)u[i + j] * (1.0f / 255.0f) - mean[ch]) / std[ch];
    }
    dt_cpu_flush(t, x, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_add_bias(int64_t rows, int c, int ld, const float *bias, float *y)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
#pragma omp simd
        for (int j = 0; j < c; j++)
            y[r * ld + j] += bias[j];
    }
}

DT_CLONES
void dt_cpu_column_sums(int64_t rows, int c, int ld, const float *y, float *out, int accumulate)
{
    enum { CB = 256 };
    for (int c0 = 0; c0 < c; c0 += CB) { /* rows in memory order, a block of channels at a time */
        const int cb = c - c0 < CB ? c - c0 : CB;
        double s[CB] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int j = 0; j < cb; j++)
                s[j] += y[r * ld + c0 + j];
        for (int j = 0; j < cb; j++)
            out[c0 + j] = accumulate ? out[c0 + j] + (float)s[j] : (float)s[j];
    }
}

DT_CLONES
void dt_cpu_relu_fwd(int64_t n, dt_dtype t, const void *x, void *y)
{
    BEGIN_TILES(n)
    float xt[DT_CPU_TILE], yt[DT_CPU_TILE];
    const float *a = dt_cpu_view(t, x, i, k, xt);
    float *o = dt_cpu_out(t, y, i, k, yt, 0);
#pragma omp simd
    for (int64_t j = 0; j < k; j++) {
        float v = a[j];
        o[j] = v > 0.0f ? v : 0.0f;
    }
    dt_cpu_flush(t, y, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_relu_bwd(int64_t n, dt_dtype t, const void *y, const void *dy, void *dx, int accumulate)
{
    BEGIN_TILES(n)
    float yt[DT_CPU_TILE], gt[DT_CPU_TILE], ot[DT_CPU_TILE];
    const float *a = dt_cpu_view(t, y, i, k, yt), *g = dt_cpu_view(t, dy, i, k, gt);
    float *o = dt_cpu_out(t, dx, i, k, ot, accumulate);
    if (accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < k; j++) { /* loads outside the condition: branch-free, vectorised */
            float v = g[j];
            o[j] += a[j] > 0.0f ? v : 0.0f;
        }
    } else {
#pragma omp simd
        for (int64_t j = 0; j < k; j++) {
            float v = g[j];
            o[j] = a[j] > 0.0f ? v : 0.0f;
        }
    }
    dt_cpu_flush(t, dx, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_add_fwd(int64_t n, const void *a, dt_dtype at, const void *b, dt_dtype bt, void *y, dt_dtype yt)
{
    BEGIN_TILES(n)
    float ta[DT_CPU_TILE], tb[DT_CPU_TILE], ty[DT_CPU_TILE];
    const float *u = dt_cpu_view(at, a, i, k, ta), *v = dt_cpu_view(bt, b, i, k, tb);
    float *o = dt_cpu_out(yt, y, i, k, ty, 0);
#pragma omp simd
    for (int64_t j = 0; j < k; j++)
        o[j] = u[j] + v[j];
    dt_cpu_flush(yt, y, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_copy_grad(int64_t n, const void *src, dt_dtype st, void *dst, dt_dtype dt, int accumulate)
{
    if (!accumulate && st == dt) {
        memcpy(dst, src, (size_t)n * dt_cpu_type_bytes(st));
        return;
    }
    BEGIN_TILES(n)
    float ts[DT_CPU_TILE], td[DT_CPU_TILE];
    dt_cpu_put(dt, dst, i, k, dt_cpu_view(st, src, i, k, ts), accumulate, td);
    END_TILES
}

/* dropout's draw (dropout_fwd's contract): seed' from the step the scalars hold when the op runs;
 * element (or image) i kept when the top 24 bits of hash(seed', i) fall at or above p*2^24, exact for
 * any thread split; kept values scaled by 1/(1-p) */
static uint64_t drop_seed(uint64_t seed, int64_t salt, const dt_scalars *s)
{
    return s ? dt_hash64(seed, (uint64_t)(s->model_step * 1024 + salt)) : seed;
}

static uint32_t drop_cut(float p)
{
    return (uint32_t)((double)p * (1u << 24));
}

static inline uint8_t drop_keep(uint64_t seed, int64_t i, uint32_t cut)
{
    return (uint32_t)(dt_hash64(seed, (uint64_t)i) >> 40) >= cut;
}

static float drop_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

DT_CLONES
void dt_cpu_dropout_fwd(int64_t n, float p, uint64_t seed, int64_t salt, const dt_scalars *s, const void *x,
                        dt_dtype xt, void *y, dt_dtype yt, uint8_t *mask)
{
    seed = drop_seed(seed, salt, s);
    const uint32_t cut = drop_cut(p);
    const float scale = drop_scale(p);
    BEGIN_TILES(n)
    float tx[DT_CPU_TILE], ty[DT_CPU_TILE];
    const float *a = dt_cpu_view(xt, x, i, k, tx);
    float *o = dt_cpu_out(yt, y, i, k, ty, 0);
    for (int64_t j = 0; j < k; j++) {
        uint8_t keep = drop_keep(seed, i + j, cut);
        mask[i + j] = keep;
        o[j] = keep ? a[j] * scale : 0.0f;
    }
    dt_cpu_flush(yt, y, i, k, o);
    END_TILES
}

/* dx (or y) = src * scale where the mask of element j / per is set, else 0: dropout's backward (per 1)
 * and stochastic depth's both ways (per: an image's elements) */
static void masked_scale(int64_t n, int64_t per, float scale, const uint8_t *mask, const void *src, dt_dtype st,
                         void *dst, dt_dtype dt, int accumulate)
{
    BEGIN_TILES(n)
    float tg[DT_CPU_TILE], to[DT_CPU_TILE];
    const float *g = dt_cpu_view(st, src, i, k, tg);
    float *o = dt_cpu_out(dt, dst, i, k, to, accumulate);
    for (int64_t j = 0; j < k; j++) {
        float v = mask[(i + j) / per] ? g[j] * scale : 0.0f;
        o[j] = accumulate ? o[j] + v : v;
    }
    dt_cpu_flush(dt, dst, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_dropout_bwd(int64_t n, float p, const uint8_t *mask, const void *dy, dt_dtype yt, void *dx, dt_dtype xt,
                        int accumulate)
{
    masked_scale(n, 1, drop_scale(p), mask, dy, yt, dx, xt, accumulate);
}

void dt_cpu_sdepth_fwd(int n, int64_t per, float p, uint64_t seed, int64_t salt, const dt_scalars *s, const void *x,
                       dt_dtype xt, void *y, dt_dtype yt, uint8_t *mask)
{
    seed = drop_seed(seed, salt, s);
    const uint32_t cut = drop_cut(p);
    for (int b = 0; b < n; b++)
        mask[b] = drop_keep(seed, b, cut);
    masked_scale((int64_t)n * per, per, drop_scale(p), mask, x, xt, y, yt, 0);
}

void dt_cpu_sdepth_bwd(int n, int64_t per, float p, const uint8_t *mask, const void *dy, dt_dtype yt, void *dx,
                       dt_dtype xt, int accumulate)
{
    masked_scale((int64_t)n * per, per, drop_scale(p), mask, dy, yt, dx, xt, accumulate);
}

/* y[img, ch*h*w + y*w + x] = x[img, y, x, ch] */
void dt_cpu_flatten_fwd(int n, int h, int w, int c, dt_dtype t, const void *x, void *y)
{
    const int64_t hw = (int64_t)h * w, per = hw * c;
    const size_t es = dt_cpu_type_bytes(t);
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < n; img++)
        for (int64_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++) /* a move of bytes: no type changes */
                memcpy((char *)y + (size_t)(img * per + ch * hw + p) * es,
                       (const char *)x + (size_t)(img * per + p * c + ch) * es, es);
}

void dt_cpu_flatten_bwd(int n, int h, int w, int c, dt_dtype t, const void *dy, void *dx, int accumulate)
{
    const int64_t hw = (int64_t)h * w, per = hw * c;
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < n; img++)
        for (int64_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++) {
                float v = dt_cpu_get(t, dy, img * per + ch * hw + p);
                int64_t o = img * per + p * c + ch;
                dt_cpu_set(t, dx, o, accumulate ? dt_cpu_get(t, dx, o) + v : v);
            }
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

void dt_cpu_chan_copy(int64_t rows, int c, const void *src, int src_stride, int src_off, dt_dtype st, void *dst,
                      int dst_stride, int dst_off, dt_dtype dt, int accumulate)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int c0 = 0; c0 < c; c0 += DT_CPU_TILE) {
            const int k = c - c0 < DT_CPU_TILE ? c - c0 : DT_CPU_TILE;
            float ts[DT_CPU_TILE], td[DT_CPU_TILE];
            const float *v = dt_cpu_view(st, src, r * src_stride + src_off + c0, k, ts);
            dt_cpu_put(dt, dst, r * dst_stride + dst_off + c0, k, v, accumulate, td);
        }
}
