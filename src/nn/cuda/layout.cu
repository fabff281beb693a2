/* layout.cu: moving tensors between layouts for the C files of the CUDA backend (contracts in
 * cuda.h): channel padding around cuDNN (conv_cudnn.c pads a half-precision convolution's channels to
 * a multiple of 8, which tensor cores need: the 3-channel stem) and the row broadcast that starts a
 * linear layer's output from its bias (linear_cublas.c). Plain copies: exact in every type. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* dst [rows, cpad] from src [rows, c]: one thread per dst element, zero past c */
template <typename T> static __global__ void pad_kernel(int64_t total, int c, int cpad, const T *src, T *dst)
{
    GRID_LOOP(i, total)
    {
        const int64_t r = i / cpad;
        const int ch = (int)(i % cpad);
        dst[i] = ch < c ? src[r * c + ch] : from_f32<T>(0.0f);
    }
}

/* dst [rows, c] = or += the first c channels of src [rows, cpad]: one thread per dst element */
template <typename T>
static __global__ void unpad_kernel(int64_t total, int c, int cpad, const T *src, T *dst, int accumulate)
{
    GRID_LOOP(i, total)
    {
        const int64_t r = i / c;
        const int ch = (int)(i % c);
        st_acc(dst, i, to_f32(src[r * cpad + ch]), accumulate);
    }
}

/* y [n, k] = b [k] per row */
template <typename T> static __global__ void broadcast_kernel(int64_t total, int k, const T *b, T *y)
{
    GRID_LOOP(i, total)
    y[i] = b[i % k];
}

extern "C" void dt_cuda_pad_channels(int64_t rows, int c, int cpad, dt_dtype t, const void *src, void *dst)
{
    const int64_t total = rows * cpad;
    if (total <= 0)
        return;
    DT_CUDA_TYPED("pad_channels", t, T,
                  pad_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, c, cpad, (const T *)src,
                                                                             (T *)dst));
    DT_LAUNCHED("pad_kernel");
}

extern "C" void dt_cuda_unpad_channels(int64_t rows, int c, int cpad, dt_dtype t, const void *src, void *dst,
                                       int accumulate)
{
    const int64_t total = rows * c;
    if (total <= 0)
        return;
    DT_CUDA_TYPED("unpad_channels", t, T,
                  unpad_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, c, cpad, (const T *)src,
                                                                               (T *)dst, accumulate));
    DT_LAUNCHED("unpad_kernel");
}

extern "C" void dt_cuda_broadcast_rows(int64_t n, int k, dt_dtype t, const void *b, void *y)
{
    const int64_t total = n * k;
    if (total <= 0)
        return;
    DT_CUDA_TYPED("broadcast_rows", t, T,
                  broadcast_kernel<T><<<blocks_for(total), THREADS, 0, stream()>>>(total, k, (const T *)b, (T *)y));
    DT_LAUNCHED("broadcast_kernel");
}
