/* scale.cu: the kernel of dt_dev_scale (scale.h): one element per thread of a grid-stride loop, one
 * instantiation per storage type, each computing in the precision scale.h names. */
#include "config.h"

#include "libdt/scale.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "util/check.h"
#include "util/log.h"

/* x * f in the precision each type is computed in */
static __device__ float scaled(float x, double f) { return x * (float)f; }
static __device__ double scaled(double x, double f) { return x * f; }
static __device__ __half scaled(__half x, double f) { return __float2half_rn(__half2float(x) * (float)f); }
static __device__ __nv_bfloat16 scaled(__nv_bfloat16 x, double f)
{
    return __float2bfloat16_rn(__bfloat162float(x) * (float)f);
}
/* integers: through fp64, truncated toward zero and clamped to the type's range (lo and hi, exact in
 * fp64; int64's hi is the largest double below 2^63), since C++ leaves out-of-range conversions undefined */
template <typename I> static __device__ I scaled_int(I x, double f, double lo, double hi)
{
    double y = trunc((double)x * f);
    return (I)(y != y ? 0.0 : y < lo ? lo : y > hi ? hi : y); /* NaN: 0 */
}
static __device__ int8_t scaled(int8_t x, double f) { return scaled_int(x, f, -128.0, 127.0); }
static __device__ uint8_t scaled(uint8_t x, double f) { return scaled_int(x, f, 0.0, 255.0); }
static __device__ int32_t scaled(int32_t x, double f) { return scaled_int(x, f, -2147483648.0, 2147483647.0); }
static __device__ int64_t scaled(int64_t x, double f)
{
    return scaled_int(x, f, -9223372036854775808.0, 9223372036854774784.0);
}

template <typename T> static __global__ void scale_kernel(T *x, size_t n, double f)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = scaled(x[i], f);
}

template <typename T> static void launch(cudaStream_t s, void *buf, size_t n, double f)
{
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096) /* the grid-stride loop covers the rest */
        blocks = 4096;
    scale_kernel<T><<<(unsigned)blocks, 256, 0, s>>>((T *)buf, n, f);
}

extern "C" int dt_dev_scale_launch(void *stream, void *buf, size_t count, dt_dtype t, double factor)
{
    if (count == 0)
        return DT_OK;
    cudaStream_t s = (cudaStream_t)stream;
    switch (t) {
    case DT_FLOAT32: launch<float>(s, buf, count, factor); break;
    case DT_FLOAT16: launch<__half>(s, buf, count, factor); break;
    case DT_BFLOAT16: launch<__nv_bfloat16>(s, buf, count, factor); break;
    case DT_FLOAT64: launch<double>(s, buf, count, factor); break;
    case DT_INT32: launch<int32_t>(s, buf, count, factor); break;
    case DT_INT64: launch<int64_t>(s, buf, count, factor); break;
    case DT_UINT8: launch<uint8_t>(s, buf, count, factor); break;
    case DT_INT8: launch<int8_t>(s, buf, count, factor); break;
    default: dt_error("scale: no such type (%d)", (int)t); return DT_ERR_STATE;
    }
    DT_CHECK_CUDA(cudaGetLastError());
    return DT_OK;
}
