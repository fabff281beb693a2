/* act.c: the CPU's activations (relu6, hardsigmoid, hardswish, sigmoid, silu, gelu; their formulas in
 * act_f.h, shared with bn.c's fused BN+activation) and squeeze-and-excitation's channel-wise scale
 * (chanmul), contracts in nn/backend.h. */
#include "config.h"

/* No trapping math here: GCC keeps a float select (x < c ? c : x) that feeds arithmetic as a branch
 * while floating-point exceptions may trap, and a loop with a branch does not vectorise; nothing in
 * dtrain traps on them (no feenableexcept), and the values are the same either way. */
#ifndef __clang__
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>

#include "nn/cpu/act_f.h"
#include "nn/cpu/cpu.h"

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
