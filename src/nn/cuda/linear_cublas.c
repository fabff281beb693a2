/* linear_cublas.c: CUDA fully connected layers through cuBLAS, fp32 (CUDA builds only).
 *
 * cuBLAS is column-major; our matrices are row-major. A row-major matrix A [r, c] (leading dimension
 * c) is, byte for byte, the column-major matrix A^T [c, r] with the same leading dimension c. So each
 * row-major product is computed as its transpose, (A B)^T = B^T A^T, on the same memory:
 *
 *   forward   Y [n, out] = X [n, in] . W [out, in]^T
 *             <=> Y^T [out, n] = W [out, in] . X^T [in, n]     (column-major)
 *             W's memory is W^T [in, out] (ld in): op T gives W; X's memory is X^T [in, n] (ld in): op N
 *             cublasSgemm(T, N, m = out, n = n, k = in, W, lda = in, X, ldb = in, Y, ldc = out)
 *   bias      Y^T [out, n] += b [out] . ones [n]^T             (a rank-1 update, cublasSger)
 *   dx        dX [n, in] = dY [n, out] . W [out, in]
 *             <=> dX^T [in, n] = W^T [in, out] . dY^T [out, n]
 *             W's memory is W^T (ld in): op N; dY's memory is dY^T [out, n] (ld out): op N
 *             cublasSgemm(N, N, m = in, n = n, k = out, W, lda = in, dY, ldb = out, dX, ldc = in)
 *   dw        dW [out, in] = dY^T [out, n] . X [n, in]
 *             <=> dW^T [in, out] = X^T [in, n] . dY [n, out]
 *             X's memory is X^T (ld in): op N; dY's memory is dY^T [out, n] (ld out): op T gives dY
 *             cublasSgemm(N, T, m = in, n = out, k = n, X, lda = in, dY, ldb = out, dW, ldc = in)
 *   db        db [out] = sum over rows of dY = dY^T [out, n] . ones [n]
 *             cublasSgemv(N, m = out, n = n, dY, lda = out, ones)
 * with beta = 0 to overwrite or 1 to accumulate. cuBLAS runs in its default math (fp32, no TF32) and
 * without atomics (backend_cuda.c), so results are reproducible run to run.
 *
 * The vector of ones is this file's own device buffer, grown when a larger n arrives (filled from
 * the host then, so it needs no kernel). Like the rest of the backend, these ops run one at a time. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "nn/cuda/cuda.h"
#include "util/check.h"

static float *ones;
static int n_ones;

/* a device vector of at least n ones */
static const float *ones_of(int n)
{
    if (n <= n_ones)
        return ones;
    cudaStream_t stream = dt_cuda_stream();
    int want = (n + 1023) & ~1023;
    float *host = malloc((size_t)want * sizeof *host);
    if (!host)
        dt_cuda_fatal("linear layer's vector of ones", "out of host memory");
    for (int i = 0; i < want; i++)
        host[i] = 1.0f;
    if (ones) { /* queued work may still read the old vector */
        FATAL_CUDA(cudaStreamSynchronize(stream));
        FATAL_CUDA(cudaFree(ones));
        ones = NULL;
        n_ones = 0;
    }
    FATAL_CUDA(cudaMalloc((void **)&ones, (size_t)want * sizeof *ones));
    FATAL_CUDA(cudaMemcpyAsync(ones, host, (size_t)want * sizeof *host, cudaMemcpyHostToDevice, stream));
    FATAL_CUDA(cudaStreamSynchronize(stream)); /* host is freed next */
    free(host);
    n_ones = want;
    return ones;
}

void dt_cuda_linear_fwd(int n, int in, int out, const float *x, const float *w, const float *b, float *y)
{
    cublasHandle_t h = dt_cuda_cublas();
    const float one = 1.0f, zero = 0.0f;
    FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &zero, y, out));
    if (b)
        FATAL_CUBLAS(cublasSger(h, out, n, &one, b, 1, ones_of(n), 1, y, out));
}

void dt_cuda_linear_bwd(int n, int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                        float *db, int accumulate_dx, int accumulate_params)
{
    cublasHandle_t h = dt_cuda_cublas();
    const float one = 1.0f, beta_dx = accumulate_dx ? 1.0f : 0.0f, beta_p = accumulate_params ? 1.0f : 0.0f;
    if (dx)
        FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy, out, &beta_dx, dx, in));
    FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out, &beta_p, dw, in));
    if (db)
        FATAL_CUBLAS(cublasSgemv(h, CUBLAS_OP_N, out, n, &one, dy, out, ones_of(n), 1, &beta_p, db, 1));
}
