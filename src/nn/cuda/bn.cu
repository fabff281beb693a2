/* bn.cu: batch norm on the GPU, the port of nn/cpu/bn.c (shared helpers and rules: kernels.h). Storage
 * types as backend.h says: x and dx d->xt, y and dy d->yt, the parameters, running statistics, dgamma
 * and dbeta d->pt, the residual and its gradient rt, each fp32, fp16 or bf16; saved, the scratch and
 * all arithmetic are fp32 or double as in the fp32 code, reduced values widened when loaded and
 * rounded once when stored. Each kernel is a template on the types it touches only: the per-channel
 * kernels on TP (they turn the parameters into fp32 scale/shift and dx coefficients, so the big
 * passes never see TP), the reductions on TX and TY, the element-wise passes on TX, TY and TR.
 * x and dx may be the first c channels of a wider tensor (d->xs elements from one row to the next, as
 * bn.c): the kernels take that row stride (xs) for x and dx alone, y, dy and the tail's operands stay
 * packed, so every sum is the packed op's; the 8-wide paths need xs % 8 == 0 as well. The tail ops share
 * the kernels and so honour xs too, but their contract takes xs = 0 only (untested with a stride). The
 * scratch depends on rows and c alone: xs changes no size. */
#include "config.h"

#include "nn/cuda/kernels.h"

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
#define SYNC_STRIDE (2 * CB + 2) /* per channel block: [unused][rows, sums[cb], sums2[cb]] */

/* bn.c's bn_affine, unfused */
static __device__ __forceinline__ float bn_affine(float x, float scale, float shift)
{
    return __fadd_rn(__fmul_rn(x, scale), shift);
}

/* elements from one row of x (and dx) to the next */
static inline int64_t bn_xs(const dt_bn_desc *d)
{
    return d->xs > 0 ? d->xs : d->c;
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

/* BWD 0: sums of t = x - k and t*t with k = x[row 0] (the forward's shifted sums; dy and ym unused, TY
 * any). BWD 1: sums of g and g*(x - mean) with g = dy masked by the fused ReLU (the backward's sums).
 * x of type TX (rows xs elements apart), dy and ym TY (packed); part0/part1: [c][nchunk] doubles. */
template <int BWD, typename TX, typename TY>
static __global__ void bn_partials(int64_t rows, int c, int64_t xs, const TX *x, const TY *dy, const float *saved,
                                   int relu, const TY *ym, int nchunk, double *part0, double *part1)
{
    __shared__ double sh0[RED_TY][RED_TX], sh1[RED_TY][RED_TX];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ch = blockIdx.x * RED_TX + tx;
    const int64_t nrb = (rows + RB - 1) / RB;
    double s0 = 0.0, s1 = 0.0;
    if (ch < c) {
        float k = 0.0f, mean = 0.0f, scale = 0.0f, shift = 0.0f;
        if (!BWD) {
            k = ld(x, ch);
        } else {
            mean = saved[ch];
            scale = saved[2 * (size_t)c + ch];
            shift = saved[3 * (size_t)c + ch];
        }
        for (int64_t b = (int64_t)blockIdx.y * RED_TY + ty; b < nrb; b += (int64_t)nchunk * RED_TY) {
            const int64_t r0 = b * RB, r1 = r0 + RB < rows ? r0 + RB : rows;
            float f0 = 0.0f, f1 = 0.0f;
            for (int64_t r = r0; r < r1; r++) {
                const float xv = ld(x, r * xs + ch);
                if (!BWD) {
                    const float t = __fsub_rn(xv, k);
                    f0 = __fadd_rn(f0, t);
                    f1 = __fadd_rn(f1, __fmul_rn(t, t));
                } else {
                    const float v = ld(dy, r * c + ch);
                    const float g = ym     ? (ld(ym, r * c + ch) > 0.0f ? v : 0.0f)
                                    : relu ? (bn_affine(xv, scale, shift) > 0.0f ? v : 0.0f)
                                           : v;
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
 * BWD 1: A = GA = sum dy, B = GB = sum dy*(x-mean), N = rows (GA, GB, N are what SyncBN replaces).
 * x (type TX) is read by the forward only (its first row, the shift k): the backward passes NULL. */
template <int BWD, typename TX>
static __global__ void bn_reduce(int64_t rows, int c, const TX *x, int nchunk, const double *part0,
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
                A[ch] = __dadd_rn((double)ld(x, ch), ms);
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

/* where the block's sync succeeded (bit blk of ok): forward: N, mean and deviations of all replicas'
 * rows; backward: N, GA, GB. On failure the local values stay, as in bn.c. */
static __global__ void bn_sync_unpack(int c, int bwd, unsigned long long ok, const double *sbuf, double *A, double *B,
                                      double *GA, double *GB, double *N)
{
    GRID_LOOP(ch, c)
    {
        const int blk = (int)(ch / CB), j = (int)(ch % CB);
        const int cb = c - blk * CB < CB ? c - blk * CB : CB;
        const double *buf = sbuf + (int64_t)blk * SYNC_STRIDE + 1;
        if (!(ok >> blk & 1ull))
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

/* d->sync per block of CB channels, in order, each handed its part of the device buffer itself (the
 * hook's communicator reduces device memory: NCCL; no host copy of the statistics). The stream is
 * waited on once after the pack, as a communicator reads what the ops wrote; the hook returns once
 * the reduction is complete, and the unpack is issued after it. */
static void bn_sync(const dt_bn_desc *d, int bwd, double *A, double *B, double *GA, double *GB, double *N,
                    double *sbuf)
{
    const int c = d->c;
    if (c > 64 * CB)
        dt_cuda_fatal("bn (SyncBN)", "more than 64 blocks of channels");
    cudaStream_t s = stream();
    bn_sync_pack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, d->rows, A, B, sbuf);
    DT_LAUNCHED("bn_sync_pack");
    DT_CK(cudaStreamSynchronize(s));
    unsigned long long ok = 0;
    for (int c0 = 0, blk = 0; c0 < c; c0 += CB, blk++) {
        const int cb = c - c0 < CB ? c - c0 : CB;
        if (d->sync(d->sync_ctx, sbuf + (int64_t)blk * SYNC_STRIDE + 1, 2 * cb + 1) == 0)
            ok |= 1ull << blk;
    }
    bn_sync_unpack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, ok, sbuf, A, B, GA, GB, N);
    DT_LAUNCHED("bn_sync_unpack");
}

/* bn.c's per-channel tail of the training forward, in its order and types (gamma, beta and the running
 * statistics of type TP, widened to float as bn.c's params_in does; the running statistics rounded to
 * float, then to TP, as bn.c stores them) */
template <typename TP>
static __global__ void bn_train_finalize(int c, const double *A, const double *B, const double *N, const TP *gamma,
                                         const TP *beta, float eps, float momentum, float *saved, TP *running_mean,
                                         TP *running_var)
{
    GRID_LOOP(ch, c)
    {
        const double mean = A[ch], sq = B[ch], n_all = N[ch];
        const double var = __ddiv_rn(sq, n_all);
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, (double)eps)));
        const double g = (double)ld(gamma, ch);
        saved[ch] = (float)mean;
        saved[c + ch] = (float)invstd;
        saved[2 * (int64_t)c + ch] = (float)__dmul_rn(g, invstd);
        saved[3 * (int64_t)c + ch] = (float)__dsub_rn((double)ld(beta, ch), __dmul_rn(__dmul_rn(mean, g), invstd));
        const double unbiased = n_all > 1 ? __ddiv_rn(sq, __dsub_rn(n_all, 1.0)) : var;
        const double m = (double)momentum, keep = __dsub_rn(1.0, m);
        st(running_mean, ch, (float)__dadd_rn(__dmul_rn(keep, (double)ld(running_mean, ch)), __dmul_rn(m, mean)));
        st(running_var, ch, (float)__dadd_rn(__dmul_rn(keep, (double)ld(running_var, ch)), __dmul_rn(m, unbiased)));
    }
}

/* bn.c's inference scale and shift (fp32, from parameters of type TP): note running_mean * gamma is a
 * float product there */
template <typename TP>
static __global__ void bn_infer_coef(int c, const TP *gamma, const TP *beta, const TP *running_mean,
                                     const TP *running_var, float eps, float *scale, float *shift)
{
    GRID_LOOP(ch, c)
    {
        const float g = ld(gamma, ch);
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)ld(running_var, ch), (double)eps)));
        scale[ch] = (float)__dmul_rn((double)g, invstd);
        const float mg = __fmul_rn(ld(running_mean, ch), g);
        shift[ch] = (float)__dsub_rn((double)ld(beta, ch), __dmul_rn((double)mg, invstd));
    }
}

/* y = x*scale + shift per channel (then max(0, .)); with a residual res, y = max(0, x*scale + shift +
 * res) (bn.c's order: the BN output as fp32 holds it, then the add), rounded to TY once; n = rows*c,
 * i counting y's (packed) elements, x's row i / c at xs elements a row.
 * x of type TX, y TY, res TR (TR any when res is NULL); scale and shift are fp32 per channel. vec:
 * c % 8 == 0 and every pointer 16-byte aligned (the host checks), so each thread takes 8 channels of a
 * row with load8/store8 (the same expression per element: the same values as the scalar loop). */
/* The per-element arithmetic of the two big passes, shared by their vector and scalar paths (so the
 * two give the same bits). The affine pass's output: bn(x), plus the residual r when there is one,
 * then the ReLU (relu, or always with a residual: the BN+add+ReLU tail). */
static __device__ __forceinline__ float bn_out(float x, float scale, float shift, int has_res, float r, int relu)
{
    float v = bn_affine(x, scale, shift);
    if (has_res)
        v = __fadd_rn(v, r);
    if (relu || has_res)
        v = v > 0.0f ? v : 0.0f;
    return v;
}

/* backward's g: dy where the block output ym is positive (a tail), where the fused ReLU's fp32 value
 * from x was (relu), else dy */
static __device__ __forceinline__ float bn_grad_in(float dy, int has_ym, float ym, int relu, float x, float scale,
                                                   float shift)
{
    if (has_ym)
        return ym > 0.0f ? dy : 0.0f;
    if (relu)
        return bn_affine(x, scale, shift) > 0.0f ? dy : 0.0f;
    return dy;
}

/* where packed element i (channel ch) of a [rows, c] tensor is in x or dx, rows xs elements apart */
static __device__ __forceinline__ int64_t x_at(int64_t i, int c, int64_t xs, int ch)
{
    return xs == c ? i : i / c * xs + ch;
}

/* dx = a*g - k*(x - mean) - b, bn.c's order */
static __device__ __forceinline__ float bn_dx_value(float g, float x, float mean, float a, float k, float b)
{
    return __fsub_rn(__fsub_rn(__fmul_rn(a, g), __fmul_rn(k, __fsub_rn(x, mean))), b);
}

template <typename TX, typename TY, typename TR>
static __global__ void bn_affine_kernel(int64_t n, int c, int64_t xs, const TX *x, const float *scale,
                                        const float *shift, TY *y, int relu, const TR *res, int vec)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (vec) { /* i counts groups of 8 elements; cg is the group's channel / 8 */
        const int c8 = c / 8;
        const int64_t n8 = n / 8;
        int cg = (int)(i % c8);
        const int dcg = (int)(stride % c8);
        for (; i < n8; i += stride) {
            const int64_t e = i * 8;
            const int ch = cg * 8;
            float xv[8], sc[8], sh[8], rv[8] = {0}, v[8];
            load8(x + x_at(e, c, xs, ch), xv);
            load8(scale + ch, sc);
            load8(shift + ch, sh);
            if (res)
                load8(res + e, rv);
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = bn_out(xv[j], sc[j], sh[j], res != NULL, rv[j], relu);
            store8(y + e, v);
            cg += dcg;
            if (cg >= c8)
                cg -= c8;
        }
        return;
    }
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        st(y, i, bn_out(ld(x, x_at(i, c, xs, ch)), scale[ch], shift[ch], res != NULL, res ? ld(res, i) : 0.0f, relu));
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* bn.c's per-channel tail of backward: dgamma, dbeta (local sums A, B; type TP, added as the rounded
 * float sum with accumulate_params) and the fp32 coefficients a, k, b of dx = a*g - k*(x-mean) - b
 * (with the possibly synced GA, GB, N) */
template <typename TP>
static __global__ void bn_bwd_finalize(int c, const double *A, const double *B, const double *GA, const double *GB,
                                       const double *N, const TP *gamma, const float *saved, TP *dgamma, TP *dbeta,
                                       int accumulate_params, float *coef)
{
    GRID_LOOP(ch, c)
    {
        const double invstd = (double)saved[c + ch];
        const double dg = __dmul_rn(B[ch], invstd), db = A[ch];
        st_acc(dgamma, ch, (float)dg, accumulate_params);
        st_acc(dbeta, ch, (float)db, accumulate_params);
        const double g = (double)ld(gamma, ch), n_all = N[ch];
        const double gi = __dmul_rn(g, invstd);
        coef[ch] = (float)gi;
        coef[c + ch] = (float)__ddiv_rn(__dmul_rn(__dmul_rn(__dmul_rn(gi, invstd), invstd), GB[ch]), n_all);
        coef[2 * (int64_t)c + ch] = (float)__ddiv_rn(__dmul_rn(gi, GA[ch]), n_all);
    }
}

/* dx (type TX, as x); with the block output ym (a BN+add+ReLU tail; type TY, as dy) the mask comes
 * from it and g also goes to the residual's gradient dr (type TR, any when dr is NULL; dr may be dy:
 * each element is read before it is written, by the same thread). The fused ReLU's mask (relu, no ym)
 * is bn.c's: the fp32 affine value from x and saved > 0, as forward computed it before rounding y.
 * vec and xs (x's and dx's row stride) as bn_affine_kernel's. */
template <typename TX, typename TY, typename TR>
static __global__ void bn_bwd_dx(int64_t n, int c, int64_t xs, const TX *x, const TY *dy, const float *saved,
                                 const float *coef, int relu, TX *dx, int accumulate, const TY *ym, TR *dr,
                                 int accumulate_dr, int vec)
{
    const float *mean = saved, *scale = saved + 2 * (int64_t)c, *shift = saved + 3 * (int64_t)c;
    const float *ca = coef, *ck = coef + c, *cb = coef + 2 * (int64_t)c;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (vec) { /* i counts groups of 8 elements; cg is the group's channel / 8 */
        const int c8 = c / 8;
        const int64_t n8 = n / 8;
        int cg = (int)(i % c8);
        const int dcg = (int)(stride % c8);
        for (; i < n8; i += stride) {
            const int64_t e = i * 8;
            const int ch = cg * 8;
            const int64_t xe = x_at(e, c, xs, ch);
            float xv[8], v[8], g[8], r[8], o[8], m[8], a[8], k[8], b[8], yv[8] = {0}, sc[8] = {0}, sh[8] = {0};
            load8(x + xe, xv);
            load8(dy + e, v);
            if (ym) {
                load8(ym + e, yv);
            } else if (relu) {
                load8(scale + ch, sc);
                load8(shift + ch, sh);
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
                g[j] = bn_grad_in(v[j], ym != NULL, yv[j], relu, xv[j], sc[j], sh[j]);
            if (dr && accumulate_dr) {
                load8(dr + e, o);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    o[j] = __fadd_rn(o[j], g[j]);
                store8(dr + e, o);
            } else if (dr) {
                store8(dr + e, g);
            }
            load8(mean + ch, m);
            load8(ca + ch, a);
            load8(ck + ch, k);
            load8(cb + ch, b);
#pragma unroll
            for (int j = 0; j < 8; j++)
                r[j] = bn_dx_value(g[j], xv[j], m[j], a[j], k[j], b[j]);
            if (accumulate) {
                load8(dx + xe, o);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    o[j] = __fadd_rn(o[j], r[j]);
                store8(dx + xe, o);
            } else {
                store8(dx + xe, r);
            }
            cg += dcg;
            if (cg >= c8)
                cg -= c8;
        }
        return;
    }
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        const int64_t xi = x_at(i, c, xs, ch);
        const float xv = ld(x, xi);
        const float g = bn_grad_in(ld(dy, i), ym != NULL, ym ? ld(ym, i) : 0.0f, relu, xv, scale[ch], shift[ch]);
        if (dr)
            st_acc(dr, i, g, accumulate_dr);
        st_acc(dx, xi, bn_dx_value(g, xv, mean[ch], ca[ch], ck[ch], cb[ch]), accumulate);
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* scratch for a training forward or backward: partials, the per-channel doubles, SyncBN buffers and
 * (backward) the dx coefficients, in one request of bn_train_bytes (the SyncBN buffers always: a
 * model planned without SyncBN may get it later) */
typedef struct bn_scratch {
    double *part0, *part1, *A, *B, *GA, *GB, *N, *sbuf;
    float *coef;
    int nchunk;
} bn_scratch;

static size_t bn_train_bytes(const dt_bn_desc *d, size_t *part, size_t *vec, size_t *sb, size_t *cf)
{
    const int c = d->c;
    *part = align256((size_t)c * (size_t)bn_chunks(d->rows, c) * sizeof(double));
    *vec = align256((size_t)c * sizeof(double));
    *sb = align256((size_t)((c + CB - 1) / CB) * SYNC_STRIDE * sizeof(double));
    *cf = align256(3 * (size_t)c * sizeof(float));
    return 2 * *part + 5 * *vec + *sb + *cf;
}

/* inference: the per-channel scale and shift */
static size_t bn_infer_bytes(const dt_bn_desc *d)
{
    return 2 * (size_t)d->c * sizeof(float);
}

/* d's three types (and a residual's rt): each must be one this backend stores (cuda.h). Checked up
 * front, so an op on an empty shape or bn_scratch aborts on a bad type as the launches would. */
static void bn_types(const char *op, const dt_bn_desc *d, dt_dtype rt)
{
    DT_CUDA_STORED(op, d->xt);
    DT_CUDA_STORED(op, d->yt);
    DT_CUDA_STORED(op, d->pt);
    DT_CUDA_STORED(op, rt);
}

extern "C" size_t dt_cuda_bn_scratch(const dt_bn_desc *d)
{
    bn_types("bn_scratch", d, DT_FLOAT32);
    if (d->rows <= 0 || d->c <= 0)
        return 0;
    size_t part, vec, sb, cf, train = bn_train_bytes(d, &part, &vec, &sb, &cf), infer = bn_infer_bytes(d);
    return train > infer ? train : infer;
}

static bn_scratch bn_scratch_get(const dt_bn_desc *d)
{
    bn_scratch s;
    s.nchunk = bn_chunks(d->rows, d->c);
    size_t part, vec, sb, cf;
    char *p = (char *)scratch(bn_train_bytes(d, &part, &vec, &sb, &cf));
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

/* bn_affine_kernel over d's rows, its three operand types dispatched (rt: res's; any stored type when
 * res is NULL), 8 channels a thread where c and the pointers allow */
static void bn_apply(const char *op, const dt_bn_desc *d, const void *x, const float *scale, const float *shift,
                     void *y, int relu, const void *res, dt_dtype rt, const char *name)
{
    const int64_t n = d->rows * d->c, xs = bn_xs(d);
    const int c = d->c;
    const int vec = c % 8 == 0 && xs % 8 == 0 && vec8_ok(x, y, res, scale) && vec8_ok(shift);
    const unsigned blocks = blocks_for(vec ? n / 8 : n);
    cudaStream_t st = stream();
    DT_CUDA_TYPED(op, d->xt, TX, DT_CUDA_TYPED(op, d->yt, TY, DT_CUDA_TYPED(op, rt, TR,
        bn_affine_kernel<TX, TY, TR><<<blocks, THREADS, 0, st>>>(n, c, xs, (const TX *)x, scale, shift, (TY *)y,
                                                                  relu, (const TR *)res, vec))));
    DT_LAUNCHED(name);
}

/* the training forward, with the tail bn_affine_kernel says (relu, or the residual res of type rt) */
static void bn_train(const char *op, const dt_bn_desc *d, const void *x, const void *gamma, const void *beta, void *y,
                     float *saved, void *running_mean, void *running_var, int relu, const void *res, dt_dtype rt)
{
    bn_types(op, d, rt);
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    const unsigned rg = (unsigned)(c < 65535 ? c : 65535);
    /* the forward's sums read x only: TY is a placeholder (float) */
    DT_CUDA_TYPED(op, d->xt, TX, {
        bn_partials<0, TX, float><<<pg, pb, 0, st>>>(rows, c, bn_xs(d), (const TX *)x, NULL, NULL, 0, NULL, s.nchunk,
                                                     s.part0, s.part1);
        DT_LAUNCHED("bn_partials (forward)");
        bn_reduce<0, TX><<<rg, THREADS, 0, st>>>(rows, c, (const TX *)x, s.nchunk, s.part0, s.part1, s.A, s.B, s.GA,
                                                 s.GB, s.N);
        DT_LAUNCHED("bn_reduce (forward)");
    });
    if (d->sync)
        bn_sync(d, 0, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    DT_CUDA_TYPED(op, d->pt, TP,
                  bn_train_finalize<TP><<<blocks_for(c), THREADS, 0, st>>>(
                      c, s.A, s.B, s.N, (const TP *)gamma, (const TP *)beta, d->eps, d->momentum, saved,
                      (TP *)running_mean, (TP *)running_var));
    DT_LAUNCHED("bn_train_finalize");
    bn_apply(op, d, x, saved + 2 * (size_t)c, saved + 3 * (size_t)c, y, relu, res, rt, "bn_affine_kernel (train)");
}

extern "C" void dt_cuda_bn_fwd_train(const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                                     void *yv, float *saved, void *running_meanv, void *running_varv, int relu)
{
    bn_train("bn_fwd_train", d, xv, gammav, betav, yv, saved, running_meanv, running_varv, relu, NULL, DT_FLOAT32);
}

extern "C" void dt_cuda_bn_add_relu_fwd_train(const dt_bn_desc *d, const void *xv, const void *gammav,
                                              const void *betav, const void *r, dt_dtype rt, void *yv, float *saved,
                                              void *running_meanv, void *running_varv)
{
    bn_train("bn_add_relu_fwd_train", d, xv, gammav, betav, yv, saved, running_meanv, running_varv, 1, r, rt);
}

/* the inference forward, with bn_affine_kernel's tail */
static void bn_infer(const char *op, const dt_bn_desc *d, const void *x, const void *gamma, const void *beta,
                     const void *running_mean, const void *running_var, void *y, int relu, const void *res,
                     dt_dtype rt)
{
    bn_types(op, d, rt);
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    float *scale = (float *)scratch(bn_infer_bytes(d)), *shift = scale + c;
    DT_CUDA_TYPED(op, d->pt, TP,
                  bn_infer_coef<TP><<<blocks_for(c), THREADS, 0, st>>>(c, (const TP *)gamma, (const TP *)beta,
                                                                       (const TP *)running_mean,
                                                                       (const TP *)running_var, d->eps, scale, shift));
    DT_LAUNCHED("bn_infer_coef");
    bn_apply(op, d, x, scale, shift, y, relu, res, rt, "bn_affine_kernel (infer)");
}

extern "C" void dt_cuda_bn_fwd_infer(const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                                     const void *running_meanv, const void *running_varv, void *yv, int relu)
{
    bn_infer("bn_fwd_infer", d, xv, gammav, betav, running_meanv, running_varv, yv, relu, NULL, DT_FLOAT32);
}

extern "C" void dt_cuda_bn_add_relu_fwd_infer(const dt_bn_desc *d, const void *xv, const void *gammav,
                                              const void *betav, const void *running_meanv,
                                              const void *running_varv, const void *r, dt_dtype rt, void *yv)
{
    bn_infer("bn_add_relu_fwd_infer", d, xv, gammav, betav, running_meanv, running_varv, yv, 1, r, rt);
}

/* backward; with ym (the block output of a BN+add+ReLU tail, type d->yt) the mask comes from it and g
 * also goes to the residual's gradient dr (type rt) */
static void bn_backward(const char *op, const dt_bn_desc *d, const void *x, const void *dy, int relu, const void *ym,
                        const void *gamma, const float *saved, void *dx, void *dr, dt_dtype rt, void *dgamma,
                        void *dbeta, int accumulate_dx, int accumulate_dr, int accumulate_params)
{
    bn_types(op, d, rt);
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    DT_CUDA_TYPED(op, d->xt, TX, DT_CUDA_TYPED(op, d->yt, TY,
        bn_partials<1, TX, TY><<<pg, pb, 0, st>>>(rows, c, bn_xs(d), (const TX *)x, (const TY *)dy, saved, relu,
                                                  (const TY *)ym, s.nchunk, s.part0, s.part1)));
    DT_LAUNCHED("bn_partials (backward)");
    /* the backward's reduce reads no x: one instantiation */
    bn_reduce<1, float><<<(unsigned)(c < 65535 ? c : 65535), THREADS, 0, st>>>(rows, c, NULL, s.nchunk, s.part0,
                                                                              s.part1, s.A, s.B, s.GA, s.GB, s.N);
    DT_LAUNCHED("bn_reduce (backward)");
    if (d->sync)
        bn_sync(d, 1, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    DT_CUDA_TYPED(op, d->pt, TP,
                  bn_bwd_finalize<TP><<<blocks_for(c), THREADS, 0, st>>>(c, s.A, s.B, s.GA, s.GB, s.N,
                                                                         (const TP *)gamma, saved, (TP *)dgamma,
                                                                         (TP *)dbeta, accumulate_params, s.coef));
    DT_LAUNCHED("bn_bwd_finalize");
    const int64_t n = rows * c, xs = bn_xs(d);
    const int vec = c % 8 == 0 && xs % 8 == 0 && vec8_ok(x, dy, dx, ym) && vec8_ok(dr, saved, s.coef);
    const unsigned blocks = blocks_for(vec ? n / 8 : n);
    DT_CUDA_TYPED(op, d->xt, TX, DT_CUDA_TYPED(op, d->yt, TY, DT_CUDA_TYPED(op, rt, TR,
        bn_bwd_dx<TX, TY, TR><<<blocks, THREADS, 0, st>>>(n, c, xs, (const TX *)x, (const TY *)dy, saved, s.coef,
                                                          relu, (TX *)dx, accumulate_dx, (const TY *)ym, (TR *)dr,
                                                          accumulate_dr, vec))));
    DT_LAUNCHED("bn_bwd_dx");
}

extern "C" void dt_cuda_bn_bwd(const dt_bn_desc *d, const void *xv, const void *dyv, int relu, const void *gammav,
                               const float *saved, void *dxv, void *dgammav, void *dbetav, int accumulate_dx,
                               int accumulate_params)
{
    bn_backward("bn_bwd", d, xv, dyv, relu, NULL, gammav, saved, dxv, NULL, DT_FLOAT32, dgammav, dbetav,
                accumulate_dx, 0, accumulate_params);
}

extern "C" void dt_cuda_bn_add_relu_bwd(const dt_bn_desc *d, const void *xv, const void *y, const void *dyv,
                                        const void *gammav, const float *saved, void *dxv, void *dr, dt_dtype rt,
                                        void *dgammav, void *dbetav, int accumulate_dx, int accumulate_dr,
                                        int accumulate_params)
{
    bn_backward("bn_add_relu_bwd", d, xv, dyv, 0, y, gammav, saved, dxv, dr, rt, dgammav, dbetav, accumulate_dx,
                accumulate_dr, accumulate_params);
}
