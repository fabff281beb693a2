/* linear.cu: the softmax cross-entropy (xent) on the GPU, the port of nn/cpu/linear.c's dt_cpu_xent,
 * and its planning op xent_scratch (shared helpers and rules: kernels.h). The linear layers
 * themselves are cuBLAS calls: linear_cublas.c. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* --- softmax cross-entropy ------------------------------------------------------------------------- */

static __device__ __forceinline__ double dnan(void)
{
    return __longlong_as_double(0x7ff8000000000000LL);
}

/* One block per row (THREADS, a power of two): linear.c's dt_cpu_xent for that row. The max is the
 * CPU's (NaN when z[0] is NaN, else the largest non-NaN value); the sums of exp(z - max) and of z run
 * in double, strided per thread then a fixed tree. loss[row] is the row's term of the CPU's total;
 * dlogits the fp32 gradient times scale. */
static __global__ void xent_rows(int n, int k, const float *logits, const int32_t *labels, float eps, float scale,
                                 float *dlogits, double *loss)
{
    __shared__ double r0[THREADS], r1[THREADS];
    __shared__ float rm[THREADS];
    const int t = threadIdx.x;
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const float *z = logits + (int64_t)row * k;
        float m = neg_inf();
        for (int j = t; j < k; j += THREADS) {
            const float v = z[j];
            m = v > m ? v : m;
        }
        rm[t] = m;
        __syncthreads();
        for (int w = THREADS / 2; w > 0; w >>= 1) {
            if (t < w)
                rm[t] = rm[t + w] > rm[t] ? rm[t + w] : rm[t];
            __syncthreads();
        }
        const float z0 = z[0];
        const double mx = z0 != z0 ? (double)z0 : (double)rm[0];
        double se = 0.0, sz = 0.0;
        for (int j = t; j < k; j += THREADS) {
            const double v = (double)z[j];
            se = __dadd_rn(se, exp(__dsub_rn(v, mx)));
            sz = __dadd_rn(sz, v);
        }
        block_sum2(r0, r1, se, sz, t);
        const double lse = __dadd_rn(mx, log(r0[0]));
        const int label = labels[row];
        const int ok = label >= 0 && label < k; /* out of range: a NaN loss instead of a stray read */
        if (t == 0) {
            const double zl = ok ? (double)z[label] : dnan();
            const double e = (double)eps;
            loss[row] = __dadd_rn(__dmul_rn(__dsub_rn(1.0, e), __dsub_rn(lse, zl)),
                                  __dmul_rn(e, __dsub_rn(lse, __ddiv_rn(r1[0], (double)k))));
        }
        __syncthreads(); /* every read of the row is done before dlogits (which may alias it) is written */
        if (dlogits) {
            /* q = eps/k (a float quotient in C) + (1 - eps on the label) */
            const double q_other = (double)__fdiv_rn(eps, (float)k);
            const double q_label = __dadd_rn(q_other, __dsub_rn(1.0, (double)eps));
            const double q_rest = __dadd_rn(q_other, 0.0);
            float *g = dlogits + (int64_t)row * k;
            for (int j = t; j < k; j += THREADS) {
                const double q = j == label ? q_label : q_rest;
                /* the fp32 gradient, then times the loss scaler's factor (a float product, as linear.c) */
                const float gj = (float)__ddiv_rn(__dsub_rn(exp(__dsub_rn((double)z[j], lse)), q), (double)n);
                g[j] = __fmul_rn(gj, scale);
            }
        }
        __syncthreads(); /* the shared arrays are rewritten for the next row */
    }
}

/* the CPU's total, in row order, then / n */
static __global__ void xent_total(int n, const double *loss, double *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < n; i++)
            total = __dadd_rn(total, loss[i]);
        out[0] = __ddiv_rn(total, (double)n);
    }
}

/* xent's scratch: the mean loss (one double), then the row losses (n doubles), then the labels (n
 * int32) at *o_lab; returns the bytes */
static size_t xent_bytes(int n, size_t *o_loss, size_t *o_lab)
{
    *o_loss = align256(sizeof(double));
    *o_lab = *o_loss + align256((size_t)n * sizeof(double));
    return *o_lab + (size_t)n * sizeof(int32_t);
}

extern "C" size_t dt_cuda_xent_scratch(int n, int k)
{
    size_t o_loss, o_lab;
    return n > 0 && k > 0 ? xent_bytes(n, &o_loss, &o_lab) : 0;
}

extern "C" double dt_cuda_xent(int n, int k, dt_dtype t, const void *logits, const int32_t *labels_host, float eps,
                               float scale, void *dlogits)
{
    DT_CUDA_F32("xent", t);
    if (n <= 0 || k <= 0)
        return 0.0 / (n > 0 ? n : 0); /* the CPU's 0 / n with nothing summed: NaN for n = 0 */
    cudaStream_t st = stream();
    size_t o_out = 0, o_loss, o_lab;
    char *p = (char *)scratch(xent_bytes(n, &o_loss, &o_lab));
    double *out = (double *)(p + o_out), *loss = (double *)(p + o_loss);
    int32_t *labels = (int32_t *)(p + o_lab);
    DT_CK(cudaMemcpyAsync(labels, labels_host, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    xent_rows<<<(unsigned)(n < 65535 ? n : 65535), THREADS, 0, st>>>(n, k, (const float *)logits, labels, eps, scale,
                                                                     (float *)dlogits, loss);
    DT_LAUNCHED("xent_rows");
    xent_total<<<1, 1, 0, st>>>(n, loss, out);
    DT_LAUNCHED("xent_total");
    double result = 0.0;
    DT_CK(cudaMemcpyAsync(&result, out, sizeof(double), cudaMemcpyDeviceToHost, st));
    DT_CK(cudaStreamSynchronize(st));
    return result;
}
