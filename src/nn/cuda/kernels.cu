/* kernels.cu: the CUDA backend's own kernels (contracts in nn/cuda/cuda.h and nn/backend.h), each a
 * port of the CPU op in nn/cpu/ (bn.c, eltwise.c, pool.c, linear.c, util/half.c, util/rng.c).
 *
 * Rounding. The CPU backend is built with -ffp-contract=off; nvcc fuses a*b+c into an FMA by default,
 * which rounds once instead of twice. Every float and double expression whose result is compared with
 * the CPU's is therefore written with the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __dmul_rn,
 * ...), in the CPU's evaluation order, with the CPU's types (C's promotions included: a float times a
 * float is a float product even when the result is later used in double).
 *
 * What matches the CPU how:
 * - bit for bit: relu_fwd/bwd, add_fwd, copy_grad, fill, scale, sgd, unscale_check (values and flag),
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
 *   bit for bit, else 1 ulp.
 *
 * Determinism: no float atomics anywhere; reductions run in an order fixed by the shapes only, so
 * every op gives the same bits run to run (and on any device).
 *
 * Execution: everything is queued on dt_cuda_stream(); only xent, unscale_check, SyncBN (d->sync)
 * and normalize_u8 from page-locked host memory wait for the stream. Temporaries come from dt_cuda_scratch, requested once per op (a
 * second request may move the buffer). */
#include "config.h"

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

#define MAX_BLOCKS 16384 /* grid-stride loops cover the rest */

static cudaStream_t stream(void)
{
    return (cudaStream_t)dt_cuda_stream();
}

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS)
        b = MAX_BLOCKS;
    if (b < 1)
        b = 1;
    return (unsigned)b;
}

static size_t align_up(size_t v)
{
    return (v + 255) & ~(size_t)255;
}

static void *scratch(size_t bytes)
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

static __device__ __forceinline__ double dnan(void)
{
    return __longlong_as_double(0x7ff8000000000000LL);
}

/* --- batch norm ------------------------------------------------------------------------------------ */
/* Per-channel sums, as bn.c forms them: float sums over blocks of RB rows (r0 = 0, 16, 32, ...), in row
 * order, then the block sums added in double. Here a thread does whole RB blocks of one channel,
 * adding their float sums into its double accumulators; the 8 threads of a column of a block are
 * then added in a fixed order, and per channel the partials of the row chunks by a fixed tree
 * (bn_reduce). The grid depends only on (rows, c), so the result does too. */
#define RB 16      /* bn.c's RB */
#define CB 256     /* bn.c's CB: SyncBN syncs per block of CB channels, as bn.c does */
#define RED_TX 32  /* channels per partials block */
#define RED_TY 8   /* row-block lanes per partials block */
#define SYNC_STRIDE (2 * CB + 2) /* per channel block: [flag][rows, sums[cb], sums2[cb]] */

/* bn.c's bn_affine, unfused */
static __device__ __forceinline__ float bn_affine(float x, float scale, float shift)
{
    return __fadd_rn(__fmul_rn(x, scale), shift);
}

static int bn_chunks(int64_t rows, int c)
{
    int64_t nrb = (rows + RB - 1) / RB, ctiles = (c + RED_TX - 1) / RED_TX;
    int64_t most = (nrb + RED_TY - 1) / RED_TY, want = 1024 / ctiles;
    if (want < 1)
        want = 1;
    int64_t nc = want < most ? want : most;
    return nc < 1 ? 1 : (int)nc;
}

/* BWD 0: sums of t = x - k and t*t with k = x[row 0] (the forward's shifted sums).
 * BWD 1: sums of g and g*(x - mean) with g = dy masked by the fused ReLU (the backward's sums).
 * part0/part1: [c][nchunk] doubles. */
template <int BWD>
static __global__ void bn_partials(int64_t rows, int c, const float *x, const float *dy, const float *saved, int relu,
                                   int nchunk, double *part0, double *part1)
{
    __shared__ double sh0[RED_TY][RED_TX], sh1[RED_TY][RED_TX];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ch = blockIdx.x * RED_TX + tx;
    const int64_t nrb = (rows + RB - 1) / RB;
    double s0 = 0.0, s1 = 0.0;
    if (ch < c) {
        float k = 0.0f, mean = 0.0f, scale = 0.0f, shift = 0.0f;
        if (!BWD) {
            k = x[ch];
        } else {
            mean = saved[ch];
            scale = saved[2 * (size_t)c + ch];
            shift = saved[3 * (size_t)c + ch];
        }
        for (int64_t b = (int64_t)blockIdx.y * RED_TY + ty; b < nrb; b += (int64_t)nchunk * RED_TY) {
            const int64_t r0 = b * RB, r1 = r0 + RB < rows ? r0 + RB : rows;
            float f0 = 0.0f, f1 = 0.0f;
            for (int64_t r = r0; r < r1; r++) {
                const float xv = x[r * c + ch];
                if (!BWD) {
                    const float t = __fsub_rn(xv, k);
                    f0 = __fadd_rn(f0, t);
                    f1 = __fadd_rn(f1, __fmul_rn(t, t));
                } else {
                    const float v = dy[r * c + ch];
                    const float g = relu ? (bn_affine(xv, scale, shift) > 0.0f ? v : 0.0f) : v;
                    f0 = __fadd_rn(f0, g);
                    f1 = __fadd_rn(f1, __fmul_rn(g, __fsub_rn(xv, mean)));
                }
            }
            s0 = __dadd_rn(s0, (double)f0);
            s1 = __dadd_rn(s1, (double)f1);
        }
    }
    sh0[ty][tx] = s0;
    sh1[ty][tx] = s1;
    __syncthreads();
    if (ty == 0 && ch < c) {
        double a = sh0[0][tx], b = sh1[0][tx];
        for (int i = 1; i < RED_TY; i++) {
            a = __dadd_rn(a, sh0[i][tx]);
            b = __dadd_rn(b, sh1[i][tx]);
        }
        part0[(int64_t)ch * nchunk + blockIdx.y] = a;
        part1[(int64_t)ch * nchunk + blockIdx.y] = b;
    }
}

/* One block per channel: the chunk partials summed by a fixed tree, then
 * BWD 0: A = mean, B = sum of squared deviations (bn.c's first adjustments), N = rows;
 * BWD 1: A = GA = sum dy, B = GB = sum dy*(x-mean), N = rows (GA, GB, N are what SyncBN replaces). */
template <int BWD>
static __global__ void bn_reduce(int64_t rows, int c, const float *x, int nchunk, const double *part0,
                                 const double *part1, double *A, double *B, double *GA, double *GB, double *N)
{
    __shared__ double r0[THREADS], r1[THREADS];
    const int t = threadIdx.x;
    for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double s0 = 0.0, s1 = 0.0;
        for (int i = t; i < nchunk; i += THREADS) {
            s0 = __dadd_rn(s0, part0[(int64_t)ch * nchunk + i]);
            s1 = __dadd_rn(s1, part1[(int64_t)ch * nchunk + i]);
        }
        block_sum2(r0, r1, s0, s1, t);
        if (t == 0) {
            const double sum = r0[0], sq = r1[0];
            if (!BWD) {
                const double ms = __ddiv_rn(sum, (double)rows);
                double dev = __dsub_rn(sq, __dmul_rn(ms, sum));
                if (dev < 0)
                    dev = 0;
                A[ch] = __dadd_rn((double)x[ch], ms);
                B[ch] = dev;
            } else {
                A[ch] = sum;
                B[ch] = sq;
                GA[ch] = sum;
                GB[ch] = sq;
            }
            N[ch] = (double)rows;
        }
        __syncthreads(); /* r0/r1 are rewritten for the next channel */
    }
}

/* SyncBN: bn.c's buffers, per block of CB channels: buf[0] = rows, then cb values, then cb values.
 * forward: rows*mean and sq + rows*mean*mean; backward: sum dy and sum dy*(x-mean). */
static __global__ void bn_sync_pack(int c, int bwd, int64_t rows, const double *A, const double *B, double *sbuf)
{
    GRID_LOOP(ch, c)
    {
        const int blk = (int)(ch / CB), j = (int)(ch % CB);
        const int cb = c - blk * CB < CB ? c - blk * CB : CB;
        double *buf = sbuf + (int64_t)blk * SYNC_STRIDE + 1;
        const double n = (double)rows;
        if (j == 0)
            buf[0] = n;
        if (!bwd) {
            const double mean = A[ch];
            buf[1 + j] = __dmul_rn(n, mean);
            buf[1 + cb + j] = __dadd_rn(B[ch], __dmul_rn(__dmul_rn(n, mean), mean));
        } else {
            buf[1 + j] = A[ch];
            buf[1 + cb + j] = B[ch];
        }
    }
}

/* where the block's sync succeeded (flag 1): forward: N, mean and deviations of all replicas' rows;
 * backward: N, GA, GB. On failure the local values stay, as in bn.c. */
static __global__ void bn_sync_unpack(int c, int bwd, const double *sbuf, double *A, double *B, double *GA, double *GB,
                                      double *N)
{
    GRID_LOOP(ch, c)
    {
        const int blk = (int)(ch / CB), j = (int)(ch % CB);
        const int cb = c - blk * CB < CB ? c - blk * CB : CB;
        const double *flag = sbuf + (int64_t)blk * SYNC_STRIDE, *buf = flag + 1;
        if (flag[0] == 0.0)
            continue;
        const double n_all = buf[0];
        N[ch] = n_all;
        if (!bwd) {
            const double mean = __ddiv_rn(buf[1 + j], n_all);
            double dev = __dsub_rn(buf[1 + cb + j], __dmul_rn(__dmul_rn(n_all, mean), mean));
            if (dev < 0)
                dev = 0;
            A[ch] = mean;
            B[ch] = dev;
        } else {
            GA[ch] = buf[1 + j];
            GB[ch] = buf[1 + cb + j];
        }
    }
}

/* d->sync per block of CB channels, in order, on host copies of bn.c's buffers (SyncBN over NCCL, on
 * the device, comes later). Each block: device -> host, wait, sync, host -> device, wait. */
static void bn_sync(const dt_bn_desc *d, int bwd, double *A, double *B, double *GA, double *GB, double *N,
                    double *sbuf)
{
    const int c = d->c;
    cudaStream_t s = stream();
    bn_sync_pack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, d->rows, A, B, sbuf);
    DT_LAUNCHED("bn_sync_pack");
    double h[SYNC_STRIDE];
    for (int c0 = 0; c0 < c; c0 += CB) {
        const int cb = c - c0 < CB ? c - c0 : CB, n = 2 * cb + 1;
        double *dev = sbuf + (int64_t)(c0 / CB) * SYNC_STRIDE;
        DT_CK(cudaMemcpyAsync(h, dev, (size_t)(n + 1) * sizeof(double), cudaMemcpyDeviceToHost, s));
        DT_CK(cudaStreamSynchronize(s));
        h[0] = d->sync(d->sync_ctx, h + 1, n) == 0 ? 1.0 : 0.0;
        DT_CK(cudaMemcpyAsync(dev, h, (size_t)(n + 1) * sizeof(double), cudaMemcpyHostToDevice, s));
        DT_CK(cudaStreamSynchronize(s)); /* h is reused by the next block */
    }
    bn_sync_unpack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, sbuf, A, B, GA, GB, N);
    DT_LAUNCHED("bn_sync_unpack");
}

/* bn.c's per-channel tail of the training forward, in its order and types */
static __global__ void bn_train_finalize(int c, const double *A, const double *B, const double *N,
                                         const float *gamma, const float *beta, float eps, float momentum,
                                         float *saved, float *running_mean, float *running_var)
{
    GRID_LOOP(ch, c)
    {
        const double mean = A[ch], sq = B[ch], n_all = N[ch];
        const double var = __ddiv_rn(sq, n_all);
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, (double)eps)));
        const double g = (double)gamma[ch];
        saved[ch] = (float)mean;
        saved[c + ch] = (float)invstd;
        saved[2 * (int64_t)c + ch] = (float)__dmul_rn(g, invstd);
        saved[3 * (int64_t)c + ch] = (float)__dsub_rn((double)beta[ch], __dmul_rn(__dmul_rn(mean, g), invstd));
        const double unbiased = n_all > 1 ? __ddiv_rn(sq, __dsub_rn(n_all, 1.0)) : var;
        const double m = (double)momentum, keep = __dsub_rn(1.0, m);
        running_mean[ch] = (float)__dadd_rn(__dmul_rn(keep, (double)running_mean[ch]), __dmul_rn(m, mean));
        running_var[ch] = (float)__dadd_rn(__dmul_rn(keep, (double)running_var[ch]), __dmul_rn(m, unbiased));
    }
}

/* bn.c's inference scale and shift: note running_mean * gamma is a float product there */
static __global__ void bn_infer_coef(int c, const float *gamma, const float *beta, const float *running_mean,
                                     const float *running_var, float eps, float *scale, float *shift)
{
    GRID_LOOP(ch, c)
    {
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)running_var[ch], (double)eps)));
        scale[ch] = (float)__dmul_rn((double)gamma[ch], invstd);
        shift[ch] = (float)__dsub_rn((double)beta[ch],
                                     __dmul_rn((double)__fmul_rn(running_mean[ch], gamma[ch]), invstd));
    }
}

/* y = x*scale + shift per channel (then max(0, .)); n = rows*c */
static __global__ void bn_affine_kernel(int64_t n, int c, const float *x, const float *scale, const float *shift,
                                        float *y, int relu)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        float v = bn_affine(x[i], scale[ch], shift[ch]);
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        y[i] = v;
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* bn.c's per-channel tail of backward: dgamma, dbeta (local sums A, B) and the coefficients a, k, b of
 * dx = a*g - k*(x-mean) - b (with the possibly synced GA, GB, N) */
static __global__ void bn_bwd_finalize(int c, const double *A, const double *B, const double *GA, const double *GB,
                                       const double *N, const float *gamma, const float *saved, float *dgamma,
                                       float *dbeta, int accumulate_params, float *coef)
{
    GRID_LOOP(ch, c)
    {
        const double invstd = (double)saved[c + ch];
        const double dg = __dmul_rn(B[ch], invstd), db = A[ch];
        if (accumulate_params) {
            dgamma[ch] = __fadd_rn(dgamma[ch], (float)dg);
            dbeta[ch] = __fadd_rn(dbeta[ch], (float)db);
        } else {
            dgamma[ch] = (float)dg;
            dbeta[ch] = (float)db;
        }
        const double g = (double)gamma[ch], n_all = N[ch];
        const double gi = __dmul_rn(g, invstd);
        coef[ch] = (float)gi;
        coef[c + ch] = (float)__ddiv_rn(__dmul_rn(__dmul_rn(__dmul_rn(gi, invstd), invstd), GB[ch]), n_all);
        coef[2 * (int64_t)c + ch] = (float)__ddiv_rn(__dmul_rn(gi, GA[ch]), n_all);
    }
}

static __global__ void bn_bwd_dx(int64_t n, int c, const float *x, const float *dy, const float *saved,
                                 const float *coef, int relu, float *dx, int accumulate)
{
    const float *mean = saved, *scale = saved + 2 * (int64_t)c, *shift = saved + 3 * (int64_t)c;
    const float *ca = coef, *ck = coef + c, *cb = coef + 2 * (int64_t)c;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        const float xv = x[i], v = dy[i];
        const float g = relu ? (bn_affine(xv, scale[ch], shift[ch]) > 0.0f ? v : 0.0f) : v;
        const float r =
            __fsub_rn(__fsub_rn(__fmul_rn(ca[ch], g), __fmul_rn(ck[ch], __fsub_rn(xv, mean[ch]))), cb[ch]);
        dx[i] = accumulate ? __fadd_rn(dx[i], r) : r;
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* scratch for a training forward or backward: partials, the per-channel doubles, SyncBN buffers and
 * (backward) the dx coefficients, in one request */
typedef struct bn_scratch {
    double *part0, *part1, *A, *B, *GA, *GB, *N, *sbuf;
    float *coef;
    int nchunk;
} bn_scratch;

static bn_scratch bn_scratch_get(const dt_bn_desc *d)
{
    bn_scratch s;
    const int c = d->c;
    s.nchunk = bn_chunks(d->rows, c);
    const size_t part = align_up((size_t)c * (size_t)s.nchunk * sizeof(double));
    const size_t vec = align_up((size_t)c * sizeof(double));
    const size_t sb = d->sync ? align_up((size_t)((c + CB - 1) / CB) * SYNC_STRIDE * sizeof(double)) : 0;
    const size_t cf = align_up(3 * (size_t)c * sizeof(float));
    char *p = (char *)scratch(2 * part + 5 * vec + sb + cf);
    s.part0 = (double *)p;
    p += part;
    s.part1 = (double *)p;
    p += part;
    s.A = (double *)p;
    p += vec;
    s.B = (double *)p;
    p += vec;
    s.GA = (double *)p;
    p += vec;
    s.GB = (double *)p;
    p += vec;
    s.N = (double *)p;
    p += vec;
    s.sbuf = d->sync ? (double *)p : NULL;
    p += sb;
    s.coef = (float *)p;
    return s;
}

extern "C" void dt_cuda_bn_fwd_train(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta,
                                     float *y, float *saved, float *running_mean, float *running_var, int relu)
{
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    bn_partials<0><<<pg, pb, 0, st>>>(rows, c, x, NULL, NULL, 0, s.nchunk, s.part0, s.part1);
    DT_LAUNCHED("bn_partials (forward)");
    bn_reduce<0><<<(unsigned)(c < 65535 ? c : 65535), THREADS, 0, st>>>(rows, c, x, s.nchunk, s.part0, s.part1, s.A,
                                                                       s.B, s.GA, s.GB, s.N);
    DT_LAUNCHED("bn_reduce (forward)");
    if (d->sync)
        bn_sync(d, 0, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    bn_train_finalize<<<blocks_for(c), THREADS, 0, st>>>(c, s.A, s.B, s.N, gamma, beta, d->eps, d->momentum, saved,
                                                          running_mean, running_var);
    DT_LAUNCHED("bn_train_finalize");
    const int64_t n = rows * c;
    bn_affine_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, saved + 2 * (size_t)c, saved + 3 * (size_t)c, y,
                                                         relu);
    DT_LAUNCHED("bn_affine_kernel (train)");
}

extern "C" void dt_cuda_bn_fwd_infer(const dt_bn_desc *d, const float *x, const float *gamma, const float *beta,
                                     const float *running_mean, const float *running_var, float *y, int relu)
{
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    float *scale = (float *)scratch(2 * (size_t)c * sizeof(float)), *shift = scale + c;
    bn_infer_coef<<<blocks_for(c), THREADS, 0, st>>>(c, gamma, beta, running_mean, running_var, d->eps, scale, shift);
    DT_LAUNCHED("bn_infer_coef");
    const int64_t n = rows * c;
    bn_affine_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, scale, shift, y, relu);
    DT_LAUNCHED("bn_affine_kernel (infer)");
}

extern "C" void dt_cuda_bn_bwd(const dt_bn_desc *d, const float *x, const float *dy, int relu, const float *gamma,
                               const float *saved, float *dx, float *dgamma, float *dbeta, int accumulate_dx,
                               int accumulate_params)
{
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    bn_partials<1><<<pg, pb, 0, st>>>(rows, c, x, dy, saved, relu, s.nchunk, s.part0, s.part1);
    DT_LAUNCHED("bn_partials (backward)");
    bn_reduce<1><<<(unsigned)(c < 65535 ? c : 65535), THREADS, 0, st>>>(rows, c, x, s.nchunk, s.part0, s.part1, s.A,
                                                                       s.B, s.GA, s.GB, s.N);
    DT_LAUNCHED("bn_reduce (backward)");
    if (d->sync)
        bn_sync(d, 1, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    bn_bwd_finalize<<<blocks_for(c), THREADS, 0, st>>>(c, s.A, s.B, s.GA, s.GB, s.N, gamma, saved, dgamma, dbeta,
                                                        accumulate_params, s.coef);
    DT_LAUNCHED("bn_bwd_finalize");
    const int64_t n = rows * c;
    bn_bwd_dx<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, dy, saved, s.coef, relu, dx, accumulate_dx);
    DT_LAUNCHED("bn_bwd_dx");
}

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

extern "C" void dt_cuda_relu_fwd(int64_t n, const float *x, float *y)
{
    if (n <= 0)
        return;
    relu_fwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, x, y);
    DT_LAUNCHED("relu_fwd_kernel");
}

extern "C" void dt_cuda_relu_bwd(int64_t n, const float *y, const float *dy, float *dx, int accumulate)
{
    if (n <= 0)
        return;
    relu_bwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, y, dy, dx, accumulate);
    DT_LAUNCHED("relu_bwd_kernel");
}

extern "C" void dt_cuda_add_fwd(int64_t n, const float *a, const float *b, float *y)
{
    if (n <= 0)
        return;
    add_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, a, b, y);
    DT_LAUNCHED("add_kernel");
}

extern "C" void dt_cuda_copy_grad(int64_t n, const float *src, float *dst, int accumulate)
{
    if (n <= 0)
        return;
    if (!accumulate) {
        if (src != dst)
            DT_CK(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
        return;
    }
    accumulate_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, src, dst);
    DT_LAUNCHED("accumulate_kernel");
}

extern "C" void dt_cuda_fill(int64_t n, float value, float *x)
{
    if (n <= 0)
        return;
    fill_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, value, x);
    DT_LAUNCHED("fill_kernel");
}

extern "C" void dt_cuda_scale(int64_t n, float a, float *x)
{
    if (n <= 0)
        return;
    scale_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, a, x);
    DT_LAUNCHED("scale_kernel");
}

/* --- pooling --------------------------------------------------------------------------------------- */

/* pool.c's rule: start at -inf with argmax at the window's first valid element; take an element when
 * it is greater or NaN (the first maximum wins, NaN propagates, the last NaN wins) */
static __global__ void maxpool_fwd_kernel(dt_pool_desc d, const float *x, float *y, uint8_t *argmax)
{
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c, in_img = (int64_t)d.h * d.w * d.c;
    GRID_LOOP(o, total)
    {
        int ch, ox, oy;
        const int64_t img = nhwc_pos(o, d.c, d.ow, d.oh, &ch, &ox, &oy);
        const float *xi = x + img * in_img + ch;
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
                const float v = xi[((int64_t)iy * d.w + ix) * d.c];
                if (v > cur || v != v) {
                    cur = v;
                    a = (uint8_t)(ky * d.kw + kx);
                }
            }
        }
        y[o] = cur;
        argmax[o] = a;
    }
}

/* Gather: each input element sums dy over the outputs whose window covers it and whose argmax is it,
 * in increasing (oy, ox) order: pool.c's scatter order, from the same start (0.0f or dx), so the
 * float sums are the CPU's. */
static __global__ void maxpool_bwd_kernel(dt_pool_desc d, const float *dy, const uint8_t *argmax, float *dx,
                                          int accumulate)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        int ch, ix, iy;
        const int64_t img = nhwc_pos(i, d.c, d.w, d.h, &ch, &ix, &iy);
        float acc = accumulate ? dx[i] : 0.0f;
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
                const int64_t o = ((img * d.oh + oy) * d.ow + ox) * d.c + ch;
                if ((int)argmax[o] == ky * d.kw + kx)
                    acc = __fadd_rn(acc, dy[o]);
            }
        }
        dx[i] = acc;
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

static __global__ void avgpool_fwd_kernel(dt_pool_desc d, const float *x, float *y)
{
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c, in_img = (int64_t)d.h * d.w * d.c;
    GRID_LOOP(o, total)
    {
        int ch, ox, oy;
        const int64_t img = nhwc_pos(o, d.c, d.ow, d.oh, &ch, &ox, &oy);
        const int y0 = win_start(oy, d.h, d.oh), y1 = win_end(oy, d.h, d.oh);
        const int x0 = win_start(ox, d.w, d.ow), x1 = win_end(ox, d.w, d.ow);
        const float *xi = x + img * in_img + ch;
        float s = 0.0f;
        for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++)
                s = __fadd_rn(s, xi[((int64_t)iy * d.w + ix) * d.c]);
        y[o] = __fmul_rn(s, win_inv(y0, y1, x0, x1));
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

static __global__ void avgpool_bwd_kernel(dt_pool_desc d, const float *dy, float *dx, int accumulate)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        int ch, ix, iy;
        const int64_t img = nhwc_pos(i, d.c, d.w, d.h, &ch, &ix, &iy);
        float acc = accumulate ? dx[i] : 0.0f;
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
                const int64_t o = ((img * d.oh + oy) * d.ow + ox) * d.c + ch;
                acc = __fadd_rn(acc, __fmul_rn(dy[o], win_inv(y0, y1, x0, x1)));
            }
        }
        dx[i] = acc;
    }
}

extern "C" void dt_cuda_maxpool_fwd(const dt_pool_desc *d, const float *x, float *y, uint8_t *argmax)
{
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0)
        return;
    maxpool_fwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(*d, x, y, argmax);
    DT_LAUNCHED("maxpool_fwd_kernel");
}

extern "C" void dt_cuda_maxpool_bwd(const dt_pool_desc *d, const float *dy, const uint8_t *argmax, float *dx,
                                    int accumulate)
{
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0)
        return;
    maxpool_bwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(*d, dy, argmax, dx, accumulate);
    DT_LAUNCHED("maxpool_bwd_kernel");
}

extern "C" void dt_cuda_avgpool_fwd(const dt_pool_desc *d, const float *x, float *y)
{
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0)
        return;
    avgpool_fwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(*d, x, y);
    DT_LAUNCHED("avgpool_fwd_kernel");
}

extern "C" void dt_cuda_avgpool_bwd(const dt_pool_desc *d, const float *dy, float *dx, int accumulate)
{
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0)
        return;
    avgpool_bwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(*d, dy, dx, accumulate);
    DT_LAUNCHED("avgpool_bwd_kernel");
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

extern "C" void dt_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, const float *x, float *y, uint8_t *mask)
{
    if (n <= 0)
        return;
    /* eltwise.c's constants, computed on the host as there */
    const uint32_t cut = (uint32_t)((double)p * (1u << 24));
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, cut, scale, seed, x, y, mask);
    DT_LAUNCHED("dropout_fwd_kernel");
}

extern "C" void dt_cuda_dropout_bwd(int64_t n, float p, const uint8_t *mask, const float *dy, float *dx, int accumulate)
{
    if (n <= 0)
        return;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    dropout_bwd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, scale, mask, dy, dx, accumulate);
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

extern "C" void dt_cuda_flatten_fwd(int n, int h, int w, int c, const float *x, float *y)
{
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    flatten_fwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, x, y);
    DT_LAUNCHED("flatten_fwd_kernel");
}

extern "C" void dt_cuda_flatten_bwd(int n, int h, int w, int c, const float *dy, float *dx, int accumulate)
{
    const int64_t hw = (int64_t)h * w, total = (int64_t)n * hw * c;
    if (total <= 0)
        return;
    flatten_bwd_kernel<<<blocks_for(total), THREADS, 0, stream()>>>(total, hw, c, dy, dx, accumulate);
    DT_LAUNCHED("flatten_bwd_kernel");
}

/* --- softmax cross-entropy ------------------------------------------------------------------------- */

/* One block per row (THREADS, a power of two): linear.c's dt_cpu_xent for that row. The max is the
 * CPU's (NaN when z[0] is NaN, else the largest non-NaN value); the sums of exp(z - max) and of z run
 * in double, strided per thread then a fixed tree. loss[row] is the row's term of the CPU's total. */
static __global__ void xent_rows(int n, int k, const float *logits, const int32_t *labels, float eps, float *dlogits,
                                 double *loss)
{
    __shared__ double r0[THREADS], r1[THREADS];
    __shared__ float rm[THREADS];
    const int t = threadIdx.x;
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const float *z = logits + (int64_t)row * k;
        float m = neg_inf();
        for (int j = t; j < k; j += THREADS) {
            const float v = z[j];
            m = v > m ? v : m;
        }
        rm[t] = m;
        __syncthreads();
        for (int w = THREADS / 2; w > 0; w >>= 1) {
            if (t < w)
                rm[t] = rm[t + w] > rm[t] ? rm[t + w] : rm[t];
            __syncthreads();
        }
        const float z0 = z[0];
        const double mx = z0 != z0 ? (double)z0 : (double)rm[0];
        double se = 0.0, sz = 0.0;
        for (int j = t; j < k; j += THREADS) {
            const double v = (double)z[j];
            se = __dadd_rn(se, exp(__dsub_rn(v, mx)));
            sz = __dadd_rn(sz, v);
        }
        block_sum2(r0, r1, se, sz, t);
        const double lse = __dadd_rn(mx, log(r0[0]));
        const int label = labels[row];
        const int ok = label >= 0 && label < k; /* out of range: a NaN loss instead of a stray read */
        if (t == 0) {
            const double zl = ok ? (double)z[label] : dnan();
            const double e = (double)eps;
            loss[row] = __dadd_rn(__dmul_rn(__dsub_rn(1.0, e), __dsub_rn(lse, zl)),
                                  __dmul_rn(e, __dsub_rn(lse, __ddiv_rn(r1[0], (double)k))));
        }
        __syncthreads(); /* every read of the row is done before dlogits (which may alias it) is written */
        if (dlogits) {
            /* q = eps/k (a float quotient in C) + (1 - eps on the label) */
            const double q_other = (double)__fdiv_rn(eps, (float)k);
            const double q_label = __dadd_rn(q_other, __dsub_rn(1.0, (double)eps));
            const double q_rest = __dadd_rn(q_other, 0.0);
            float *g = dlogits + (int64_t)row * k;
            for (int j = t; j < k; j += THREADS) {
                const double q = j == label ? q_label : q_rest;
                g[j] = (float)__ddiv_rn(__dsub_rn(exp(__dsub_rn((double)z[j], lse)), q), (double)n);
            }
        }
        __syncthreads(); /* the shared arrays are rewritten for the next row */
    }
}

/* the CPU's total, in row order, then / n */
static __global__ void xent_total(int n, const double *loss, double *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < n; i++)
            total = __dadd_rn(total, loss[i]);
        out[0] = __ddiv_rn(total, (double)n);
    }
}

extern "C" double dt_cuda_xent(int n, int k, const float *logits, const int32_t *labels_host, float eps,
                               float *dlogits)
{
    if (n <= 0 || k <= 0)
        return 0.0 / (n > 0 ? n : 0); /* the CPU's 0 / n with nothing summed: NaN for n = 0 */
    cudaStream_t st = stream();
    const size_t o_out = 0, o_loss = align_up(sizeof(double)),
                 o_lab = o_loss + align_up((size_t)n * sizeof(double));
    char *p = (char *)scratch(o_lab + (size_t)n * sizeof(int32_t));
    double *out = (double *)(p + o_out), *loss = (double *)(p + o_loss);
    int32_t *labels = (int32_t *)(p + o_lab);
    DT_CK(cudaMemcpyAsync(labels, labels_host, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    xent_rows<<<(unsigned)(n < 65535 ? n : 65535), THREADS, 0, st>>>(n, k, logits, labels, eps, dlogits, loss);
    DT_LAUNCHED("xent_rows");
    xent_total<<<1, 1, 0, st>>>(n, loss, out);
    DT_LAUNCHED("xent_total");
    double result = 0.0;
    DT_CK(cudaMemcpyAsync(&result, out, sizeof(double), cudaMemcpyDeviceToHost, st));
    DT_CK(cudaStreamSynchronize(st));
    return result;
}

/* --- SGD ------------------------------------------------------------------------------------------- */

/* eltwise.c's dt_cpu_sgd, unfused */
static __global__ void sgd_kernel(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                                  float one_minus_dampening, float wd, int nesterov, int first)
{
    GRID_LOOP(i, n)
    {
        const float pv = p[i];
        float d = g[i];
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

extern "C" void dt_cuda_sgd(int64_t n, float *p, const float *g, float *buf, float lr, float momentum, float dampening,
                            float wd, int nesterov, int first)
{
    if (n <= 0)
        return;
    sgd_kernel<<<blocks_for(n), THREADS, 0, stream()>>>(n, p, g, buf, lr, momentum, 1.0f - dampening, wd, nesterov,
                                                        first);
    DT_LAUNCHED("sgd_kernel");
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

/* --- unscale and overflow check -------------------------------------------------------------------- */

static __global__ void unscale_check_kernel(int64_t n, float *g, float inv_scale, int *flag)
{
    int bad = 0;
    GRID_LOOP(i, n)
    {
        const float v = __fmul_rn(g[i], inv_scale);
        g[i] = v;
        bad |= !(__fsub_rn(v, v) == 0.0f); /* inf - inf and NaN - NaN are NaN */
    }
    if (bad)
        *flag = 1; /* every writer writes the same value */
}

extern "C" int dt_cuda_unscale_check(int64_t n, float *g, float inv_scale)
{
    if (n <= 0)
        return 0;
    cudaStream_t st = stream();
    int *flag = (int *)scratch(sizeof(int));
    DT_CK(cudaMemsetAsync(flag, 0, sizeof(int), st));
    unscale_check_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, g, inv_scale, flag);
    DT_LAUNCHED("unscale_check_kernel");
    int bad = 0;
    DT_CK(cudaMemcpyAsync(&bad, flag, sizeof(int), cudaMemcpyDeviceToHost, st));
    DT_CK(cudaStreamSynchronize(st));
    return bad != 0;
}

/* --- input normalisation --------------------------------------------------------------------------- */

#define NORM_MAXC 16

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

extern "C" void dt_cuda_normalize_u8(int64_t n, int c, const uint8_t *u_host, const float *mean_host,
                                     const float *std_host, float *x)
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
    cudaStream_t st = stream();
    uint8_t *u = (uint8_t *)scratch((size_t)n);
    DT_CK(cudaMemcpyAsync(u, u_host, (size_t)n, cudaMemcpyHostToDevice, st));
    /* From pageable memory the copy is staged before cudaMemcpyAsync returns, so the caller may reuse
     * u_host at once. From page-locked memory it runs later: wait for it then, so that the contract
     * (the op has read u_host when it returns) holds either way. */
    cudaPointerAttributes attr;
    DT_CK(cudaPointerGetAttributes(&attr, u_host));
    if (attr.type != cudaMemoryTypeUnregistered)
        DT_CK(cudaStreamSynchronize(st));
    normalize_u8_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, c, u, np, x);
    DT_LAUNCHED("normalize_u8_kernel");
}
