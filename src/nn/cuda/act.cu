/* act.cu: the activations (relu6, hardsigmoid, hardswish, sigmoid, silu, gelu) and squeeze-and-
 * excitation's channel-wise scale (chanmul) on the GPU, the port of nn/cpu/act.c (contracts in
 * nn/backend.h; shared helpers and rules: kernels.h). Every operand is fp32, fp16 or bf16 as its
 * dt_dtype says; each kernel is a template on the storage types, computes in fp32 and rounds once
 * when it stores (accumulate: the fp32 sum of the widened old value and the result, rounded once).
 *
 * act_fwd and act_bwd are kernels.h's map_kernel and grad_kernel (8 elements at a time when aligned,
 * one at a time otherwise and for the tail, the same per-element helper in both). The
 * formulas are act.c's, each operation written with the round-to-nearest intrinsics in act.c's order
 * (no FMA contraction), so relu6, hardsigmoid and hardswish, both ways, give the CPU's bits (NaN
 * passes through relu6 as there: its comparisons are false for it). sigmoid, silu and gelu call
 * CUDA's expf and erff (2 ulp at most), not glibc's (within 1 ulp): their results differ from the
 * CPU's by a few ulps of those functions' values, then carried by act.c's arithmetic.
 *
 * chanmul_fwd and chanmul_bwd's dx: y (or dx) [b, p, ch] = x (or dy) [b, p, ch] * s[b, ch], one
 * product per element (the CPU's bits), 8 at a time when c is a multiple of 8 and the operands are
 * aligned. chanmul_bwd's ds: one block per (image, chunk of DS_CH channels), its threads DS_CH
 * channels by DS_LANES lanes of positions (a warp reads DS_CH consecutive channels of one
 * position); each lane sums the products dy*x (fp32 products, as act.c forms them) of its positions
 * p = lane, lane + DS_LANES, ... in order, in double, then the lanes' sums are added by a fixed tree:
 * an order fixed by the shape alone, no atomics; the sum rounded to float once, as act.c's double
 * sums are (so the CPU's bits, but for the double additions' order: a few double ulps, which show
 * only when a sum lies that close to a float rounding boundary). */
#include "config.h"

#include <math.h>

#include "nn/cuda/kernels.h"

/* --- activations ----------------------------------------------------------------------------------- */

/* act.c's relu6: NaN passes through (both comparisons are false for it) */
static __device__ __forceinline__ float relu6(float x)
{
    return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
}

static __device__ __forceinline__ float sigmoid(float x)
{
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

/* act.c's act_f */
static __device__ __forceinline__ float act_f(int act, float x)
{
    switch (act) {
    case DT_ACT_RELU6: return relu6(x);
    case DT_ACT_HARDSIGMOID: return __fdiv_rn(relu6(__fadd_rn(x, 3.0f)), 6.0f);
    case DT_ACT_HARDSWISH: return __fdiv_rn(__fmul_rn(x, relu6(__fadd_rn(x, 3.0f))), 6.0f);
    case DT_ACT_SIGMOID: return sigmoid(x);
    case DT_ACT_SILU: return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
    default: /* DT_ACT_GELU: 0.5f * x * (1 + erf(x / sqrt 2)), left to right */
        return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, (float)M_SQRT1_2))));
    }
}

/* act.c's act_df: dy * f'(x) */
static __device__ __forceinline__ float act_df(int act, float x, float dy)
{
    switch (act) {
    case DT_ACT_RELU6: return x > 0.0f && x < 6.0f ? dy : 0.0f;
    case DT_ACT_HARDSIGMOID: return x > -3.0f && x < 3.0f ? __fmul_rn(dy, 1.0f / 6.0f) : 0.0f;
    case DT_ACT_HARDSWISH:
        return x < -3.0f ? 0.0f : x <= 3.0f ? __fmul_rn(dy, __fadd_rn(__fdiv_rn(x, 3.0f), 0.5f)) : dy;
    case DT_ACT_SIGMOID: {
        const float s = sigmoid(x);
        return __fmul_rn(__fmul_rn(dy, __fsub_rn(1.0f, s)), s);
    }
    case DT_ACT_SILU: {
        const float s = sigmoid(x);
        return __fmul_rn(__fmul_rn(dy, s), __fadd_rn(1.0f, __fmul_rn(x, __fsub_rn(1.0f, s))));
    }
    default: { /* DT_ACT_GELU: the normal's cdf and pdf at x */
        const float cdf = __fmul_rn(0.5f, __fadd_rn(1.0f, erff(__fmul_rn(x, (float)M_SQRT1_2))));
        const float pdf = __fmul_rn(expf(__fmul_rn(__fmul_rn(-0.5f, x), x)),
                                    (float)(0.5 * M_2_SQRTPI * M_SQRT1_2)); /* 1/sqrt(2 pi) */
        return __fmul_rn(dy, __fadd_rn(cdf, __fmul_rn(x, pdf)));
    }
    }
}

/* the functors of map_kernel and grad_kernel (kernels.h), the activation chosen when launched */
struct act_fn {
    int act;
    __device__ float operator()(float x) const
    {
        return act_f(act, x);
    }
};

struct act_grad_fn {
    int act;
    __device__ float operator()(float x, float dy) const
    {
        return act_df(act, x, dy);
    }
};

/* an act outside enum dt_act is a programming error (act.c would compute gelu) */
static void check_act(const char *op, int act)
{
    if (act < 0 || act >= DT_ACT_COUNT)
        dt_cuda_fatal(op, "no such activation (enum dt_act)");
}

/* y may be x (in place), as the contract allows: map_kernel reads each element before it writes it */
extern "C" void dt_cuda_act_fwd(int64_t n, int act, dt_dtype t, const void *x, void *y)
{
    check_act("act_fwd", act);
    launch_map("act_fwd", n, t, act_fn{act}, x, y);
}

extern "C" void dt_cuda_act_bwd(int64_t n, int act, dt_dtype t, const void *x, const void *dy, void *dx,
                                int accumulate)
{
    check_act("act_bwd", act);
    launch_grad("act_bwd", n, t, act_grad_fn{act}, x, dy, dx, accumulate);
}

/* --- squeeze-and-excitation's scale ---------------------------------------------------------------- */

/* o[b, p, ch] = a[b, p, ch] * s[b, ch] over the n elements (images of hw*c; accumulate: added to o):
 * chanmul_fwd (a = x, o = y) and chanmul_bwd's dx (a = dy, o = dx). The 8-wide path (n8 > 0) needs c
 * a multiple of 8: a chunk then lies in one row, its 8 scales consecutive and aligned. */
template <typename TA, typename TS, typename TO>
static __global__ void chanmul_kernel(int64_t n, int64_t n8, int64_t hw, int c, const TA *a, const TS *s, TO *o,
                                      int accumulate)
{
    const int64_t per = hw * c;
    GRID_LOOP(q, n8)
    {
        const int64_t e = 8 * q;
        float u[8], v[8], w[8];
        load8(a + e, u);
        load8(s + e / per * c + e % c, v);
        load8_old(o + e, w, accumulate);
#pragma unroll
        for (int j = 0; j < 8; j++)
            w[j] = acc_f(w[j], __fmul_rn(u[j], v[j]), accumulate);
        store8(o + e, w);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st_acc(o, i, __fmul_rn(ld(a, i), ld(s, i / per * c + i % c)), accumulate);
}

/* chanmul_kernel on n images of hw positions and c channels, a of type at, s st, o ot */
static void chanmul(const char *op, int n, int64_t hw, int c, const void *a, dt_dtype at, const void *s, dt_dtype st,
                    void *o, dt_dtype ot, int accumulate)
{
    const int64_t total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    const int64_t n8 = chunks8(total, c % 8 == 0 && vec8_ok(a, s, o));
    DT_CUDA_TYPED(op, at, TA,
                  DT_CUDA_TYPED(op, st, TS,
                                DT_CUDA_TYPED(op, ot, TO,
                                              chanmul_kernel<TA, TS, TO><<<grid8(total, n8), THREADS, 0, stream()>>>(
                                                  total, n8, hw, c, (const TA *)a, (const TS *)s, (TO *)o,
                                                  accumulate))));
    DT_LAUNCHED("chanmul_kernel");
}

extern "C" void dt_cuda_chanmul_fwd(int n, int64_t hw, int c, const void *x, dt_dtype xt, const void *s, dt_dtype st,
                                    void *y, dt_dtype yt)
{
    chanmul("chanmul_fwd", n, hw, c, x, xt, s, st, y, yt, 0);
}

/* ds's blocks: DS_CH channels by DS_LANES lanes of positions, THREADS threads */
enum { DS_CH = 32, DS_LANES = THREADS / DS_CH };

/* ds[b, ch] = the sum over p of dy[b, p, ch] * x[b, p, ch] (accumulate: added to ds); block k takes
 * the (image, chunk) pairs k, k + gridDim.x, ... (the same for all its threads: the barriers are
 * reached by all) */
template <typename TX, typename TY, typename TS>
static __global__ void chanmul_ds_kernel(int n, int64_t hw, int c, const TX *x, const TY *dy, TS *ds, int accumulate)
{
    __shared__ double part[DS_LANES][DS_CH];
    const int chunks = (c + DS_CH - 1) / DS_CH, j = (int)threadIdx.x % DS_CH, lane = (int)threadIdx.x / DS_CH;
    for (int64_t bc = blockIdx.x; bc < (int64_t)n * chunks; bc += gridDim.x) {
        const int64_t b = bc / chunks;
        const int ch = (int)(bc % chunks) * DS_CH + j;
        double sum = 0;
        if (ch < c)
            for (int64_t p = lane; p < hw; p += DS_LANES) {
                const int64_t i = (b * hw + p) * c + ch;
                sum = __dadd_rn(sum, (double)__fmul_rn(ld(dy, i), ld(x, i)));
            }
        part[lane][j] = sum;
        __syncthreads();
        for (int w = DS_LANES / 2; w > 0; w /= 2) {
            if (lane < w)
                part[lane][j] = __dadd_rn(part[lane][j], part[lane + w][j]);
            __syncthreads();
        }
        if (lane == 0 && ch < c)
            st_acc(ds, b * c + ch, __double2float_rn(part[0][j]), accumulate);
        __syncthreads(); /* part is written again for the next pair */
    }
}

extern "C" void dt_cuda_chanmul_bwd(int n, int64_t hw, int c, const void *x, dt_dtype xt, const void *s, dt_dtype st,
                                    const void *dy, dt_dtype yt, void *dx, void *ds, int accumulate_dx,
                                    int accumulate_ds)
{
    if (dx)
        chanmul("chanmul_bwd", n, hw, c, dy, yt, s, st, dx, xt, accumulate_dx);
    if (!ds || n <= 0 || c <= 0 || hw < 0) /* hw 0: ds is written, the empty sums 0 */
        return;
    const int64_t pairs = (int64_t)n * ((c + DS_CH - 1) / DS_CH);
    const unsigned blocks = (unsigned)(pairs < MAX_BLOCKS ? pairs : MAX_BLOCKS);
    DT_CUDA_TYPED("chanmul_bwd", xt, TX,
                  DT_CUDA_TYPED("chanmul_bwd", yt, TY,
                                DT_CUDA_TYPED("chanmul_bwd", st, TS,
                                              chanmul_ds_kernel<TX, TY, TS><<<blocks, THREADS, 0, stream()>>>(
                                                  n, hw, c, (const TX *)x, (const TY *)dy, (TS *)ds,
                                                  accumulate_ds))));
    DT_LAUNCHED("chanmul_ds_kernel");
}
