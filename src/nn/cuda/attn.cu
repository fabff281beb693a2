/* attn.cu: ViT's token ops and self-attention's core on the GPU, the port of nn/cpu/attn.c (tokens_fwd,
 * tokens_bwd, attn_scratch, attn_fwd, attn_bwd; contracts in nn/backend.h, shared helpers and rules:
 * kernels.h). Every typed operand is fp32, fp16 or bf16 as its dt_dtype says; the arithmetic is fp32
 * (sums in double where attn.c's are), each reduced value widened when loaded and each result rounded
 * once when stored (accumulate: the rounded fp32 sum of the widened old value and the result).
 *
 * Tokens. tokens_fwd is one fp32 add per element and tokens_bwd's dx a copy (added with accumulate):
 * the CPU's bits. dcls and dpos are sums over the batch: one thread per (token, column) adds the n
 * images' values in the order of b in double and rounds once, as attn.c does: the CPU's bits too, with
 * no atomics.
 *
 * Attention. The products are cuBLAS's fp32 strided-batched GEMMs (CUBLAS_COMPUTE_32F on fp32
 * operands; the handle's CUBLAS_DEFAULT_MATH keeps them off TF32: runtime.c), the rest small
 * kernels of ours. qkv's layout [n, s, 3D] puts a head's queries of one sequence in rows 3D apart,
 * and its sequences and heads at strides (s*3D, dh) that no single batch stride covers, so a kernel
 * first copies the operands into fp32 scratch laid out head-major, [n, heads, s, dh] (one contiguous
 * [s, dh] matrix per (sequence, head), batch index b*heads + h, the index p uses too): one GEMM call
 * then covers every sequence and head. That copy is also where reduced operands are widened and where
 * Q is divided by sqrt(dh) (PyTorch's order: the division before the product). Another kernel copies
 * results back into the [n, s, parts*D] layout, rounding (and adding, for dqkv) as it stores.
 *
 * cuBLAS is column-major: a row-major [r, c] matrix is, in the same memory, the column-major [c, r]
 * matrix (its transpose), leading dimension c. So each row-major product C = A B is computed as
 * C^T = B^T A^T on the same memory (as linear_cublas.c does), the three forms used here being
 *   C [s, s] = A [s, dh] B [s, dh]^T    gemm(T, N, m = s,  n = s, k = dh, B, ld dh, A, ld dh, C, ld s)
 *   C [s, dh] = A [s, s] B [s, dh]      gemm(N, N, m = dh, n = s, k = s,  B, ld dh, A, ld s,  C, ld dh)
 *   C [s, dh] = A [s, s]^T B [s, dh]    gemm(N, T, m = dh, n = s, k = s,  B, ld dh, A, ld s,  C, ld dh)
 * (bt_gemm, ab_gemm and atb_gemm below): S = Qs K^T and dP = dY V^T; y = P V and dQ' = dS K; dV =
 * P^T dY and dK = dS^T Qs. cuBLAS sums each product's dh or s terms in its own order: results agree
 * with the CPU's to float rounding of such sums, not bit for bit (kernels.h's 1e-4 class).
 *
 * Rows (the softmax, and backward's dS = P*(dP - c), c the row's sum of P*dP): one block of THREADS
 * threads per row, its threads striding over the s columns; each thread sums its columns in order in
 * double, then the threads' sums are added by a fixed tree: attn.c's double sums in another order fixed
 * by s alone (no atomics), so the float results almost always have the CPU's bits, else differ by 1
 * ulp (a max is exact in any order). The arithmetic around the sums is attn.c's, unfused; the
 * softmax's exponentials are CUDA's expf (within 2 ulp) where the CPU has glibc's.
 *
 * Scratch (attn_scratch): five fp32 arrays of n*s*D floats (Q/sqrt(dh), K, V, dY, dV) and one of
 * n*heads*s*s (dP, then dS in place); arrays are reused once their values are dead: forward writes
 * P V over Q/sqrt(dh) (which only S needed), backward dS K over dY and dS^T Qs over V (both dead once
 * dV and dP are formed). So forward uses the first three arrays, backward all six. */
#include "config.h"

#include <cublas_v2.h>
#include <math.h>

#include "nn/cuda/kernels.h"

/* --- tokens ------------------------------------------------------------------------------------------ */

static void tokens_types(const char *op, dt_dtype xt, dt_dtype pt, dt_dtype yt)
{
    DT_CUDA_STORED(op, xt);
    DT_CUDA_STORED(op, pt);
    DT_CUDA_STORED(op, yt);
}

/* y [n, np+1, d]: token 0 of each image cls + pos[0], token 1+i x[b, i] + pos[1+i]; one thread per
 * element of y */
template <typename TX, typename TP, typename TY>
static __global__ void tokens_fwd_kernel(int64_t total, int np, int d, const TX *x, const TP *cls, const TP *pos, TY *y)
{
    const int64_t per = (int64_t)(np + 1) * d; /* an image's tokens */
    GRID_LOOP(i, total)
    {
        const int64_t b = i / per, r = i % per; /* r = t*d + j, pos's index */
        const float a = r < d ? ld(cls, r) : ld(x, b * np * d + r - d);
        st(y, i, __fadd_rn(a, ld(pos, r)));
    }
}

/* dx [n, np, d] = the image tokens of dy [n, np+1, d] (accumulate: added); one thread per element of dx */
template <typename TY, typename TX>
static __global__ void tokens_dx_kernel(int64_t total, int np, int d, const TY *dy, TX *dx, int accumulate)
{
    const int64_t per = (int64_t)np * d;
    GRID_LOOP(i, total)
    {
        const int64_t b = i / per, r = i % per;
        st_acc(dx, i, ld(dy, b * (per + d) + d + r), accumulate);
    }
}

/* dpos [np+1, d] = the sum over the n images of dy, and dcls [d] = its token 0; one thread per element
 * of dpos, adding the images in the order of b in double, rounded to fp32 once (accumulate: the rounded
 * fp32 sum with the old value). Either destination may be NULL. */
template <typename TY, typename TP>
static __global__ void tokens_params_kernel(int n, int64_t per, int d, const TY *dy, TP *dcls, TP *dpos, int accumulate)
{
    GRID_LOOP(r, per)
    {
        double acc = 0.0;
        for (int b = 0; b < n; b++)
            acc = __dadd_rn(acc, (double)ld(dy, b * per + r));
        const float sum = (float)acc; /* the fp32 result, then rounded to TP (or added) as attn.c does */
        if (dpos)
            st_acc(dpos, r, sum, accumulate);
        if (dcls && r < d)
            st_acc(dcls, r, sum, accumulate);
    }
}

extern "C" void dt_cuda_tokens_fwd(int n, int np, int d, const void *x, dt_dtype xt, const void *cls, const void *pos,
                                   dt_dtype pt, void *y, dt_dtype yt)
{
    tokens_types("tokens_fwd", xt, pt, yt);
    const int64_t total = (int64_t)n * (np + 1) * d;
    if (n <= 0 || np < 0 || d <= 0)
        return;
    DT_CUDA_TYPED(
        "tokens_fwd", xt, TX,
        DT_CUDA_TYPED("tokens_fwd", pt, TP,
                      DT_CUDA_TYPED("tokens_fwd", yt, TY,
                                    tokens_fwd_kernel<TX, TP, TY><<<blocks_for(total), THREADS, 0, stream()>>>(
                                        total, np, d, (const TX *)x, (const TP *)cls, (const TP *)pos, (TY *)y))));
    DT_LAUNCHED("tokens_fwd_kernel");
}

/* dx when wanted; dcls and dpos over any n (none: zeros, the empty sums) */
extern "C" void dt_cuda_tokens_bwd(int n, int np, int d, const void *dy, dt_dtype yt, void *dx, dt_dtype xt, void *dcls,
                                   void *dpos, dt_dtype pt, int accumulate_dx, int accumulate_params)
{
    tokens_types("tokens_bwd", xt, pt, yt);
    if (np < 0 || d <= 0 || n < 0)
        return;
    const int64_t ndx = (int64_t)n * np * d, per = (int64_t)(np + 1) * d;
    if (dx && ndx > 0) {
        DT_CUDA_TYPED("tokens_bwd", yt, TY,
                      DT_CUDA_TYPED("tokens_bwd", xt, TX,
                                    tokens_dx_kernel<TY, TX><<<blocks_for(ndx), THREADS, 0, stream()>>>(
                                        ndx, np, d, (const TY *)dy, (TX *)dx, accumulate_dx)));
        DT_LAUNCHED("tokens_dx_kernel");
    }
    if (dcls || dpos) {
        DT_CUDA_TYPED("tokens_bwd", yt, TY,
                      DT_CUDA_TYPED("tokens_bwd", pt, TP,
                                    tokens_params_kernel<TY, TP><<<blocks_for(per), THREADS, 0, stream()>>>(
                                        n, per, d, (const TY *)dy, (TP *)dcls, (TP *)dpos, accumulate_params)));
        DT_LAUNCHED("tokens_params_kernel");
    }
}

/* --- attention: layouts --------------------------------------------------------------------------- */

/* Rows [n, s, parts*D] of type T (qkv: parts 3; y and dy: parts 1) into the parts fp32 head-major arrays
 * [n, heads, s, dh] d0, d1, d2 (unused ones NULL), part 0 divided by div0 (Q by sqrt(dh); 1 leaves a
 * value as it is, exactly). One thread per source element: consecutive threads read consecutive columns
 * and write consecutive elements of a head's row. */
template <typename T>
static __global__ void heads_split_kernel(int64_t total, int s, int heads, int dh, int parts, const T *src, float *d0,
                                          float *d1, float *d2, float div0)
{
    const int D = heads * dh, w = parts * D;
    GRID_LOOP(i, total)
    {
        const int64_t row = i / w, b = row / s, tok = row % s; /* row = b*s + tok */
        const int c = (int)(i % w), part = c / D, h = c % D / dh, k = c % dh;
        const int64_t o = ((b * heads + h) * s + tok) * dh + k;
        const float v = ld(src, i);
        if (part == 0)
            d0[o] = __fdiv_rn(v, div0);
        else if (part == 1)
            d1[o] = v;
        else
            d2[o] = v;
    }
}

/* The way back: dst [n, s, parts*D] of type T from the parts head-major arrays s0, s1, s2, part 0
 * divided by div0 (dQ' / sqrt(dh)), stored or added (st_acc); one thread per destination element. */
template <typename T>
static __global__ void heads_merge_kernel(int64_t total, int s, int heads, int dh, int parts, const float *s0,
                                          const float *s1, const float *s2, float div0, T *dst, int accumulate)
{
    const int D = heads * dh, w = parts * D;
    GRID_LOOP(i, total)
    {
        const int64_t row = i / w, b = row / s, tok = row % s;
        const int c = (int)(i % w), part = c / D, h = c % D / dh, k = c % dh;
        const int64_t o = ((b * heads + h) * s + tok) * dh + k;
        const float v = part == 0 ? __fdiv_rn(s0[o], div0) : part == 1 ? s1[o] : s2[o];
        st_acc(dst, i, v, accumulate);
    }
}

template <typename T>
static void heads_split(int n, int s, int heads, int dh, int parts, const void *src, float *d0, float *d1, float *d2,
                        float div0)
{
    const int64_t total = (int64_t)n * s * parts * heads * dh;
    heads_split_kernel<T>
        <<<blocks_for(total), THREADS, 0, stream()>>>(total, s, heads, dh, parts, (const T *)src, d0, d1, d2, div0);
    DT_LAUNCHED("heads_split_kernel");
}

template <typename T>
static void heads_merge(int n, int s, int heads, int dh, int parts, const float *s0, const float *s1, const float *s2,
                        float div0, void *dst, int accumulate)
{
    const int64_t total = (int64_t)n * s * parts * heads * dh;
    heads_merge_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, s, heads, dh, parts, s0, s1, s2, div0,
                                                                       (T *)dst, accumulate);
    DT_LAUNCHED("heads_merge_kernel");
}

/* --- attention: rows ----------------------------------------------------------------------------------- */

struct max_op {
    __device__ double operator()(double a, double b) const
    {
        return b > a ? b : a;
    }
};

struct sum_op {
    __device__ double operator()(double a, double b) const
    {
        return __dadd_rn(a, b);
    }
};

/* v combined over the block's THREADS threads by op, in a fixed tree; every thread gets the result. red:
 * THREADS doubles of shared memory; every thread of the block must call it. */
template <typename Op> static __device__ double block_reduce(double v, double *red, Op op)
{
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (t < w)
            red[t] = op(red[t], red[t + w]);
        __syncthreads();
    }
    const double r = red[0];
    __syncthreads(); /* every thread has read red[0] before the next call writes red */
    return r;
}

/* the blocks of a row kernel: one per row, at most MAX_BLOCKS (the kernels loop over the rest) */
static unsigned row_blocks(int64_t rows)
{
    return (unsigned)(rows < MAX_BLOCKS ? rows : MAX_BLOCKS);
}

/* attn.c's softmax on each row of s values of p, in place: e = expf(x - the row's max) in fp32, the e
 * summed in double, each e divided by the sum in double and rounded once. The loop's condition is the
 * block's own, so its threads reach block_reduce's barriers together. */
static __global__ void __launch_bounds__(THREADS) softmax_rows_kernel(int64_t rows, int s, float *p)
{
    __shared__ double red[THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float *x = p + r * s;
        double m = (double)neg_inf(); /* a max is exact in any order (a max over doubles of floats) */
        for (int j = threadIdx.x; j < s; j += THREADS)
            m = max_op()(m, (double)x[j]);
        const float mf = (float)block_reduce(m, red, max_op());
        double sum = 0.0;
        for (int j = threadIdx.x; j < s; j += THREADS) {
            const float e = expf(__fsub_rn(x[j], mf));
            x[j] = e; /* read back below by this same thread */
            sum = __dadd_rn(sum, (double)e);
        }
        sum = block_reduce(sum, red, sum_op());
        for (int j = threadIdx.x; j < s; j += THREADS)
            x[j] = (float)__ddiv_rn((double)x[j], sum);
    }
}

/* attn.c's softmax backward on each row of s values: g = dP in, dS = P * (dP - c) out, in place, c = the
 * row's sum of P*dP (double products, summed in double, rounded to fp32 once) */
static __global__ void __launch_bounds__(THREADS)
    softmax_grad_rows_kernel(int64_t rows, int s, const float *p, float *g)
{
    __shared__ double red[THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *pr = p + r * s;
        float *gr = g + r * s;
        double dot = 0.0;
        for (int j = threadIdx.x; j < s; j += THREADS)
            dot = __dadd_rn(dot, __dmul_rn((double)pr[j], (double)gr[j]));
        const float c = (float)block_reduce(dot, red, sum_op());
        for (int j = threadIdx.x; j < s; j += THREADS)
            gr[j] = __fmul_rn(pr[j], __fsub_rn(gr[j], c));
    }
}

/* --- attention: products --------------------------------------------------------------------------- */

/* the most matrices one call gets: cuBLAS documents no limit, but a batch index may end up in a grid
 * dimension of at most 65535, so larger batches (n*heads above 32768) go in slices, to be safe */
#define ATTN_BATCH_MAX 32768

/* batch column-major products C_i = op(A_i) op(B_i), fp32 operands and compute, the i-th matrix of each
 * sa, sb, sc floats after the previous one */
static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *a, int lda,
                         long long sa, const float *b, int ldb, long long sb, float *c, int ldc, long long sc,
                         int64_t batch)
{
    const float one = 1.0f, zero = 0.0f;
    for (int64_t i = 0; i < batch; i += ATTN_BATCH_MAX) {
        const int cnt = (int)(batch - i < ATTN_BATCH_MAX ? batch - i : ATTN_BATCH_MAX);
        FATAL_CUBLAS(cublasGemmStridedBatchedEx((cublasHandle_t)dt_cuda_cublas(), ta, tb, m, n, k, &one, a + i * sa,
                                                CUDA_R_32F, lda, sa, b + i * sb, CUDA_R_32F, ldb, sb, &zero, c + i * sc,
                                                CUDA_R_32F, ldc, sc, cnt, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

/* The three row-major products of the file's comment, per (sequence, head): batch matrices A, B, C, each
 * of the sizes named, one after the other (head-major arrays and p). */
/* C [s, s] = A [s, dh] B [s, dh]^T */
static void bt_gemm(int64_t batch, int s, int dh, const float *a, const float *b, float *c)
{
    gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, s, s, dh, b, dh, (long long)s * dh, a, dh, (long long)s * dh, c, s,
                 (long long)s * s, batch);
}

/* C [s, dh] = A [s, s] B [s, dh] */
static void ab_gemm(int64_t batch, int s, int dh, const float *a, const float *b, float *c)
{
    gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, dh, s, s, b, dh, (long long)s * dh, a, s, (long long)s * s, c, dh,
                 (long long)s * dh, batch);
}

/* C [s, dh] = A [s, s]^T B [s, dh] */
static void atb_gemm(int64_t batch, int s, int dh, const float *a, const float *b, float *c)
{
    gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, dh, s, s, b, dh, (long long)s * dh, a, s, (long long)s * s, c, dh,
                 (long long)s * dh, batch);
}

/* --- attention: the ops ---------------------------------------------------------------------------- */

/* the scratch: five head-major arrays (Q/sqrt(dh), K, V, dY, dV) then dP, each starting 256-byte
 * aligned; returns the bytes (all six: backward's; forward uses the first three) */
enum { A_Q, A_K, A_V, A_DY, A_DV, A_DP, A_COUNT };
static size_t attn_layout(int n, int s, int heads, int dh, size_t off[A_COUNT])
{
    const size_t e = align256((size_t)n * s * heads * dh * sizeof(float));
    for (int i = 0; i < A_DP; i++)
        off[i] = (size_t)i * e;
    off[A_DP] = (size_t)A_DP * e;
    return off[A_DP] + (size_t)n * heads * s * s * sizeof(float);
}

/* the scratch's arrays for this shape (one request: a second may move the buffer) */
static void attn_arrays(int n, int s, int heads, int dh, float *a[A_COUNT])
{
    size_t off[A_COUNT];
    char *base = (char *)scratch(attn_layout(n, s, heads, dh, off));
    for (int i = 0; i < A_COUNT; i++)
        a[i] = (float *)(base + off[i]);
}

static void attn_types(const char *op, dt_dtype t, dt_dtype yt)
{
    DT_CUDA_STORED(op, t);
    DT_CUDA_STORED(op, yt);
}

static int attn_empty(int n, int s, int heads, int dh)
{
    return n <= 0 || s <= 0 || heads <= 0 || dh <= 0;
}

extern "C" size_t dt_cuda_attn_scratch(int n, int s, int heads, int dh, dt_dtype t, dt_dtype yt)
{
    attn_types("attn_scratch", t, yt);
    size_t off[A_COUNT];
    return attn_empty(n, s, heads, dh) ? 0 : attn_layout(n, s, heads, dh, off);
}

/* Q/sqrt(dh), K, V head-major; S = Qs K^T into p; the softmax in place; P V over Qs; y from it */
extern "C" void dt_cuda_attn_fwd(int n, int s, int heads, int dh, const void *qkv, dt_dtype t, void *y, dt_dtype yt,
                                 float *p)
{
    attn_types("attn_fwd", t, yt);
    if (attn_empty(n, s, heads, dh))
        return;
    float *a[A_COUNT];
    attn_arrays(n, s, heads, dh, a);
    const int64_t batch = (int64_t)n * heads;
    const float sd = (float)sqrt((double)dh); /* attn.c's (PyTorch's) sqrt(dh) */
    DT_CUDA_TYPED("attn_fwd", t, T, heads_split<T>(n, s, heads, dh, 3, qkv, a[A_Q], a[A_K], a[A_V], sd));
    bt_gemm(batch, s, dh, a[A_Q], a[A_K], p);
    softmax_rows_kernel<<<row_blocks(batch * s), THREADS, 0, stream()>>>(batch * s, s, p);
    DT_LAUNCHED("softmax_rows_kernel");
    ab_gemm(batch, s, dh, p, a[A_V], a[A_Q]);
    DT_CUDA_TYPED("attn_fwd", yt, TY, heads_merge<TY>(n, s, heads, dh, 1, a[A_Q], NULL, NULL, 1.0f, y, 0));
}

/* dV = P^T dY, dP = dY V^T, dS in place of dP, dQ' = dS K over dY, dK = dS^T Qs over V; dqkv from dQ'/sqrt(dh),
 * dK and dV */
extern "C" void dt_cuda_attn_bwd(int n, int s, int heads, int dh, const void *qkv, dt_dtype t, const float *p,
                                 const void *dy, dt_dtype yt, void *dqkv, int accumulate)
{
    attn_types("attn_bwd", t, yt);
    if (attn_empty(n, s, heads, dh))
        return;
    float *a[A_COUNT];
    attn_arrays(n, s, heads, dh, a);
    const int64_t batch = (int64_t)n * heads;
    const float sd = (float)sqrt((double)dh); /* attn.c's (PyTorch's) sqrt(dh) */
    DT_CUDA_TYPED("attn_bwd", t, T, heads_split<T>(n, s, heads, dh, 3, qkv, a[A_Q], a[A_K], a[A_V], sd));
    DT_CUDA_TYPED("attn_bwd", yt, TY, heads_split<TY>(n, s, heads, dh, 1, dy, a[A_DY], NULL, NULL, 1.0f));
    atb_gemm(batch, s, dh, p, a[A_DY], a[A_DV]);
    bt_gemm(batch, s, dh, a[A_DY], a[A_V], a[A_DP]);
    softmax_grad_rows_kernel<<<row_blocks(batch * s), THREADS, 0, stream()>>>(batch * s, s, p, a[A_DP]);
    DT_LAUNCHED("softmax_grad_rows_kernel");
    ab_gemm(batch, s, dh, a[A_DP], a[A_K], a[A_DY]);
    atb_gemm(batch, s, dh, a[A_DP], a[A_Q], a[A_V]);
    DT_CUDA_TYPED("attn_bwd", t, T, heads_merge<T>(n, s, heads, dh, 3, a[A_DY], a[A_V], a[A_DV], sd, dqkv, accumulate));
}
