/* linear_cublas.c: CUDA fully connected layers through cuBLAS, fp32 operands only (t: the ops abort on
 * another, cuda.h) (CUDA builds only).
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
 * The vector of ones is this file's own device buffer (filled from the host, so it needs no kernel).
 * Planning sizes it: linear_scratch records the longest batch (it needs no scratch: 0), and
 * reserve_scratch (dt_cuda_linear_reserve) makes the vector that long. A longer n at run time grows
 * it inside the op, counted as unplanned. Like the rest of the backend, these ops run one at a time. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/log.h"

static float *ones;
static int n_ones;   /* ones' length */
static int n_wanted; /* the longest batch linear_scratch saw */

/* ones at least n long (a multiple of 1024): DT_OK, or DT_ERR_NOMEM after one line with the old
 * vector kept */
static int grow_ones(int n)
{
    if (n <= n_ones)
        return DT_OK;
    cudaStream_t stream = dt_cuda_stream();
    int want = (int)(((int64_t)n + 1023) & ~(int64_t)1023);
    float *host = malloc((size_t)want * sizeof *host), *dev = NULL;
    if (!host) {
        dt_error("CUDA backend: out of host memory for the linear layers' vector of %d ones", want);
        return DT_ERR_NOMEM;
    }
    for (int i = 0; i < want; i++)
        host[i] = 1.0f;
    cudaError_t e = cudaMalloc((void **)&dev, (size_t)want * sizeof *dev);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dev, host, (size_t)want * sizeof *host, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream); /* host is freed next; queued work is done with the old vector */
    free(host);
    if (e != cudaSuccess) {
        dt_error("CUDA backend: the linear layers' vector of %d ones: %s", want, dt_errstr_cuda(e, 0));
        if (dev)
            cudaFree(dev);
        cudaGetLastError(); /* out of memory is not sticky */
        return DT_ERR_NOMEM;
    }
    if (ones)
        FATAL_CUDA(cudaFree(ones));
    ones = dev;
    n_ones = want;
    return DT_OK;
}

size_t dt_cuda_linear_scratch(int n, int in, int out, dt_dtype t)
{
    DT_CUDA_F32("linear_scratch", t);
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

/* a device vector of at least n ones */
static const float *ones_of(int n)
{
    if (n <= n_ones)
        return ones;
    dt_cuda_count_unplanned("vector of ones grown", (size_t)n * sizeof(float));
    if (grow_ones(n) != DT_OK)
        dt_cuda_fatal("linear layer's vector of ones", "out of memory (the line above says which)");
    return ones;
}

void dt_cuda_linear_fwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *b, void *y)
{
    DT_CUDA_F32("linear_fwd", t);
    cublasHandle_t h = dt_cuda_cublas();
    const float one = 1.0f, zero = 0.0f;
    FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &zero, y, out));
    if (b)
        FATAL_CUBLAS(cublasSger(h, out, n, &one, b, 1, ones_of(n), 1, y, out));
}

void dt_cuda_linear_bwd(int n, int in, int out, dt_dtype t, const void *x, const void *w, const void *dy, void *dx,
                        void *dw, void *db, int accumulate_dx, int accumulate_params)
{
    DT_CUDA_F32("linear_bwd", t);
    cublasHandle_t h = dt_cuda_cublas();
    const float one = 1.0f, beta_dx = accumulate_dx ? 1.0f : 0.0f, beta_p = accumulate_params ? 1.0f : 0.0f;
    if (dx)
        FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy, out, &beta_dx, dx, in));
    FATAL_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out, &beta_p, dw, in));
    if (db)
        FATAL_CUBLAS(cublasSgemv(h, CUBLAS_OP_N, out, n, &one, dy, out, ones_of(n), 1, &beta_p, db, 1));
}
