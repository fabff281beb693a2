/* layout.cu: moving tensors between layouts: for the C files of the CUDA backend (contracts in
 * cuda.h), channel padding around cuDNN (conv_cudnn.c pads a half-precision convolution's channels to
 * a multiple of 8, which tensor cores need: the 3-channel stem) and the row broadcast that starts a
 * linear layer's output from its bias (linear_cublas.c); and the op chan_copy (nn/backend.h: channel
 * slices, a concatenation both ways; the port of eltwise.c's dt_cpu_chan_copy). Plain copies: exact
 * in every type; chan_copy's conversions and sums are one rounding each, as eltwise.c's. */
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

/* chan_copy when it converts or adds: dst[r*ds + doff + j] = (or +=) src[r*ss + soff + j], widened from
 * TS, the value (or the fp32 sum) rounded to TD once. vec: c, both strides and both offsets multiples of
 * 8 and both pointers 16-byte aligned, so each thread moves 8 elements of a row with load8/store8 (the
 * same arithmetic per element as the scalar loop). */
template <typename TS, typename TD>
static __global__ void chan_copy_kernel(int64_t rows, int c, const TS *src, int ss, int soff, TD *dst, int ds,
                                        int doff, int accumulate, int vec)
{
    if (vec) {
        const int c8 = c / 8;
        GRID_LOOP(i, rows * c8)
        {
            const int64_t r = i / c8;
            const int j = (int)(i % c8) * 8;
            TD *d = dst + r * ds + doff + j;
            float v[8], o[8];
            load8(src + r * ss + soff + j, v);
            if (accumulate) {
                load8(d, o);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = __fadd_rn(o[k], v[k]);
            }
            store8(d, v);
        }
        return;
    }
    GRID_LOOP(i, rows * c)
    {
        const int64_t r = i / c;
        const int j = (int)(i % c);
        st_acc(dst, r * ds + doff + j, ld(src, r * ss + soff + j), accumulate);
    }
}

/* A plain copy (one type, no sum) moves the bytes (cudaMemcpy2DAsync: rows of c elements at the two
 * pitches), as copy_grad's memcpy does; anything else is the kernel. */
extern "C" void dt_cuda_chan_copy(int64_t rows, int c, const void *src, int src_stride, int src_off, dt_dtype st,
                                  void *dst, int dst_stride, int dst_off, dt_dtype dt, int accumulate)
{
    DT_CUDA_STORED("chan_copy", st);
    DT_CUDA_STORED("chan_copy", dt);
    if (rows <= 0 || c <= 0)
        return;
    if (st == dt && !accumulate && src_stride >= c && dst_stride >= c) {
        const size_t es = dt_cuda_elem_bytes(st);
        DT_CK(cudaMemcpy2DAsync((char *)dst + (size_t)dst_off * es, (size_t)dst_stride * es,
                                (const char *)src + (size_t)src_off * es, (size_t)src_stride * es, (size_t)c * es,
                                (size_t)rows, cudaMemcpyDeviceToDevice, stream()));
        return;
    }
    const int vec = c % 8 == 0 && src_stride % 8 == 0 && src_off % 8 == 0 && dst_stride % 8 == 0 &&
                    dst_off % 8 == 0 && vec8_ok(src, dst);
    const unsigned blocks = blocks_for(vec ? rows * (c / 8) : rows * c);
    DT_CUDA_TYPED("chan_copy", st, TS,
                  DT_CUDA_TYPED("chan_copy", dt, TD,
                                chan_copy_kernel<TS, TD><<<blocks, THREADS, 0, stream()>>>(
                                    rows, c, (const TS *)src, src_stride, src_off, (TD *)dst, dst_stride, dst_off,
                                    accumulate, vec)));
    DT_LAUNCHED("chan_copy_kernel");
}
