/* linear.cu: the softmax cross-entropy (xent) on the GPU, the port of nn/cpu/linear.c's dt_cpu_xent
 * (the loss, the scaled gradient, the top-1/top-5 hits, all into the step's scalars block on the
 * device), and its planning op xent_scratch (shared helpers and rules: kernels.h). The logits and
 * dlogits are fp32, fp16 or bf16 (one type t; the kernel is a template on it): a logit is widened as
 * it is read, as linear.c does, and a gradient rounded once when stored; the loss stays double. The
 * linear layers themselves are cuBLAS calls: linear_cublas.c. */
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
 * dlogits the fp32 gradient times s->scale_f, rounded to T. flags[row]: XENT_HIT1 when no logit ranks
 * above the label's (strictly above it, or equal to it in a lower class), XENT_HIT5 when fewer than 5 do, XENT_NONFINITE (and neither hit) when the
 * row holds a NaN or an inf, as the CPU counts them (float comparisons). A label outside [0, k) (the
 * caller checks them) gives a NaN loss and a miss instead of a stray read. */
enum { XENT_HIT1 = 1, XENT_HIT5 = 2, XENT_NONFINITE = 4 };

template <typename T>
static __global__ void xent_rows(int n, int k, const T *logits, const int32_t *labels, float eps, const dt_scalars *s,
                                 T *dlogits, double *loss, int32_t *flags)
{
    __shared__ double r0[THREADS], r1[THREADS];
    __shared__ float rm[THREADS];
    __shared__ int ra[THREADS], rf[THREADS];
    const int t = threadIdx.x;
    const float scale = dlogits ? s->scale_f : 1.0f;
    const int mix = s->mixing; /* mixup/cutmix: targets lam on the label, rest on the row before's */
    const double lam = s->mix_lam, rest = s->mix_rest;
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const T *z = logits + (int64_t)row * k;
        const int y = labels[row], y2 = labels[(row + n - 1) % n];
        const int label = mix ? dt_scalars_mix_label(s, y, y2) : y; /* what the hits count against */
        const int ok = label >= 0 && label < k && (!mix || (y >= 0 && y < k && y2 >= 0 && y2 < k));
        const float zl = ok ? ld(z, label) : __int_as_float(0x7fc00000);
        /* one pass: the max, the logits strictly above the label's, the non-finite ones */
        float m = neg_inf();
        int above = 0, bad = 0;
        for (int j = t; j < k; j += THREADS) {
            const float v = ld(z, j);
            m = v > m ? v : m;
            above += v > zl || (j < label && v == zl); /* ties in class order, as linear.c */
            bad |= !isfinite(v);
        }
        rm[t] = m;
        ra[t] = above;
        rf[t] = bad;
        __syncthreads();
        for (int w = THREADS / 2; w > 0; w >>= 1) {
            if (t < w) {
                rm[t] = rm[t + w] > rm[t] ? rm[t + w] : rm[t];
                ra[t] += ra[t + w];
                rf[t] |= rf[t + w];
            }
            __syncthreads();
        }
        const float z0 = ld(z, 0);
        const double mx = z0 != z0 ? (double)z0 : (double)rm[0];
        double se = 0.0, sz = 0.0;
        for (int j = t; j < k; j += THREADS) {
            const double v = (double)ld(z, j);
            se = __dadd_rn(se, exp(__dsub_rn(v, mx)));
            sz = __dadd_rn(sz, v);
        }
        block_sum2(r0, r1, se, sz, t);
        const double lse = __dadd_rn(mx, log(r0[0]));
        if (t == 0) {
            const double e = (double)eps;
            /* the label's term: -log p_y, or mixed lam * -log p_y + rest * -log p_y2 (linear.c's order) */
            double term;
            if (!ok)
                term = dnan();
            else if (mix)
                term = __dadd_rn(__dmul_rn(lam, __dsub_rn(lse, (double)ld(z, y))),
                                 __dmul_rn(rest, __dsub_rn(lse, (double)ld(z, y2))));
            else
                term = __dsub_rn(lse, (double)zl);
            loss[row] = __dadd_rn(__dmul_rn(__dsub_rn(1.0, e), term),
                                  __dmul_rn(e, __dsub_rn(lse, __ddiv_rn(r1[0], (double)k))));
            const int fin = !rf[0], hit = fin && ok;
            flags[row] = (hit && ra[0] == 0 ? XENT_HIT1 : 0) | (hit && ra[0] < 5 ? XENT_HIT5 : 0) |
                         (fin ? 0 : XENT_NONFINITE);
        }
        __syncthreads(); /* every read of the row is done before dlogits (which may alias it) is written */
        if (dlogits) {
            /* q = eps/k (a float quotient in C) + (1 - eps on the label) */
            const double q_other = (double)__fdiv_rn(eps, (float)k);
            const double q_label = __dadd_rn(q_other, __dsub_rn(1.0, (double)eps));
            const double q_rest = __dadd_rn(q_other, 0.0);
            T *g = dlogits + (int64_t)row * k;
            const double one_minus = __dsub_rn(1.0, (double)eps);
            for (int j = t; j < k; j += THREADS) {
                /* mixed: eps/k + (1 - eps) * (lam [j == y] + rest [j == y2]), linear.c's order */
                const double q = !mix ? (j == label ? q_label : q_rest)
                                      : __dadd_rn(q_other, __dmul_rn(one_minus, __dadd_rn(j == y ? lam : 0.0,
                                                                                           j == y2 ? rest : 0.0)));
                /* the fp32 gradient, then times the loss scaler's factor (a float product, as linear.c) */
                const float gj = (float)__ddiv_rn(__dsub_rn(exp(__dsub_rn((double)ld(z, j), lse)), q), (double)n);
                st(g, j, __fmul_rn(gj, scale));
            }
        }
        __syncthreads(); /* the shared arrays are rewritten for the next row */
    }
}

/* One block of THREADS: the CPU's total in row order (thread 0: the same double additions as
 * linear.c, so the same bits given the row terms), / n; the hits and non-finite rows counted by all
 * threads (integers: any order gives the same); then into the scalars block as the CPU does. n <= 0
 * sums nothing: the CPU's 0 / n (NaN for n = 0, which sets the overflow flag). */
static __global__ void xent_finish(int n, const double *loss, const int32_t *flags, dt_scalars *s)
{
    __shared__ int h1[THREADS], h5[THREADS], nf[THREADS];
    const int t = threadIdx.x;
    int a = 0, b = 0, c = 0;
    for (int i = t; i < n; i += THREADS) {
        const int f = flags[i];
        a += (f & XENT_HIT1) != 0;
        b += (f & XENT_HIT5) != 0;
        c += (f & XENT_NONFINITE) != 0;
    }
    h1[t] = a;
    h5[t] = b;
    nf[t] = c;
    double total = 0.0;
    if (t == 0)
        for (int i = 0; i < n; i++)
            total = __dadd_rn(total, loss[i]);
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            h1[t] += h1[t + w];
            h5[t] += h5[t + w];
            nf[t] += nf[t + w];
        }
        __syncthreads();
    }
    if (t == 0) {
        const double mean = __ddiv_rn(total, (double)n);
        s->loss = mean;
        s->loss_sum = __dadd_rn(s->loss_sum, mean);
        s->hits1 += h1[0];
        s->hits5 += h5[0];
        s->rows += n;
        s->nonfinite_rows += nf[0];
        if (!isfinite(mean))
            s->agree[DT_AGREE_OVERFLOW] = 1;
    }
}

/* xent's scratch: the row losses (n doubles), then the row flags (n int32) at *o_flags; returns the
 * bytes */
static size_t xent_bytes(int n, size_t *o_flags)
{
    *o_flags = align256((size_t)n * sizeof(double));
    return *o_flags + (size_t)n * sizeof(int32_t);
}

extern "C" size_t dt_cuda_xent_scratch(int n, int k)
{
    size_t o_flags;
    return n > 0 && k > 0 ? xent_bytes(n, &o_flags) : 0;
}

/* Two kernels on the stream, nothing copied to or from the host: the rows (loss terms, dlogits,
 * flags in the scratch), then the reduction into s. */
extern "C" void dt_cuda_xent(int n, int k, dt_dtype t, const void *logits, const int32_t *labels, float eps,
                             void *dlogits, dt_scalars *s)
{
    cudaStream_t st = stream();
    double *loss = NULL;
    int32_t *flags = NULL;
    if (n > 0) {
        if (k < 1)
            dt_cuda_fatal("xent", "rows of no logits (k < 1)");
        size_t o_flags;
        char *p = (char *)scratch(xent_bytes(n, &o_flags));
        loss = (double *)p;
        flags = (int32_t *)(p + o_flags);
        const unsigned grid = (unsigned)(n < 65535 ? n : 65535);
        DT_CUDA_TYPED("xent", t, T,
                      xent_rows<T><<<grid, THREADS, 0, st>>>(n, k, (const T *)logits, labels, eps, s, (T *)dlogits,
                                                             loss, flags));
        DT_LAUNCHED("xent_rows");
    }
    xent_finish<<<1, THREADS, 0, st>>>(n, loss, flags, s);
    DT_LAUNCHED("xent_finish");
}
