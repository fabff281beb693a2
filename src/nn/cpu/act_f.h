/* act_f.h: the CPU's activation formulas (relu6, hardsigmoid, hardswish, sigmoid, silu, gelu and
 * their derivatives; contracts in nn/backend.h, act_fwd and act_bwd), shared by act.c's ops and
 * bn.c's BN with a fused activation (DT_FUSE_BN_ACT), which must compute the same values bit for bit.
 * Include it after `#pragma GCC optimize("no-trapping-math")` (see act.c) so that the selects in
 * these loops vectorise; -ffp-contract=off (configure) keeps every product and sum rounded as written,
 * wherever the functions are inlined. */
#ifndef DT_NN_CPU_ACT_F_H
#define DT_NN_CPU_ACT_F_H

#include <math.h>
#include <stdint.h>

#include "nn/backend.h"

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

#endif
