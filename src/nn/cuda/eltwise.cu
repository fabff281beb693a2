/* eltwise.cu: the element-wise ops on the GPU, ports of nn/cpu/eltwise.c: relu, add, copy_grad, fill,
 * scale, dropout (with util/rng.c's hash) and stochastic depth (sdepth: dropout's draw, per image),
 * flatten, sgd, adam, rmsprop, step_end (scalars.h's update in one thread), round_half (util/half.c's
 * conversions), unscale_check, grad_sumsq, normalize_u8 and its planning op
 * normalize_scratch (shared helpers and rules: kernels.h). Each operand is fp32, fp16 or bf16, as its
 * dt_dtype says: every kernel is a template on the storage types, instantiated through DT_CUDA_TYPED,
 * and computes the fp32 op, each result rounded once when stored (SGD's momentum stays fp32). The
 * element-wise kernels move 8 elements at a time with 16-byte accesses when their operands are
 * aligned (load8/store8), one at a time otherwise and for the tail; both paths apply the same
 * per-element helper, so they give the same bits. The step's numbers (lr, 1/scale, the skip, the
 * overflow flag) are read and written in the dt_scalars block on the device, by the kernels: no op
 * here waits for the stream or copies to or from the host. */
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

/* --- SGD and the step's end ------------------------------------------------------------------------ */

/* the update's constants: the op's arguments, and the step's (lr, 1/scale, first) read from the
 * scalars block by the kernel */
typedef struct sgd_consts {
    float momentum, one_minus_dampening, wd, grad_scale, lr, clip;
    int nesterov, first, clipping;
} sgd_consts;

/* eltwise.c's dt_cpu_sgd on one element, unfused: the new p from p and g, the gradient times 1/scale
 * first (a float product, as there); *buf, the element's momentum (fp32), is read and written only
 * when momentum != 0 */
static __device__ __forceinline__ float sgd_one(float pv, float gv, float *buf, const sgd_consts &k)
{
    float d = __fmul_rn(gv, k.grad_scale);
    if (k.clipping) /* clip_grad_norm_'s multiply after unscale_'s, each rounded */
        d = __fmul_rn(d, k.clip);
    if (k.wd != 0.0f)
        d = __fadd_rn(d, __fmul_rn(k.wd, pv));
    if (k.momentum != 0.0f) {
        const float b = k.first ? d : __fadd_rn(__fmul_rn(k.momentum, *buf), __fmul_rn(k.one_minus_dampening, d));
        *buf = b;
        d = k.nesterov ? __fadd_rn(d, __fmul_rn(k.momentum, b)) : b;
    }
    return __fsub_rn(pv, __fmul_rn(k.lr, d));
}

/* lr, 1/scale, first and the skip come from the scalars block (written by the ops and step_end before
 * this kernel runs on the same stream); a skipped step changes nothing. p of type TP, g of TG. */
template <typename TP, typename TG>
static __global__ void sgd_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *buf, sgd_consts args,
                                  const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    sgd_consts k = args;
    k.grad_scale = s->inv_scale;
    k.lr = s->lr;
    k.first = s->sgd_steps == 0;
    k.clipping = s->clip_norm > 0;
    k.clip = dt_scalars_clip_coef(s);
    const int mom = k.momentum != 0.0f;
    GRID_LOOP(c, n8)
    {
        float pv[8], gv[8], b[8];
        load8(p + 8 * c, pv);
        load8(g + 8 * c, gv);
        if (mom)
            load8(buf + 8 * c, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = sgd_one(pv[j], gv[j], &b[j], k);
        store8(p + 8 * c, pv);
        if (mom)
            store8(buf + 8 * c, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, sgd_one(ld(p, i), ld(g, i), mom ? buf + i : NULL, k));
}

extern "C" void dt_cuda_sgd(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, float momentum,
                            float dampening, float wd, int nesterov, const dt_scalars *s)
{
    if (n <= 0)
        return;
    sgd_consts k = {};
    k.momentum = momentum;
    k.one_minus_dampening = 1.0f - dampening;
    k.wd = wd;
    k.nesterov = nesterov;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, momentum != 0.0f ? buf : NULL));
    DT_CUDA_TYPED("sgd", pt, TP,
                  DT_CUDA_TYPED("sgd", gt, TG,
                                sgd_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, (TP *)p,
                                                                                           (const TG *)g, buf, k, s)));
    DT_LAUNCHED("sgd_kernel");
}

/* --- Adam, AdamW and RMSprop: eltwise.c's dt_cpu_adam and dt_cpu_rmsprop on one element, each
 * operation rounded as there (torch's single-tensor formulas) ------------------------------------- */

static __device__ __forceinline__ float unscaled_one(float gv, const dt_scalars *s, float clip)
{
    const float d = __fmul_rn(gv, s->inv_scale);
    return s->clip_norm > 0 ? __fmul_rn(d, clip) : d;
}

static __device__ __forceinline__ float adam_one(float w, float gv, float *m1, float *m2, const dt_adam_consts &c,
                                                 int l2, int dec, const dt_scalars *s, float clip)
{
    float d = unscaled_one(gv, s, clip);
    if (l2)
        d = __fadd_rn(d, __fmul_rn(c.wd, w));
    if (dec)
        w = __fmul_rn(w, c.decay);
    const float a = __fadd_rn(__fmul_rn(*m1, c.beta1), __fmul_rn(c.one_minus_beta1, d));
    const float b = __fadd_rn(__fmul_rn(*m2, c.beta2), __fmul_rn(__fmul_rn(c.one_minus_beta2, d), d));
    *m1 = a;
    *m2 = b;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(b), c.bc2_sqrt), c.eps);
    return __fadd_rn(w, __fdiv_rn(__fmul_rn(c.neg_step, a), denom));
}

template <typename TP, typename TG>
static __global__ void adam_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *m1, float *m2, double beta1,
                                   double beta2, double eps, double wd, int decoupled, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float clip = dt_scalars_clip_coef(s);
    const int l2 = !decoupled && wd != 0, dec = decoupled && wd != 0;
    GRID_LOOP(k, n8)
    {
        float pv[8], gv[8], a[8], b[8];
        load8(p + 8 * k, pv);
        load8(g + 8 * k, gv);
        load8(m1 + 8 * k, a);
        load8(m2 + 8 * k, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = adam_one(pv[j], gv[j], &a[j], &b[j], c, l2, dec, s, clip);
        store8(p + 8 * k, pv);
        store8(m1 + 8 * k, a);
        store8(m2 + 8 * k, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, adam_one(ld(p, i), ld(g, i), m1 + i, m2 + i, c, l2, dec, s, clip));
}

extern "C" void dt_cuda_adam(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1, float *m2,
                             double beta1, double beta2, double eps, double wd, int decoupled, const dt_scalars *s)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, m1, m2));
    DT_CUDA_TYPED("adam", pt, TP,
                  DT_CUDA_TYPED("adam", gt, TG,
                                adam_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, (TP *)p, (const TG *)g, m1, m2, beta1, beta2, eps, wd, decoupled, s)));
    DT_LAUNCHED("adam_kernel");
}

typedef struct rmsprop_consts {
    float alpha, one_minus_alpha, eps, wd, momentum;
} rmsprop_consts;

static __device__ __forceinline__ float rmsprop_one(float w, float gv, float *sq, float *buf, const rmsprop_consts &c,
                                                    float neg_lr, const dt_scalars *s, float clip)
{
    float d = unscaled_one(gv, s, clip);
    if (c.wd != 0.0f)
        d = __fadd_rn(d, __fmul_rn(c.wd, w));
    const float v = __fadd_rn(__fmul_rn(*sq, c.alpha), __fmul_rn(__fmul_rn(c.one_minus_alpha, d), d));
    *sq = v;
    const float avg = __fadd_rn(__fsqrt_rn(v), c.eps);
    if (c.momentum > 0) {
        const float b = __fadd_rn(__fmul_rn(*buf, c.momentum), __fdiv_rn(d, avg));
        *buf = b;
        return __fadd_rn(w, __fmul_rn(neg_lr, b));
    }
    return __fadd_rn(w, __fdiv_rn(__fmul_rn(neg_lr, d), avg));
}

template <typename TP, typename TG>
static __global__ void rmsprop_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *sq, float *buf,
                                      rmsprop_consts c, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float clip = dt_scalars_clip_coef(s), neg_lr = -s->lr;
    const int mom = c.momentum > 0;
    GRID_LOOP(k, n8)
    {
        float pv[8], gv[8], v[8], b[8];
        load8(p + 8 * k, pv);
        load8(g + 8 * k, gv);
        load8(sq + 8 * k, v);
        if (mom)
            load8(buf + 8 * k, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = rmsprop_one(pv[j], gv[j], &v[j], &b[j], c, neg_lr, s, clip);
        store8(p + 8 * k, pv);
        store8(sq + 8 * k, v);
        if (mom)
            store8(buf + 8 * k, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, rmsprop_one(ld(p, i), ld(g, i), sq + i, mom ? buf + i : NULL, c, neg_lr, s, clip));
}

extern "C" void dt_cuda_rmsprop(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *sq, float *buf,
                                double alpha, double eps, double wd, double momentum, const dt_scalars *s)
{
    if (n <= 0)
        return;
    rmsprop_consts c;
    c.alpha = (float)alpha;
    c.one_minus_alpha = (float)(1.0 - alpha);
    c.eps = (float)eps;
    c.wd = (float)wd;
    c.momentum = (float)momentum;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, sq, momentum > 0 ? buf : NULL));
    DT_CUDA_TYPED("rmsprop", pt, TP,
                  DT_CUDA_TYPED("rmsprop", gt, TG,
                                rmsprop_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, (TP *)p, (const TG *)g, sq, buf, c, s)));
    DT_LAUNCHED("rmsprop_kernel");
}

/* --- the model's exponential moving average (eltwise.c's dt_cpu_ema_update) --------------------- */

template <typename TX>
static __global__ void ema_kernel(int64_t n, float *avg, const TX *x, float d, float one_minus_d, int copy)
{
    GRID_LOOP(i, n)
    {
        const float xv = ld(x, i);
        avg[i] = copy ? xv : __fadd_rn(__fmul_rn(d, avg[i]), __fmul_rn(one_minus_d, xv));
    }
}

extern "C" void dt_cuda_ema_update(int64_t n, float *avg, const void *x, dt_dtype xt, double decay)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("ema_update", xt, TX,
                  ema_kernel<TX><<<grid8(n, 0), THREADS, 0, stream()>>>(n, avg, (const TX *)x, (float)decay,
                                                                    (float)(1.0 - decay), decay == 0));
    DT_LAUNCHED("ema_kernel");
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

/* g*inv_scale is inf or NaN: inf - inf and NaN - NaN are NaN */
static __device__ __forceinline__ int overflows(float g, float inv_scale)
{
    const float v = __fmul_rn(g, inv_scale);
    return !(__fsub_rn(v, v) == 0.0f);
}

/* g is only read: the multiply by 1/scale is the check's (the update applies it: sgd). A bad value
 * sets the block's overflow flag; a clean one leaves it (it is cleared by step_end, and set by xent
 * too). Every writer writes the same value, so the race between them is harmless. */
template <typename T> static __global__ void unscale_check_kernel(int64_t n, int64_t n8, const T *g, dt_scalars *s)
{
    const float inv_scale = s->inv_scale;
    int bad = 0;
    GRID_LOOP(c, n8)
    {
        float v[8];
        load8(g + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            bad |= overflows(v[j], inv_scale);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    bad |= overflows(ld(g, i), inv_scale);
    if (bad)
        s->agree[DT_AGREE_OVERFLOW] = 1;
}

extern "C" void dt_cuda_unscale_check(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(g));
    DT_CUDA_TYPED("unscale_check", t, T,
                  unscale_check_kernel<T><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, (const T *)g, s));
    DT_LAUNCHED("unscale_check_kernel");
}

/* --- the gradients' sum of squares (clipping) -------------------------------------------------------- */

/* eltwise.c's rule: blocks whose size depends on n alone, each summed in order, then the blocks' sums
 * in order, here by one block of threads per part (a tree in shared memory: the same tree on every
 * run) and one thread adding the parts; the same bits whatever the GPU, not the CPU's bits (another
 * order of the additions) */
#define SUMSQ_PARTS 4096
static __device__ double sumsq_part[SUMSQ_PARTS];

template <typename T>
static __global__ void grad_sumsq_kernel(int64_t n, int64_t block, const T *g, const dt_scalars *s)
{
    __shared__ double tree[THREADS];
    const float inv_scale = s->inv_scale;
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double acc = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float u = __fmul_rn(ld(g, i), inv_scale);
        acc = __dadd_rn(acc, __dmul_rn((double)u, (double)u));
    }
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            tree[threadIdx.x] = __dadd_rn(tree[threadIdx.x], tree[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        sumsq_part[blockIdx.x] = tree[0];
}

static __global__ void grad_sumsq_total_kernel(int64_t parts, dt_scalars *s)
{
    double sum = s->grad_sumsq;
    for (int64_t b = 0; b < parts; b++)
        sum = __dadd_rn(sum, sumsq_part[b]);
    s->grad_sumsq = sum;
}

extern "C" void dt_cuda_grad_sumsq(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    if (n <= 0)
        return;
    int64_t block = (int64_t)1 << 16;
    if ((n + block - 1) / block > SUMSQ_PARTS)
        block = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    const int64_t parts = (n + block - 1) / block;
    DT_CUDA_TYPED("grad_sumsq", t, T,
                  grad_sumsq_kernel<T><<<(unsigned)parts, THREADS, 0, stream()>>>(n, block, (const T *)g, s));
    DT_LAUNCHED("grad_sumsq_kernel");
    grad_sumsq_total_kernel<<<1, 1, 0, stream()>>>(parts, s);
    DT_LAUNCHED("grad_sumsq_total_kernel");
}

/* --- per-tensor norms, LARS and LAMB (eltwise.c's, each operation rounded as there) ------------ */

static __device__ double sumsq_part2[SUMSQ_PARTS];

/* the block size of the norms' sums: eltwise.c's rule, fixed by n */
static int64_t sumsq_block(int64_t n)
{
    int64_t block = (int64_t)1 << 16;
    if ((n + block - 1) / block > SUMSQ_PARTS)
        block = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    return block;
}

/* a fixed tree over the block's THREADS values of a and b (b may be unused) */
static __device__ void tree2(double *ta, double *tb, double a, double b)
{
    ta[threadIdx.x] = a;
    tb[threadIdx.x] = b;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) {
            ta[threadIdx.x] = __dadd_rn(ta[threadIdx.x], ta[threadIdx.x + w]);
            tb[threadIdx.x] = __dadd_rn(tb[threadIdx.x], tb[threadIdx.x + w]);
        }
        __syncthreads();
    }
}

template <typename T>
static __global__ void tensor_sumsq_kernel(int64_t n, int64_t block, const T *x, int unscale, const dt_scalars *s)
{
    __shared__ double ta[THREADS], tb[THREADS];
    const float clip = dt_scalars_clip_coef(s);
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double acc = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float u = unscale ? unscaled_one(ld(x, i), s, clip) : ld(x, i);
        acc = __dadd_rn(acc, __dmul_rn((double)u, (double)u));
    }
    tree2(ta, tb, acc, 0.0);
    if (threadIdx.x == 0)
        sumsq_part[blockIdx.x] = ta[0];
}

/* the parts in order into out[0] (and out[1] from sumsq_part2 when two); zeros when skip is set and
 * the step is skipped (LAMB's phase 1 wrote no parts then) */
static __global__ void sumsq_out_kernel(int64_t parts, int two, int skip, const dt_scalars *s, double *out)
{
    if (skip && dt_scalars_skip(s)) {
        out[0] = 0;
        if (two)
            out[1] = 0;
        return;
    }
    double a = 0, b = 0;
    for (int64_t k = 0; k < parts; k++) {
        a = __dadd_rn(a, sumsq_part[k]);
        if (two)
            b = __dadd_rn(b, sumsq_part2[k]);
    }
    out[0] = a;
    if (two)
        out[1] = b;
}

extern "C" void dt_cuda_tensor_sumsq(int64_t n, const void *x, dt_dtype t, int unscale, const dt_scalars *s, double *out)
{
    const int64_t block = sumsq_block(n > 0 ? n : 1), parts = n > 0 ? (n + block - 1) / block : 0;
    if (parts > 0) {
        DT_CUDA_TYPED("tensor_sumsq", t, T,
                      tensor_sumsq_kernel<T><<<(unsigned)parts, THREADS, 0, stream()>>>(n, block, (const T *)x,
                                                                                          unscale, s));
        DT_LAUNCHED("tensor_sumsq_kernel");
    }
    sumsq_out_kernel<<<1, 1, 0, stream()>>>(parts, 0, 0, s, out);
    DT_LAUNCHED("sumsq_out_kernel");
}

template <typename TP, typename TG>
static __global__ void lars_kernel(int64_t n, TP *p, const TG *g, float *buf, float mom, float wd, double dwd,
                                   double eta, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const double wn = sqrt(norms[0]), gn = sqrt(norms[1]);
    const float trust = eta > 0 && wn > 0 && gn > 0 ? (float)(eta * wn / (gn + dwd * wn)) : 1.0f;
    const float local_lr = __fmul_rn(s->lr, trust), clip = dt_scalars_clip_coef(s);
    GRID_LOOP(i, n)
    {
        const float w = ld(p, i);
        const float d = __fadd_rn(unscaled_one(ld(g, i), s, clip), __fmul_rn(wd, w));
        const float b = __fadd_rn(__fmul_rn(mom, buf[i]), __fmul_rn(local_lr, d));
        buf[i] = b;
        st(p, i, __fsub_rn(w, b));
    }
}

extern "C" void dt_cuda_lars(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, double momentum,
                             double wd, double eta, const double *norms, const dt_scalars *s)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("lars", pt, TP,
                  DT_CUDA_TYPED("lars", gt, TG,
                                lars_kernel<TP, TG><<<grid8(n, 0), THREADS, 0, stream()>>>(
                                    n, (TP *)p, (const TG *)g, buf, (float)momentum, (float)wd, wd, eta, norms, s)));
    DT_LAUNCHED("lars_kernel");
}

/* LAMB's r for one element (eltwise.c's lamb_r) */
static __device__ __forceinline__ float lamb_r(float a, float b, float w, const dt_adam_consts &c, float inv_bc1)
{
    return __fadd_rn(__fdiv_rn(__fmul_rn(a, inv_bc1), __fadd_rn(__fdiv_rn(__fsqrt_rn(b), c.bc2_sqrt), c.eps)),
                     __fmul_rn(c.wd, w));
}

template <typename TP, typename TG>
static __global__ void lamb_moments_kernel(int64_t n, int64_t block, const TP *p, const TG *g, float *m1, float *m2,
                                           double beta1, double beta2, double eps, double wd, const dt_scalars *s)
{
    __shared__ double ta[THREADS], tb[THREADS];
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const float clip = dt_scalars_clip_coef(s);
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double aw = 0, ar = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float w = ld(p, i), d = unscaled_one(ld(g, i), s, clip);
        const float a = __fadd_rn(__fmul_rn(m1[i], c.beta1), __fmul_rn(c.one_minus_beta1, d));
        const float b = __fadd_rn(__fmul_rn(m2[i], c.beta2), __fmul_rn(__fmul_rn(c.one_minus_beta2, d), d));
        m1[i] = a;
        m2[i] = b;
        const float r = lamb_r(a, b, w, c, inv_bc1);
        aw = __dadd_rn(aw, __dmul_rn((double)w, (double)w));
        ar = __dadd_rn(ar, __dmul_rn((double)r, (double)r));
    }
    tree2(ta, tb, aw, ar);
    if (threadIdx.x == 0) {
        sumsq_part[blockIdx.x] = ta[0];
        sumsq_part2[blockIdx.x] = tb[0];
    }
}

extern "C" void dt_cuda_lamb_moments(int64_t n, const void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1,
                                     float *m2, double beta1, double beta2, double eps, double wd, const dt_scalars *s,
                                     double *norms)
{
    const int64_t block = sumsq_block(n > 0 ? n : 1), parts = n > 0 ? (n + block - 1) / block : 0;
    if (parts > 0) {
        DT_CUDA_TYPED("lamb_moments", pt, TP,
                      DT_CUDA_TYPED("lamb_moments", gt, TG,
                                    lamb_moments_kernel<TP, TG><<<(unsigned)parts, THREADS, 0, stream()>>>(
                                        n, block, (const TP *)p, (const TG *)g, m1, m2, beta1, beta2, eps, wd, s)));
        DT_LAUNCHED("lamb_moments_kernel");
    }
    sumsq_out_kernel<<<1, 1, 0, stream()>>>(parts, 1, 1, s, norms);
    DT_LAUNCHED("sumsq_out_kernel");
}

template <typename TP>
static __global__ void lamb_apply_kernel(int64_t n, TP *p, const float *m1, const float *m2, double beta1,
                                         double beta2, double eps, double wd, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const double wn = sqrt(norms[0]), rn = sqrt(norms[1]);
    const float step = __fmul_rn(s->lr, wn > 0 && rn > 0 ? (float)(wn / rn) : 1.0f);
    GRID_LOOP(i, n)
    {
        const float w = ld(p, i);
        st(p, i, __fsub_rn(w, __fmul_rn(step, lamb_r(m1[i], m2[i], w, c, inv_bc1))));
    }
}

extern "C" void dt_cuda_lamb_apply(int64_t n, void *p, dt_dtype pt, const float *m1, const float *m2, double beta1,
                                   double beta2, double eps, double wd, const double *norms, const dt_scalars *s)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("lamb_apply", pt, TP,
                  lamb_apply_kernel<TP><<<grid8(n, 0), THREADS, 0, stream()>>>(n, (TP *)p, m1, m2, beta1, beta2, eps,
                                                                               wd, norms, s));
    DT_LAUNCHED("lamb_apply_kernel");
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
