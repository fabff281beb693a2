/* pool.c: CPU max pool (with argmax for backward) and adaptive average pool on NHWC tensors. */
#include "config.h"

#include <math.h>

#include "nn/cpu/cpu.h"

int dt_pool_desc_set_max(dt_pool_desc *d, int n, int h, int w, int c, int k, int s, int p)
{
    if (n < 1 || h < 1 || w < 1 || c < 1 || k < 1 || k > 16 || s < 1 || p < 0 || 2 * p > k)
        return -1;
    int oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    if (h + 2 * p < k || w + 2 * p < k || oh < 1 || ow < 1)
        return -1;
    *d = (dt_pool_desc){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow, .kh = k, .kw = k, .sh = s, .sw = s,
                        .ph = p, .pw = p};
    return 0;
}

int dt_pool_desc_set_adaptive(dt_pool_desc *d, int n, int h, int w, int c, int oh, int ow)
{
    if (n < 1 || h < 1 || w < 1 || c < 1 || oh < 1 || ow < 1)
        return -1;
    *d = (dt_pool_desc){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow};
    return 0;
}

DT_CLONES
void dt_cpu_maxpool_fwd(const dt_pool_desc *d, const float *x, float *y, uint8_t *argmax)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, out_img = (int64_t)d->oh * d->ow * d->c;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->oh; row++) {
        int64_t img = row / d->oh;
        int oy = (int)(row % d->oh);
        const float *xi = x + img * in_img;
        for (int ox = 0; ox < d->ow; ox++) {
            float *yo = y + img * out_img + ((int64_t)oy * d->ow + ox) * d->c;
            uint8_t *ao = argmax + img * out_img + ((int64_t)oy * d->ow + ox) * d->c;
            /* PyTorch's rule: start at -inf with the window's first valid element, take an element
             * when it is greater or NaN (so the first maximum wins and NaN propagates) */
            int iy0 = oy * d->sh - d->ph, ix0 = ox * d->sw - d->pw;
            uint8_t first = (uint8_t)((iy0 < 0 ? -iy0 : 0) * d->kw + (ix0 < 0 ? -ix0 : 0));
            for (int ch = 0; ch < d->c; ch++) {
                yo[ch] = -INFINITY;
                ao[ch] = first;
            }
            for (int ky = 0; ky < d->kh; ky++) {
                int iy = iy0 + ky;
                if (iy < 0 || iy >= d->h)
                    continue;
                for (int kx = 0; kx < d->kw; kx++) {
                    int ix = ix0 + kx;
                    if (ix < 0 || ix >= d->w)
                        continue;
                    const float *xp = xi + ((int64_t)iy * d->w + ix) * d->c;
                    const uint8_t pos = (uint8_t)(ky * d->kw + kx);
#pragma omp simd
                    for (int ch = 0; ch < d->c; ch++) { /* branch-free, so it vectorises */
                        float v = xp[ch], cur = yo[ch];
                        int take = v > cur || v != v;
                        yo[ch] = take ? v : cur;
                        ao[ch] = take ? pos : ao[ch];
                    }
                }
            }
        }
    }
}

DT_CLONES
void dt_cpu_maxpool_bwd(const dt_pool_desc *d, const float *dy, const uint8_t *argmax, float *dx, int accumulate)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, out_img = (int64_t)d->oh * d->ow * d->c;
    if (!accumulate)
        dt_cpu_zero((int64_t)d->n * in_img, dx);
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < d->n; img++) /* windows overlap within an image, never across */
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++) {
                int64_t o = img * out_img + ((int64_t)oy * d->ow + ox) * d->c;
                for (int ch = 0; ch < d->c; ch++) {
                    int pos = argmax[o + ch];
                    int iy = oy * d->sh - d->ph + pos / d->kw, ix = ox * d->sw - d->pw + pos % d->kw;
                    dx[img * in_img + ((int64_t)iy * d->w + ix) * d->c + ch] += dy[o + ch];
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
void dt_cpu_avgpool_fwd(const dt_pool_desc *d, const float *x, float *y)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, out_img = (int64_t)d->oh * d->ow * d->c;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < (int64_t)d->n * d->oh; row++) {
        int64_t img = row / d->oh;
        int oy = (int)(row % d->oh);
        int y0 = win_start(oy, d->h, d->oh), y1 = win_end(oy, d->h, d->oh);
        for (int ox = 0; ox < d->ow; ox++) {
            int x0 = win_start(ox, d->w, d->ow), x1 = win_end(ox, d->w, d->ow);
            float *yo = y + img * out_img + ((int64_t)oy * d->ow + ox) * d->c;
            float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
            for (int ch = 0; ch < d->c; ch++) {
                float s = 0;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        s += x[img * in_img + ((int64_t)iy * d->w + ix) * d->c + ch];
                yo[ch] = s * inv;
            }
        }
    }
}

DT_CLONES
void dt_cpu_avgpool_bwd(const dt_pool_desc *d, const float *dy, float *dx, int accumulate)
{
    const int64_t in_img = (int64_t)d->h * d->w * d->c, out_img = (int64_t)d->oh * d->ow * d->c;
    if (!accumulate)
        dt_cpu_zero((int64_t)d->n * in_img, dx);
#pragma omp parallel for schedule(static)
    for (int64_t img = 0; img < d->n; img++)
        for (int oy = 0; oy < d->oh; oy++) {
            int y0 = win_start(oy, d->h, d->oh), y1 = win_end(oy, d->h, d->oh);
            for (int ox = 0; ox < d->ow; ox++) {
                int x0 = win_start(ox, d->w, d->ow), x1 = win_end(ox, d->w, d->ow);
                const float *g = dy + img * out_img + ((int64_t)oy * d->ow + ox) * d->c;
                float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        float *o = dx + img * in_img + ((int64_t)iy * d->w + ix) * d->c;
                        for (int ch = 0; ch < d->c; ch++)
                            o[ch] += g[ch] * inv;
                    }
            }
        }
}
