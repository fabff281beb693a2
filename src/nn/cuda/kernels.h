/* kernels.h: what the CUDA backend's own kernels share: launch helpers, device helpers and the rules
 * they all follow (for the *.cu files only). The kernels are one file per family, named as the CPU
 * file each ports (nn/cpu/): act.cu, attn.cu, bn.cu, eltwise.cu, optim.cu, pool.cu, linear.cu (xent),
 * ln.cu; contracts in nn/cuda/cuda.h and nn/backend.h. Ports of util/half.c and util/rng.c are in
 * eltwise.cu.
 *
 * Types (op table v2, nn/backend.h). A tensor operand is stored as float, __half (fp16) or
 * __nv_bfloat16 (bf16), as its dt_dtype says; every kernel of ours is a template on the storage type
 * of each typed operand (T, or TX/TY/... where an op's operands may differ), instantiated by the op's
 * host function through DT_CUDA_TYPED below, which aborts on any other dt_dtype (dt_cuda_bad_type).
 * Inside a kernel, to_f32 widens what it loads (exactly) and from_f32<T> rounds what it stores (to
 * nearest even, once: the hardware conversions, cvt.rn). All arithmetic is fp32 (double where the
 * CPU's is), so an op on half storage gives the fp32 op's result rounded once, as the CPU backend's
 * real half storage does; the bits agree for every number (NaNs: the hardware gives its canonical
 * NaN where util/half.c keeps payload bits; compare NaNs as NaNs). BN's statistics, SGD's momentum
 * and master weights, and the loss are fp32 whatever the activations are.
 *
 * Vector access: load8/store8 move 8 consecutive elements with 16-byte instructions (one for 8
 * halves, two for 8 floats) when vec8_ok says the pointers allow it (16-byte aligned; the model's
 * arena aligns every tensor to 64 bytes), so a memory-bound kernel reads and writes full sectors;
 * the elements past the last multiple of 8 (and misaligned operands) take the scalar path.
 *
 * Rounding. The CPU backend is built with -ffp-contract=off; nvcc fuses a*b+c into an FMA by default,
 * which rounds once instead of twice. Every float and double expression whose result is compared with
 * the CPU's is therefore written with the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __dmul_rn,
 * ...), in the CPU's evaluation order, with the CPU's types (C's promotions included: a float times a
 * float is a float product even when the result is later used in double).
 *
 * What matches the CPU how:
 * - bit for bit: relu_fwd/bwd, add_fwd, copy_grad, fill, scale, sgd, step_end (scalars.h's own function),
 *   unscale_check (the flag; g is read only), xent's hits (float comparisons),
 *   normalize_u8, dropout and sdepth (masks and values: dt_hash64 ported bit for bit), flatten,
 *   act_fwd/act_bwd's relu6, hardsigmoid and hardswish, chanmul_fwd and chanmul_bwd's dx, max pool forward
 *   (values and argmax, same NaN and tie rules) and backward, adaptive average pool forward and
 *   backward (the same float sums in the same order: the backward passes gather, each input summing
 *   the outputs that cover it in the CPU's scatter order, starting from 0.0f or dx as the CPU does),
 *   round_half (util/half.c's scalar algorithm ported: see dev_f32_to_f16 for the one caveat, NaN
 *   payloads), bn_fwd_infer (per-channel scale/shift in double as the CPU, then the same float affine),
 *   chan_copy (layout.cu), tokens_fwd and tokens_bwd's dx (attn.cu).
 * - to double rounding, so almost always bit for bit, otherwise 1 ulp of float: bn_fwd_train and
 *   bn_bwd. The per-channel sums are formed as the CPU forms them: float sums over the same blocks of
 *   RB = 16 rows (bit-identical), then those block sums added in double. Only the order of the double
 *   additions differs (the CPU's depends on its OpenMP thread count too); the double results then
 *   differ by a few double ulps, which survive the final cast to float only when a value lies that
 *   close to a float rounding boundary. Everything after the sums is the CPU's double arithmetic.
 *   Expect rel. error <= ~1e-6 on saved/running stats/dgamma/dbeta and the same (times the
 *   magnitude of the terms) on y and dx; the fused ReLU mask is exact given the saved scale/shift.
 * - to double rounding, so almost always bit for bit, otherwise 1 ulp of float: chanmul_bwd's ds (act.c's
 *   fp32 products summed in double; only the order of the double additions differs).
 * - to a few ulps: act's sigmoid, silu and gelu (CUDA's expf and erff, 2 ulp at most, against act.c's exp_f32,
 *   1.3 ulp at most, and glibc's erff;
 *   the arithmetic around them is act.c's, operation for operation).
 * - the same way, to double rounding: ln_fwd and ln_bwd (ln.cu: the CPU's double sums in another order
 *   fixed by the shape, then its float arithmetic in its order).
 * - the CPU's bits: tokens_bwd's dcls and dpos (attn.c's double sums over the images, in the same order
 *   of b, rounded to float once), though the contract allows any fp32-or-wider sum (ops_check: 1e-4).
 * - to float rounding of sums in another order: attn_fwd and attn_bwd (attn.cu). Their GEMMs are
 *   cuBLAS's fp32 ones (no TF32), summing dh or s terms in cuBLAS's order where the CPU has OpenBLAS's;
 *   the softmax's row sums (and backward's sum of P*dP) are attn.c's double sums in another order, and
 *   its exponentials CUDA's expf against glibc's (a few ulps). Expect about 1e-6 relative to a tensor's
 *   RMS on p, y and dqkv (ops_check's 1e-4 class, as the GEMMs of linear layers).
 * - to about 1e-15 relative before the cast: xent. exp and log in double are CUDA's (<= 1-2 ulp of
 *   double), not glibc's, and the per-row sums over the k classes run as a fixed tree instead of a
 *   left-to-right loop. The loss (double) agrees to ~1e-14 relative, dlogits (float) almost always
 *   bit for bit, else 1 ulp. The mean is the CPU's sum of the row terms in row order (one thread).
 *
 * Determinism: no float atomics anywhere; reductions run in an order fixed by the shapes only, so
 * every op gives the same bits run to run (and on any device).
 *
 * Execution: everything is queued on dt_cuda_stream(); only SyncBN (d->sync) waits for the stream
 * (its device buffer of sums goes to the communicator, which reduces it in place). No op copies to
 * or from the host: the step's numbers (lr, the loss scale and 1/scale, the skip, the loss, the
 * hits, the overflow flag) are read and written by the kernels in the dt_scalars block
 * (nn/scalars.h), on the device, and normalize_u8's batch is already there. Temporaries come from
 * dt_cuda_scratch, requested once per op (a second request may move the buffer), in the amount the
 * family's planning op (bn_scratch, xent_scratch, normalize_scratch) returns for that shape, so a
 * planned model's ops find the scratch reserved at planning large enough and never allocate. */
#ifndef DT_NN_CUDA_KERNELS_H
#define DT_NN_CUDA_KERNELS_H

#include "nn/cuda/cuda.h"
#include "util/check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

/* --- helpers --------------------------------------------------------------------------------------- */

#define DT_CK(call) FATAL_CUDA(call)

/* after every kernel launch (a capture's own error fails the capture instead: cuda.h) */
#define DT_LAUNCHED(name)                                                                                      \
    do {                                                                                                       \
        cudaError_t dt_err_ = cudaGetLastError();                                                              \
        if (dt_err_ != cudaSuccess && !dt_cuda_capture_lost(name, (int)dt_err_))                               \
            dt_cuda_fatal(name, cudaGetErrorString(dt_err_));                                                  \
    } while (0)

#define THREADS 256

/* r0[0] and r1[0] = the sums of a and b over the block's THREADS threads (t = threadIdx.x), in a
 * fixed tree order (reproducible); every thread must call it */
static __device__ void block_sum2(double *r0, double *r1, double a, double b, int t)
{
    r0[t] = a;
    r1[t] = b;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            r0[t] = __dadd_rn(r0[t], r0[t + w]);
            r1[t] = __dadd_rn(r1[t], r1[t + w]);
        }
        __syncthreads();
    }
}

#define MAX_BLOCKS 16384 /* grid-stride loops cover the rest */

static inline cudaStream_t stream(void)
{
    return (cudaStream_t)dt_cuda_stream();
}

static inline unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS)
        b = MAX_BLOCKS;
    if (b < 1)
        b = 1;
    return (unsigned)b;
}

/* v rounded up to a multiple of 256 bytes: where the next piece of a kernel's scratch may start */
static inline size_t align256(size_t v)
{
    return (v + 255) & ~(size_t)255;
}

static inline void *scratch(size_t bytes)
{
    void *p = dt_cuda_scratch(bytes);
    if (!p)
        dt_cuda_fatal("dt_cuda_scratch", "out of device memory");
    return p;
}

/* for (i = first; i < n; i += stride): the grid-stride loop */
#define GRID_LOOP(i, n)                                                                                        \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float neg_inf(void)
{
    return __int_as_float((int)0xff800000u);
}

/* --- storage types ------------------------------------------------------------------------------------ */

/* widening, exact */
static __device__ __forceinline__ float to_f32(float v)
{
    return v;
}
static __device__ __forceinline__ float to_f32(__half v)
{
    return __half2float(v);
}
static __device__ __forceinline__ float to_f32(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

/* rounding to the storage type, to nearest even */
template <typename T> static __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v)
{
    return v;
}
template <> __device__ __forceinline__ __half from_f32<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* p[i] as fp32, and v stored into p[i] */
template <typename T> static __device__ __forceinline__ float ld(const T *p, int64_t i)
{
    return to_f32(p[i]);
}
template <typename T> static __device__ __forceinline__ void st(T *p, int64_t i, float v)
{
    p[i] = from_f32<T>(v);
}

/* dst[i] = v, or with accumulate the rounded fp32 sum of the old value and v (backend.h's rule) */
template <typename T> static __device__ __forceinline__ void st_acc(T *p, int64_t i, float v, int accumulate)
{
    p[i] = from_f32<T>(accumulate ? __fadd_rn(to_f32(p[i]), v) : v);
}

/* Eight consecutive elements p[0..7] (p 16-byte aligned) to and from fp32, with 16-byte accesses. */
static __device__ __forceinline__ void load8(const float *p, float f[8])
{
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
static __device__ __forceinline__ void store8(float *p, const float f[8])
{
    reinterpret_cast<float4 *>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}
template <typename H> static __device__ __forceinline__ void load8_16(const H *p, float f[8])
{
    union {
        uint4 u;
        H h[8];
    } v;
    v.u = *reinterpret_cast<const uint4 *>(p);
#pragma unroll
    for (int j = 0; j < 8; j++)
        f[j] = to_f32(v.h[j]);
}
template <typename H> static __device__ __forceinline__ void store8_16(H *p, const float f[8])
{
    union {
        uint4 u;
        H h[8];
    } v;
#pragma unroll
    for (int j = 0; j < 8; j++)
        v.h[j] = from_f32<H>(f[j]);
    *reinterpret_cast<uint4 *>(p) = v.u;
}
static __device__ __forceinline__ void load8(const __half *p, float f[8])
{
    load8_16(p, f);
}
static __device__ __forceinline__ void load8(const __nv_bfloat16 *p, float f[8])
{
    load8_16(p, f);
}
static __device__ __forceinline__ void store8(__half *p, const float f[8])
{
    store8_16(p, f);
}
static __device__ __forceinline__ void store8(__nv_bfloat16 *p, const float f[8])
{
    store8_16(p, f);
}

/* 1 when every pointer given (NULLs ignored) is 16-byte aligned: the kernels may use load8/store8 at
 * multiples of 8 elements. Host side, at launch. */
static inline int vec8_ok(const void *a, const void *b = NULL, const void *c = NULL, const void *d = NULL)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15) == 0;
}

/* --- the two paths of an element-wise kernel (eltwise.cu, optim.cu, act.cu) -------------------------- */

/* An element-wise kernel on n elements gets n8: the chunks of 8 elements (8c .. 8c+7) it walks with
 * load8/store8, n / 8 when vec8_ok found every operand 16-byte aligned, else 0; then it walks
 * elements 8*n8 .. n-1 one at a time (the tail, or all of them). The grid covers the larger part. */
static inline int64_t chunks8(int64_t n, int aligned)
{
    return aligned ? n / 8 : 0;
}

static inline unsigned grid8(int64_t n, int64_t n8)
{
    return blocks_for(n8 > 0 ? n8 : n);
}

/* GRID_LOOP over elements first .. n-1 */
#define GRID_LOOP_FROM(i, first, n)                                                                            \
    for (int64_t i = (first) + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (int64_t)gridDim.x * blockDim.x)

/* the 8 old values of a destination (p 16-byte aligned) when the op adds into it; zeros, unread,
 * when it overwrites */
template <typename T> static __device__ __forceinline__ void load8_old(const T *p, float f[8], int accumulate)
{
    if (accumulate) {
        load8(p, f);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
            f[j] = 0.0f;
    }
}

/* what a gradient op stores: v, or with accumulate the fp32 sum of the old value and v (st_acc's rule) */
static __device__ __forceinline__ float acc_f(float old, float v, int accumulate)
{
    return accumulate ? __fadd_rn(old, v) : v;
}

/* The host side of a typed op: runs the statements after it with T naming the storage type of t
 * (float, __half or __nv_bfloat16), or aborts naming op (dt_cuda_bad_type) for any other type. Nest
 * it (with other names than T) for ops whose operands have types of their own:
 *   DT_CUDA_TYPED("fill", t, T, fill_kernel<T><<<blocks_for(n), THREADS, 0, stream()>>>(...));
 * (statements, not an expression: commas inside template arguments and launches are fine). */
#define DT_CUDA_TYPED(op, t, T, ...)                                                                           \
    do {                                                                                                       \
        switch (t) {                                                                                           \
        case DT_FLOAT32: {                                                                                     \
            typedef float T;                                                                                   \
            __VA_ARGS__;                                                                                       \
        } break;                                                                                               \
        case DT_FLOAT16: {                                                                                     \
            typedef __half T;                                                                                  \
            __VA_ARGS__;                                                                                       \
        } break;                                                                                               \
        case DT_BFLOAT16: {                                                                                    \
            typedef __nv_bfloat16 T;                                                                           \
            __VA_ARGS__;                                                                                       \
        } break;                                                                                               \
        default:                                                                                               \
            dt_cuda_bad_type(op, t);                                                                           \
        }                                                                                                      \
    } while (0)

/* --- ops of one function per element (eltwise.cu's relu, act.cu's activations) -------------------- */

/* map_kernel: y = f(x); grad_kernel: dx = f(a, dy), or with accumulate the old dx plus it (acc_f);
 * every operand of type T, on the two paths above. f is a functor (a struct with a __device__
 * operator(): float f(float) or float f(float, float)), so its code is inlined in both paths. y may
 * be x, dx may be dy: each element is read before it is written, by the same thread. */
template <typename T, typename F> static __global__ void map_kernel(int64_t n, int64_t n8, F f, const T *x, T *y)
{
    GRID_LOOP(c, n8)
    {
        float v[8];
        load8(x + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = f(v[j]);
        store8(y + 8 * c, v);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(y, i, f(ld(x, i)));
}

template <typename T, typename F>
static __global__ void grad_kernel(int64_t n, int64_t n8, F f, const T *a, const T *dy, T *dx, int accumulate)
{
    GRID_LOOP(c, n8)
    {
        float u[8], g[8], o[8];
        load8(a + 8 * c, u);
        load8(dy + 8 * c, g);
        load8_old(dx + 8 * c, o, accumulate);
#pragma unroll
        for (int j = 0; j < 8; j++)
            o[j] = acc_f(o[j], f(u[j], g[j]), accumulate);
        store8(dx + 8 * c, o);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st_acc(dx, i, f(ld(a, i), ld(dy, i)), accumulate);
}

/* the host side of the two: op's n elements of type t, 8-wide where the operands are aligned */
template <typename F> static void launch_map(const char *op, int64_t n, dt_dtype t, F f, const void *x, void *y)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(x, y));
    DT_CUDA_TYPED(op, t, T, map_kernel<T, F><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, f, (const T *)x, (T *)y));
    DT_LAUNCHED(op);
}

template <typename F>
static void launch_grad(const char *op, int64_t n, dt_dtype t, F f, const void *a, const void *dy, void *dx,
                        int accumulate)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(a, dy, dx));
    DT_CUDA_TYPED(op, t, T,
                  grad_kernel<T, F><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, f, (const T *)a, (const T *)dy,
                                                                            (T *)dx, accumulate));
    DT_LAUNCHED(op);
}

#endif
