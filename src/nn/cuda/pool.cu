/* pool.cu: max and adaptive average pooling on the GPU, the port of nn/cpu/pool.c (shared helpers and
 * rules: kernels.h). x and dx are of type d->xt, y and dy of d->yt (fp32, fp16 or bf16; each kernel is a
 * template on both): values are widened as they are read, summed in fp32 as the CPU sums them, and
 * rounded once when stored. y and dy may be a channel slice of a wider tensor: the kernels get d with
 * d.ys set (pool_launch_desc: c when the caller's is 0), the elements from one output position of y and dy
 * to the next; an output element o (packed index, as the argmax, which stays packed) is at
 * o / c * ys + ch there. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* --- pooling --------------------------------------------------------------------------------------- */

/* where element i of an NHWC tensor of c channels, w columns and h rows is: its image (returned),
 * channel, column and row */
static __device__ int64_t nhwc_pos(int64_t i, int c, int w, int h, int *ch, int *x, int *y)
{
    *ch = (int)(i % c);
    int64_t t = i / c;
    *x = (int)(t % w);
    t /= w;
    *y = (int)(t % h);
    return t / h;
}

/* the descriptor the kernels get: ys as the elements between output positions (0 means c) */
static dt_pool_desc pool_launch_desc(const dt_pool_desc *d)
{
    dt_pool_desc k = *d;
    if (k.ys <= 0)
        k.ys = k.c;
    return k;
}

/* pool.c's rule: start at -inf with argmax at the window's first valid element; take an element when
 * it is greater or NaN (the first maximum wins, NaN propagates, the last NaN wins) */
template <typename TX, typename TY>
static __global__ void maxpool_fwd_kernel(dt_pool_desc d, const TX *x, TY *y, uint8_t *argmax)
{
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c, in_img = (int64_t)d.h * d.w * d.c;
    GRID_LOOP(o, total)
    {
        int ch, ox, oy;
        const int64_t img = nhwc_pos(o, d.c, d.ow, d.oh, &ch, &ox, &oy);
        const TX *xi = x + img * in_img + ch;
        const int iy0 = oy * d.sh - d.ph, ix0 = ox * d.sw - d.pw;
        uint8_t a = (uint8_t)((iy0 < 0 ? -iy0 : 0) * d.kw + (ix0 < 0 ? -ix0 : 0));
        float cur = neg_inf();
        for (int ky = 0; ky < d.kh; ky++) {
            const int iy = iy0 + ky;
            if (iy < 0 || iy >= d.h)
                continue;
            for (int kx = 0; kx < d.kw; kx++) {
                const int ix = ix0 + kx;
                if (ix < 0 || ix >= d.w)
                    continue;
                const float v = ld(xi, ((int64_t)iy * d.w + ix) * d.c);
                if (v > cur || v != v) {
                    cur = v;
                    a = (uint8_t)(ky * d.kw + kx);
                }
            }
        }
        st(y, o / d.c * d.ys + ch, cur);
        argmax[o] = a;
    }
}

/* Gather: each input element sums dy over the outputs whose window covers it and whose argmax is it,
 * in increasing (oy, ox) order: pool.c's scatter order, from the same start (0.0f or dx), so the
 * float sums are the CPU's. */
template <typename TX, typename TY>
static __global__ void maxpool_bwd_kernel(dt_pool_desc d, const TY *dy, const uint8_t *argmax, TX *dx, int accumulate)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        int ch, ix, iy;
        const int64_t img = nhwc_pos(i, d.c, d.w, d.h, &ch, &ix, &iy);
        float acc = accumulate ? ld(dx, i) : 0.0f;
        /* oy*sh - ph <= iy <= oy*sh - ph + kh - 1 */
        const int ty = iy + d.ph - d.kh + 1, tx = ix + d.pw - d.kw + 1;
        const int oy0 = ty <= 0 ? 0 : (ty + d.sh - 1) / d.sh, ox0 = tx <= 0 ? 0 : (tx + d.sw - 1) / d.sw;
        int oy1 = (iy + d.ph) / d.sh, ox1 = (ix + d.pw) / d.sw;
        if (oy1 > d.oh - 1)
            oy1 = d.oh - 1;
        if (ox1 > d.ow - 1)
            ox1 = d.ow - 1;
        for (int oy = oy0; oy <= oy1; oy++) {
            const int ky = iy - (oy * d.sh - d.ph);
            for (int ox = ox0; ox <= ox1; ox++) {
                const int kx = ix - (ox * d.sw - d.pw);
                const int64_t p = (img * d.oh + oy) * d.ow + ox; /* the output position */
                if ((int)argmax[p * d.c + ch] == ky * d.kw + kx)
                    acc = __fadd_rn(acc, ld(dy, p * d.ys + ch));
            }
        }
        st(dx, i, acc);
    }
}

/* PyTorch's adaptive window [floor(o*in/out), ceil((o+1)*in/out)), as pool.c */
static __device__ __forceinline__ int win_start(int o, int in, int out)
{
    return (int)(((int64_t)o * in) / out);
}

static __device__ __forceinline__ int win_end(int o, int in, int out)
{
    return (int)(((int64_t)(o + 1) * in + out - 1) / out);
}

static __device__ __forceinline__ float win_inv(int y0, int y1, int x0, int x1)
{
    return __fdiv_rn(1.0f, (float)((y1 - y0) * (x1 - x0)));
}

template <typename TX, typename TY> static __global__ void avgpool_fwd_kernel(dt_pool_desc d, const TX *x, TY *y)
{
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c, in_img = (int64_t)d.h * d.w * d.c;
    GRID_LOOP(o, total)
    {
        int ch, ox, oy;
        const int64_t img = nhwc_pos(o, d.c, d.ow, d.oh, &ch, &ox, &oy);
        const int y0 = win_start(oy, d.h, d.oh), y1 = win_end(oy, d.h, d.oh);
        const int x0 = win_start(ox, d.w, d.ow), x1 = win_end(ox, d.w, d.ow);
        const TX *xi = x + img * in_img + ch;
        float s = 0.0f;
        for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++)
                s = __fadd_rn(s, ld(xi, ((int64_t)iy * d.w + ix) * d.c));
        st(y, o / d.c * d.ys + ch, __fmul_rn(s, win_inv(y0, y1, x0, x1)));
    }
}

/* the outputs o in [0, out) whose window covers input i: a range, computed, then widened by one and
 * checked against the windows themselves */
static __device__ __forceinline__ void covering(int i, int in, int out, int *lo, int *hi)
{
    int a = (int)(((int64_t)i * out) / in) - 1, b = (int)((((int64_t)i + 1) * out - 1) / in) + 1;
    *lo = a < 0 ? 0 : a;
    *hi = b > out - 1 ? out - 1 : b;
}

template <typename TX, typename TY>
static __global__ void avgpool_bwd_kernel(dt_pool_desc d, const TY *dy, TX *dx, int accumulate)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        int ch, ix, iy;
        const int64_t img = nhwc_pos(i, d.c, d.w, d.h, &ch, &ix, &iy);
        float acc = accumulate ? ld(dx, i) : 0.0f;
        int oy0, oy1, ox0, ox1;
        covering(iy, d.h, d.oh, &oy0, &oy1);
        covering(ix, d.w, d.ow, &ox0, &ox1);
        for (int oy = oy0; oy <= oy1; oy++) {
            const int y0 = win_start(oy, d.h, d.oh), y1 = win_end(oy, d.h, d.oh);
            if (iy < y0 || iy >= y1)
                continue;
            for (int ox = ox0; ox <= ox1; ox++) {
                const int x0 = win_start(ox, d.w, d.ow), x1 = win_end(ox, d.w, d.ow);
                if (ix < x0 || ix >= x1)
                    continue;
                const int64_t o = ((img * d.oh + oy) * d.ow + ox) * d.ys + ch;
                acc = __fadd_rn(acc, __fmul_rn(ld(dy, o), win_inv(y0, y1, x0, x1)));
            }
        }
        st(dx, i, acc);
    }
}

/* The host side: x's and y's types from d, the kernel instantiated for the pair (nine in all). */
#define POOL_TYPED(op, d, ...) DT_CUDA_TYPED(op, (d)->xt, TX, DT_CUDA_TYPED(op, (d)->yt, TY, __VA_ARGS__))

extern "C" void dt_cuda_maxpool_fwd(const dt_pool_desc *d, const void *x, void *y, uint8_t *argmax)
{
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0)
        return;
    const dt_pool_desc kd = pool_launch_desc(d);
    POOL_TYPED("maxpool_fwd", d,
               maxpool_fwd_kernel<TX, TY><<<blocks_for(total), THREADS, 0, stream()>>>(kd, (const TX *)x, (TY *)y,
                                                                                       argmax));
    DT_LAUNCHED("maxpool_fwd_kernel");
}

extern "C" void dt_cuda_maxpool_bwd(const dt_pool_desc *d, const void *dy, const uint8_t *argmax, void *dx,
                                    int accumulate)
{
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0)
        return;
    const dt_pool_desc kd = pool_launch_desc(d);
    POOL_TYPED("maxpool_bwd", d,
               maxpool_bwd_kernel<TX, TY><<<blocks_for(total), THREADS, 0, stream()>>>(kd, (const TY *)dy, argmax,
                                                                                       (TX *)dx, accumulate));
    DT_LAUNCHED("maxpool_bwd_kernel");
}

extern "C" void dt_cuda_avgpool_fwd(const dt_pool_desc *d, const void *x, void *y)
{
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0)
        return;
    const dt_pool_desc kd = pool_launch_desc(d);
    POOL_TYPED("avgpool_fwd", d,
               avgpool_fwd_kernel<TX, TY><<<blocks_for(total), THREADS, 0, stream()>>>(kd, (const TX *)x, (TY *)y));
    DT_LAUNCHED("avgpool_fwd_kernel");
}

extern "C" void dt_cuda_avgpool_bwd(const dt_pool_desc *d, const void *dy, void *dx, int accumulate)
{
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0)
        return;
    const dt_pool_desc kd = pool_launch_desc(d);
    POOL_TYPED("avgpool_bwd", d,
               avgpool_bwd_kernel<TX, TY><<<blocks_for(total), THREADS, 0, stream()>>>(kd, (const TY *)dy, (TX *)dx,
                                                                                       accumulate));
    DT_LAUNCHED("avgpool_bwd_kernel");
}
