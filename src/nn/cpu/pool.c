/* pool.c: CPU max pool (with argmax for backward) and adaptive average pool on NHWC tensors.
 * y and dy may be a channel slice of a wider tensor (d->ys elements from one output position to the
 * next): only their offsets change (the argmax stays packed, a byte per output), so the results are the
 * packed op's bits, and the channels outside the slice are neither read nor written. */
#include "config.h"

#include <math.h>

#include "nn/cpu/cpu.h"

#define CB 256 /* channels per block: the widened values of one output pixel */

/* elements from one output position of y (and dy) to the next */
static inline int64_t pool_ys(const dt_pool_desc *d)
{
    return d->ys > 0 ? d->ys : d->c;
}

DT_CLONES
void dt_cpu_maxpool_fwd(const dt_pool_desc *d, const void *x, void *y, uint8_t *argmax)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, ys = pool_ys(d);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->oh; row++) {
        int64_t img = row / d->oh;
        int oy = (int)(row % d->oh);
        for (int ox = 0; ox < d->ow; ox++) {
            const int64_t at = row * d->ow + ox, o = at * ys; /* the output position; y's offset */
            uint8_t *ao = argmax + at * d->c;
            /* PyTorch's rule: start at -inf with the window's first valid element, take an element
             * when it is greater or NaN (so the first maximum wins and NaN propagates) */
            int iy0 = oy * d->sh - d->ph, ix0 = ox * d->sw - d->pw;
            uint8_t first = (uint8_t)((iy0 < 0 ? -iy0 : 0) * d->kw + (ix0 < 0 ? -ix0 : 0));
            for (int c0 = 0; c0 < d->c; c0 += CB) {
                const int cb = d->c - c0 < CB ? d->c - c0 : CB;
                float yo[CB], xt[CB];
                for (int ch = 0; ch < cb; ch++) {
                    yo[ch] = -INFINITY;
                    ao[c0 + ch] = first;
                }
                for (int ky = 0; ky < d->kh; ky++) {
                    int iy = iy0 + ky;
                    if (iy < 0 || iy >= d->h)
                        continue;
                    for (int kx = 0; kx < d->kw; kx++) {
                        int ix = ix0 + kx;
                        if (ix < 0 || ix >= d->w)
                            continue;
                        const float *xp =
                            dt_cpu_view(d->xt, x, img * in_img + ((int64_t)iy * d->w + ix) * d->c + c0, cb, xt);
                        const uint8_t pos = (uint8_t)(ky * d->kw + kx);
#pragma omp simd
                        for (int ch = 0; ch < cb; ch++) { /* branch-free, so it vectorises */
                            float v = xp[ch], cur = yo[ch];
                            int take = v > cur || v != v;
                            yo[ch] = take ? v : cur;
                            ao[c0 + ch] = take ? pos : ao[c0 + ch];
                        }
                    }
                }
                dt_cpu_store(d->yt, y, o + c0, cb, yo);
            }
        }
    }
}

/* a gather's sums start at dx's values (accumulate) or 0 */
static void sums_begin(dt_dtype t, const void *dx, int64_t i, int cb, int accumulate, float *acc)
{
    if (accumulate)
        dt_cpu_load(t, dx, i, cb, acc);
    else
        for (int ch = 0; ch < cb; ch++)
            acc[ch] = 0.0f;
}

/* The output positions whose window (kernel k, stride s, padding p over outputs 0..o-1) covers input
 * position i: [*lo, *hi). */
static void covering(int i, int k, int s, int p, int o, int *lo, int *hi)
{
    int a = i + p - k + 1; /* the first output start at or after i + p - (k - 1) */
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = (i + p) / s + 1;
    if (*hi > o)
        *hi = o;
}

/* Each input element gathers, in increasing output order, the gradients of the outputs that chose
 * it: the order a scatter over the outputs would add them in (so any split over threads gives the
 * same sums), with one rounding per element for a reduced dx. */
DT_CLONES
void dt_cpu_maxpool_bwd(const dt_pool_desc *d, const void *dy, const uint8_t *argmax, void *dx, int accumulate)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, ys = pool_ys(d);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->h; row++) {
        int64_t img = row / d->h;
        int iy = (int)(row % d->h), oy0, oy1;
        covering(iy, d->kh, d->sh, d->ph, d->oh, &oy0, &oy1);
        for (int ix = 0; ix < d->w; ix++) {
            int ox0, ox1;
            covering(ix, d->kw, d->sw, d->pw, d->ow, &ox0, &ox1);
            const int64_t at = img * in_img + ((int64_t)iy * d->w + ix) * d->c;
            for (int c0 = 0; c0 < d->c; c0 += CB) {
                const int cb = d->c - c0 < CB ? d->c - c0 : CB;
                float acc[CB];
                sums_begin(d->xt, dx, at + c0, cb, accumulate, acc);
                for (int oy = oy0; oy < oy1; oy++)
                    for (int ox = ox0; ox < ox1; ox++) {
                        const uint8_t pos = (uint8_t)((iy - (oy * d->sh - d->ph)) * d->kw + (ix - (ox * d->sw - d->pw)));
                        const int64_t op = (img * d->oh + oy) * d->ow + ox; /* the output position */
                        float dyt[CB];
                        const float *g = dt_cpu_view(d->yt, dy, op * ys + c0, cb, dyt);
                        const uint8_t *am = argmax + op * d->c + c0;
#pragma omp simd
                        for (int ch = 0; ch < cb; ch++) /* a select, not a branch: it vectorises */
                            acc[ch] = am[ch] == pos ? acc[ch] + g[ch] : acc[ch];
                    }
                dt_cpu_store(d->xt, dx, at + c0, cb, acc);
            }
        }
    }
}

/* PyTorch's adaptive pooling window: [floor(o*in/out), ceil((o+1)*in/out)) */
static int win_start(int o, int in, int out)
{
    return (int)(((int64_t)o * in) / out);
}

static int win_end(int o, int in, int out)
{
    return (int)(((int64_t)(o + 1) * in + out - 1) / out);
}

DT_CLONES
void dt_cpu_avgpool_fwd(const dt_pool_desc *d, const void *x, void *y)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, ys = pool_ys(d);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->oh; row++) {
        int64_t img = row / d->oh;
        int oy = (int)(row % d->oh);
        int y0 = win_start(oy, d->h, d->oh), y1 = win_end(oy, d->h, d->oh);
        for (int ox = 0; ox < d->ow; ox++) {
            int x0 = win_start(ox, d->w, d->ow), x1 = win_end(ox, d->w, d->ow);
            const int64_t o = (row * d->ow + ox) * ys;
            float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
            /* a block of channels at a time, pixel by pixel (each channel's sum in the window's
             * order, as one channel at a time would add): rows read contiguously, vectorised */
            for (int c0 = 0; c0 < d->c; c0 += CB) {
                const int cb = d->c - c0 < CB ? d->c - c0 : CB;
                float sum[CB], xt[CB];
                for (int ch = 0; ch < cb; ch++)
                    sum[ch] = 0;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        const float *xr = dt_cpu_view(d->xt, x, img * in_img + ((int64_t)iy * d->w + ix) * d->c + c0, cb, xt);
#pragma omp simd
                        for (int ch = 0; ch < cb; ch++)
                            sum[ch] += xr[ch];
                    }
                for (int ch = 0; ch < cb; ch++)
                    sum[ch] *= inv;
                dt_cpu_store(d->yt, y, o + c0, cb, sum);
            }
        }
    }
}

/* a gather in increasing output order, as maxpool_bwd */
DT_CLONES
void dt_cpu_avgpool_bwd(const dt_pool_desc *d, const void *dy, void *dx, int accumulate)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, ys = pool_ys(d);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->h; row++) {
        int64_t img = row / d->h;
        int iy = (int)(row % d->h);
        for (int ix = 0; ix < d->w; ix++) {
            const int64_t at = img * in_img + ((int64_t)iy * d->w + ix) * d->c;
            for (int c0 = 0; c0 < d->c; c0 += CB) {
                const int cb = d->c - c0 < CB ? d->c - c0 : CB;
                float acc[CB];
                sums_begin(d->xt, dx, at + c0, cb, accumulate, acc);
                for (int oy = 0; oy < d->oh; oy++) {
                    if (iy < win_start(oy, d->h, d->oh) || iy >= win_end(oy, d->h, d->oh))
                        continue;
                    for (int ox = 0; ox < d->ow; ox++) {
                        int x0 = win_start(ox, d->w, d->ow), x1 = win_end(ox, d->w, d->ow), y0, y1;
                        if (ix < x0 || ix >= x1)
                            continue;
                        y0 = win_start(oy, d->h, d->oh);
                        y1 = win_end(oy, d->h, d->oh);
                        float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                        const int64_t o = ((img * d->oh + oy) * d->ow + ox) * ys + c0;
                        float gt[CB];
                        const float *g = dt_cpu_view(d->yt, dy, o, cb, gt);
#pragma omp simd
                        for (int ch = 0; ch < cb; ch++)
                            acc[ch] += g[ch] * inv;
                    }
                }
                dt_cpu_store(d->xt, dx, at + c0, cb, acc);
            }
        }
    }
}
