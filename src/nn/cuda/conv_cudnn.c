/* conv_cudnn.c: CUDA convolutions through cuDNN's legacy convolution API (CUDA builds only).
 *
 * Layouts: activations are NHWC tensors (cuDNN's CUDNN_TENSOR_NHWC with dims n, c, h, w); weights
 * are ours, O,KH,KW,I/groups, which is cuDNN's NHWC filter format ("KRSC") with dims
 * oc, c/groups, kh, kw. Groups through cudnnSetConvolutionGroupCount, dilation in the convolution
 * descriptor (ours counts as cuDNN's does: 1 is none), cross-correlation, fp32 operands (d->t: the
 * ops abort on another, cuda.h) and fp32 compute.
 *
 * Math: CUDNN_FMA_MATH. CUDNN_DEFAULT_MATH is not enough to keep fp32 in fp32: on Ampere and newer
 * it lets cuDNN run fp32 convolutions on TF32 tensor cores (PyTorch sets FMA math when TF32 is off
 * for the same reason). Results must compare with the CPU reference to fp32 rounding
 * (tests/gpu/ops_check), so no tensor-op math (TF32, fp16/bf16: doc/design.md, "The CUDA backend:
 * the plan").
 *
 * Planning: dt_cuda_conv_workspace, called when a model is planned for each convolution at every
 * batch size the run will meet, makes the shape's descriptors and chooses the three algorithms by
 * measurement (cudnnFind*Algorithm, which runs each candidate on the GPU with memory it allocates
 * itself: only at planning, never between steps). The choice is the fastest
 * candidate that succeeded, is deterministic (CUDNN_DETERMINISTIC, so a run's results do not depend
 * on the order of atomics), did not use tensor-op math, and needs at most WS_CAP of workspace. When
 * no candidate qualifies, the cap is dropped, then determinism (with a warning); none at all is
 * fatal. The answer is the largest workspace of the three. Note that measurement can choose another
 * algorithm in another run (timings are noisy), so two runs are bit-identical only when they choose
 * alike; the choices are logged at debug level.
 * Each search is timed and logged at info level, one line per shape (tests/gpu/check.sh reads the
 * lines that start "cuDNN conv " and hold " search "):
 *   cuDNN conv n256 56x56x64->64 k3x3 s1 g1: search 0.42 s (fwd 0.10, bwd data 0.20, bwd filter
 *   0.12); algorithms 1/1/0; workspace 12.0 MiB
 * and reserve_scratch, at the end of a model's planning, logs the totals since the last one
 * (dt_cuda_conv_search_report: "cuDNN algorithm search: ...").
 * Entries are kept in a cache keyed by the descriptor (bias and dx_accumulate cleared: cuDNN's state
 * does not depend on them), never freed. The ops only look their entry up. One missing means the
 * shape was not planned: a smaller batch of a planned shape is searched there and then, within the
 * planned workspace, with a warning (a search mid-run stalls the device and NCCL, and counts as an
 * unplanned allocation); any other is fatal.
 *
 * The legacy API is deprecated in cuDNN 9 (the calls remain): this file alone silences the
 * deprecation warnings. Moving to the cuDNN graph API (and fusing bias and activations there) is
 * future work. */
#include "config.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cudnn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

/* the most workspace a preferred algorithm may need */
#define WS_CAP ((size_t)1 << 30)
/* the most candidates we ask cuDNN for per pass (it has 6 to 8) */
#define MAX_ALGOS 32

typedef struct conv_entry {
    dt_conv_desc d; /* the key: bias and dx_accumulate cleared */
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_data, ws_filter;
} conv_entry;

static conv_entry **cache;
static int n_cache, cap_cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* searches since the last dt_cuda_conv_search_report: count, seconds per pass (under cache_lock) */
static int n_searched;
static double searched_s[3];

static dt_conv_desc key_of(const dt_conv_desc *d)
{
    dt_conv_desc k = *d;
    k.bias = 0;
    k.dx_accumulate = 0;
    return k;
}

/* the entry for d, or NULL; caller holds cache_lock */
static conv_entry *find_locked(const dt_conv_desc *key)
{
    for (int i = n_cache - 1; i >= 0; i--)
        if (memcmp(&cache[i]->d, key, sizeof *key) == 0)
            return cache[i];
    return NULL;
}

/* one measured candidate, whichever pass it is for */
typedef struct candidate {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} candidate;

static int tensor_math(cudnnMathType_t m)
{
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* index of the fastest candidate that qualifies under the given relaxations, or -1 */
static int pick_among(const candidate *c, int n, size_t cap, int any_memory, int any_determinism)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].status != CUDNN_STATUS_SUCCESS || tensor_math(c[i].math) || c[i].time < 0)
            continue;
        if (!any_determinism && c[i].determinism != CUDNN_DETERMINISTIC)
            continue;
        if (!any_memory && c[i].memory > cap)
            continue;
        if (best < 0 || c[i].time < c[best].time)
            best = i;
    }
    return best;
}

/* the chosen candidate's index; fatal when none ran */
static int pick(const candidate *c, int n, const char *pass, const dt_conv_desc *d, size_t cap, int hard_cap)
{
    int i = pick_among(c, n, cap, 0, 0);
    if (i < 0 && hard_cap && (i = pick_among(c, n, cap, 0, 1)) >= 0)
        dt_warn("cuDNN conv %dx%dx%d->%d k%dx%d s%d g%d %s: no deterministic algorithm fits the planned workspace; "
                "algorithm %d is not deterministic",
                d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, pass, c[i].algo);
    if (i < 0 && !hard_cap && (i = pick_among(c, n, cap, 1, 0)) >= 0)
        dt_warn("cuDNN conv %dx%dx%d->%d k%dx%d s%d g%d %s: every deterministic algorithm needs more than %zu MiB "
                "of workspace; algorithm %d needs %zu MiB",
                d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, pass, cap >> 20, c[i].algo,
                c[i].memory >> 20);
    if (i < 0 && !hard_cap && (i = pick_among(c, n, cap, 1, 1)) >= 0)
        dt_warn("cuDNN conv %dx%dx%d->%d k%dx%d s%d g%d %s: no deterministic algorithm runs; algorithm %d is not "
                "deterministic, so runs are not bit-reproducible",
                d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, pass, c[i].algo);
    if (i < 0) {
        dt_error("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d %s: no algorithm ran (%d tried)", d->n,
                 d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh, d->dw, d->groups, pass, n);
        for (int j = 0; j < n; j++)
            dt_error("  algorithm %d: %s", c[j].algo, cudnnGetErrorString(c[j].status));
        dt_cuda_fatal("cudnnFind*Algorithm", "no usable convolution algorithm");
    }
    return i;
}

/* descriptors and algorithms for e->d */
/* cap: the most workspace an algorithm may take; hard_cap: never more (a shape met at run time must
 * fit the workspace planned for the larger batch) */
static void build(conv_entry *e, cudnnHandle_t h, size_t cap, int hard_cap)
{
    const dt_conv_desc *d = &e->d;
    candidate c[MAX_ALGOS];
    int max = 0, got = 0, i;
    double t[3], t0;

    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->x));
    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->y));
    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->b));
    FATAL_CUDNN(cudnnCreateFilterDescriptor(&e->w));
    FATAL_CUDNN(cudnnCreateConvolutionDescriptor(&e->conv));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n, d->c, d->h, d->w));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n, d->oc, d->oh, d->ow));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->b, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, d->oc, 1, 1));
    FATAL_CUDNN(cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, d->oc, d->c / d->groups, d->kh,
                                           d->kw));
    FATAL_CUDNN(cudnnSetConvolution2dDescriptor(e->conv, d->ph, d->pw, d->sh, d->sw, d->dh, d->dw,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    FATAL_CUDNN(cudnnSetConvolutionGroupCount(e->conv, d->groups));
    FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv, CUDNN_FMA_MATH));

    int on, oc, ohh, oww; /* cuDNN must see the output we planned */
    FATAL_CUDNN(cudnnGetConvolution2dForwardOutputDim(e->conv, e->x, e->w, &on, &oc, &ohh, &oww));
    if (on != d->n || oc != d->oc || ohh != d->oh || oww != d->ow)
        dt_cuda_fatal("cudnnGetConvolution2dForwardOutputDim", "cuDNN's output shape differs from the planned one");

    /* forward */
    {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(cudnnFindConvolutionForwardAlgorithm(h, e->x, e->w, e->conv, e->y, max, &got, perf));
        t[0] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "forward", d, cap, hard_cap);
        e->fwd = perf[i].algo;
        FATAL_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(h, e->x, e->w, e->conv, e->y, e->fwd, &e->ws_fwd));
        e->ws_fwd = e->ws_fwd > perf[i].memory ? e->ws_fwd : perf[i].memory;
    }
    /* backward data */
    {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->y, e->conv, e->x, max, &got, perf));
        t[1] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "backward data", d, cap, hard_cap);
        e->bwd_data = perf[i].algo;
        FATAL_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w, e->y, e->conv, e->x, e->bwd_data,
                                                                 &e->ws_data));
        e->ws_data = e->ws_data > perf[i].memory ? e->ws_data : perf[i].memory;
    }
    /* backward filter */
    {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(h, e->x, e->y, e->conv, e->w, max, &got, perf));
        t[2] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "backward filter", d, cap, hard_cap);
        e->bwd_filter = perf[i].algo;
        FATAL_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->x, e->y, e->conv, e->w, e->bwd_filter,
                                                                   &e->ws_filter));
        e->ws_filter = e->ws_filter > perf[i].memory ? e->ws_filter : perf[i].memory;
    }
    dt_debug("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d: algorithms fwd %d / bwd data %d / bwd "
             "filter %d, workspace %zu / %zu / %zu bytes",
             d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh, d->dw, d->groups,
             (int)e->fwd, (int)e->bwd_data, (int)e->bwd_filter, e->ws_fwd, e->ws_data, e->ws_filter);
    size_t ws = e->ws_fwd > e->ws_data ? e->ws_fwd : e->ws_data;
    ws = e->ws_filter > ws ? e->ws_filter : ws;
    /* the format tests/gpu/check.sh reads: "cuDNN conv " ... " search " */
    dt_info("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%d g%d: search %.2f s (fwd %.2f, bwd data %.2f, bwd filter %.2f); "
            "algorithms %d/%d/%d; workspace %.1f MiB",
            d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, t[0] + t[1] + t[2], t[0], t[1], t[2],
            (int)e->fwd, (int)e->bwd_data, (int)e->bwd_filter, ws / 1048576.0);
    n_searched++;
    for (i = 0; i < 3; i++)
        searched_s[i] += t[i];
}

void dt_cuda_conv_search_report(void)
{
    pthread_mutex_lock(&cache_lock);
    if (n_searched > 0)
        dt_info("cuDNN algorithm search: %d convolution shape%s in %.2f s (fwd %.2f, bwd data %.2f, bwd filter "
                "%.2f)",
                n_searched, n_searched == 1 ? "" : "s", searched_s[0] + searched_s[1] + searched_s[2],
                searched_s[0], searched_s[1], searched_s[2]);
    n_searched = 0;
    searched_s[0] = searched_s[1] = searched_s[2] = 0;
    pthread_mutex_unlock(&cache_lock);
}

static size_t entry_ws(const conv_entry *e)
{
    size_t ws = e->ws_fwd;
    ws = e->ws_data > ws ? e->ws_data : ws;
    ws = e->ws_filter > ws ? e->ws_filter : ws;
    return (ws + 255) & ~(size_t)255;
}

/* a new entry for key, cached; caller holds cache_lock */
static conv_entry *add_locked(const dt_conv_desc *key, size_t cap, int hard_cap)
{
    if (n_cache == cap_cache) {
        int cap_n = cap_cache ? 2 * cap_cache : 64;
        conv_entry **grown = realloc(cache, (size_t)cap_n * sizeof *grown);
        if (!grown)
            dt_cuda_fatal("cuDNN convolution cache", "out of host memory");
        cache = grown;
        cap_cache = cap_n;
    }
    conv_entry *e = calloc(1, sizeof *e);
    if (!e)
        dt_cuda_fatal("cuDNN convolution cache", "out of host memory");
    e->d = *key;
    build(e, dt_cuda_cudnn(), cap, hard_cap);
    cache[n_cache++] = e;
    return e;
}

size_t dt_cuda_conv_workspace(const dt_conv_desc *d)
{
    DT_CUDA_F32("conv_workspace", d->t);
    dt_conv_desc key = key_of(d);
    pthread_mutex_lock(&cache_lock);
    conv_entry *e = find_locked(&key);
    if (!e)
        e = add_locked(&key, WS_CAP, 0);
    size_t ws = entry_ws(e);
    pthread_mutex_unlock(&cache_lock);
    return ws;
}

/* d's entry. Planning made it for every batch the run meets. The safety net: a batch smaller than
 * a planned one of the same layer (a size the caller forgot to plan) gets its entry now, with
 * algorithms that fit the workspace planned for the larger batch, after one warning for the shape
 * (the search happens once: the entry is cached). A shape with no planned larger batch is fatal. */
static const conv_entry *lookup(const dt_conv_desc *d)
{
    dt_conv_desc key = key_of(d);
    pthread_mutex_lock(&cache_lock);
    const conv_entry *e = find_locked(&key);
    if (!e) {
        const conv_entry *planned = NULL;
        for (int i = 0; i < n_cache && !planned; i++) {
            dt_conv_desc k = cache[i]->d;
            k.n = key.n;
            if (cache[i]->d.n > key.n && memcmp(&k, &key, sizeof key) == 0)
                planned = cache[i];
        }
        if (planned) {
            /* not "cuDNN conv ...": check.sh counts those lines as searches, and the search logs its own */
            dt_warn("convolution n%d %dx%dx%d->%d k%dx%d s%d g%d (batch %d, planned for %d) was not planned: cuDNN "
                    "algorithm search mid-run",
                    d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, d->n, planned->d.n);
            dt_cuda_count_unplanned("cuDNN algorithm search", 0);
            e = add_locked(&key, entry_ws(planned), 1);
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (!e) {
        dt_error("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%d g%d was not planned (conv_workspace was not called for it)",
                 d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups);
        dt_cuda_fatal("convolution", "shape not planned");
    }
    return e;
}

void dt_cuda_conv_fwd(const dt_conv_desc *d, const void *x, const void *w, const void *bias, void *y, void *ws)
{
    DT_CUDA_F32("conv_fwd", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, zero = 0.0f;
    FATAL_CUDNN(cudnnConvolutionForward(h, &one, e->x, x, e->w, w, e->conv, e->fwd, ws, e->ws_fwd, &zero, e->y, y));
    if (bias) /* y += bias, broadcast over n, h, w */
        FATAL_CUDNN(cudnnAddTensor(h, &one, e->b, bias, &one, e->y, y));
}

void dt_cuda_conv_bwd_data(const dt_conv_desc *d, const void *dy, const void *w, void *dx, int accumulate,
                           void *ws)
{
    DT_CUDA_F32("conv_bwd_data", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    FATAL_CUDNN(cudnnConvolutionBackwardData(h, &one, e->w, w, e->y, dy, e->conv, e->bwd_data, ws, e->ws_data, &beta,
                                             e->x, dx));
}

void dt_cuda_conv_bwd_filter(const dt_conv_desc *d, const void *x, const void *dy, void *dw, void *dbias,
                             int accumulate, void *ws)
{
    DT_CUDA_F32("conv_bwd_filter", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    FATAL_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e->x, x, e->y, dy, e->conv, e->bwd_filter, ws, e->ws_filter,
                                               &beta, e->w, dw));
    if (dbias) /* dbias = sums of dy over n, h, w */
        FATAL_CUDNN(cudnnConvolutionBackwardBias(h, &one, e->y, dy, &beta, e->b, dbias));
}
