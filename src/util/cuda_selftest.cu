/* cuda_selftest.cu: the device self-test of cuda_selftest.h. */
#include "config.h"

#include "util/cuda_selftest.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "util/check.h"
#include "util/log.h"

/* x[i] and y[i] are small integers, so a*x+y is exact in fp32 on any device */
static __host__ __device__ float pattern_x(size_t i) { return (float)(i % 97); }
static __host__ __device__ float pattern_y(size_t i) { return (float)(i % 13) - 6.0f; }

static __global__ void axpy_kernel(size_t n, float a, float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = a * pattern_x(i) + pattern_y(i);
}

static int run(int device, size_t n, float *host, float *dev)
{
    const float a = 3.0f;
    DT_CHECK_CUDA(cudaSetDevice(device));
    DT_CHECK_CUDA(cudaMemset(dev, 0xff, n * sizeof(float))); /* NaN poison: unwritten elements fail */
    axpy_kernel<<<256, 256>>>(n, a, dev);
    DT_CHECK_CUDA(cudaGetLastError());
    DT_CHECK_CUDA(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = a * pattern_x(i) + pattern_y(i);
        if (host[i] != want && bad++ < 3)
            dt_error("cuda self-test: device %d element %zu is %g, expected %g", device, i, host[i], want);
    }
    if (bad) {
        dt_error("cuda self-test: device %d: %zu of %zu elements wrong", device, bad, n);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

extern "C" int dt_cuda_selftest(int device, size_t n)
{
    float *host = NULL, *dev = NULL;
    int rc = DT_OK;
    DT_CHECK_ALLOC(host = (float *)malloc(n * sizeof(float)));
    DT_CHECK_CUDA_GOTO(cudaSetDevice(device), rc, out);
    DT_CHECK_CUDA_GOTO(cudaMalloc((void **)&dev, n * sizeof(float)), rc, out);
    rc = run(device, n, host, dev);
out:
    if (dev)
        cudaFree(dev);
    free(host);
    return rc;
}
