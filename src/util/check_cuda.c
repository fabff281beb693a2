/* check_cuda.c: messages for DT_CHECK_CUDA, _CUBLAS, _CUDNN and _NCCL (CUDA builds only).
 * Each gives the status name and the library's sentence, plus the detail cuDNN 9 and NCCL keep
 * about their last error when there is one. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>

#include "util/check.h"

static _Thread_local char cuda_buf[1024];

const char *dt_errstr_cuda(long long rc, int saved_errno)
{
    (void)saved_errno;
    cudaError_t e = (cudaError_t)rc;
    snprintf(cuda_buf, sizeof cuda_buf, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return cuda_buf;
}

const char *dt_errstr_cublas(long long rc, int saved_errno)
{
    (void)saved_errno;
    cublasStatus_t s = (cublasStatus_t)rc;
    snprintf(cuda_buf, sizeof cuda_buf, "%s: %s", cublasGetStatusName(s), cublasGetStatusString(s));
    return cuda_buf;
}

const char *dt_errstr_cudnn(long long rc, int saved_errno)
{
    (void)saved_errno;
    char detail[512] = "";
#if CUDNN_MAJOR >= 9
    cudnnGetLastErrorString(detail, sizeof detail);
#endif
    snprintf(cuda_buf, sizeof cuda_buf, "%s%s%s", cudnnGetErrorString((cudnnStatus_t)rc),
             detail[0] ? ": " : "", detail);
    return cuda_buf;
}

const char *dt_errstr_nccl(long long rc, int saved_errno)
{
    (void)saved_errno;
    const char *last = ncclGetLastError(NULL);
    snprintf(cuda_buf, sizeof cuda_buf, "%s%s%s", ncclGetErrorString((ncclResult_t)rc),
             last && last[0] ? ": " : "", last ? last : "");
    return cuda_buf;
}
