/* bn.cu: batch norm on the GPU, the port of nn/cpu/bn.c (shared helpers and rules: kernels.h), on fp32
 * operands only (d->xt, d->yt, d->pt: the ops abort on another, cuda.h). */
#include "config.h"

#include "nn/cuda/kernels.h"

/* --- batch norm ------------------------------------------------------------------------------------ */
/* Per-channel sums, as bn.c forms them: float sums over blocks of RB rows (r0 = 0, 16, 32, ...), in row
 * order, then the block sums added in double. Here a thread does whole RB blocks of one channel,
 * adding their float sums into its double accumulators; the 8 threads of a column of a block are
 * then added in a fixed order, and per channel the partials of the row chunks by a fixed tree
 * (bn_reduce). The grid depends only on (rows, c), so the result does too. */
#define RB 16      /* bn.c's RB */
#define CB 256     /* bn.c's CB: SyncBN syncs per block of CB channels, as bn.c does */
#define RED_TX 32  /* channels per partials block */
#define RED_TY 8   /* row-block lanes per partials block */
#define SYNC_STRIDE (2 * CB + 2) /* per channel block: [unused][rows, sums[cb], sums2[cb]] */

/* bn.c's bn_affine, unfused */
static __device__ __forceinline__ float bn_affine(float x, float scale, float shift)
{
    return __fadd_rn(__fmul_rn(x, scale), shift);
}

static int bn_chunks(int64_t rows, int c)
{
    int64_t nrb = (rows + RB - 1) / RB, ctiles = (c + RED_TX - 1) / RED_TX;
    int64_t most = (nrb + RED_TY - 1) / RED_TY, want = 1024 / ctiles;
    if (want < 1)
        want = 1;
    int64_t nc = want < most ? want : most;
    return nc < 1 ? 1 : (int)nc;
}

/* BWD 0: sums of t = x - k and t*t with k = x[row 0] (the forward's shifted sums).
 * BWD 1: sums of g and g*(x - mean) with g = dy masked by the fused ReLU (the backward's sums).
 * part0/part1: [c][nchunk] doubles. */
template <int BWD>
static __global__ void bn_partials(int64_t rows, int c, const float *x, const float *dy, const float *saved, int relu,
                                   const float *ym, int nchunk, double *part0, double *part1)
{
    __shared__ double sh0[RED_TY][RED_TX], sh1[RED_TY][RED_TX];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ch = blockIdx.x * RED_TX + tx;
    const int64_t nrb = (rows + RB - 1) / RB;
    double s0 = 0.0, s1 = 0.0;
    if (ch < c) {
        float k = 0.0f, mean = 0.0f, scale = 0.0f, shift = 0.0f;
        if (!BWD) {
            k = x[ch];
        } else {
            mean = saved[ch];
            scale = saved[2 * (size_t)c + ch];
            shift = saved[3 * (size_t)c + ch];
        }
        for (int64_t b = (int64_t)blockIdx.y * RED_TY + ty; b < nrb; b += (int64_t)nchunk * RED_TY) {
            const int64_t r0 = b * RB, r1 = r0 + RB < rows ? r0 + RB : rows;
            float f0 = 0.0f, f1 = 0.0f;
            for (int64_t r = r0; r < r1; r++) {
                const float xv = x[r * c + ch];
                if (!BWD) {
                    const float t = __fsub_rn(xv, k);
                    f0 = __fadd_rn(f0, t);
                    f1 = __fadd_rn(f1, __fmul_rn(t, t));
                } else {
                    const float v = dy[r * c + ch];
                    const float g = ym     ? (ym[r * c + ch] > 0.0f ? v : 0.0f)
                                    : relu ? (bn_affine(xv, scale, shift) > 0.0f ? v : 0.0f)
                                           : v;
                    f0 = __fadd_rn(f0, g);
                    f1 = __fadd_rn(f1, __fmul_rn(g, __fsub_rn(xv, mean)));
                }
            }
            s0 = __dadd_rn(s0, (double)f0);
            s1 = __dadd_rn(s1, (double)f1);
        }
    }
    sh0[ty][tx] = s0;
    sh1[ty][tx] = s1;
    __syncthreads();
    if (ty == 0 && ch < c) {
        double a = sh0[0][tx], b = sh1[0][tx];
        for (int i = 1; i < RED_TY; i++) {
            a = __dadd_rn(a, sh0[i][tx]);
            b = __dadd_rn(b, sh1[i][tx]);
        }
        part0[(int64_t)ch * nchunk + blockIdx.y] = a;
        part1[(int64_t)ch * nchunk + blockIdx.y] = b;
    }
}

/* One block per channel: the chunk partials summed by a fixed tree, then
 * BWD 0: A = mean, B = sum of squared deviations (bn.c's first adjustments), N = rows;
 * BWD 1: A = GA = sum dy, B = GB = sum dy*(x-mean), N = rows (GA, GB, N are what SyncBN replaces). */
template <int BWD>
static __global__ void bn_reduce(int64_t rows, int c, const float *x, int nchunk, const double *part0,
                                 const double *part1, double *A, double *B, double *GA, double *GB, double *N)
{
    __shared__ double r0[THREADS], r1[THREADS];
    const int t = threadIdx.x;
    for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double s0 = 0.0, s1 = 0.0;
        for (int i = t; i < nchunk; i += THREADS) {
            s0 = __dadd_rn(s0, part0[(int64_t)ch * nchunk + i]);
            s1 = __dadd_rn(s1, part1[(int64_t)ch * nchunk + i]);
        }
        block_sum2(r0, r1, s0, s1, t);
        if (t == 0) {
            const double sum = r0[0], sq = r1[0];
            if (!BWD) {
                const double ms = __ddiv_rn(sum, (double)rows);
                double dev = __dsub_rn(sq, __dmul_rn(ms, sum));
                if (dev < 0)
                    dev = 0;
                A[ch] = __dadd_rn((double)x[ch], ms);
                B[ch] = dev;
            } else {
                A[ch] = sum;
                B[ch] = sq;
                GA[ch] = sum;
                GB[ch] = sq;
            }
            N[ch] = (double)rows;
        }
        __syncthreads(); /* r0/r1 are rewritten for the next channel */
    }
}

/* SyncBN: bn.c's buffers, per block of CB channels: buf[0] = rows, then cb values, then cb values.
 * forward: rows*mean and sq + rows*mean*mean; backward: sum dy and sum dy*(x-mean). */
static __global__ void bn_sync_pack(int c, int bwd, int64_t rows, const double *A, const double *B, double *sbuf)
{
    GRID_LOOP(ch, c)
    {
        const int blk = (int)(ch / CB), j = (int)(ch % CB);
        const int cb = c - blk * CB < CB ? c - blk * CB : CB;
        double *buf = sbuf + (int64_t)blk * SYNC_STRIDE + 1;
        const double n = (double)rows;
        if (j == 0)
            buf[0] = n;
        if (!bwd) {
            const double mean = A[ch];
            buf[1 + j] = __dmul_rn(n, mean);
            buf[1 + cb + j] = __dadd_rn(B[ch], __dmul_rn(__dmul_rn(n, mean), mean));
        } else {
            buf[1 + j] = A[ch];
            buf[1 + cb + j] = B[ch];
        }
    }
}

/* where the block's sync succeeded (bit blk of ok): forward: N, mean and deviations of all replicas'
 * rows; backward: N, GA, GB. On failure the local values stay, as in bn.c. */
static __global__ void bn_sync_unpack(int c, int bwd, unsigned long long ok, const double *sbuf, double *A, double *B,
                                      double *GA, double *GB, double *N)
{
    GRID_LOOP(ch, c)
    {
        const int blk = (int)(ch / CB), j = (int)(ch % CB);
        const int cb = c - blk * CB < CB ? c - blk * CB : CB;
        const double *buf = sbuf + (int64_t)blk * SYNC_STRIDE + 1;
        if (!(ok >> blk & 1ull))
            continue;
        const double n_all = buf[0];
        N[ch] = n_all;
        if (!bwd) {
            const double mean = __ddiv_rn(buf[1 + j], n_all);
            double dev = __dsub_rn(buf[1 + cb + j], __dmul_rn(__dmul_rn(n_all, mean), mean));
            if (dev < 0)
                dev = 0;
            A[ch] = mean;
            B[ch] = dev;
        } else {
            GA[ch] = buf[1 + j];
            GB[ch] = buf[1 + cb + j];
        }
    }
}

/* d->sync per block of CB channels, in order, each handed its part of the device buffer itself (the
 * hook's communicator reduces device memory: NCCL; no host copy of the statistics). The stream is
 * waited on once after the pack, as a communicator reads what the ops wrote; the hook returns once
 * the reduction is complete, and the unpack is issued after it. */
static void bn_sync(const dt_bn_desc *d, int bwd, double *A, double *B, double *GA, double *GB, double *N,
                    double *sbuf)
{
    const int c = d->c;
    if (c > 64 * CB)
        dt_cuda_fatal("bn (SyncBN)", "more than 64 blocks of channels");
    cudaStream_t s = stream();
    bn_sync_pack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, d->rows, A, B, sbuf);
    DT_LAUNCHED("bn_sync_pack");
    DT_CK(cudaStreamSynchronize(s));
    unsigned long long ok = 0;
    for (int c0 = 0, blk = 0; c0 < c; c0 += CB, blk++) {
        const int cb = c - c0 < CB ? c - c0 : CB;
        if (d->sync(d->sync_ctx, sbuf + (int64_t)blk * SYNC_STRIDE + 1, 2 * cb + 1) == 0)
            ok |= 1ull << blk;
    }
    bn_sync_unpack<<<blocks_for(c), THREADS, 0, s>>>(c, bwd, ok, sbuf, A, B, GA, GB, N);
    DT_LAUNCHED("bn_sync_unpack");
}

/* bn.c's per-channel tail of the training forward, in its order and types */
static __global__ void bn_train_finalize(int c, const double *A, const double *B, const double *N,
                                         const float *gamma, const float *beta, float eps, float momentum,
                                         float *saved, float *running_mean, float *running_var)
{
    GRID_LOOP(ch, c)
    {
        const double mean = A[ch], sq = B[ch], n_all = N[ch];
        const double var = __ddiv_rn(sq, n_all);
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, (double)eps)));
        const double g = (double)gamma[ch];
        saved[ch] = (float)mean;
        saved[c + ch] = (float)invstd;
        saved[2 * (int64_t)c + ch] = (float)__dmul_rn(g, invstd);
        saved[3 * (int64_t)c + ch] = (float)__dsub_rn((double)beta[ch], __dmul_rn(__dmul_rn(mean, g), invstd));
        const double unbiased = n_all > 1 ? __ddiv_rn(sq, __dsub_rn(n_all, 1.0)) : var;
        const double m = (double)momentum, keep = __dsub_rn(1.0, m);
        running_mean[ch] = (float)__dadd_rn(__dmul_rn(keep, (double)running_mean[ch]), __dmul_rn(m, mean));
        running_var[ch] = (float)__dadd_rn(__dmul_rn(keep, (double)running_var[ch]), __dmul_rn(m, unbiased));
    }
}

/* bn.c's inference scale and shift: note running_mean * gamma is a float product there */
static __global__ void bn_infer_coef(int c, const float *gamma, const float *beta, const float *running_mean,
                                     const float *running_var, float eps, float *scale, float *shift)
{
    GRID_LOOP(ch, c)
    {
        const double invstd = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)running_var[ch], (double)eps)));
        scale[ch] = (float)__dmul_rn((double)gamma[ch], invstd);
        shift[ch] = (float)__dsub_rn((double)beta[ch],
                                     __dmul_rn((double)__fmul_rn(running_mean[ch], gamma[ch]), invstd));
    }
}

/* y = x*scale + shift per channel (then max(0, .)); with a residual res, y = max(0, x*scale + shift +
 * res) (bn.c's order: the BN output as fp32 holds it, then the add); n = rows*c */
static __global__ void bn_affine_kernel(int64_t n, int c, const float *x, const float *scale, const float *shift,
                                        float *y, int relu, const float *res)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        float v = bn_affine(x[i], scale[ch], shift[ch]);
        if (res)
            v = __fadd_rn(v, res[i]);
        if (relu || res)
            v = v > 0.0f ? v : 0.0f;
        y[i] = v;
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* bn.c's per-channel tail of backward: dgamma, dbeta (local sums A, B) and the coefficients a, k, b of
 * dx = a*g - k*(x-mean) - b (with the possibly synced GA, GB, N) */
static __global__ void bn_bwd_finalize(int c, const double *A, const double *B, const double *GA, const double *GB,
                                       const double *N, const float *gamma, const float *saved, float *dgamma,
                                       float *dbeta, int accumulate_params, float *coef)
{
    GRID_LOOP(ch, c)
    {
        const double invstd = (double)saved[c + ch];
        const double dg = __dmul_rn(B[ch], invstd), db = A[ch];
        if (accumulate_params) {
            dgamma[ch] = __fadd_rn(dgamma[ch], (float)dg);
            dbeta[ch] = __fadd_rn(dbeta[ch], (float)db);
        } else {
            dgamma[ch] = (float)dg;
            dbeta[ch] = (float)db;
        }
        const double g = (double)gamma[ch], n_all = N[ch];
        const double gi = __dmul_rn(g, invstd);
        coef[ch] = (float)gi;
        coef[c + ch] = (float)__ddiv_rn(__dmul_rn(__dmul_rn(__dmul_rn(gi, invstd), invstd), GB[ch]), n_all);
        coef[2 * (int64_t)c + ch] = (float)__ddiv_rn(__dmul_rn(gi, GA[ch]), n_all);
    }
}

/* dx; with the block output ym (a BN+add+ReLU tail) the mask comes from it and g also goes to the
 * residual's gradient dr (dr may be dy: each element is read before it is written) */
static __global__ void bn_bwd_dx(int64_t n, int c, const float *x, const float *dy, const float *saved,
                                 const float *coef, int relu, float *dx, int accumulate, const float *ym, float *dr,
                                 int accumulate_dr)
{
    const float *mean = saved, *scale = saved + 2 * (int64_t)c, *shift = saved + 3 * (int64_t)c;
    const float *ca = coef, *ck = coef + c, *cb = coef + 2 * (int64_t)c;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int ch = (int)(i % c);
    const int dch = (int)(stride % c);
    for (; i < n; i += stride) {
        const float xv = x[i], v = dy[i];
        const float g = ym     ? (ym[i] > 0.0f ? v : 0.0f)
                        : relu ? (bn_affine(xv, scale[ch], shift[ch]) > 0.0f ? v : 0.0f)
                               : v;
        if (dr)
            dr[i] = accumulate_dr ? __fadd_rn(dr[i], g) : g;
        const float r =
            __fsub_rn(__fsub_rn(__fmul_rn(ca[ch], g), __fmul_rn(ck[ch], __fsub_rn(xv, mean[ch]))), cb[ch]);
        dx[i] = accumulate ? __fadd_rn(dx[i], r) : r;
        ch += dch;
        if (ch >= c)
            ch -= c;
    }
}

/* scratch for a training forward or backward: partials, the per-channel doubles, SyncBN buffers and
 * (backward) the dx coefficients, in one request of bn_train_bytes (the SyncBN buffers always: a
 * model planned without SyncBN may get it later) */
typedef struct bn_scratch {
    double *part0, *part1, *A, *B, *GA, *GB, *N, *sbuf;
    float *coef;
    int nchunk;
} bn_scratch;

static size_t bn_train_bytes(const dt_bn_desc *d, size_t *part, size_t *vec, size_t *sb, size_t *cf)
{
    const int c = d->c;
    *part = align256((size_t)c * (size_t)bn_chunks(d->rows, c) * sizeof(double));
    *vec = align256((size_t)c * sizeof(double));
    *sb = align256((size_t)((c + CB - 1) / CB) * SYNC_STRIDE * sizeof(double));
    *cf = align256(3 * (size_t)c * sizeof(float));
    return 2 * *part + 5 * *vec + *sb + *cf;
}

/* inference: the per-channel scale and shift */
static size_t bn_infer_bytes(const dt_bn_desc *d)
{
    return 2 * (size_t)d->c * sizeof(float);
}

/* d's three types: fp32 only (cuda.h) */
static void bn_types(const char *op, const dt_bn_desc *d)
{
    DT_CUDA_F32(op, d->xt);
    DT_CUDA_F32(op, d->yt);
    DT_CUDA_F32(op, d->pt);
}

extern "C" size_t dt_cuda_bn_scratch(const dt_bn_desc *d)
{
    bn_types("bn_scratch", d);
    if (d->rows <= 0 || d->c <= 0)
        return 0;
    size_t part, vec, sb, cf, train = bn_train_bytes(d, &part, &vec, &sb, &cf), infer = bn_infer_bytes(d);
    return train > infer ? train : infer;
}

static bn_scratch bn_scratch_get(const dt_bn_desc *d)
{
    bn_scratch s;
    s.nchunk = bn_chunks(d->rows, d->c);
    size_t part, vec, sb, cf;
    char *p = (char *)scratch(bn_train_bytes(d, &part, &vec, &sb, &cf));
    s.part0 = (double *)p;
    p += part;
    s.part1 = (double *)p;
    p += part;
    s.A = (double *)p;
    p += vec;
    s.B = (double *)p;
    p += vec;
    s.GA = (double *)p;
    p += vec;
    s.GB = (double *)p;
    p += vec;
    s.N = (double *)p;
    p += vec;
    s.sbuf = d->sync ? (double *)p : NULL;
    p += sb;
    s.coef = (float *)p;
    return s;
}

/* the training forward, with the tail bn_affine_kernel says (relu, or the residual res) */
static void bn_train(const char *op, const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                     void *yv, float *saved, void *running_meanv, void *running_varv, int relu, const float *res)
{
    bn_types(op, d);
    const float *x = (const float *)xv, *gamma = (const float *)gammav, *beta = (const float *)betav;
    float *y = (float *)yv, *running_mean = (float *)running_meanv, *running_var = (float *)running_varv;
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    bn_partials<0><<<pg, pb, 0, st>>>(rows, c, x, NULL, NULL, 0, NULL, s.nchunk, s.part0, s.part1);
    DT_LAUNCHED("bn_partials (forward)");
    bn_reduce<0><<<(unsigned)(c < 65535 ? c : 65535), THREADS, 0, st>>>(rows, c, x, s.nchunk, s.part0, s.part1, s.A,
                                                                       s.B, s.GA, s.GB, s.N);
    DT_LAUNCHED("bn_reduce (forward)");
    if (d->sync)
        bn_sync(d, 0, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    bn_train_finalize<<<blocks_for(c), THREADS, 0, st>>>(c, s.A, s.B, s.N, gamma, beta, d->eps, d->momentum, saved,
                                                          running_mean, running_var);
    DT_LAUNCHED("bn_train_finalize");
    const int64_t n = rows * c;
    bn_affine_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, saved + 2 * (size_t)c, saved + 3 * (size_t)c, y,
                                                         relu, res);
    DT_LAUNCHED("bn_affine_kernel (train)");
}

extern "C" void dt_cuda_bn_fwd_train(const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                                     void *yv, float *saved, void *running_meanv, void *running_varv, int relu)
{
    bn_train("bn_fwd_train", d, xv, gammav, betav, yv, saved, running_meanv, running_varv, relu, NULL);
}

extern "C" void dt_cuda_bn_add_relu_fwd_train(const dt_bn_desc *d, const void *xv, const void *gammav,
                                              const void *betav, const void *r, dt_dtype rt, void *yv, float *saved,
                                              void *running_meanv, void *running_varv)
{
    DT_CUDA_F32("bn_add_relu_fwd_train", rt);
    bn_train("bn_add_relu_fwd_train", d, xv, gammav, betav, yv, saved, running_meanv, running_varv, 1,
             (const float *)r);
}

/* the inference forward, with bn_affine_kernel's tail */
static void bn_infer(const char *op, const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                     const void *running_meanv, const void *running_varv, void *yv, int relu, const float *res)
{
    bn_types(op, d);
    const float *x = (const float *)xv, *gamma = (const float *)gammav, *beta = (const float *)betav;
    const float *running_mean = (const float *)running_meanv, *running_var = (const float *)running_varv;
    float *y = (float *)yv;
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    float *scale = (float *)scratch(bn_infer_bytes(d)), *shift = scale + c;
    bn_infer_coef<<<blocks_for(c), THREADS, 0, st>>>(c, gamma, beta, running_mean, running_var, d->eps, scale, shift);
    DT_LAUNCHED("bn_infer_coef");
    const int64_t n = rows * c;
    bn_affine_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, scale, shift, y, relu, res);
    DT_LAUNCHED("bn_affine_kernel (infer)");
}

extern "C" void dt_cuda_bn_fwd_infer(const dt_bn_desc *d, const void *xv, const void *gammav, const void *betav,
                                     const void *running_meanv, const void *running_varv, void *yv, int relu)
{
    bn_infer("bn_fwd_infer", d, xv, gammav, betav, running_meanv, running_varv, yv, relu, NULL);
}

extern "C" void dt_cuda_bn_add_relu_fwd_infer(const dt_bn_desc *d, const void *xv, const void *gammav,
                                              const void *betav, const void *running_meanv,
                                              const void *running_varv, const void *r, dt_dtype rt, void *yv)
{
    DT_CUDA_F32("bn_add_relu_fwd_infer", rt);
    bn_infer("bn_add_relu_fwd_infer", d, xv, gammav, betav, running_meanv, running_varv, yv, 1, (const float *)r);
}

/* backward; with ym (the block output of a BN+add+ReLU tail) the mask comes from it and g also goes to
 * the residual's gradient dr */
static void bn_backward(const char *op, const dt_bn_desc *d, const void *xv, const void *dyv, int relu,
                        const float *ym, const void *gammav, const float *saved, void *dxv, float *dr,
                        void *dgammav, void *dbetav, int accumulate_dx, int accumulate_dr, int accumulate_params)
{
    bn_types(op, d);
    const float *x = (const float *)xv, *dy = (const float *)dyv, *gamma = (const float *)gammav;
    float *dx = (float *)dxv, *dgamma = (float *)dgammav, *dbeta = (float *)dbetav;
    const int64_t rows = d->rows;
    const int c = d->c;
    if (rows <= 0 || c <= 0)
        return;
    cudaStream_t st = stream();
    bn_scratch s = bn_scratch_get(d);
    dim3 pb(RED_TX, RED_TY), pg((unsigned)((c + RED_TX - 1) / RED_TX), (unsigned)s.nchunk);
    bn_partials<1><<<pg, pb, 0, st>>>(rows, c, x, dy, saved, relu, ym, s.nchunk, s.part0, s.part1);
    DT_LAUNCHED("bn_partials (backward)");
    bn_reduce<1><<<(unsigned)(c < 65535 ? c : 65535), THREADS, 0, st>>>(rows, c, x, s.nchunk, s.part0, s.part1, s.A,
                                                                       s.B, s.GA, s.GB, s.N);
    DT_LAUNCHED("bn_reduce (backward)");
    if (d->sync)
        bn_sync(d, 1, s.A, s.B, s.GA, s.GB, s.N, s.sbuf);
    bn_bwd_finalize<<<blocks_for(c), THREADS, 0, st>>>(c, s.A, s.B, s.GA, s.GB, s.N, gamma, saved, dgamma, dbeta,
                                                        accumulate_params, s.coef);
    DT_LAUNCHED("bn_bwd_finalize");
    const int64_t n = rows * c;
    bn_bwd_dx<<<blocks_for(n), THREADS, 0, st>>>(n, c, x, dy, saved, s.coef, relu, dx, accumulate_dx, ym, dr,
                                                  accumulate_dr);
    DT_LAUNCHED("bn_bwd_dx");
}

extern "C" void dt_cuda_bn_bwd(const dt_bn_desc *d, const void *xv, const void *dyv, int relu, const void *gammav,
                               const float *saved, void *dxv, void *dgammav, void *dbetav, int accumulate_dx,
                               int accumulate_params)
{
    bn_backward("bn_bwd", d, xv, dyv, relu, NULL, gammav, saved, dxv, NULL, dgammav, dbetav, accumulate_dx, 0,
                accumulate_params);
}

extern "C" void dt_cuda_bn_add_relu_bwd(const dt_bn_desc *d, const void *xv, const void *y, const void *dyv,
                                        const void *gammav, const float *saved, void *dxv, void *dr, dt_dtype rt,
                                        void *dgammav, void *dbetav, int accumulate_dx, int accumulate_dr,
                                        int accumulate_params)
{
    DT_CUDA_F32("bn_add_relu_bwd", rt);
    bn_backward("bn_add_relu_bwd", d, xv, dyv, 0, (const float *)y, gammav, saved, dxv, (float *)dr, dgammav, dbetav,
                accumulate_dx, accumulate_dr, accumulate_params);
}
