/* eltwise.cu: the element-wise ops on the GPU, ports of nn/cpu/eltwise.c: relu, add, copy_grad, fill,
 * scale, dropout (with util/rng.c's hash), flatten, sgd, step_end (scalars.h's update in one thread),
 * round_half (util/half.c's conversions), unscale_check, normalize_u8 and its planning op
 * normalize_scratch (shared helpers and rules: kernels.h). Operands are fp32 only: each op first
 * checks its types (DT_CUDA_F32, cuda.h). The step's numbers (lr, 1/scale, the skip, the overflow
 * flag) are read and written in the dt_scalars block on the device, by the kernels: no op here
 * waits for the stream or copies to or from the host. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* --- element-wise ---------------------------------------------------------------------------------- */

static __global__ void relu_fwd_kernel(int64_t n, const float *x, float *y)
{
    GRID_LOOP(i, n)
    {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static __global__ void relu_bwd_kernel(int64_t n, const float *y, const float *dy, float *dx, int accumulate)
{
    GRID_LOOP(i, n)
    {
        const float g = y[i] > 0.0f ? dy[i] : 0.0f;
        dx[i] = accumulate ? __fadd_rn(dx[i], g) : g;
    }
}

static __global__ void add_kernel(int64_t n, const float *a, const float *b, float *y)
{
    GRID_LOOP(i, n)
    y[i] = __fadd_rn(a[i], b[i]);
}

static __global__ void accumulate_kernel(int64_t n, const float *src, float *dst)
{
    GRID_LOOP(i, n)
    dst[i] = __fadd_rn(dst[i], src[i]);
}

static __global__ void fill_kernel(int64_t n, float value, float *x)
{
    GRID_LOOP(i, n)
    x[i] = value;
}

static __global__ void scale_kernel(int64_t n, float a, float *x)
{
    GRID_LOOP(i, n)
    x[i] = __fmul_rn(x[i], a);
}

extern "C" void dt_cuda_relu_fwd(int64_t n, dt_dtype t, const void *x, void *y)
{
    DT_CUDA_F32("relu_fwd", t);
    if (n <= 0)
        return;
    relu_fwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (const float *)x, (float *)y);
    DT_LAUNCHED("relu_fwd_kernel");
}

extern "C" void dt_cuda_relu_bwd(int64_t n, dt_dtype t, const void *y, const void *dy, void *dx, int accumulate)
{
    DT_CUDA_F32("relu_bwd", t);
    if (n <= 0)
        return;
    relu_bwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (const float *)y, (const float *)dy, (float *)dx,
                                                             accumulate);
    DT_LAUNCHED("relu_bwd_kernel");
}

extern "C" void dt_cuda_add_fwd(int64_t n, const void *a, dt_dtype at, const void *b, dt_dtype bt, void *y,
                                dt_dtype yt)
{
    DT_CUDA_F32("add_fwd", at);
    DT_CUDA_F32("add_fwd", bt);
    DT_CUDA_F32("add_fwd", yt);
    if (n <= 0)
        return;
    add_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (const float *)a, (const float *)b, (float *)y);
    DT_LAUNCHED("add_kernel");
}

extern "C" void dt_cuda_copy_grad(int64_t n, const void *src, dt_dtype st, void *dst, dt_dtype dt, int accumulate)
{
    DT_CUDA_F32("copy_grad", st);
    DT_CUDA_F32("copy_grad", dt);
    if (n <= 0)
        return;
    if (!accumulate) {
        if (src != dst)
            DT_CK(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
        return;
    }
    accumulate_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (const float *)src, (float *)dst);
    DT_LAUNCHED("accumulate_kernel");
}

extern "C" void dt_cuda_fill(int64_t n, dt_dtype t, float value, void *x)
{
    DT_CUDA_F32("fill", t);
    if (n <= 0)
        return;
    fill_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, value, (float *)x);
    DT_LAUNCHED("fill_kernel");
}

extern "C" void dt_cuda_scale(int64_t n, dt_dtype t, float a, void *x)
{
    DT_CUDA_F32("scale", t);
    if (n <= 0)
        return;
    scale_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, a, (float *)x);
    DT_LAUNCHED("scale_kernel");
}

/* --- dropout --------------------------------------------------------------------------------------- */

/* util/rng.c's dt_hash64 (splitmix64 of a mix of a and b), bit for bit */
static __device__ __forceinline__ uint64_t dev_hash64(uint64_t a, uint64_t b)
{
    uint64_t z = ((a * 0x9e3779b97f4a7c15ULL) ^ (b + 0x632be59bd9b4e019ULL)) + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static __global__ void dropout_fwd_kernel(int64_t n, uint32_t cut, float scale, uint64_t seed, const float *x, float *y,
                                          uint8_t *mask)
{
    GRID_LOOP(i, n)
    {
        const uint8_t keep = (uint32_t)(dev_hash64(seed, (uint64_t)i) >> 40) >= cut;
        mask[i] = keep;
        y[i] = keep ? __fmul_rn(x[i], scale) : 0.0f;
    }
}

static __global__ void dropout_bwd_kernel(int64_t n, float scale, const uint8_t *mask, const float *dy, float *dx,
                                          int accumulate)
{
    GRID_LOOP(i, n)
    {
        const float v = mask[i] ? __fmul_rn(dy[i], scale) : 0.0f;
        dx[i] = accumulate ? __fadd_rn(dx[i], v) : v;
    }
}

extern "C" void dt_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, const void *x, dt_dtype xt, void *y,
                                    dt_dtype yt, uint8_t *mask)
{
    DT_CUDA_F32("dropout_fwd", xt);
    DT_CUDA_F32("dropout_fwd", yt);
    if (n <= 0)
        return;
    /* eltwise.c's constants, computed on the host as there */
    const uint32_t cut = (uint32_t)((double)p * (1u << 24));
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, cut, scale, seed, (const float *)x, (float *)y,
                                                                mask);
    DT_LAUNCHED("dropout_fwd_kernel");
}

extern "C" void dt_cuda_dropout_bwd(int64_t n, float p, const uint8_t *mask, const void *dy, dt_dtype yt, void *dx,
                                    dt_dtype xt, int accumulate)
{
    DT_CUDA_F32("dropout_bwd", yt);
    DT_CUDA_F32("dropout_bwd", xt);
    if (n <= 0)
        return;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    dropout_bwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, scale, mask, (const float *)dy, (float *)dx,
                                                                accumulate);
    DT_LAUNCHED("dropout_bwd_kernel");
}

/* --- flatten --------------------------------------------------------------------------------------- */

/* y[img, ch*h*w + p] = x[img, p, ch], p = y*w + x: one thread per y element */
static __global__ void flatten_fwd_kernel(int64_t total, int64_t hw, int c, const float *x, float *y)
{
    const int64_t per = hw * c;
    GRID_LOOP(o, total)
    {
        const int64_t img = o / per, r = o % per;
        const int64_t ch = r / hw, p = r % hw;
        y[o] = x[img * per + p * c + ch];
    }
}

/* one thread per dx element */
static __global__ void flatten_bwd_kernel(int64_t total, int64_t hw, int c, const float *dy, float *dx,
                                          int accumulate)
{
    const int64_t per = hw * c;
    GRID_LOOP(i, total)
    {
        const int64_t img = i / per, r = i % per;
        const int64_t p = r / c, ch = r % c;
        const float v = dy[img * per + ch * hw + p];
        dx[i] = accumulate ? __fadd_rn(dx[i], v) : v;
    }
}

extern "C" void dt_cuda_flatten_fwd(int n, int h, int w, int c, dt_dtype t, const void *x, void *y)
{
    DT_CUDA_F32("flatten_fwd", t);
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    flatten_fwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, (const float *)x, (float *)y);
    DT_LAUNCHED("flatten_fwd_kernel");
}

extern "C" void dt_cuda_flatten_bwd(int n, int h, int w, int c, dt_dtype t, const void *dy, void *dx, int accumulate)
{
    DT_CUDA_F32("flatten_bwd", t);
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    flatten_bwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, (const float *)dy, (float *)dx,
                                                                    accumulate);
    DT_LAUNCHED("flatten_bwd_kernel");
}

/* --- SGD and the step's end ------------------------------------------------------------------------ */

/* eltwise.c's dt_cpu_sgd, unfused: the gradient times 1/scale first (a float product, as there). lr,
 * 1/scale, first and the skip come from the scalars block (written by the ops and step_end before
 * this kernel runs on the same stream); a skipped step changes nothing. */
static __global__ void sgd_kernel(int64_t n, float *p, const float *g, float *buf, float momentum,
                                  float one_minus_dampening, float wd, int nesterov, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float grad_scale = s->inv_scale, lr = s->lr;
    const int first = s->sgd_steps == 0;
    GRID_LOOP(i, n)
    {
        const float pv = p[i];
        float d = __fmul_rn(g[i], grad_scale);
        if (wd != 0.0f)
            d = __fadd_rn(d, __fmul_rn(wd, pv));
        if (momentum != 0.0f) {
            const float b = first ? d : __fadd_rn(__fmul_rn(momentum, buf[i]), __fmul_rn(one_minus_dampening, d));
            buf[i] = b;
            d = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
        }
        p[i] = __fsub_rn(pv, __fmul_rn(lr, d));
    }
}

extern "C" void dt_cuda_sgd(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, float momentum,
                            float dampening, float wd, int nesterov, const dt_scalars *s)
{
    DT_CUDA_F32("sgd", pt);
    DT_CUDA_F32("sgd", gt);
    if (n <= 0)
        return;
    sgd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (float *)p, (const float *)g, buf, momentum,
                                                        1.0f - dampening, wd, nesterov, s);
    DT_LAUNCHED("sgd_kernel");
}

/* scalars.h's dt_scalars_step_end, the very function the CPU runs (no a*b+c in it for nvcc to
 * contract: the same bits) */
static __global__ void step_end_kernel(dt_scalars *s)
{
    dt_scalars_step_end(s);
}

extern "C" void dt_cuda_step_end(dt_scalars *s)
{
    step_end_kernel<<<1, 1, 0, stream()>>>(s);
    DT_LAUNCHED("step_end_kernel");
}

/* --- fp16 / bf16 rounding -------------------------------------------------------------------------- */
/* util/half.c's scalar conversions, bit for bit (CUDA's __float2half_rn / __float2bfloat16_rn agree on
 * numbers but make NaNs canonical, where half.c keeps the payload's top bits for bf16 and gives
 * sign|0x7e00 for fp16). Caveat, on the CPU side: half.c's bulk fp16 path uses F16C (vcvtps2ph) in
 * groups of 8, which keeps the top 10 payload bits of a NaN instead of 0x7e00, so for fp16 NaNs the
 * CPU's own payload depends on the element's position; compare NaNs as NaNs. */

static __device__ __forceinline__ uint16_t dev_f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ float dev_bf16_to_f32(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

static __device__ __forceinline__ uint16_t dev_f32_to_f16(float f)
{
    const uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        /* half.c: nearbyintf(|f| * 2^24) (exact product, ties to even), in integers so that no FTZ
         * setting can change it: |f| = m * 2^(e-150), times 2^24 = m / 2^(126-e) */
        const uint32_t e = a >> 23;
        if (e < 102) /* below 2^-25: rounds to 0 (2^-25 itself is a tie, to even: 0, handled below too) */
            return (uint16_t)sign;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, sh = 126 - e; /* 14..24 */
        uint32_t q = m >> sh;
        const uint32_t rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return (uint16_t)(sign | q); /* q = 1024 is the smallest normal half, as in half.c */
    }
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static __device__ __forceinline__ float dev_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0) /* zero or subnormal: +-m * 2^-24, exact */
        return __uint_as_float(sign | __float_as_uint(__fmul_rn(__uint2float_rn(m), 5.9604644775390625e-8f)));
    if (e == 31)
        return __uint_as_float(sign | 0x7f800000u | (m << 13));
    return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
}

static __global__ void round_half_kernel(int64_t n, float *x, int bf16)
{
    GRID_LOOP(i, n)
    {
        const float v = x[i];
        x[i] = bf16 ? dev_bf16_to_f32(dev_f32_to_bf16(v)) : dev_f16_to_f32(dev_f32_to_f16(v));
    }
}

extern "C" void dt_cuda_round_half(int64_t n, float *x, int bf16)
{
    if (n <= 0)
        return;
    round_half_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, x, bf16);
    DT_LAUNCHED("round_half_kernel");
}

/* --- overflow check ------------------------------------------------------------------------------- */

/* g is only read: the multiply by 1/scale is the check's (the update applies it: sgd). A bad value
 * sets the block's overflow flag; a clean one leaves it (it is cleared by step_end, and set by xent
 * too). Every writer writes the same value, so the race between them is harmless. */
static __global__ void unscale_check_kernel(int64_t n, const float *g, dt_scalars *s)
{
    const float inv_scale = s->inv_scale;
    int bad = 0;
    GRID_LOOP(i, n)
    {
        const float v = __fmul_rn(g[i], inv_scale);
        bad |= !(__fsub_rn(v, v) == 0.0f); /* inf - inf and NaN - NaN are NaN */
    }
    if (bad)
        s->agree[DT_AGREE_OVERFLOW] = 1;
}

extern "C" void dt_cuda_unscale_check(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    DT_CUDA_F32("unscale_check", t);
    if (n <= 0)
        return;
    unscale_check_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, (const float *)g, s);
    DT_LAUNCHED("unscale_check_kernel");
}

/* --- input normalisation --------------------------------------------------------------------------- */

#define NORM_MAXC 16

/* mean and std by value: the kernel's arguments are copied when it is launched, so the host arrays
 * are read when the op is issued */
typedef struct norm_params {
    float mean[NORM_MAXC], std[NORM_MAXC];
} norm_params;

static __global__ void normalize_u8_kernel(int64_t n, int c, const uint8_t *u, norm_params np, float *x)
{
    GRID_LOOP(i, n)
    {
        const int ch = (int)(i % c);
        x[i] = __fdiv_rn(__fsub_rn(__fmul_rn((float)u[i], 1.0f / 255.0f), np.mean[ch]), np.std[ch]);
    }
}

/* the batch is already in device memory (uploaded by the caller): no scratch */
extern "C" size_t dt_cuda_normalize_scratch(int64_t n)
{
    (void)n;
    return 0;
}

extern "C" void dt_cuda_normalize_u8(int64_t n, int c, const uint8_t *u, const float *mean_host,
                                     const float *std_host, dt_dtype t, void *x)
{
    DT_CUDA_F32("normalize_u8", t);
    if (n <= 0)
        return;
    if (c < 1 || c > NORM_MAXC)
        dt_cuda_fatal("normalize_u8", "channel count outside 1..16");
    norm_params np;
    for (int j = 0; j < NORM_MAXC; j++) {
        np.mean[j] = j < c ? mean_host[j] : 0.0f;
        np.std[j] = j < c ? std_host[j] : 1.0f;
    }
    normalize_u8_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, c, u, np, (float *)x);
    DT_LAUNCHED("normalize_u8_kernel");
}
