/* bn.c: CPU batch norm over NHWC rows (per-channel statistics over n*h*w rows).
 * Sums run in float over RB rows (so they vectorise), then in double across row blocks, each
 * thread over its static share of them, and across the threads in thread order (an ordered loop,
 * not a reduction clause, which merges in the order threads finish: exact with 2 threads, since
 * a + b = b + a, but with 3 or more two runs of the same call could differ in the last bit). So the
 * bits depend on the thread count only, as "CPU runs are bit-reproducible for the same --threads"
 * says. Forward reads x twice (statistics, then the affine map), backward reads x and dy twice.
 * Each pass goes over the rows once for up to GC channels (groups of 8 blocks), the blocks inside
 * each row (or row block): a pass per block of 256 read every row once per block, at half the speed
 * past 256 channels (resnet50's 512 and 1024). Each channel's sums keep the order above, so the bits
 * are those of a block at a time. A fused ReLU's mask is recomputed in backward with the forward's
 * own scale and shift (saved), by the same expression (bn_affine), so its output need not be kept. A fused activation (relu = DT_BN_ACT(a), backend.h) is act_fwd's formula
 * (act_f.h) on the affine map's value in the same pass, and backward recomputes that value the same
 * way for act_bwd's derivative, in both of its passes: the BN output's gradient exists only per row
 * tile, and the BN output needs no memory. In fp32 the values are those of bn, act_fwd and act_bwd,
 * bn_bwd composed, bit for bit (the same expressions on the same fp32 operands); with reduced
 * storage the fused forward rounds once (the activation's output) where the composition also rounds
 * the BN output, and backward takes the derivative at the unrounded BN output and keeps its product
 * in fp32 (the composition rounds both to the stored type). A residual block's tail (bn_add_relu_*)
 * adds the residual before the ReLU in the same pass, and its backward takes the mask from the
 * block's output (kept: the next block reads it) and writes the residual's gradient in the
 * reduction pass. Temporaries are per channel block or group, on the stack (a group's sums and
 * coefficients up to 56 KiB, each thread's share of the sums 32 KiB): no scratch (bn_scratch is 0).
 * fp16/bf16 rows and parameters are widened a row block at a time as they are read, results
 * rounded as they are stored (cpu.h's typed helpers).
 * x and dx may be the first c channels of a wider tensor (d->xs, the elements from one row to the next;
 * y and dy always packed): only their row offsets change, so every sum runs in the packed op's order and
 * gives its bits, and the channels past c are neither read nor written. The tail ops share the code, so
 * they would honour xs too, but their contract takes xs = 0 only (the residual and its gradient are
 * packed) and nothing tests them with a stride. */
#include "config.h"

/* for the fused activations' selects (act_f.h; act.c says why) */
#ifndef __clang__
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <omp.h>
#include <string.h>

#include "nn/cpu/act_f.h"
#include "nn/cpu/cpu.h"

#define CB 256 /* channels per block */
#define RB 16  /* rows summed in float before the double sums */
#define GC (8 * CB) /* channels per pass over the rows (a row block of them stays in L2): a group of blocks */

/* elements from one row of x (and dx) to the next */
static inline int64_t bn_xs(const dt_bn_desc *d)
{
    return d->xs > 0 ? d->xs : d->c;
}

/* Called by every thread of a parallel region: each adds its shares a0 and a1 into the totals s0
 * and s1, in thread order (an ordered loop of one iteration per thread, iteration t thread t's) */
static void add_in_thread_order(int cb, const double *a0, const double *a1, double *s0, double *s1)
{
    const int nt = omp_get_num_threads();
#pragma omp for ordered schedule(static, 1)
    for (int t = 0; t < nt; t++) {
#pragma omp ordered
        for (int j = 0; j < cb; j++) {
            s0[j] += a0[j];
            s1[j] += a1[j];
        }
    }
}

size_t dt_cpu_bn_scratch(const dt_bn_desc *d)
{
    (void)d;
    return 0;
}

/* the affine map of forward; backward's ReLU mask is bn_affine(...) > 0 with the same operands */
static inline float bn_affine(float x, float scale, float shift)
{
    return x * scale + shift;
}

/* y = x*scale + shift, then max(0, .) when relu is DT_BN_RELU, the activation a when DT_BN_ACT(a);
 * with a residual res (type rt, not NULL), y = max(0, x*scale + shift + res): a residual block's tail
 * (relu is then implied) */
DT_CLONES
static void affine(const dt_bn_desc *d, int g0, int gc, const void *x, const float *scale_g, const float *shift_g,
                   void *y, int relu, const void *res, dt_dtype rt)
{
    const int64_t rows = d->rows, xs = bn_xs(d);
    const int c = d->c;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        for (int c0 = g0; c0 < g0 + gc; c0 += CB) { /* channels g0..g0+gc, scale_g[0] and shift_g[0] g0's */
            const int cb = g0 + gc - c0 < CB ? g0 + gc - c0 : CB;
            const float *scale = scale_g + (c0 - g0), *shift = shift_g + (c0 - g0);
            float xt[CB], yt[CB], rtile[CB];
            const float *xr = dt_cpu_view(d->xt, x, r * xs + c0, cb, xt);
            float *yr = dt_cpu_out(d->yt, y, r * c + c0, cb, yt, 0);
            if (res) { /* the add's and the ReLU's own expressions, on the BN output as it would be stored in fp32 */
                const float *rr = dt_cpu_view(rt, res, r * c + c0, cb, rtile);
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    float v = bn_affine(xr[j], scale[j], shift[j]) + rr[j];
                    yr[j] = v > 0.0f ? v : 0.0f;
                }
            } else if (relu >= DT_BN_ACT(0)) { /* act_fwd's expression, on the BN output as stored in fp32 */
#define AFFINE_ACT(kind)                                                                                       \
        _Pragma("omp simd") for (int j = 0; j < cb; j++) yr[j] = act_f(kind, bn_affine(xr[j], scale[j], shift[j]))
                EACH_ACT(DT_BN_ACT_OF(relu), AFFINE_ACT)
#undef AFFINE_ACT
            } else if (relu) {
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    float v = bn_affine(xr[j], scale[j], shift[j]);
                    yr[j] = v > 0.0f ? v : 0.0f;
                }
            } else {
#pragma omp simd
                for (int j = 0; j < cb; j++)
                    yr[j] = bn_affine(xr[j], scale[j], shift[j]);
            }
            dt_cpu_flush(d->yt, y, r * c + c0, cb, yr);
        }
    }
}

/* n parameters of type t from element i into dst */
static void params_in(dt_dtype t, const void *p, int c0, int n, float *dst)
{
    dt_cpu_load(t, p, c0, n, dst);
}

/* the training forward, with the tail affine() says (relu, or the residual res of type rt) */
DT_CLONES
static void bn_train(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta, void *y, float *saved,
                     void *running_mean, void *running_var, int relu, const void *res, dt_dtype rt)
{
    const int64_t rows = d->rows, xs = bn_xs(d);
    const int c = d->c;
    float *save_mean = saved, *save_invstd = saved + c, *save_scale = saved + 2 * c, *save_shift = saved + 3 * c;
    for (int g0 = 0; g0 < c; g0 += GC) { /* a group of channel blocks per pass over the rows */
        const int gc = c - g0 < GC ? c - g0 : GC;
        /* one pass: sums of (x - k) and (x - k)^2 with k the channel's first value, so the variance
         * E[(x-k)^2] - E[x-k]^2 does not cancel catastrophically for inputs far from zero */
        double gsum[GC] = {0}, gsq[GC] = {0};
        float gk[GC];
        dt_cpu_load(d->xt, x, g0, gc, gk);
#pragma omp parallel
        {
            double ps[GC] = {0}, pq[GC] = {0}; /* this thread's share */
#pragma omp for schedule(static) nowait
            for (int64_t r0 = 0; r0 < rows; r0 += RB) /* float over RB rows (vectorised), double across */
                for (int b0 = 0; b0 < gc; b0 += CB) {
                    const int cb = gc - b0 < CB ? gc - b0 : CB;
                    const float *k = gk + b0;
                    float fs[CB] = {0}, fq[CB] = {0};
                    for (int64_t r = r0; r < r0 + RB && r < rows; r++) {
                        float xt[CB];
                        const float *xr = dt_cpu_view(d->xt, x, r * xs + g0 + b0, cb, xt);
#pragma omp simd
                        for (int j = 0; j < cb; j++) {
                            float t = xr[j] - k[j];
                            fs[j] += t;
                            fq[j] += t * t;
                        }
                    }
                    for (int j = 0; j < cb; j++) {
                        ps[b0 + j] += fs[j];
                        pq[b0 + j] += fq[j];
                    }
                }
            add_in_thread_order(gc, ps, pq, gsum, gsq);
        }
        for (int c0 = g0; c0 < g0 + gc; c0 += CB) { /* each block's statistics, as one block's pass had them */
            const int cb = g0 + gc - c0 < CB ? g0 + gc - c0 : CB;
            double *sum = gsum + (c0 - g0), *sq = gsq + (c0 - g0);
            const float *k = gk + (c0 - g0);
            double mean[CB], n_all = (double)rows;
            for (int j = 0; j < cb; j++) {
                double ms = sum[j] / (double)rows;
                mean[j] = k[j] + ms;
                sq[j] -= ms * sum[j]; /* now the sum of squared deviations from the mean */
                if (sq[j] < 0)
                    sq[j] = 0;
            }
            if (d->sync) { /* SyncBN: count, sums and squared sums of every replica's rows */
                double buf[2 * CB + 1];
                buf[0] = (double)rows;
                for (int j = 0; j < cb; j++) {
                    buf[1 + j] = (double)rows * mean[j];
                    buf[1 + cb + j] = sq[j] + (double)rows * mean[j] * mean[j];
                }
                if (d->sync(d->sync_ctx, buf, 2 * cb + 1) == 0) { /* on failure the batch's own statistics serve */
                    n_all = buf[0];
                    for (int j = 0; j < cb; j++) {
                        mean[j] = buf[1 + j] / n_all;
                        sq[j] = buf[1 + cb + j] - n_all * mean[j] * mean[j];
                        if (sq[j] < 0)
                            sq[j] = 0;
                    }
                }
            }
            float *scale = save_scale + c0, *shift = save_shift + c0;
            float g[CB], b[CB], rm[CB], rv[CB];
            params_in(d->pt, gamma, c0, cb, g);
            params_in(d->pt, beta, c0, cb, b);
            params_in(d->pt, running_mean, c0, cb, rm);
            params_in(d->pt, running_var, c0, cb, rv);
            for (int j = 0; j < cb; j++) {
                double var = sq[j] / n_all;
                double invstd = 1.0 / sqrt(var + d->eps);
                save_mean[c0 + j] = (float)mean[j];
                save_invstd[c0 + j] = (float)invstd;
                scale[j] = (float)(g[j] * invstd);
                shift[j] = (float)(b[j] - mean[j] * g[j] * invstd);
                double unbiased = n_all > 1 ? sq[j] / (n_all - 1) : var;
                rm[j] = (float)((1.0 - d->momentum) * rm[j] + d->momentum * mean[j]);
                rv[j] = (float)((1.0 - d->momentum) * rv[j] + d->momentum * unbiased);
            }
            dt_cpu_store(d->pt, running_mean, c0, cb, rm);
            dt_cpu_store(d->pt, running_var, c0, cb, rv);
        }
        affine(d, g0, gc, x, save_scale + g0, save_shift + g0, y, relu, res, rt);
    }
}

void dt_cpu_bn_fwd_train(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta, void *y, float *saved,
                         void *running_mean, void *running_var, int relu)
{
    bn_train(d, x, gamma, beta, y, saved, running_mean, running_var, relu, NULL, DT_FLOAT32);
}

void dt_cpu_bn_add_relu_fwd_train(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta,
                                  const void *r, dt_dtype rt, void *y, float *saved, void *running_mean,
                                  void *running_var)
{
    bn_train(d, x, gamma, beta, y, saved, running_mean, running_var, 1, r, rt);
}

/* the inference forward from the running statistics, with affine()'s tail */
DT_CLONES
static void bn_infer(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta, const void *running_mean,
                     const void *running_var, void *y, int relu, const void *res, dt_dtype rt)
{
    const int c = d->c;
    for (int c0 = 0; c0 < c; c0 += CB) {
        const int cb = c - c0 < CB ? c - c0 : CB;
        float scale[CB], shift[CB], g[CB], b[CB], rm[CB], rv[CB];
        params_in(d->pt, gamma, c0, cb, g);
        params_in(d->pt, beta, c0, cb, b);
        params_in(d->pt, running_mean, c0, cb, rm);
        params_in(d->pt, running_var, c0, cb, rv);
        for (int j = 0; j < cb; j++) {
            double invstd = 1.0 / sqrt((double)rv[j] + d->eps);
            scale[j] = (float)(g[j] * invstd);
            shift[j] = (float)(b[j] - rm[j] * g[j] * invstd);
        }
        affine(d, c0, cb, x, scale, shift, y, relu, res, rt);
    }
}

void dt_cpu_bn_fwd_infer(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta,
                         const void *running_mean, const void *running_var, void *y, int relu)
{
    bn_infer(d, x, gamma, beta, running_mean, running_var, y, relu, NULL, DT_FLOAT32);
}

void dt_cpu_bn_add_relu_fwd_infer(const dt_bn_desc *d, const void *x, const void *gamma, const void *beta,
                                  const void *running_mean, const void *running_var, const void *r, dt_dtype rt,
                                  void *y)
{
    bn_infer(d, x, gamma, beta, running_mean, running_var, y, 1, r, rt);
}

/* Inlined into each clone of bn_backward (DT_CLONES), so that the row loops vectorise for the clone's
 * target: with the activations' loops, row_dy is past the size GCC inlines on its own, and called
 * out of line it runs the baseline's code. */
#if defined(__GNUC__)
#define BN_ROW_INLINE static inline __attribute__((always_inline))
#else
#define BN_ROW_INLINE static inline
#endif

/* The gradient of the BN output for the row at dr, masked by the fused ReLU (relu DT_BN_RELU) where
 * the forward's output was zero, or through the fused activation's derivative (DT_BN_ACT(a): act_bwd's
 * expression at the BN output recomputed from x), into g[0..cb): a separate pass over a row keeps
 * every loop branch-free. */
BN_ROW_INLINE void row_dy(const float *dr, const float *xr, const float *scale, const float *shift, int relu, int cb,
                          float *g)
{
    if (relu < 0) { /* the block's tail: masked where its output (here xr: that row of y) was zero */
#pragma omp simd
        for (int j = 0; j < cb; j++) {
            float v = dr[j];
            g[j] = xr[j] > 0.0f ? v : 0.0f;
        }
    } else if (relu >= DT_BN_ACT(0)) {
#define ROW_ACT(kind)                                                                                           \
    _Pragma("omp simd") for (int j = 0; j < cb; j++) g[j] = act_df(kind, bn_affine(xr[j], scale[j], shift[j]), dr[j])
        EACH_ACT(DT_BN_ACT_OF(relu), ROW_ACT)
#undef ROW_ACT
    } else if (relu) {
#pragma omp simd
        for (int j = 0; j < cb; j++) {
            float v = dr[j];
            g[j] = bn_affine(xr[j], scale[j], shift[j]) > 0.0f ? v : 0.0f;
        }
    } else {
#pragma omp simd
        for (int j = 0; j < cb; j++)
            g[j] = dr[j];
    }
}

/* one row of the BN output's gradient g (row r, channels c0..c0+cb) into the tile g: dy masked as
 * row_dy says, the mask from x's row (a fused ReLU) or from the block output ym's (ym not NULL) */
BN_ROW_INLINE void grad_row(const dt_bn_desc *d, const void *dy, const void *ym, const float *xr, const float *scale,
                            const float *shift, int relu, int64_t at, int cb, float *g)
{
    float dt[CB], yt[CB];
    const float *dr = dt_cpu_view(d->yt, dy, at, cb, dt);
    if (ym)
        row_dy(dr, dt_cpu_view(d->yt, ym, at, cb, yt), scale, shift, -1, cb, g);
    else
        row_dy(dr, xr, scale, shift, relu, cb, g);
}

/* Backward; with ym (the block output of a BN+add+ReLU tail), the mask comes from it and g also
 * goes to the residual's gradient res (type rt; added with accumulate_res). */
DT_CLONES
static void bn_backward(const dt_bn_desc *d, const void *x, const void *dy, int relu, const void *ym,
                        const void *gamma, const float *saved, void *dx, void *res, dt_dtype rt, void *dgamma,
                        void *dbeta, int accumulate_dx, int accumulate_res, int accumulate_params)
{
    const int64_t rows = d->rows, xs = bn_xs(d);
    const int c = d->c;
    const float *save_mean = saved, *save_invstd = saved + c, *scale = saved + 2 * c, *shift = saved + 3 * c;
    /* An activation whose derivative costs an exp (SiLU, sigmoid) or an erf (GELU) has it computed
     * once: the reduction pass stores the BN output's gradient g into dx (fp32, written rather than
     * added: dx is the gradient's own buffer then, or dy itself, whose row is read before), and the
     * second pass reads it back there. The same fp32 values either way. */
    const int g_in_dx = !ym && !res && !accumulate_dx && d->xt == DT_FLOAT32 && relu >= DT_BN_ACT(0) &&
                        (DT_BN_ACT_OF(relu) == DT_ACT_SILU || DT_BN_ACT_OF(relu) == DT_ACT_SIGMOID ||
                         DT_BN_ACT_OF(relu) == DT_ACT_GELU);
    for (int g0 = 0; g0 < c; g0 += GC) { /* a group of channel blocks per pass over the rows */
        const int gc = c - g0 < GC ? c - g0 : GC;
        double gsdy[GC] = {0}, gsdyx[GC] = {0}; /* sum dy, sum dy*(x-mean) */
#pragma omp parallel
        {
            double ps[GC] = {0}, px[GC] = {0}; /* this thread's share */
#pragma omp for schedule(static) nowait
            for (int64_t r0 = 0; r0 < rows; r0 += RB) /* float over RB rows (vectorised), double across */
                for (int b0 = 0; b0 < gc; b0 += CB) {
                    const int cb = gc - b0 < CB ? gc - b0 : CB, c0 = g0 + b0;
                    const float *mean = save_mean + c0;
                    float fs[CB] = {0}, fx[CB] = {0};
                    for (int64_t r = r0; r < r0 + RB && r < rows; r++) {
                        float xt[CB], g[CB];
                        const float *xr = dt_cpu_view(d->xt, x, r * xs + c0, cb, xt);
                        grad_row(d, dy, ym, xr, scale + c0, shift + c0, relu, r * c + c0, cb, g);
                        if (g_in_dx)
                            memcpy((float *)dx + r * xs + c0, g, (size_t)cb * sizeof(float));
                        if (res) { /* the residual's gradient: g (dy may be res itself: its row is read already) */
                            float ot[CB];
                            dt_cpu_put(rt, res, r * c + c0, cb, g, accumulate_res, ot);
                        }
#pragma omp simd
                        for (int j = 0; j < cb; j++) {
                            fs[j] += g[j];
                            fx[j] += g[j] * (xr[j] - mean[j]);
                        }
                    }
                    for (int j = 0; j < cb; j++) {
                        ps[b0 + j] += fs[j];
                        px[b0 + j] += fx[j];
                    }
                }
            add_in_thread_order(gc, ps, px, gsdy, gsdyx);
        }
        float ga[GC], gb[GC], gkx[GC]; /* dx = a*g - kx*(x-mean) - b, per channel */
        for (int c0 = g0; c0 < g0 + gc; c0 += CB) {
            const int cb = g0 + gc - c0 < CB ? g0 + gc - c0 : CB;
            const double *sdy = gsdy + (c0 - g0), *sdyx = gsdyx + (c0 - g0);
            /* dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)), xhat = (x-mean)*invstd; with SyncBN
             * the two means run over every replica's rows, dgamma and dbeta stay this replica's */
            double gdy[CB], gdyx[CB], n_all = (double)rows;
            for (int j = 0; j < cb; j++) {
                gdy[j] = sdy[j];
                gdyx[j] = sdyx[j];
            }
            if (d->sync) {
                double buf[2 * CB + 1];
                buf[0] = (double)rows;
                for (int j = 0; j < cb; j++) {
                    buf[1 + j] = sdy[j];
                    buf[1 + cb + j] = sdyx[j];
                }
                if (d->sync(d->sync_ctx, buf, 2 * cb + 1) == 0) {
                    n_all = buf[0];
                    for (int j = 0; j < cb; j++) {
                        gdy[j] = buf[1 + j];
                        gdyx[j] = buf[1 + cb + j];
                    }
                }
            }
            float *a = ga + (c0 - g0), *b = gb + (c0 - g0), *k = gkx + (c0 - g0), gm[CB], dgm[CB], dbt[CB];
            params_in(d->pt, gamma, c0, cb, gm);
            if (accumulate_params) {
                params_in(d->pt, dgamma, c0, cb, dgm);
                params_in(d->pt, dbeta, c0, cb, dbt);
            }
            for (int j = 0; j < cb; j++) {
                double invstd = save_invstd[c0 + j];
                double dg = sdyx[j] * invstd, db = sdy[j];
                if (accumulate_params) {
                    dgm[j] += (float)dg;
                    dbt[j] += (float)db;
                } else {
                    dgm[j] = (float)dg;
                    dbt[j] = (float)db;
                }
                a[j] = (float)(gm[j] * invstd);                               /* times dy */
                k[j] = (float)(gm[j] * invstd * invstd * invstd * gdyx[j] / n_all); /* times (x-mean) */
                b[j] = (float)(gm[j] * invstd * gdy[j] / n_all);              /* constant */
            }
            dt_cpu_store(d->pt, dgamma, c0, cb, dgm);
            dt_cpu_store(d->pt, dbeta, c0, cb, dbt);
        }
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            for (int c0 = g0; c0 < g0 + gc; c0 += CB) {
                const int cb = g0 + gc - c0 < CB ? g0 + gc - c0 : CB;
                const float *a = ga + (c0 - g0), *b = gb + (c0 - g0), *k = gkx + (c0 - g0), *mean = save_mean + c0;
                float xt[CB], ot[CB], g[CB];
                const float *xr = dt_cpu_view(d->xt, x, r * xs + c0, cb, xt);
                float *o = dt_cpu_out(d->xt, dx, r * xs + c0, cb, ot, accumulate_dx);
                if (g_in_dx) /* the reduction pass left g there: o[j] reads g[j] before writing it */
                    memcpy(g, o, (size_t)cb * sizeof(float));
                else
                    grad_row(d, dy, ym, xr, scale + c0, shift + c0, relu, r * c + c0, cb, g);
                if (accumulate_dx) {
#pragma omp simd
                    for (int j = 0; j < cb; j++)
                        o[j] += a[j] * g[j] - k[j] * (xr[j] - mean[j]) - b[j];
                } else {
#pragma omp simd
                    for (int j = 0; j < cb; j++)
                        o[j] = a[j] * g[j] - k[j] * (xr[j] - mean[j]) - b[j];
                }
                dt_cpu_flush(d->xt, dx, r * xs + c0, cb, o);
            }
        }
    }
}

void dt_cpu_bn_bwd(const dt_bn_desc *d, const void *x, const void *dy, int relu, const void *gamma, const float *saved,
                   void *dx, void *dgamma, void *dbeta, int accumulate_dx, int accumulate_params)
{
    bn_backward(d, x, dy, relu, NULL, gamma, saved, dx, NULL, DT_FLOAT32, dgamma, dbeta, accumulate_dx, 0,
                accumulate_params);
}

void dt_cpu_bn_add_relu_bwd(const dt_bn_desc *d, const void *x, const void *y, const void *dy, const void *gamma,
                            const float *saved, void *dx, void *dr, dt_dtype rt, void *dgamma, void *dbeta,
                            int accumulate_dx, int accumulate_dr, int accumulate_params)
{
    bn_backward(d, x, dy, 0, y, gamma, saved, dx, dr, rt, dgamma, dbeta, accumulate_dx, accumulate_dr,
                accumulate_params);
}
