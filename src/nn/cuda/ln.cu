/* ln.cu: layer norm over each row's c values on the GPU, the port of nn/cpu/ln.c (ln_fwd, ln_bwd;
 * contracts in nn/backend.h, shared helpers and rules: kernels.h). x and dx are of type xt, y and dy
 * of yt, gamma, beta, dgamma and dbeta of pt (fp32, fp16 or bf16: every kernel is a template on the
 * types it touches); saved and all arithmetic are fp32 or double as in ln.c, each reduced value
 * widened when loaded and each result rounded once when stored. No scratch, no atomics.
 *
 * Rows (ln_fwd's mean and rstd, ln_bwd's two sums for dx): a group of ln_tpr(c) threads per row, a
 * warp (c <= LN_WARP_MAX) or the block of THREADS (wider rows): the choice depends on c alone. Each
 * thread sums its columns j = lane, lane + tpr, ... in order in double; the group's sums are then
 * added by a fixed butterfly of xor shuffles (which leaves every lane with the same bits) and, for a
 * block, the warps' sums in warp order. So the sums are ln.c's (in double, two passes for the
 * variance) in another order fixed by the shape: the double results differ from the CPU's by a few
 * double ulps, which reach the float mean, rstd and dx coefficients only where a value lies that close
 * to a float rounding boundary (almost always bit for bit, else 1 ulp of float). Everything after the
 * sums is ln.c's float arithmetic in its order, unfused (kernels.h, "Rounding").
 *
 * Columns (ln_bwd's dgamma and dbeta, summed over the rows): a block of 32 columns x LN_LANES lanes
 * of rows; lane l sums rows l, l + LN_LANES, ... of its column in order in double (a warp reads 32
 * consecutive columns of one row), then the lanes' sums are added in lane order: again ln.c's sums in
 * another order fixed by the shape. (ln.c sums each column over the rows in order: the same values,
 * to double rounding.) That is c / 32 blocks, few for narrow rows (ConvNeXt's first stage, c = 96: 3
 * blocks each looping over all rows): correct and deterministic, not fast; spreading the rows over
 * more blocks needs scratch for their partial sums, hence a planning op in nn/backend.h's list. */
#include "config.h"

#include "nn/cuda/kernels.h"

#define LN_WARP_MAX 1024 /* rows of up to this many values: a warp per row; wider: a block */
#define LN_LANES 32      /* the row lanes of a block of ln_params_kernel (32 x LN_LANES threads) */

static int ln_tpr(int c)
{
    return c > LN_WARP_MAX ? THREADS : 32;
}

/* blocks for rows of tpr threads each: THREADS / tpr rows a block, at most MAX_BLOCKS (ln_rows_kernel
 * loops over the rest) */
static unsigned ln_row_blocks(int64_t rows, int tpr)
{
    const int64_t per = THREADS / tpr, b = (rows + per - 1) / per;
    return (unsigned)(b < MAX_BLOCKS ? b : MAX_BLOCKS);
}

/* the three types must be ones this backend stores (cuda.h): checked up front, so an op on an empty
 * shape aborts on a bad type as a launch would */
static void ln_types(const char *op, dt_dtype xt, dt_dtype pt, dt_dtype yt)
{
    DT_CUDA_STORED(op, xt);
    DT_CUDA_STORED(op, pt);
    DT_CUDA_STORED(op, yt);
}

/* *a and *b summed over the TPR threads of a row (32: a warp; THREADS: the block), in a fixed order;
 * every thread of the row gets the same bits. red: the block's shared [THREADS / 32][2]. Every thread
 * of the row must call it (of the block when TPR is THREADS). */
template <int TPR> static __device__ __forceinline__ void row_sum2(double *a, double *b, double (*red)[2])
{
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) {
        *a = __dadd_rn(*a, __shfl_xor_sync(0xffffffffu, *a, k));
        *b = __dadd_rn(*b, __shfl_xor_sync(0xffffffffu, *b, k));
    }
    if (TPR > 32) {
        __syncthreads(); /* the previous call's readers are done with red */
        if ((threadIdx.x & 31) == 0) {
            red[threadIdx.x / 32][0] = *a;
            red[threadIdx.x / 32][1] = *b;
        }
        __syncthreads();
        double s0 = red[0][0], s1 = red[0][1];
        for (int w = 1; w < TPR / 32; w++) {
            s0 = __dadd_rn(s0, red[w][0]);
            s1 = __dadd_rn(s1, red[w][1]);
        }
        *a = s0;
        *b = s1;
    }
}

/* ln.c's xhat = (x - mean) * rstd, in float */
static __device__ __forceinline__ float ln_xhat(float x, float mean, float rstd)
{
    return __fmul_rn(__fsub_rn(x, mean), rstd);
}

/* The row kernel: a group of TPR threads a row (THREADS / TPR rows a block), row.run<TPR>(r, lane, red)
 * for each row r of this thread's group, lane its place in the group. The loop's condition is the
 * block's own, so a block of one row (TPR THREADS) runs it uniformly, as row_sum2's __syncthreads
 * need; a warp past the last row skips its turn as a whole. */
template <int TPR, typename Row> static __global__ void ln_rows_kernel(int64_t rows, Row row)
{
    __shared__ double red[THREADS / 32][2];
    const int lane = threadIdx.x % TPR;
    for (int64_t blk = blockIdx.x; blk * (THREADS / TPR) < rows; blk += gridDim.x) {
        const int64_t r = blk * (THREADS / TPR) + threadIdx.x / TPR;
        if (r < rows)
            row.template run<TPR>(r, lane, red);
    }
}

/* ln_rows_kernel with row's work over rows of c values: a warp or a block a row, as ln_tpr(c) says */
template <typename Row> static void ln_rows(int64_t rows, int c, const Row &row)
{
    if (ln_tpr(c) == 32)
        ln_rows_kernel<32, Row><<<ln_row_blocks(rows, 32), THREADS, 0, stream()>>>(rows, row);
    else
        ln_rows_kernel<THREADS, Row><<<ln_row_blocks(rows, THREADS), THREADS, 0, stream()>>>(rows, row);
}

/* ln.c's dt_cpu_ln_fwd on a row: the mean (sum / c) and the biased variance (the sum of (x - mean)^2
 * over a second pass, / c) in double, rstd = 1 / sqrt(var + eps), both saved as floats; then
 * y = (x - mean) * rstd * gamma + beta in float */
template <typename TX, typename TP, typename TY> struct ln_fwd_row {
    int64_t rows;
    int c;
    float eps;
    const TX *x;
    const TP *gamma, *beta;
    TY *y;
    float *saved;

    template <int TPR> __device__ void run(int64_t r, int lane, double (*red)[2]) const
    {
        const TX *xr = x + r * c;
        double sum = 0.0, sq = 0.0, unused = 0.0;
        for (int j = lane; j < c; j += TPR)
            sum = __dadd_rn(sum, (double)ld(xr, j));
        row_sum2<TPR>(&sum, &unused, red);
        const double m = __ddiv_rn(sum, (double)c);
        for (int j = lane; j < c; j += TPR) {
            const double t = __dsub_rn((double)ld(xr, j), m);
            sq = __dadd_rn(sq, __dmul_rn(t, t));
        }
        row_sum2<TPR>(&sq, &unused, red);
        const float mean = (float)m;
        const float rstd = (float)__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(sq, (double)c), (double)eps)));
        if (lane == 0) {
            saved[r] = mean;
            saved[rows + r] = rstd;
        }
        for (int j = lane; j < c; j += TPR)
            st(y, r * c + j, __fadd_rn(__fmul_rn(ln_xhat(ld(xr, j), mean, rstd), ld(gamma, j)), ld(beta, j)));
    }
};

/* ln.c's dx on a row: with g = dy * gamma and xhat from saved (floats), a = sum g / c and
 * b = sum g*xhat / c (the sums in double, g*xhat a double product), dx = rstd * (g - a - xhat * b) in
 * float, stored or added (the rounded float sum) */
template <typename TX, typename TP, typename TY> struct ln_dx_row {
    int64_t rows;
    int c;
    const TX *x;
    const TP *gamma;
    const float *saved;
    const TY *dy;
    TX *dx;
    int accumulate;

    template <int TPR> __device__ void run(int64_t r, int lane, double (*red)[2]) const
    {
        const TX *xr = x + r * c;
        const TY *dyr = dy + r * c;
        const float m = saved[r], rstd = saved[rows + r];
        double s1 = 0.0, s2 = 0.0;
        for (int j = lane; j < c; j += TPR) {
            const float g = __fmul_rn(ld(dyr, j), ld(gamma, j)), xh = ln_xhat(ld(xr, j), m, rstd);
            s1 = __dadd_rn(s1, (double)g);
            s2 = __dadd_rn(s2, __dmul_rn((double)g, (double)xh));
        }
        row_sum2<TPR>(&s1, &s2, red);
        const float a = (float)__ddiv_rn(s1, (double)c), b = (float)__ddiv_rn(s2, (double)c);
        for (int j = lane; j < c; j += TPR) {
            const float g = __fmul_rn(ld(dyr, j), ld(gamma, j)), xh = ln_xhat(ld(xr, j), m, rstd);
            st_acc(dx, r * c + j, __fmul_rn(rstd, __fsub_rn(__fsub_rn(g, a), __fmul_rn(xh, b))), accumulate);
        }
    }
};

/* dgamma = sum over rows of dy * xhat (a float product, summed in double) and dbeta = sum of dy, each
 * stored (or added, the rounded float sum) where not NULL; the order as the file's comment says */
template <typename TX, typename TY, typename TP>
static __global__ void __launch_bounds__(32 * LN_LANES)
    ln_params_kernel(int64_t rows, int c, const TX *x, const float *saved, const TY *dy, TP *dgamma, TP *dbeta,
                     int accumulate)
{
    __shared__ double sg[LN_LANES][32], sb[LN_LANES][32];
    const int tx = threadIdx.x, ty = threadIdx.y, j = blockIdx.x * 32 + tx;
    double ag = 0.0, ab = 0.0;
    if (j < c)
        for (int64_t r = ty; r < rows; r += LN_LANES) {
            const float d = ld(dy, r * c + j), xh = ln_xhat(ld(x, r * c + j), saved[r], saved[rows + r]);
            ag = __dadd_rn(ag, (double)__fmul_rn(d, xh));
            ab = __dadd_rn(ab, (double)d);
        }
    sg[ty][tx] = ag;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && j < c) {
        for (int l = 1; l < LN_LANES; l++) {
            ag = __dadd_rn(ag, sg[l][tx]);
            ab = __dadd_rn(ab, sb[l][tx]);
        }
        if (dgamma)
            st_acc(dgamma, j, (float)ag, accumulate);
        if (dbeta)
            st_acc(dbeta, j, (float)ab, accumulate);
    }
}

extern "C" void dt_cuda_ln_fwd(int64_t rows, int c, float eps, const void *x, dt_dtype xt, const void *gamma,
                               const void *beta, dt_dtype pt, void *y, dt_dtype yt, float *saved)
{
    ln_types("ln_fwd", xt, pt, yt);
    if (rows <= 0 || c <= 0)
        return;
    DT_CUDA_TYPED("ln_fwd", xt, TX, DT_CUDA_TYPED("ln_fwd", pt, TP, DT_CUDA_TYPED("ln_fwd", yt, TY,
        ln_rows(rows, c, ln_fwd_row<TX, TP, TY>{rows, c, eps, (const TX *)x, (const TP *)gamma, (const TP *)beta,
                                                 (TY *)y, saved}))));
    DT_LAUNCHED("ln_rows_kernel (ln_fwd)");
}

/* dx when wanted (rows > 0); dgamma and dbeta when either is wanted, over any rows (none: zeros, as
 * ln.c's empty sums) */
extern "C" void dt_cuda_ln_bwd(int64_t rows, int c, const void *x, dt_dtype xt, const void *gamma, dt_dtype pt,
                               const float *saved, const void *dy, dt_dtype yt, void *dx, void *dgamma, void *dbeta,
                               int accumulate_dx, int accumulate_params)
{
    ln_types("ln_bwd", xt, pt, yt);
    if (c <= 0 || rows < 0)
        return;
    if (dx && rows > 0) {
        DT_CUDA_TYPED("ln_bwd", xt, TX, DT_CUDA_TYPED("ln_bwd", pt, TP, DT_CUDA_TYPED("ln_bwd", yt, TY,
            ln_rows(rows, c, ln_dx_row<TX, TP, TY>{rows, c, (const TX *)x, (const TP *)gamma, saved, (const TY *)dy,
                                                    (TX *)dx, accumulate_dx}))));
        DT_LAUNCHED("ln_rows_kernel (ln_bwd dx)");
    }
    if (dgamma || dbeta) {
        const dim3 block(32, LN_LANES);
        const unsigned grid = (unsigned)((c + 31) / 32);
        DT_CUDA_TYPED("ln_bwd", xt, TX, DT_CUDA_TYPED("ln_bwd", yt, TY, DT_CUDA_TYPED("ln_bwd", pt, TP,
            ln_params_kernel<TX, TY, TP><<<grid, block, 0, stream()>>>(rows, c, (const TX *)x, saved, (const TY *)dy,
                                                                       (TP *)dgamma, (TP *)dbeta,
                                                                       accumulate_params))));
        DT_LAUNCHED("ln_params_kernel");
    }
}
