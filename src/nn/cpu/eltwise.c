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

void dt_cpu_zero(int64_t n, float *x)
{
    dt_cpu_fill(n, 0.0f, x);
}

DT_CLONES
void dt_cpu_fill(int64_t n, float value, float *x)
{
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++)
        x[i] = value;
}

DT_CLONES
void dt_cpu_scale(int64_t n, float a, float *x)
{
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++)
        x[i] *= a;
}

void dt_cpu_round_half(int64_t n, float *x, int bf16)
{
    dt_round_half(x, n, bf16);
}

DT_CLONES
int dt_cpu_unscale_check(int64_t n, float *g, float inv_scale)
{
    int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad)
    for (int64_t i = 0; i < n; i++) {
        float v = g[i] * inv_scale;
        g[i] = v;
        bad |= !(v - v == 0.0f); /* inf - inf and NaN - NaN are NaN; branch-free, so it vectorises */
    }
    return bad;
}

size_t dt_cpu_normalize_scratch(int64_t n)
{
    (void)n;
    return 0;
}

void dt_cpu_normalize_u8(int64_t n, int c, const uint8_t *u, const float *mean, const float *std, float *x)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int ch = (int)(i % c);
        x[i] = ((float)u[i] * (1.0f / 255.0f) - mean[ch]) / std[ch];
    }
}

DT_CLONES
void dt_cpu_add_bias(int64_t rows, int c, const float *bias, float *y)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
#pragma omp simd
        for (int j = 0; j < c; j++)
            y[r * c + j] += bias[j];
    }
}

DT_CLONES
void dt_cpu_column_sums(int64_t rows, int c, const float *y, float *out, int accumulate)
{
    enum { CB = 256 };
    for (int c0 = 0; c0 < c; c0 += CB) { /* rows in memory order, a block of channels at a time */
        const int cb = c - c0 < CB ? c - c0 : CB;
        double s[CB] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int j = 0; j < cb; j++)
                s[j] += y[r * c + c0 + j];
        for (int j = 0; j < cb; j++)
            out[c0 + j] = accumulate ? out[c0 + j] + (float)s[j] : (float)s[j];
    }
}

DT_CLONES
void dt_cpu_relu_fwd(int64_t n, const float *x, float *y)
{
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

DT_CLONES
void dt_cpu_relu_bwd(int64_t n, const float *y, const float *dy, float *dx, int accumulate)
{
    if (accumulate) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) { /* loads outside the condition: branch-free, vectorised */
            float g = dy[i];
            dx[i] += y[i] > 0.0f ? g : 0.0f;
        }
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
    }
}

DT_CLONES
void dt_cpu_add_fwd(int64_t n, const float *a, const float *b, float *y)
{
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

DT_CLONES
void dt_cpu_copy_grad(int64_t n, const float *src, float *dst, int accumulate)
{
    if (!accumulate) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++)
        dst[i] += src[i];
}

DT_CLONES
void dt_cpu_dropout_fwd(int64_t n, float p, uint64_t seed, const float *x, float *y, uint8_t *mask)
{
    /* keep when the top 24 bits of hash(seed, i) fall at or above p*2^24: exact for any thread split */
    const uint32_t cut = (uint32_t)((double)p * (1u << 24));
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint8_t keep = (uint32_t)(dt_hash64(seed, (uint64_t)i) >> 40) >= cut;
        mask[i] = keep;
        y[i] = keep ? x[i] * scale : 0.0f;
    }
}

DT_CLONES
void dt_cpu_dropout_bwd(int64_t n, float p, const uint8_t *mask, const float *dy, float *dx, int accumulate)
{
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = mask[i] ? dy[i] * scale : 0.0f;
        dx[i] = accumulate ? dx[i] + v : v;
    }
}

/* y[img, ch*h*w + y*w + x] = x[img, y, x, ch] */
void dt_cpu_flatten_fwd(int n, int h, int w, int c, const float *x, float *y)
{
    const int64_t hw = (int64_t)h * w, per = hw * c;
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < n; img++)
        for (int64_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++)
                y[img * per + ch * hw + p] = x[img * per + p * c + ch];
}

void dt_cpu_flatten_bwd(int n, int h, int w, int c, const float *dy, float *dx, int accumulate)
{
    const int64_t hw = (int64_t)h * w, per = hw * c;
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < n; img++)
        for (int64_t p = 0; p < hw; p++)
            for (int ch = 0; ch < c; ch++) {
                float v = dy[img * per + ch * hw + p];
                float *o = &dx[img * per + p * c + ch];
                *o = accumulate ? *o + v : v;
            }
}

DT_CLONES
void dt_cpu_sgd(int64_t n, float *p, const float *g, float *buf, float lr, float momentum, float dampening, float wd,
                int nesterov, int first)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f)
            d += wd * p[i];
        if (momentum != 0.0f) {
            float b = first ? d : momentum * buf[i] + (1.0f - dampening) * d;
            buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
}
