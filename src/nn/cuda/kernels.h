/* kernels.h: what the CUDA backend's own kernels share: launch helpers, device helpers and the rules
 * they all follow (for the *.cu files only). The kernels are one file per family, named as the CPU
 * file each ports (nn/cpu/): bn.cu, eltwise.cu, pool.cu, linear.cu (xent); contracts in nn/cuda/cuda.h
 * and nn/backend.h. Ports of util/half.c and util/rng.c are in eltwise.cu. The kernels work on fp32
 * only: each op's host function checks its dt_dtype arguments (DT_CUDA_F32, cuda.h) and then casts
 * its void * operands to float *.
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
 *   normalize_u8, dropout (mask and values: dt_hash64 ported bit for bit), flatten, max pool forward
 *   (values and argmax, same NaN and tie rules) and backward, adaptive average pool forward and
 *   backward (the same float sums in the same order: the backward passes gather, each input summing
 *   the outputs that cover it in the CPU's scatter order, starting from 0.0f or dx as the CPU does),
 *   round_half (util/half.c's scalar algorithm ported: see dev_f32_to_f16 for the one caveat, NaN
 *   payloads), bn_fwd_infer (per-channel scale/shift in double as the CPU, then the same float affine).
 * - to double rounding, so almost always bit for bit, otherwise 1 ulp of float: bn_fwd_train and
 *   bn_bwd. The per-channel sums are formed as the CPU forms them: float sums over the same blocks of
 *   RB = 16 rows (bit-identical), then those block sums added in double. Only the order of the double
 *   additions differs (the CPU's depends on its OpenMP thread count too); the double results then
 *   differ by a few double ulps, which survive the final cast to float only when a value lies that
 *   close to a float rounding boundary. Everything after the sums is the CPU's double arithmetic.
 *   Expect rel. error <= ~1e-6 on saved/running stats/dgamma/dbeta and the same (times the
 *   magnitude of the terms) on y and dx; the fused ReLU mask is exact given the saved scale/shift.
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

#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

/* --- helpers --------------------------------------------------------------------------------------- */

#define DT_CK(call) FATAL_CUDA(call)

/* after every kernel launch */
#define DT_LAUNCHED(name)                                                                                      \
    do {                                                                                                       \
        cudaError_t dt_err_ = cudaGetLastError();                                                              \
        if (dt_err_ != cudaSuccess)                                                                            \
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

#endif
