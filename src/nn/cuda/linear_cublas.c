/* linear_cublas.c: CUDA fully connected layers through cuBLAS, operands of type t (fp32, fp16 or bf16)
 * with fp32 compute (CUDA builds only).
 *
 * cuBLAS is column-major; our matrices are row-major. A row-major matrix A [r, c] (leading dimension
 * c) is, byte for byte, the column-major matrix A^T [c, r] with the same leading dimension c. So each
 * row-major product is computed as its transpose, (A B)^T = B^T A^T, on the same memory:
 *
 *   forward   Y [n, out] = X [n, in] . W [out, in]^T (+ b in every row)
 *             <=> Y^T [out, n] = W [out, in] . X^T [in, n]     (column-major)
 *             W's memory is W^T [in, out] (ld in): op T gives W; X's memory is X^T [in, n] (ld in): op N
 *             gemm(T, N, m = out, n = n, k = in, W, lda = in, X, ldb = in, Y, ldc = out)
 *   bias      Y starts as b in every row (dt_cuda_broadcast_rows) and the GEMM adds into it (beta 1):
 *             cuBLAS forms alpha * sum + beta * Y in fp32 and rounds once, so Y = round(X W^T + b), the
 *             CPU's order (the product, then the bias) in every type
 *   dx        dX [n, in] = dY [n, out] . W [out, in]
 *             <=> dX^T [in, n] = W^T [in, out] . dY^T [out, n]
 *             W's memory is W^T (ld in): op N; dY's memory is dY^T [out, n] (ld out): op N
 *             gemm(N, N, m = in, n = n, k = out, W, lda = in, dY, ldb = out, dX, ldc = in)
 *   dw        dW [out, in] = dY^T [out, n] . X [n, in]
 *             <=> dW^T [in, out] = X^T [in, n] . dY [n, out]
 *             X's memory is X^T (ld in): op N; dY's memory is dY^T [out, n] (ld out): op T gives dY
 *             gemm(N, T, m = in, n = out, k = n, X, lda = in, dY, ldb = out, dW, ldc = in)
 *   db        db [out] = sum over rows of dY = dY^T [out, n] . ones [n]
 *             gemm(N, N, m = out, n = 1, k = n, dY, lda = out, ones, ldb = n, db, ldc = out)
 * with beta = 0 to overwrite or 1 to accumulate. Every product is cublasGemmEx with the operands'
 * type (CUDA_R_32F, _16F, _16BF) and CUBLAS_COMPUTE_32F: half operands go to tensor cores, their
 * products exact and summed in fp32; fp32 stays fp32 (the handle's math mode is
 * CUBLAS_DEFAULT_MATH, no TF32: runtime.c). cuBLAS runs without atomics, so results are
 * reproducible run to run.
 *
 * The vectors of ones are this file's own device buffers, one per type (filled from the host, so
 * they need no kernel). Planning sizes them: linear_scratch records the longest batch (it needs no
 * scratch: 0), and reserve_scratch (dt_cuda_linear_reserve) makes them that long. A longer n at run
 * time grows them inside the op, counted as unplanned. Like the rest of the backend, these ops run one
 * at a time. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"

/* the ones of each stored type, as 32-bit floats or 16-bit patterns: [0] fp32, [1] fp16, [2] bf16 */
static void *ones[3];
static int n_ones;   /* their length */
static int n_wanted; /* the longest batch linear_scratch saw */

static int type_index(dt_dtype t)
{
    return t == DT_FLOAT16 ? 1 : t == DT_BFLOAT16 ? 2 : 0;
}

static cudaDataType_t cuda_type(dt_dtype t)
{
    return t == DT_FLOAT16 ? CUDA_R_16F : t == DT_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* the three vectors at least n long (a multiple of 1024): DT_OK, or DT_ERR_NOMEM after one line with
 * the old vectors kept */
static int grow_ones(int n)
{
    if (n <= n_ones)
        return DT_OK;
    cudaStream_t stream = dt_cuda_stream();
    const int want = (int)(((int64_t)n + 1023) & ~(int64_t)1023);
    const size_t bytes32 = (size_t)want * 4, bytes16 = (size_t)want * 2;
    float *host = malloc(bytes32 + 2 * bytes16);
    void *dev[3] = {NULL, NULL, NULL};
    if (!host) {
        dt_error("CUDA backend: out of host memory for the linear layers' vectors of %d ones", want);
        return DT_ERR_NOMEM;
    }
    uint16_t *h16 = (uint16_t *)(host + want), *b16 = h16 + want;
    for (int i = 0; i < want; i++) {
        host[i] = 1.0f;
        h16[i] = dt_f32_to_f16(1.0f);
        b16[i] = dt_f32_to_bf16(1.0f);
    }
    const void *src[3] = {host, h16, b16};
    const size_t bytes[3] = {bytes32, bytes16, bytes16};
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 3 && e == cudaSuccess; k++) {
        e = cudaMalloc(&dev[k], bytes[k]);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dev[k], src[k], bytes[k], cudaMemcpyHostToDevice, stream);
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream); /* host is freed next; queued work is done with the old vectors */
    free(host);
    if (e != cudaSuccess) {
        dt_error("CUDA backend: the linear layers' vectors of %d ones: %s", want, dt_errstr_cuda(e, 0));
        for (int k = 0; k < 3; k++)
            if (dev[k])
                cudaFree(dev[k]);
        cudaGetLastError(); /* out of memory is not sticky */
        return DT_ERR_NOMEM;
    }
    for (int k = 0; k < 3; k++) {
        if (ones[k])
            FATAL_CUDA(cudaFree(ones[k]));
        ones[k] = dev[k];
    }
    n_ones = want;
    return DT_OK;
}

size_t dt_cuda_linear_scratch(int n, int in, int out, dt_dtype t)
{
    DT_CUDA_STORED("linear_scratch", t);
    (void)in;
    (void)out;
    if (n > n_wanted)
        n_wanted = n;
    return 0;
}

int dt_cuda_linear_reserve(void)
{
    return grow_ones(n_wanted);
}

/* a device vector of at least n ones of type t */
static const void *ones_of(int n, dt_dtype t)
{
    if (n > n_ones) {
        dt_cuda_count_unplanned("vectors of ones grown", (size_t)n * 8);
        int broke = dt_cuda_capture_break("the linear layers' vectors of ones grown to %d (an allocation in an op)", n);
        if (grow_ones(n) != DT_OK)
            dt_cuda_fatal("linear layer's vectors of ones", "out of memory (the line above says which)");
        if (broke)
            dt_cuda_capture_resume();
    }
    return ones[type_index(t)];
}

/* C [m, n] (column-major, ld ldc) = A op B + beta C, every matrix of type t, fp32 compute */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, dt_dtype t, const void *a, int lda,
                 const void *b, int ldb, float beta, void *c, int ldc)
{
    const float one = 1.0f;
    const cudaDataType_t ct = cuda_type(t);
    FATAL_CUBLAS(cublasGemmEx(dt_cuda_cublas(), ta, tb, m, n, k, &one, a, ct, lda, b, ct, ldb, &beta, c, ct, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void dt_cuda_linear_fwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *b, void *y)
{
    DT_CUDA_STORED("linear_fwd", t);
    if (b)
        dt_cuda_broadcast_rows(n, out, t, b, y);
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, t, w, in, x, in, b ? 1.0f : 0.0f, y, out);
}

void dt_cuda_linear_bwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *dy, void *dx,
                        void *dw, void *db, int accumulate_dx, int accumulate_params)
{
    DT_CUDA_STORED("linear_bwd", t);
    const float beta_dx = accumulate_dx ? 1.0f : 0.0f, beta_p = accumulate_params ? 1.0f : 0.0f;
    if (dx)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, t, w, in, dy, out, beta_dx, dx, in);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, t, x, in, dy, out, beta_p, dw, in);
    if (db)
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, out, 1, n, t, dy, out, ones_of(n, t), n, beta_p, db, out);
}
