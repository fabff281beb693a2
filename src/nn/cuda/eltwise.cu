/* eltwise.cu: the element-wise ops on the GPU, ports of nn/cpu/eltwise.c: relu, add, copy_grad, fill,
 * scale, dropout (with util/rng.c's hash) and stochastic depth (sdepth: dropout's draw, per image),
 * flatten, round_half (util/half.c's conversions), normalize_u8 and its planning op normalize_scratch
 * (shared helpers and rules: kernels.h; the optimizer step's ops are in optim.cu). Each operand is
 * fp32, fp16 or bf16, as its dt_dtype says: every kernel is a template on the storage types,
 * instantiated through DT_CUDA_TYPED, and computes the fp32 op, each result rounded once when stored.
 * The element-wise kernels move 8 elements at a time with 16-byte accesses when their operands are
 * aligned (load8/store8), one at a time otherwise and for the tail; both paths apply the same
 * per-element helper, so they give the same bits. Dropout's and sdepth's step is read from the
 * dt_scalars block on the device, by the kernels: no op here waits for the stream or copies to or
 * from the host. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* 8 bytes (dropout's mask, normalize_u8's input) in one 8-byte access: at 8c from a 16-byte aligned
 * base */
typedef union bytes8 {
    uint64_t u;
    uint8_t b[8];
} bytes8;

/* --- element-wise ---------------------------------------------------------------------------------- */

static __device__ __forceinline__ float relu(float v)
{
    return v > 0.0f ? v : 0.0f;
}

/* dy where the ReLU's output y is positive, else 0 */
static __device__ __forceinline__ float relu_grad(float y, float dy)
{
    return y > 0.0f ? dy : 0.0f;
}

/* the functors of map_kernel and grad_kernel (kernels.h) */
struct relu_fn {
    __device__ float operator()(float v) const
    {
        return relu(v);
    }
};

struct relu_grad_fn {
    __device__ float operator()(float y, float dy) const
    {
        return relu_grad(y, dy);
    }
};

template <typename TA, typename TB, typename TY>
static __global__ void add_kernel(int64_t n, int64_t n8, const TA *a, const TB *b, TY *y)
{
    GRID_LOOP(c, n8)
    {
        float u[8], v[8];
        load8(a + 8 * c, u);
        load8(b + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            u[j] = __fadd_rn(u[j], v[j]);
        store8(y + 8 * c, u);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(y, i, __fadd_rn(ld(a, i), ld(b, i)));
}

/* copy_grad when it adds or converts: dst = src (rounded to TD) or dst + src */
template <typename TS, typename TD>
static __global__ void copy_kernel(int64_t n, int64_t n8, const TS *src, TD *dst, int accumulate)
{
    GRID_LOOP(c, n8)
    {
        float v[8], o[8];
        load8(src + 8 * c, v);
        load8_old(dst + 8 * c, o, accumulate);
#pragma unroll
        for (int j = 0; j < 8; j++)
            o[j] = acc_f(o[j], v[j], accumulate);
        store8(dst + 8 * c, o);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st_acc(dst, i, ld(src, i), accumulate);
}

template <typename T> static __global__ void fill_kernel(int64_t n, int64_t n8, float value, T *x)
{
    GRID_LOOP(c, n8)
    {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = value;
        store8(x + 8 * c, v);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(x, i, value);
}

template <typename T> static __global__ void scale_kernel(int64_t n, int64_t n8, float a, T *x)
{
    GRID_LOOP(c, n8)
    {
        float v[8];
        load8(x + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = __fmul_rn(v[j], a);
        store8(x + 8 * c, v);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(x, i, __fmul_rn(ld(x, i), a));
}

extern "C" void dt_cuda_relu_fwd(int64_t n, dt_dtype t, const void *x, void *y)
{
    launch_map("relu_fwd", n, t, relu_fn(), x, y);
}

extern "C" void dt_cuda_relu_bwd(int64_t n, dt_dtype t, const void *y, const void *dy, void *dx, int accumulate)
{
    launch_grad("relu_bwd", n, t, relu_grad_fn(), y, dy, dx, accumulate);
}

/* a, b and y each of its own type: 27 instantiations */
extern "C" void dt_cuda_add_fwd(int64_t n, const void *a, dt_dtype at, const void *b, dt_dtype bt, void *y,
                                dt_dtype yt)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(a, b, y));
    DT_CUDA_TYPED("add_fwd", at, TA,
                  DT_CUDA_TYPED("add_fwd", bt, TB,
                                DT_CUDA_TYPED("add_fwd", yt, TY,
                                              add_kernel<TA, TB, TY><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                                  n, n8, (const TA *)a, (const TB *)b, (TY *)y))));
    DT_LAUNCHED("add_kernel");
}

/* A plain copy (same type, no accumulate) is a cudaMemcpyAsync of the bytes; anything else (a sum, a
 * conversion: fp32 to half rounds, half to fp32 widens, fp16 to bf16 widens then rounds once) is the
 * copy kernel, as eltwise.c's widening view and rounding put. */
extern "C" void dt_cuda_copy_grad(int64_t n, const void *src, dt_dtype st, void *dst, dt_dtype dt, int accumulate)
{
    if (n <= 0)
        return;
    if (!accumulate && st == dt) {
        DT_CUDA_STORED("copy_grad", st);
        if (src != dst)
            DT_CK(cudaMemcpyAsync(dst, src, (size_t)n * dt_cuda_elem_bytes(st), cudaMemcpyDeviceToDevice, stream()));
        return;
    }
    const int64_t n8 = chunks8(n, vec8_ok(src, dst));
    DT_CUDA_TYPED("copy_grad", st, TS,
                  DT_CUDA_TYPED("copy_grad", dt, TD,
                                copy_kernel<TS, TD><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, (const TS *)src, (TD *)dst, accumulate)));
    DT_LAUNCHED("copy_kernel");
}

extern "C" void dt_cuda_fill(int64_t n, dt_dtype t, float value, void *x)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(x));
    DT_CUDA_TYPED("fill", t, T, fill_kernel<T><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, value, (T *)x));
    DT_LAUNCHED("fill_kernel");
}

extern "C" void dt_cuda_scale(int64_t n, dt_dtype t, float a, void *x)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(x));
    DT_CUDA_TYPED("scale", t, T, scale_kernel<T><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, a, (T *)x));
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

/* dropout's draw (eltwise.c's drop_seed, drop_cut, drop_keep, drop_scale), shared by stochastic depth:
 * seed' from the step the scalars hold when the kernel runs (a graph's launch: that step's, so a
 * captured graph draws anew each step); element (or image) i kept when the top 24 bits of
 * hash(seed', i) are at or above cut; kept values scaled by 1/(1-p). cut and the scale are computed
 * on the host, as eltwise.c computes them. */
static __device__ __forceinline__ uint64_t dropout_seed(uint64_t seed0, int64_t salt, const dt_scalars *s)
{
    return s ? dev_hash64(seed0, (uint64_t)(s->model_step * 1024 + salt)) : seed0;
}

static __device__ __forceinline__ uint8_t dropout_keep(uint64_t seed, int64_t i, uint32_t cut)
{
    return (uint32_t)(dev_hash64(seed, (uint64_t)i) >> 40) >= cut;
}

static uint32_t dropout_cut(float p)
{
    return (uint32_t)((double)p * (1u << 24));
}

static float dropout_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* a kept value (x forward, dy backward) times 1/(1-p), a dropped one 0 */
static __device__ __forceinline__ float dropout_value(uint8_t keep, float v, float scale)
{
    return keep ? __fmul_rn(v, scale) : 0.0f;
}

template <typename TX, typename TY>
static __global__ void dropout_fwd_kernel(int64_t n, int64_t n8, uint32_t cut, float scale, uint64_t seed0,
                                          int64_t salt, const dt_scalars *s, const TX *x, TY *y, uint8_t *mask)
{
    const uint64_t seed = dropout_seed(seed0, salt, s);
    GRID_LOOP(c, n8)
    {
        float v[8];
        bytes8 m;
        load8(x + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            m.b[j] = dropout_keep(seed, 8 * c + j, cut);
            v[j] = dropout_value(m.b[j], v[j], scale);
        }
        store8(y + 8 * c, v);
        *reinterpret_cast<uint64_t *>(mask + 8 * c) = m.u;
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    {
        const uint8_t keep = dropout_keep(seed, i, cut);
        mask[i] = keep;
        st(y, i, dropout_value(keep, ld(x, i), scale));
    }
}

/* dst = src * scale where the mask byte of element i / per is set, else 0 (accumulate: added to dst):
 * dropout's backward (per 1) and stochastic depth's forward and backward (per: an image's elements),
 * eltwise.c's masked_scale. The 8-wide path (n8 > 0) needs src and dst aligned and either per 1 with
 * the mask aligned too (eight mask bytes in one access) or per a multiple of 8 (the chunk lies in one
 * image: one byte). */
template <typename TS, typename TD>
static __global__ void masked_scale_kernel(int64_t n, int64_t n8, int64_t per, float scale, const uint8_t *mask,
                                           const TS *src, TD *dst, int accumulate)
{
    GRID_LOOP(c, n8)
    {
        float g[8], o[8];
        bytes8 m;
        if (per == 1)
            m.u = *reinterpret_cast<const uint64_t *>(mask + 8 * c);
        else
            m.u = 0x0101010101010101ull * mask[8 * c / per]; /* the image's byte in all eight */
        load8(src + 8 * c, g);
        load8_old(dst + 8 * c, o, accumulate);
#pragma unroll
        for (int j = 0; j < 8; j++)
            o[j] = acc_f(o[j], dropout_value(m.b[j], g[j], scale), accumulate);
        store8(dst + 8 * c, o);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st_acc(dst, i, dropout_value(mask[per == 1 ? i : i / per], ld(src, i), scale), accumulate);
}

/* masked_scale_kernel on n elements, src of type st and dst of type dt (op: the caller's name) */
static void masked_scale(const char *op, int64_t n, int64_t per, float scale, const uint8_t *mask, const void *src,
                         dt_dtype st, void *dst, dt_dtype dt, int accumulate)
{
    const int vec = per == 1 ? vec8_ok(mask, src, dst) : per % 8 == 0 && vec8_ok(src, dst);
    const int64_t n8 = chunks8(n, vec);
    DT_CUDA_TYPED(op, st, TS,
                  DT_CUDA_TYPED(op, dt, TD,
                                masked_scale_kernel<TS, TD><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, per, scale, mask, (const TS *)src, (TD *)dst, accumulate)));
    DT_LAUNCHED("masked_scale_kernel");
}

extern "C" void dt_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, int64_t salt, const dt_scalars *s,
                                    const void *x, dt_dtype xt, void *y, dt_dtype yt, uint8_t *mask)
{
    if (n <= 0)
        return;
    const uint32_t cut = dropout_cut(p);
    const float scale = dropout_scale(p);
    const int64_t n8 = chunks8(n, vec8_ok(x, y, mask));
    DT_CUDA_TYPED("dropout_fwd", xt, TX,
                  DT_CUDA_TYPED("dropout_fwd", yt, TY,
                                dropout_fwd_kernel<TX, TY><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, cut, scale, seed, salt, s, (const TX *)x, (TY *)y, mask)));
    DT_LAUNCHED("dropout_fwd_kernel");
}

extern "C" void dt_cuda_dropout_bwd(int64_t n, float p, const uint8_t *mask, const void *dy, dt_dtype yt, void *dx,
                                    dt_dtype xt, int accumulate)
{
    if (n <= 0)
        return;
    masked_scale("dropout_bwd", n, 1, dropout_scale(p), mask, dy, yt, dx, xt, accumulate);
}

/* --- stochastic depth ------------------------------------------------------------------------------ */

/* mask[b] for the n images: dropout's keep for element b, under the same seed' */
static __global__ void sdepth_mask_kernel(int n, uint32_t cut, uint64_t seed0, int64_t salt, const dt_scalars *s,
                                          uint8_t *mask)
{
    const uint64_t seed = dropout_seed(seed0, salt, s);
    GRID_LOOP(b, n)
    mask[b] = dropout_keep(seed, b, cut);
}

/* as eltwise.c: the images' mask, then each image's values scaled or zeroed by its byte (the second
 * kernel follows the first on the stream) */
extern "C" void dt_cuda_sdepth_fwd(int n, int64_t per, float p, uint64_t seed, int64_t salt, const dt_scalars *s,
                                   const void *x, dt_dtype xt, void *y, dt_dtype yt, uint8_t *mask)
{
    if (n <= 0)
        return;
    sdepth_mask_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, dropout_cut(p), seed, salt, s, mask);
    DT_LAUNCHED("sdepth_mask_kernel");
    if (per > 0)
        masked_scale("sdepth_fwd", (int64_t)n * per, per, dropout_scale(p), mask, x, xt, y, yt, 0);
}

extern "C" void dt_cuda_sdepth_bwd(int n, int64_t per, float p, const uint8_t *mask, const void *dy, dt_dtype yt,
                                   void *dx, dt_dtype xt, int accumulate)
{
    if (n <= 0 || per <= 0)
        return;
    masked_scale("sdepth_bwd", (int64_t)n * per, per, dropout_scale(p), mask, dy, yt, dx, xt, accumulate);
}

/* --- flatten --------------------------------------------------------------------------------------- */

/* y[img, ch*h*w + p] = x[img, p, ch], p = y*w + x: one thread per y element, a copy of the stored
 * element (no conversion: the bits move, as eltwise.c's memcpy) */
template <typename T> static __global__ void flatten_fwd_kernel(int64_t total, int64_t hw, int c, const T *x, T *y)
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
template <typename T>
static __global__ void flatten_bwd_kernel(int64_t total, int64_t hw, int c, const T *dy, T *dx, int accumulate)
{
    const int64_t per = hw * c;
    GRID_LOOP(i, total)
    {
        const int64_t img = i / per, r = i % per;
        const int64_t p = r / c, ch = r % c;
        st_acc(dx, i, ld(dy, img * per + ch * hw + p), accumulate);
    }
}

extern "C" void dt_cuda_flatten_fwd(int n, int h, int w, int c, dt_dtype t, const void *x, void *y)
{
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    DT_CUDA_TYPED("flatten_fwd", t, T,
                  flatten_fwd_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, (const T *)x,
                                                                                     (T *)y));
    DT_LAUNCHED("flatten_fwd_kernel");
}

extern "C" void dt_cuda_flatten_bwd(int n, int h, int w, int c, dt_dtype t, const void *dy, void *dx, int accumulate)
{
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    DT_CUDA_TYPED("flatten_bwd", t, T,
                  flatten_bwd_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, (const T *)dy,
                                                                                     (T *)dx, accumulate));
    DT_LAUNCHED("flatten_bwd_kernel");
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

/* --- input normalisation --------------------------------------------------------------------------- */

#define NORM_MAXC 16

/* mean and std by value: the kernel's arguments are copied when it is launched, so the host arrays
 * are read when the op is issued */
typedef struct norm_params {
    float mean[NORM_MAXC], std[NORM_MAXC];
} norm_params;

/* eltwise.c's (u / 255 - mean) / std, in fp32 */
static __device__ __forceinline__ float normalize_one(uint8_t u, float mean, float std)
{
    return __fdiv_rn(__fsub_rn(__fmul_rn((float)u, 1.0f / 255.0f), mean), std);
}

template <typename T>
static __global__ void normalize_u8_kernel(int64_t n, int64_t n8, int c, const uint8_t *u, norm_params np, T *x)
{
    GRID_LOOP(q, n8)
    {
        bytes8 b;
        float v[8];
        b.u = *reinterpret_cast<const uint64_t *>(u + 8 * q);
        int ch = (int)(8 * q % c); /* the channel of element 8q + j, stepped */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            v[j] = normalize_one(b.b[j], np.mean[ch], np.std[ch]);
            ch = ch + 1 == c ? 0 : ch + 1;
        }
        store8(x + 8 * q, v);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    {
        const int ch = (int)(i % c);
        st(x, i, normalize_one(u[i], np.mean[ch], np.std[ch]));
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
    if (n <= 0)
        return;
    if (c < 1 || c > NORM_MAXC)
        dt_cuda_fatal("normalize_u8", "channel count outside 1..16");
    norm_params np;
    for (int j = 0; j < NORM_MAXC; j++) {
        np.mean[j] = j < c ? mean_host[j] : 0.0f;
        np.std[j] = j < c ? std_host[j] : 1.0f;
    }
    const int64_t n8 = chunks8(n, vec8_ok(u, x));
    DT_CUDA_TYPED("normalize_u8", t, T,
                  normalize_u8_kernel<T><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, c, u, np, (T *)x));
    DT_LAUNCHED("normalize_u8_kernel");
}
