/* eltwise.c: CPU element-wise ops, helpers, dropout, flatten (the optimizer step's ops are in
 * optim.c). normalize_u8 reads the host batch where it is: no scratch (normalize_scratch is 0). */
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
