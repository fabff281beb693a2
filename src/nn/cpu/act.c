/* act.c: the CPU's activations (relu6, hardsigmoid, hardswish, sigmoid, silu, gelu) and
 * squeeze-and-excitation's channel-wise scale (chanmul), contracts in nn/backend.h. */
#include "config.h"

/* No trapping math here: GCC keeps a float select (x < c ? c : x) that feeds arithmetic as a branch
 * while floating-point exceptions may trap, and a loop with a branch does not vectorise; nothing in
 * dtrain traps on them (no feenableexcept), and the values are the same either way. */
#ifndef __clang__
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>

#include "nn/cpu/cpu.h"

/* relu6 with NaN passing through (the comparisons are false for it) */
static inline float relu6(float x)
{
    return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
}

/* e^x in fp32 without a library call, so that the loops over a tile vectorise (glibc's expf is a
 * scalar call in them, which made SiLU and the SE's sigmoid over a third of EfficientNet-B0's step):
 * x = k ln 2 + r, k = x log2(e) rounded to nearest, r = x - k ln2_hi - k ln2_lo (ln2_hi has 15
 * significant bits, so k ln2_hi is exact for |k| <= 150), e^r by its Taylor series to r^7 (the next
 * term is under 6e-9 on |r| <= ln2/2), times 2^k as two powers of two made in the exponent bits (so
 * that 2^128 and the subnormal results come out: one rounding, in the last product). Within 1.3 ulp
 * of e^x (every 97th float in [-110, 90] checked against exp in double); inf above 88.7228, 0 below
 * -103.973 (the exact value is under half the least subnormal there), NaN for NaN. The selects
 * vectorise only without -ftrapping-math: see the pragma at the top. */
static inline float exp_f32(float x)
{
    const float x0 = x == x ? x : 0.0f; /* NaN: its result is chosen below; (int) of NaN would be undefined */
    const float x1 = x0 < -103.972084f ? -103.972084f : x0;
    const float xc = x1 > 88.7228394f ? 88.7228394f : x1;
    const float kr = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* rounded to nearest: |.| < 2^22 */
    const int k = (int)kr;
    const float r = (xc - kr * 0.693145752f) - kr * 1.42860677e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int k1 = k / 2, k2 = k - k1;
    union {
        uint32_t u;
        float f;
    } s1 = {.u = (uint32_t)(k1 + 127) << 23}, s2 = {.u = (uint32_t)(k2 + 127) << 23};
    const float e = p * s1.f * s2.f;
    const float big = x > 88.7228394f ? INFINITY : e;
    const float small = x < -103.972084f ? 0.0f : big;
    return x != x ? x : small;
}

static inline float sigmoid(float x)
{
    return 1.0f / (1.0f + exp_f32(-x));
}

static inline float act_f(int act, float x)
{
    switch (act) {
    case DT_ACT_RELU6: return relu6(x);
    case DT_ACT_HARDSIGMOID: return relu6(x + 3.0f) / 6.0f;
    case DT_ACT_HARDSWISH: return x * relu6(x + 3.0f) / 6.0f;
    case DT_ACT_SIGMOID: return sigmoid(x);
    case DT_ACT_SILU: return x / (1.0f + exp_f32(-x));
    default: return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); /* DT_ACT_GELU */
    }
}

static inline float act_df(int act, float x, float dy)
{
    switch (act) {
    case DT_ACT_RELU6: return x > 0.0f && x < 6.0f ? dy : 0.0f;
    case DT_ACT_HARDSIGMOID: return x > -3.0f && x < 3.0f ? dy * (1.0f / 6.0f) : 0.0f;
    case DT_ACT_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    case DT_ACT_SIGMOID: {
        float s = sigmoid(x);
        return dy * (1.0f - s) * s;
    }
    case DT_ACT_SILU: {
        float s = sigmoid(x);
        return dy * s * (1.0f + x * (1.0f - s));
    }
    default: { /* DT_ACT_GELU */
        const float cdf = 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
        const float pdf = exp_f32(-0.5f * x * x) * (float)(0.5 * M_2_SQRTPI * M_SQRT1_2); /* 1/sqrt(2 pi) */
        return dy * (cdf + x * pdf);
    }
    }
}

/* One loop per activation (the switch outside it, so that the piecewise ones vectorise): F(x) or
 * DF(x, dy) on each value of the tile. */
#define EACH_ACT(act, LOOP)                                                                                     \
    switch (act) {                                                                                              \
    case DT_ACT_RELU6: LOOP(DT_ACT_RELU6); break;                                                               \
    case DT_ACT_HARDSIGMOID: LOOP(DT_ACT_HARDSIGMOID); break;                                                   \
    case DT_ACT_HARDSWISH: LOOP(DT_ACT_HARDSWISH); break;                                                       \
    case DT_ACT_SIGMOID: LOOP(DT_ACT_SIGMOID); break;                                                           \
    case DT_ACT_SILU: LOOP(DT_ACT_SILU); break;                                                                 \
    default: LOOP(DT_ACT_GELU); break;                                                                          \
    }

DT_CLONES
void dt_cpu_act_fwd(int64_t n, int act, dt_dtype t, const void *x, void *y)
{
    BEGIN_TILES(n)
    float tx[DT_CPU_TILE], ty[DT_CPU_TILE];
    const float *a = dt_cpu_view(t, x, i, k, tx);
    float *o = dt_cpu_out(t, y, i, k, ty, 0);
#define FWD_LOOP(kind)                                                                                          \
    _Pragma("omp simd") for (int64_t j = 0; j < k; j++) o[j] = act_f(kind, a[j])
    EACH_ACT(act, FWD_LOOP)
#undef FWD_LOOP
    dt_cpu_flush(t, y, i, k, o);
    END_TILES
}

DT_CLONES
void dt_cpu_act_bwd(int64_t n, int act, dt_dtype t, const void *x, const void *dy, void *dx, int accumulate)
{
    BEGIN_TILES(n)
    float tx[DT_CPU_TILE], tg[DT_CPU_TILE], to[DT_CPU_TILE], tv[DT_CPU_TILE];
    const float *a = dt_cpu_view(t, x, i, k, tx), *g = dt_cpu_view(t, dy, i, k, tg);
#define BWD_LOOP(kind)                                                                                          \
    _Pragma("omp simd") for (int64_t j = 0; j < k; j++) tv[j] = act_df(kind, a[j], g[j])
    EACH_ACT(act, BWD_LOOP)
#undef BWD_LOOP
    dt_cpu_put(t, dx, i, k, tv, accumulate, to);
    END_TILES
}

/* Both chanmul ops walk an image's rows in chunks of CHUNK channels: (image, chunk) pairs in parallel,
 * the positions in order inside each (so ds's sums have one order whatever the threads). */
enum { CHUNK = DT_CPU_TILE };

DT_CLONES
void dt_cpu_chanmul_fwd(int n, int64_t hw, int c, const void *x, dt_dtype xt, const void *s, dt_dtype st, void *y,
                        dt_dtype yt)
{
    const int chunks = (c + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t bc = 0; bc < (int64_t)n * chunks; bc++) {
        const int64_t b = bc / chunks;
        const int c0 = (int)(bc % chunks) * CHUNK, k = c - c0 < CHUNK ? c - c0 : CHUNK;
        float ts[CHUNK], tx[CHUNK], ty[CHUNK];
        const float *sv = dt_cpu_view(st, s, b * c + c0, k, ts);
        for (int64_t p = 0; p < hw; p++) {
            const int64_t row = (b * hw + p) * c + c0;
            const float *xv = dt_cpu_view(xt, x, row, k, tx);
            float *o = dt_cpu_out(yt, y, row, k, ty, 0);
#pragma omp simd
            for (int j = 0; j < k; j++)
                o[j] = xv[j] * sv[j];
            dt_cpu_flush(yt, y, row, k, o);
        }
    }
}

DT_CLONES
void dt_cpu_chanmul_bwd(int n, int64_t hw, int c, const void *x, dt_dtype xt, const void *s, dt_dtype st,
                        const void *dy, dt_dtype yt, void *dx, void *ds, int accumulate_dx, int accumulate_ds)
{
    const int chunks = (c + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t bc = 0; bc < (int64_t)n * chunks; bc++) {
        const int64_t b = bc / chunks;
        const int c0 = (int)(bc % chunks) * CHUNK, k = c - c0 < CHUNK ? c - c0 : CHUNK;
        float ts[CHUNK], tx[CHUNK], tg[CHUNK], to[CHUNK];
        double sum[CHUNK] = {0};
        const float *sv = dt_cpu_view(st, s, b * c + c0, k, ts);
        for (int64_t p = 0; p < hw; p++) {
            const int64_t row = (b * hw + p) * c + c0;
            const float *g = dt_cpu_view(yt, dy, row, k, tg);
            if (ds) {
                const float *xv = dt_cpu_view(xt, x, row, k, tx);
                for (int j = 0; j < k; j++)
                    sum[j] += (double)(g[j] * xv[j]);
            }
            if (dx) {
                float *o = dt_cpu_out(xt, dx, row, k, to, accumulate_dx);
                for (int j = 0; j < k; j++) {
                    const float v = g[j] * sv[j];
                    o[j] = accumulate_dx ? o[j] + v : v;
                }
                dt_cpu_flush(xt, dx, row, k, o);
            }
        }
        if (ds) {
            float *o = dt_cpu_out(st, ds, b * c + c0, k, to, accumulate_ds);
            for (int j = 0; j < k; j++)
                o[j] = accumulate_ds ? o[j] + (float)sum[j] : (float)sum[j];
            dt_cpu_flush(st, ds, b * c + c0, k, o);
        }
    }
}
