/* optim.cu: the optimizer step's ops on the GPU, the port of nn/cpu/optim.c (contracts in
 * nn/backend.h; shared helpers and rules: kernels.h): unscale_check, grad_sumsq, the updates sgd,
 * adam (and AdamW), rmsprop, lars and lamb (lamb_moments, lamb_apply), tensor_sumsq, ema_update and
 * step_end (scalars.h's update in one thread).
 *
 * The arithmetic: each update is optim.c's formula on one element, every operation written with a
 * round-to-nearest intrinsic in optim.c's order (no FMA contraction), in fp32; the optimizer's state
 * (momentum, moments) is fp32, the parameter and the gradient of their own types (templates on the
 * storage types, instantiated through DT_CUDA_TYPED), the parameter rounded once when stored. sgd,
 * adam, rmsprop and unscale_check move 8 elements at a time with 16-byte accesses when their operands
 * are aligned (load8/store8), one at a time otherwise and for the tail, the same per-element helper in
 * both. Sums of squares (grad_sumsq, tensor_sumsq, LAMB's norms) use optim.c's blocks, fixed by n:
 * one block of threads per part, summed by a fixed tree in shared memory, then the parts in order by
 * one thread: the same bits on any GPU and launch, not the CPU's bits (another order of the
 * additions). The step's numbers (lr, 1/scale, the clip factor, the skip, the overflow flag) are read
 * and written in the dt_scalars block on the device, by the kernels: no op here waits for the stream
 * or copies to or from the host. */
#include "config.h"

#include "nn/cuda/kernels.h"

/* --- SGD and the step's end ------------------------------------------------------------------------ */

/* the update's constants: the op's arguments, and the step's (lr, 1/scale, first) read from the
 * scalars block by the kernel */
typedef struct sgd_consts {
    float momentum, one_minus_dampening, wd, grad_scale, lr, clip;
    int nesterov, first, clipping;
} sgd_consts;

/* optim.c's dt_cpu_sgd on one element, unfused: the new p from p and g, the gradient times 1/scale
 * first (a float product, as there); *buf, the element's momentum (fp32), is read and written only
 * when momentum != 0 */
static __device__ __forceinline__ float sgd_one(float pv, float gv, float *buf, const sgd_consts &k)
{
    float d = __fmul_rn(gv, k.grad_scale);
    if (k.clipping) /* clip_grad_norm_'s multiply after unscale_'s, each rounded */
        d = __fmul_rn(d, k.clip);
    if (k.wd != 0.0f)
        d = __fadd_rn(d, __fmul_rn(k.wd, pv));
    if (k.momentum != 0.0f) {
        const float b = k.first ? d : __fadd_rn(__fmul_rn(k.momentum, *buf), __fmul_rn(k.one_minus_dampening, d));
        *buf = b;
        d = k.nesterov ? __fadd_rn(d, __fmul_rn(k.momentum, b)) : b;
    }
    return __fsub_rn(pv, __fmul_rn(k.lr, d));
}

/* lr, 1/scale, first and the skip come from the scalars block (written by the ops and step_end before
 * this kernel runs on the same stream); a skipped step changes nothing. p of type TP, g of TG. */
template <typename TP, typename TG>
static __global__ void sgd_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *buf, sgd_consts args,
                                  const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    sgd_consts k = args;
    k.grad_scale = s->inv_scale;
    k.lr = s->lr;
    k.first = s->sgd_steps == 0;
    k.clipping = s->clip_norm > 0;
    k.clip = dt_scalars_clip_coef(s);
    const int mom = k.momentum != 0.0f;
    GRID_LOOP(c, n8)
    {
        float pv[8], gv[8], b[8];
        load8(p + 8 * c, pv);
        load8(g + 8 * c, gv);
        if (mom)
            load8(buf + 8 * c, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = sgd_one(pv[j], gv[j], &b[j], k);
        store8(p + 8 * c, pv);
        if (mom)
            store8(buf + 8 * c, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, sgd_one(ld(p, i), ld(g, i), mom ? buf + i : NULL, k));
}

extern "C" void dt_cuda_sgd(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, float momentum,
                            float dampening, float wd, int nesterov, const dt_scalars *s)
{
    if (n <= 0)
        return;
    sgd_consts k = {};
    k.momentum = momentum;
    k.one_minus_dampening = 1.0f - dampening;
    k.wd = wd;
    k.nesterov = nesterov;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, momentum != 0.0f ? buf : NULL));
    DT_CUDA_TYPED("sgd", pt, TP,
                  DT_CUDA_TYPED("sgd", gt, TG,
                                sgd_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, (TP *)p,
                                                                                           (const TG *)g, buf, k, s)));
    DT_LAUNCHED("sgd_kernel");
}

/* --- Adam, AdamW and RMSprop: optim.c's dt_cpu_adam and dt_cpu_rmsprop on one element, each
 * operation rounded as there (torch's single-tensor formulas) ------------------------------------- */

static __device__ __forceinline__ float unscaled_one(float gv, const dt_scalars *s, float clip)
{
    const float d = __fmul_rn(gv, s->inv_scale);
    return s->clip_norm > 0 ? __fmul_rn(d, clip) : d;
}

static __device__ __forceinline__ float adam_one(float w, float gv, float *m1, float *m2, const dt_adam_consts &c,
                                                 int l2, int dec, const dt_scalars *s, float clip)
{
    float d = unscaled_one(gv, s, clip);
    if (l2)
        d = __fadd_rn(d, __fmul_rn(c.wd, w));
    if (dec)
        w = __fmul_rn(w, c.decay);
    const float a = __fadd_rn(__fmul_rn(*m1, c.beta1), __fmul_rn(c.one_minus_beta1, d));
    const float b = __fadd_rn(__fmul_rn(*m2, c.beta2), __fmul_rn(__fmul_rn(c.one_minus_beta2, d), d));
    *m1 = a;
    *m2 = b;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(b), c.bc2_sqrt), c.eps);
    return __fadd_rn(w, __fdiv_rn(__fmul_rn(c.neg_step, a), denom));
}

template <typename TP, typename TG>
static __global__ void adam_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *m1, float *m2, double beta1,
                                   double beta2, double eps, double wd, int decoupled, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float clip = dt_scalars_clip_coef(s);
    const int l2 = !decoupled && wd != 0, dec = decoupled && wd != 0;
    GRID_LOOP(k, n8)
    {
        float pv[8], gv[8], a[8], b[8];
        load8(p + 8 * k, pv);
        load8(g + 8 * k, gv);
        load8(m1 + 8 * k, a);
        load8(m2 + 8 * k, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = adam_one(pv[j], gv[j], &a[j], &b[j], c, l2, dec, s, clip);
        store8(p + 8 * k, pv);
        store8(m1 + 8 * k, a);
        store8(m2 + 8 * k, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, adam_one(ld(p, i), ld(g, i), m1 + i, m2 + i, c, l2, dec, s, clip));
}

extern "C" void dt_cuda_adam(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1, float *m2,
                             double beta1, double beta2, double eps, double wd, int decoupled, const dt_scalars *s)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, m1, m2));
    DT_CUDA_TYPED("adam", pt, TP,
                  DT_CUDA_TYPED("adam", gt, TG,
                                adam_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, (TP *)p, (const TG *)g, m1, m2, beta1, beta2, eps, wd, decoupled, s)));
    DT_LAUNCHED("adam_kernel");
}

typedef struct rmsprop_consts {
    float alpha, one_minus_alpha, eps, wd, momentum;
} rmsprop_consts;

static __device__ __forceinline__ float rmsprop_one(float w, float gv, float *sq, float *buf, const rmsprop_consts &c,
                                                    float neg_lr, const dt_scalars *s, float clip)
{
    float d = unscaled_one(gv, s, clip);
    if (c.wd != 0.0f)
        d = __fadd_rn(d, __fmul_rn(c.wd, w));
    const float v = __fadd_rn(__fmul_rn(*sq, c.alpha), __fmul_rn(__fmul_rn(c.one_minus_alpha, d), d));
    *sq = v;
    const float avg = __fadd_rn(__fsqrt_rn(v), c.eps);
    if (c.momentum > 0) {
        const float b = __fadd_rn(__fmul_rn(*buf, c.momentum), __fdiv_rn(d, avg));
        *buf = b;
        return __fadd_rn(w, __fmul_rn(neg_lr, b));
    }
    return __fadd_rn(w, __fdiv_rn(__fmul_rn(neg_lr, d), avg));
}

template <typename TP, typename TG>
static __global__ void rmsprop_kernel(int64_t n, int64_t n8, TP *p, const TG *g, float *sq, float *buf,
                                      rmsprop_consts c, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const float clip = dt_scalars_clip_coef(s), neg_lr = -s->lr;
    const int mom = c.momentum > 0;
    GRID_LOOP(k, n8)
    {
        float pv[8], gv[8], v[8], b[8];
        load8(p + 8 * k, pv);
        load8(g + 8 * k, gv);
        load8(sq + 8 * k, v);
        if (mom)
            load8(buf + 8 * k, b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            pv[j] = rmsprop_one(pv[j], gv[j], &v[j], &b[j], c, neg_lr, s, clip);
        store8(p + 8 * k, pv);
        store8(sq + 8 * k, v);
        if (mom)
            store8(buf + 8 * k, b);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    st(p, i, rmsprop_one(ld(p, i), ld(g, i), sq + i, mom ? buf + i : NULL, c, neg_lr, s, clip));
}

extern "C" void dt_cuda_rmsprop(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *sq, float *buf,
                                double alpha, double eps, double wd, double momentum, const dt_scalars *s)
{
    if (n <= 0)
        return;
    rmsprop_consts c;
    c.alpha = (float)alpha;
    c.one_minus_alpha = (float)(1.0 - alpha);
    c.eps = (float)eps;
    c.wd = (float)wd;
    c.momentum = (float)momentum;
    const int64_t n8 = chunks8(n, vec8_ok(p, g, sq, momentum > 0 ? buf : NULL));
    DT_CUDA_TYPED("rmsprop", pt, TP,
                  DT_CUDA_TYPED("rmsprop", gt, TG,
                                rmsprop_kernel<TP, TG><<<grid8(n, n8), THREADS, 0, stream()>>>(
                                    n, n8, (TP *)p, (const TG *)g, sq, buf, c, s)));
    DT_LAUNCHED("rmsprop_kernel");
}

/* --- the model's exponential moving average (optim.c's dt_cpu_ema_update) ----------------------- */

template <typename TX>
static __global__ void ema_kernel(int64_t n, float *avg, const TX *x, float d, float one_minus_d, int copy)
{
    GRID_LOOP(i, n)
    {
        const float xv = ld(x, i);
        avg[i] = copy ? xv : __fadd_rn(__fmul_rn(d, avg[i]), __fmul_rn(one_minus_d, xv));
    }
}

extern "C" void dt_cuda_ema_update(int64_t n, float *avg, const void *x, dt_dtype xt, double decay)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("ema_update", xt, TX,
                  ema_kernel<TX><<<grid8(n, 0), THREADS, 0, stream()>>>(n, avg, (const TX *)x, (float)decay,
                                                                    (float)(1.0 - decay), decay == 0));
    DT_LAUNCHED("ema_kernel");
}

/* scalars.h's dt_scalars_step_end, the very function the CPU runs (no a*b+c in it for nvcc to
 * contract: the same bits) */
static __global__ void step_end_kernel(dt_scalars *s)
{
    dt_scalars_step_end(s);
}

extern "C" void dt_cuda_step_end(dt_scalars *s)
{
    step_end_kernel<<<1, 1, 0, stream()>>>(s);
    DT_LAUNCHED("step_end_kernel");
}

/* --- overflow check ------------------------------------------------------------------------------- */

/* g*inv_scale is inf or NaN: inf - inf and NaN - NaN are NaN */
static __device__ __forceinline__ int overflows(float g, float inv_scale)
{
    const float v = __fmul_rn(g, inv_scale);
    return !(__fsub_rn(v, v) == 0.0f);
}

/* g is only read: the multiply by 1/scale is the check's (the update applies it: sgd). A bad value
 * sets the block's overflow flag; a clean one leaves it (it is cleared by step_end, and set by xent
 * too). Every writer writes the same value, so the race between them is harmless. */
template <typename T> static __global__ void unscale_check_kernel(int64_t n, int64_t n8, const T *g, dt_scalars *s)
{
    const float inv_scale = s->inv_scale;
    int bad = 0;
    GRID_LOOP(c, n8)
    {
        float v[8];
        load8(g + 8 * c, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            bad |= overflows(v[j], inv_scale);
    }
    GRID_LOOP_FROM(i, 8 * n8, n)
    bad |= overflows(ld(g, i), inv_scale);
    if (bad)
        s->agree[DT_AGREE_OVERFLOW] = 1;
}

extern "C" void dt_cuda_unscale_check(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    if (n <= 0)
        return;
    const int64_t n8 = chunks8(n, vec8_ok(g));
    DT_CUDA_TYPED("unscale_check", t, T,
                  unscale_check_kernel<T><<<grid8(n, n8), THREADS, 0, stream()>>>(n, n8, (const T *)g, s));
    DT_LAUNCHED("unscale_check_kernel");
}

/* --- the gradients' sum of squares (clipping) -------------------------------------------------------- */

/* optim.c's rule: blocks whose size depends on n alone, each summed in order, then the blocks' sums
 * in order, here by one block of threads per part (a tree in shared memory: the same tree on every
 * run) and one thread adding the parts; the same bits whatever the GPU, not the CPU's bits (another
 * order of the additions) */
#define SUMSQ_PARTS 4096
static __device__ double sumsq_part[SUMSQ_PARTS];

template <typename T>
static __global__ void grad_sumsq_kernel(int64_t n, int64_t block, const T *g, const dt_scalars *s)
{
    __shared__ double tree[THREADS];
    const float inv_scale = s->inv_scale;
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double acc = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float u = __fmul_rn(ld(g, i), inv_scale);
        acc = __dadd_rn(acc, __dmul_rn((double)u, (double)u));
    }
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            tree[threadIdx.x] = __dadd_rn(tree[threadIdx.x], tree[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        sumsq_part[blockIdx.x] = tree[0];
}

static __global__ void grad_sumsq_total_kernel(int64_t parts, dt_scalars *s)
{
    double sum = s->grad_sumsq;
    for (int64_t b = 0; b < parts; b++)
        sum = __dadd_rn(sum, sumsq_part[b]);
    s->grad_sumsq = sum;
}

extern "C" void dt_cuda_grad_sumsq(int64_t n, dt_dtype t, const void *g, dt_scalars *s)
{
    if (n <= 0)
        return;
    int64_t block = (int64_t)1 << 16;
    if ((n + block - 1) / block > SUMSQ_PARTS)
        block = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    const int64_t parts = (n + block - 1) / block;
    DT_CUDA_TYPED("grad_sumsq", t, T,
                  grad_sumsq_kernel<T><<<(unsigned)parts, THREADS, 0, stream()>>>(n, block, (const T *)g, s));
    DT_LAUNCHED("grad_sumsq_kernel");
    grad_sumsq_total_kernel<<<1, 1, 0, stream()>>>(parts, s);
    DT_LAUNCHED("grad_sumsq_total_kernel");
}

/* --- per-tensor norms, LARS and LAMB (optim.c's, each operation rounded as there) -------------- */

static __device__ double sumsq_part2[SUMSQ_PARTS];

/* the block size of the norms' sums: optim.c's rule, fixed by n */
static int64_t sumsq_block(int64_t n)
{
    int64_t block = (int64_t)1 << 16;
    if ((n + block - 1) / block > SUMSQ_PARTS)
        block = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
    return block;
}

/* a fixed tree over the block's THREADS values of a and b (b may be unused) */
static __device__ void tree2(double *ta, double *tb, double a, double b)
{
    ta[threadIdx.x] = a;
    tb[threadIdx.x] = b;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) {
            ta[threadIdx.x] = __dadd_rn(ta[threadIdx.x], ta[threadIdx.x + w]);
            tb[threadIdx.x] = __dadd_rn(tb[threadIdx.x], tb[threadIdx.x + w]);
        }
        __syncthreads();
    }
}

template <typename T>
static __global__ void tensor_sumsq_kernel(int64_t n, int64_t block, const T *x, int unscale, const dt_scalars *s)
{
    __shared__ double ta[THREADS], tb[THREADS];
    const float clip = dt_scalars_clip_coef(s);
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double acc = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float u = unscale ? unscaled_one(ld(x, i), s, clip) : ld(x, i);
        acc = __dadd_rn(acc, __dmul_rn((double)u, (double)u));
    }
    tree2(ta, tb, acc, 0.0);
    if (threadIdx.x == 0)
        sumsq_part[blockIdx.x] = ta[0];
}

/* the parts in order into out[0] (and out[1] from sumsq_part2 when two); zeros when skip is set and
 * the step is skipped (LAMB's phase 1 wrote no parts then) */
static __global__ void sumsq_out_kernel(int64_t parts, int two, int skip, const dt_scalars *s, double *out)
{
    if (skip && dt_scalars_skip(s)) {
        out[0] = 0;
        if (two)
            out[1] = 0;
        return;
    }
    double a = 0, b = 0;
    for (int64_t k = 0; k < parts; k++) {
        a = __dadd_rn(a, sumsq_part[k]);
        if (two)
            b = __dadd_rn(b, sumsq_part2[k]);
    }
    out[0] = a;
    if (two)
        out[1] = b;
}

extern "C" void dt_cuda_tensor_sumsq(int64_t n, const void *x, dt_dtype t, int unscale, const dt_scalars *s, double *out)
{
    const int64_t block = sumsq_block(n > 0 ? n : 1), parts = n > 0 ? (n + block - 1) / block : 0;
    if (parts > 0) {
        DT_CUDA_TYPED("tensor_sumsq", t, T,
                      tensor_sumsq_kernel<T><<<(unsigned)parts, THREADS, 0, stream()>>>(n, block, (const T *)x,
                                                                                          unscale, s));
        DT_LAUNCHED("tensor_sumsq_kernel");
    }
    sumsq_out_kernel<<<1, 1, 0, stream()>>>(parts, 0, 0, s, out);
    DT_LAUNCHED("sumsq_out_kernel");
}

template <typename TP, typename TG>
static __global__ void lars_kernel(int64_t n, TP *p, const TG *g, float *buf, float mom, float wd, double dwd,
                                   double eta, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const double wn = sqrt(norms[0]), gn = sqrt(norms[1]);
    const float trust = eta > 0 && wn > 0 && gn > 0 ? (float)(eta * wn / (gn + dwd * wn)) : 1.0f;
    const float local_lr = __fmul_rn(s->lr, trust), clip = dt_scalars_clip_coef(s);
    GRID_LOOP(i, n)
    {
        const float w = ld(p, i);
        const float d = __fadd_rn(unscaled_one(ld(g, i), s, clip), __fmul_rn(wd, w));
        const float b = __fadd_rn(__fmul_rn(mom, buf[i]), __fmul_rn(local_lr, d));
        buf[i] = b;
        st(p, i, __fsub_rn(w, b));
    }
}

extern "C" void dt_cuda_lars(int64_t n, void *p, dt_dtype pt, const void *g, dt_dtype gt, float *buf, double momentum,
                             double wd, double eta, const double *norms, const dt_scalars *s)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("lars", pt, TP,
                  DT_CUDA_TYPED("lars", gt, TG,
                                lars_kernel<TP, TG><<<grid8(n, 0), THREADS, 0, stream()>>>(
                                    n, (TP *)p, (const TG *)g, buf, (float)momentum, (float)wd, wd, eta, norms, s)));
    DT_LAUNCHED("lars_kernel");
}

/* LAMB's r for one element (optim.c's lamb_r) */
static __device__ __forceinline__ float lamb_r(float a, float b, float w, const dt_adam_consts &c, float inv_bc1)
{
    return __fadd_rn(__fdiv_rn(__fmul_rn(a, inv_bc1), __fadd_rn(__fdiv_rn(__fsqrt_rn(b), c.bc2_sqrt), c.eps)),
                     __fmul_rn(c.wd, w));
}

template <typename TP, typename TG>
static __global__ void lamb_moments_kernel(int64_t n, int64_t block, const TP *p, const TG *g, float *m1, float *m2,
                                           double beta1, double beta2, double eps, double wd, const dt_scalars *s)
{
    __shared__ double ta[THREADS], tb[THREADS];
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const float clip = dt_scalars_clip_coef(s);
    const int64_t lo = (int64_t)blockIdx.x * block, hi = lo + block < n ? lo + block : n;
    double aw = 0, ar = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float w = ld(p, i), d = unscaled_one(ld(g, i), s, clip);
        const float a = __fadd_rn(__fmul_rn(m1[i], c.beta1), __fmul_rn(c.one_minus_beta1, d));
        const float b = __fadd_rn(__fmul_rn(m2[i], c.beta2), __fmul_rn(__fmul_rn(c.one_minus_beta2, d), d));
        m1[i] = a;
        m2[i] = b;
        const float r = lamb_r(a, b, w, c, inv_bc1);
        aw = __dadd_rn(aw, __dmul_rn((double)w, (double)w));
        ar = __dadd_rn(ar, __dmul_rn((double)r, (double)r));
    }
    tree2(ta, tb, aw, ar);
    if (threadIdx.x == 0) {
        sumsq_part[blockIdx.x] = ta[0];
        sumsq_part2[blockIdx.x] = tb[0];
    }
}

extern "C" void dt_cuda_lamb_moments(int64_t n, const void *p, dt_dtype pt, const void *g, dt_dtype gt, float *m1,
                                     float *m2, double beta1, double beta2, double eps, double wd, const dt_scalars *s,
                                     double *norms)
{
    const int64_t block = sumsq_block(n > 0 ? n : 1), parts = n > 0 ? (n + block - 1) / block : 0;
    if (parts > 0) {
        DT_CUDA_TYPED("lamb_moments", pt, TP,
                      DT_CUDA_TYPED("lamb_moments", gt, TG,
                                    lamb_moments_kernel<TP, TG><<<(unsigned)parts, THREADS, 0, stream()>>>(
                                        n, block, (const TP *)p, (const TG *)g, m1, m2, beta1, beta2, eps, wd, s)));
        DT_LAUNCHED("lamb_moments_kernel");
    }
    sumsq_out_kernel<<<1, 1, 0, stream()>>>(parts, 1, 1, s, norms);
    DT_LAUNCHED("sumsq_out_kernel");
}

template <typename TP>
static __global__ void lamb_apply_kernel(int64_t n, TP *p, const float *m1, const float *m2, double beta1,
                                         double beta2, double eps, double wd, const double *norms, const dt_scalars *s)
{
    if (dt_scalars_skip(s))
        return;
    const dt_adam_consts c = dt_adam_consts_of(s, beta1, beta2, eps, wd);
    const float inv_bc1 = (float)(1.0 / (1.0 - pow(beta1, (double)(s->sgd_steps + 1))));
    const double wn = sqrt(norms[0]), rn = sqrt(norms[1]);
    const float step = __fmul_rn(s->lr, wn > 0 && rn > 0 ? (float)(wn / rn) : 1.0f);
    GRID_LOOP(i, n)
    {
        const float w = ld(p, i);
        st(p, i, __fsub_rn(w, __fmul_rn(step, lamb_r(m1[i], m2[i], w, c, inv_bc1))));
    }
}

extern "C" void dt_cuda_lamb_apply(int64_t n, void *p, dt_dtype pt, const float *m1, const float *m2, double beta1,
                                   double beta2, double eps, double wd, const double *norms, const dt_scalars *s)
{
    if (n <= 0)
        return;
    DT_CUDA_TYPED("lamb_apply", pt, TP,
                  lamb_apply_kernel<TP><<<grid8(n, 0), THREADS, 0, stream()>>>(n, (TP *)p, m1, m2, beta1, beta2, eps,
                                                                               wd, norms, s));
    DT_LAUNCHED("lamb_apply_kernel");
}
