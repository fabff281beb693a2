/* conv_cudnn.c: CUDA convolutions through cuDNN's legacy convolution API (CUDA builds only).
 *
 * Layouts: activations are NHWC tensors (cuDNN's CUDNN_TENSOR_NHWC with dims n, c, h, w); weights
 * are ours, O,KH,KW,I/groups, which is cuDNN's NHWC filter format ("KRSC") with dims
 * oc, c/groups, kh, kw. Groups through cudnnSetConvolutionGroupCount, dilation in the convolution
 * descriptor (ours counts as cuDNN's does: 1 is none), cross-correlation, operands of d->t (fp32,
 * fp16 or bf16: CUDNN_DATA_FLOAT, _HALF, _BFLOAT16) and fp32 compute (the convolution descriptor's
 * type: half operands are multiplied exactly and summed in fp32, what backend.h allows).
 *
 * Math, per pass (each pass has its own convolution descriptor, set to the math type the search
 * reported for the algorithm it chose). fp32: CUDNN_FMA_MATH, and candidates that use tensor-op
 * math are refused: CUDNN_DEFAULT_MATH is not enough to keep fp32 in fp32, as on Ampere and newer it
 * lets cuDNN run fp32 convolutions on TF32 tensor cores (PyTorch sets FMA math when TF32 is off for
 * the same reason; its default for convolutions is TF32 on: O0 here compares with PyTorch at
 * torch.backends.cudnn.allow_tf32 = False). Results must compare with the CPU reference to fp32
 * rounding (tests/gpu/ops_check). fp16 and bf16: CUDNN_TENSOR_OP_MATH, any candidate.
 *
 * Channel padding. Tensor-core kernels for NHWC half tensors want channels in multiples of 8; the
 * stem's 3 image channels are not. A half convolution with groups 1 and c % 8 != 0 therefore runs
 * cuDNN on channels padded with zeros to the next multiple of 8 (the padded input and weight are
 * copies in the op's workspace, made per call: the input is the model's, the weight changes every
 * step); its data gradient is computed padded and the first c channels copied out, its filter
 * gradient the same way. The zeros add nothing to any sum, so the result is the unpadded
 * convolution's. DT_CUDA_PAD_CHANNELS=0 in the environment turns it off (for measuring).
 *
 * Channel slices (d->ys > oc: y and dy rows of ys elements, the slice's oc of them ours) are staged
 * densely: cuDNN runs the packed convolution with a packed y (or dy) in the workspace, after the
 * padded copies, and chan_copy (layout.cu) moves the slice out of it (forward, after the bias) or into
 * it (backward). cuDNN never sees the stride, so a slice shares the packed shape's entry and its
 * algorithms: the slice holds the packed op's bits.
 *
 * Planning: dt_cuda_conv_workspace, called when a model is planned for each convolution at every
 * batch size the run will meet, makes the shape's descriptors and chooses the three algorithms by
 * measurement (cudnnFind*Algorithm, which runs each candidate on the GPU with memory it allocates
 * itself: only at planning, never between steps). The choice is the fastest
 * candidate that succeeded, is deterministic (CUDNN_DETERMINISTIC, so a run's results do not depend
 * on the order of atomics; only while dt_cuda_set_deterministic is on, the default), keeps to fp32 math
 * for fp32 operands, and needs at most WS_CAP of workspace. When no candidate qualifies, the cap is
 * dropped, then determinism (with a warning); none at all is fatal. The answer is the largest
 * workspace of the three, plus the padded copies' room. Note that measurement can choose another
 * algorithm in another run (timings are noisy), so two runs are bit-identical only when they choose
 * alike; the choices are logged at debug level.
 * Each search is timed and logged at info level, one line per shape (tests/gpu/check.sh reads the
 * lines that start "cuDNN conv " and hold " search "):
 *   cuDNN conv n256 56x56x64->64 k3x3 s1 g1: search 0.42 s (fwd 0.10, bwd data 0.20, bwd filter
 *   0.12); algorithms 1/1/0; workspace 12.0 MiB
 * and reserve_scratch, at the end of a model's planning, logs the totals since the last one
 * (dt_cuda_conv_search_report: "cuDNN algorithm search: ...").
 * Entries are kept in a cache keyed by the descriptor (bias, dx_accumulate and ys cleared: cuDNN's
 * state does not depend on them, and a slice's staged room comes from the descriptor at each call),
 * never freed. The ops only look their entry up. One missing means the shape was not planned: a
 * smaller batch of a planned shape is searched there and then, within the planned workspace, with a
 * warning (a search mid-run stalls the device and NCCL, and counts as an unplanned allocation); any
 * other is fatal.
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

#include "libdt/comm.h" /* dt_dtype_name */
#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

/* the most workspace a preferred algorithm may need */
#define WS_CAP ((size_t)1 << 30)
/* the most candidates we ask cuDNN for per pass (it has 6 to 8) */
#define MAX_ALGOS 32

typedef struct conv_entry {
    dt_conv_desc d; /* the key: bias, dx_accumulate and ys cleared */
    int cpad;       /* the channels cuDNN sees: d.c, or d.c padded to a multiple of 8 */
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv[3]; /* per pass (forward, backward data, backward filter): its math */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_data, ws_filter;
    size_t ws;                 /* cuDNN's part of the workspace: the most of the three, 256-aligned */
    size_t pad_x, pad_w;       /* bytes of the padded input (or its gradient) and weight (or its gradient) */
} conv_entry;

enum { PASS_FWD, PASS_DATA, PASS_FILTER };
static int deterministic = 1; /* dt_cuda_set_deterministic */

void dt_cuda_set_deterministic(int on)
{
    deterministic = on != 0;
}

static cudnnDataType_t cudnn_type(dt_dtype t)
{
    return t == DT_FLOAT16 ? CUDNN_DATA_HALF : t == DT_BFLOAT16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* the channels cuDNN runs d on (see "Channel padding" above) */
static int padded_channels(const dt_conv_desc *d)
{
    static int off = -1;
    if (off < 0) {
        const char *e = getenv("DT_CUDA_PAD_CHANNELS");
        off = e && strcmp(e, "0") == 0;
    }
    if (off || d->t == DT_FLOAT32 || d->groups != 1 || d->c % 8 == 0)
        return d->c;
    return (d->c + 7) & ~7;
}

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
    k.ys = 0; /* a channel slice runs packed (staged): the packed shape's algorithms */
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

/* index of the fastest candidate that qualifies under the given relaxations, or -1; fp32: no
 * tensor-op math (TF32) */
static int pick_among(const candidate *c, int n, int fp32, size_t cap, int any_memory, int any_determinism)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].status != CUDNN_STATUS_SUCCESS || (fp32 && tensor_math(c[i].math)) || c[i].time < 0)
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
    const int fp32 = d->t == DT_FLOAT32;
    int i = pick_among(c, n, fp32, cap, 0, !deterministic);
    if (i < 0 && hard_cap && (i = pick_among(c, n, fp32, cap, 0, 1)) >= 0)
        dt_warn("cuDNN conv %dx%dx%d->%d k%dx%d s%d g%d %s: no deterministic algorithm fits the planned workspace; "
                "algorithm %d is not deterministic",
                d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, pass, c[i].algo);
    if (i < 0 && !hard_cap && (i = pick_among(c, n, fp32, cap, 1, !deterministic)) >= 0)
        dt_warn("cuDNN conv %dx%dx%d->%d k%dx%d s%d g%d %s: every deterministic algorithm needs more than %zu MiB "
                "of workspace; algorithm %d needs %zu MiB",
                d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, pass, cap >> 20, c[i].algo,
                c[i].memory >> 20);
    if (i < 0 && !hard_cap && deterministic && (i = pick_among(c, n, fp32, cap, 1, 1)) >= 0)
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

    const cudnnDataType_t type = cudnn_type(d->t);
    const size_t es = dt_cuda_elem_bytes(d->t);
    e->cpad = padded_channels(d);
    if (e->cpad != d->c) {
        e->pad_x = ((size_t)d->n * d->h * d->w * e->cpad * es + 255) & ~(size_t)255;
        e->pad_w = ((size_t)d->oc * d->kh * d->kw * e->cpad * es + 255) & ~(size_t)255;
    }
    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->x));
    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->y));
    FATAL_CUDNN(cudnnCreateTensorDescriptor(&e->b));
    FATAL_CUDNN(cudnnCreateFilterDescriptor(&e->w));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, type, d->n, e->cpad, d->h, d->w));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NHWC, type, d->n, d->oc, d->oh, d->ow));
    FATAL_CUDNN(cudnnSetTensor4dDescriptor(e->b, CUDNN_TENSOR_NHWC, type, 1, d->oc, 1, 1));
    FATAL_CUDNN(cudnnSetFilter4dDescriptor(e->w, type, CUDNN_TENSOR_NHWC, d->oc, e->cpad / d->groups, d->kh, d->kw));
    for (i = 0; i < 3; i++) {
        FATAL_CUDNN(cudnnCreateConvolutionDescriptor(&e->conv[i]));
        FATAL_CUDNN(cudnnSetConvolution2dDescriptor(e->conv[i], d->ph, d->pw, d->sh, d->sw, d->dh, d->dw,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        FATAL_CUDNN(cudnnSetConvolutionGroupCount(e->conv[i], d->groups));
        /* what the search may try; each pass is then set to its algorithm's math */
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[i], d->t == DT_FLOAT32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    }

    int on, oc, ohh, oww; /* cuDNN must see the output we planned */
    FATAL_CUDNN(cudnnGetConvolution2dForwardOutputDim(e->conv[PASS_FWD], e->x, e->w, &on, &oc, &ohh, &oww));
    if (on != d->n || oc != d->oc || ohh != d->oh || oww != d->ow)
        dt_cuda_fatal("cudnnGetConvolution2dForwardOutputDim", "cuDNN's output shape differs from the planned one");

    /* forward */
    {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(cudnnFindConvolutionForwardAlgorithm(h, e->x, e->w, e->conv[PASS_FWD], e->y, max, &got, perf));
        t[0] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "forward", d, cap, hard_cap);
        e->fwd = perf[i].algo;
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[PASS_FWD], perf[i].mathType));
        FATAL_CUDNN(
            cudnnGetConvolutionForwardWorkspaceSize(h, e->x, e->w, e->conv[PASS_FWD], e->y, e->fwd, &e->ws_fwd));
        e->ws_fwd = e->ws_fwd > perf[i].memory ? e->ws_fwd : perf[i].memory;
    }
    /* backward data */
    {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(
            cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->y, e->conv[PASS_DATA], e->x, max, &got, perf));
        t[1] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "backward data", d, cap, hard_cap);
        e->bwd_data = perf[i].algo;
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[PASS_DATA], perf[i].mathType));
        FATAL_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w, e->y, e->conv[PASS_DATA], e->x, e->bwd_data,
                                                                 &e->ws_data));
        e->ws_data = e->ws_data > perf[i].memory ? e->ws_data : perf[i].memory;
    }
    /* backward filter */
    {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        t0 = dt_seconds();
        FATAL_CUDNN(
            cudnnFindConvolutionBackwardFilterAlgorithm(h, e->x, e->y, e->conv[PASS_FILTER], e->w, max, &got, perf));
        t[2] = dt_seconds() - t0;
        for (i = 0; i < got; i++)
            c[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                               perf[i].mathType};
        i = pick(c, got, "backward filter", d, cap, hard_cap);
        e->bwd_filter = perf[i].algo;
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[PASS_FILTER], perf[i].mathType));
        FATAL_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->x, e->y, e->conv[PASS_FILTER], e->w,
                                                                   e->bwd_filter, &e->ws_filter));
        e->ws_filter = e->ws_filter > perf[i].memory ? e->ws_filter : perf[i].memory;
    }
    dt_debug("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d %s: algorithms fwd %d / bwd data %d / bwd "
             "filter %d, workspace %zu / %zu / %zu bytes, channels padded to %d",
             d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh, d->dw, d->groups,
             dt_dtype_name(d->t), (int)e->fwd, (int)e->bwd_data, (int)e->bwd_filter, e->ws_fwd, e->ws_data,
             e->ws_filter, e->cpad);
    size_t ws = e->ws_fwd > e->ws_data ? e->ws_fwd : e->ws_data;
    ws = e->ws_filter > ws ? e->ws_filter : ws;
    e->ws = (ws + 255) & ~(size_t)255;
    ws += e->pad_x + e->pad_w;
    /* the format tests/gpu/check.sh reads: "cuDNN conv " ... " search " */
    dt_info("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%d g%d %s: search %.2f s (fwd %.2f, bwd data %.2f, bwd filter "
            "%.2f); algorithms %d/%d/%d; workspace %.1f MiB",
            d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, dt_dtype_name(d->t), t[0] + t[1] + t[2],
            t[0], t[1], t[2],
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

/* the caller's workspace: cuDNN's part, then the padded copies' (channel padding) */
static size_t entry_ws(const conv_entry *e)
{
    return e->ws + e->pad_x + e->pad_w;
}

/* elements from one output row's channels to the next's in y and dy */
static int ys_of(const dt_conv_desc *d)
{
    return d->ys > 0 ? d->ys : d->oc;
}

static int64_t rows_y(const dt_conv_desc *d)
{
    return (int64_t)d->n * d->oh * d->ow;
}

/* bytes of the staged packed y (or dy) of a channel slice, after entry_ws; 0 when y is packed */
static size_t stage_bytes(const dt_conv_desc *d)
{
    if (ys_of(d) == d->oc)
        return 0;
    return ((size_t)rows_y(d) * d->oc * dt_cuda_elem_bytes(d->t) + 255) & ~(size_t)255;
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
    DT_CUDA_STORED("conv_workspace", d->t);
    dt_conv_desc key = key_of(d);
    pthread_mutex_lock(&cache_lock);
    conv_entry *e = find_locked(&key);
    if (!e)
        e = add_locked(&key, WS_CAP, 0);
    size_t ws = entry_ws(e) + stage_bytes(d);
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
            e = add_locked(&key, planned->ws, 1); /* its padded copies are no larger than planned's */
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

/* the workspace's parts: cuDNN's, the padded input (or its gradient), the padded weight (or its gradient) */
static void *ws_x(const conv_entry *e, void *ws)
{
    return (char *)ws + e->ws;
}

static void *ws_w(const conv_entry *e, void *ws)
{
    return (char *)ws + e->ws + e->pad_x;
}

/* the staged packed y (or dy) of a channel slice */
static void *ws_y(const conv_entry *e, void *ws)
{
    return (char *)ws + entry_ws(e);
}

/* dy's slice copied into the staged packed dy; dy itself when packed */
static const void *dy_packed(const dt_conv_desc *d, const conv_entry *e, const void *dy, void *ws)
{
    if (ys_of(d) == d->oc)
        return dy;
    dt_cuda_chan_copy(rows_y(d), d->oc, dy, ys_of(d), 0, d->t, ws_y(e, ws), d->oc, 0, d->t, 0);
    return ws_y(e, ws);
}

static int64_t rows_x(const dt_conv_desc *d)
{
    return (int64_t)d->n * d->h * d->w;
}

static int64_t rows_w(const dt_conv_desc *d)
{
    return (int64_t)d->oc * d->kh * d->kw;
}

void dt_cuda_conv_fwd(const dt_conv_desc *d, const void *x, const void *w, const void *bias, void *y, void *ws)
{
    DT_CUDA_STORED("conv_fwd", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, zero = 0.0f;
    void *yp = ys_of(d) == d->oc ? y : ws_y(e, ws); /* a channel slice: staged packed */
    if (e->cpad != d->c) {
        dt_cuda_pad_channels(rows_x(d), d->c, e->cpad, d->t, x, ws_x(e, ws));
        dt_cuda_pad_channels(rows_w(d), d->c, e->cpad, d->t, w, ws_w(e, ws));
        x = ws_x(e, ws);
        w = ws_w(e, ws);
    }
    FATAL_CUDNN(cudnnConvolutionForward(h, &one, e->x, x, e->w, w, e->conv[PASS_FWD], e->fwd, ws, e->ws_fwd, &zero,
                                        e->y, yp));
    if (bias) /* y += bias, broadcast over n, h, w */
        FATAL_CUDNN(cudnnAddTensor(h, &one, e->b, bias, &one, e->y, yp));
    if (yp != y) /* into the slice, the channels around it untouched */
        dt_cuda_chan_copy(rows_y(d), d->oc, yp, d->oc, 0, d->t, y, ys_of(d), 0, d->t, 0);
}

void dt_cuda_conv_bwd_data(const dt_conv_desc *d, const void *dy, const void *w, void *dx, int accumulate,
                           void *ws)
{
    DT_CUDA_STORED("conv_bwd_data", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, zero = 0.0f, beta = accumulate ? 1.0f : 0.0f;
    dy = dy_packed(d, e, dy, ws);
    if (e->cpad == d->c) {
        FATAL_CUDNN(cudnnConvolutionBackwardData(h, &one, e->w, w, e->y, dy, e->conv[PASS_DATA], e->bwd_data, ws,
                                                 e->ws_data, &beta, e->x, dx));
        return;
    }
    dt_cuda_pad_channels(rows_w(d), d->c, e->cpad, d->t, w, ws_w(e, ws));
    FATAL_CUDNN(cudnnConvolutionBackwardData(h, &one, e->w, ws_w(e, ws), e->y, dy, e->conv[PASS_DATA], e->bwd_data,
                                             ws, e->ws_data, &zero, e->x, ws_x(e, ws)));
    dt_cuda_unpad_channels(rows_x(d), d->c, e->cpad, d->t, ws_x(e, ws), dx, accumulate);
}

void dt_cuda_conv_bwd_filter(const dt_conv_desc *d, const void *x, const void *dy, void *dw, void *dbias,
                             int accumulate, void *ws)
{
    DT_CUDA_STORED("conv_bwd_filter", d->t);
    const conv_entry *e = lookup(d);
    cudnnHandle_t h = dt_cuda_cudnn();
    const float one = 1.0f, zero = 0.0f, beta = accumulate ? 1.0f : 0.0f;
    dy = dy_packed(d, e, dy, ws);
    if (e->cpad == d->c) {
        FATAL_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e->x, x, e->y, dy, e->conv[PASS_FILTER], e->bwd_filter, ws,
                                                   e->ws_filter, &beta, e->w, dw));
    } else {
        dt_cuda_pad_channels(rows_x(d), d->c, e->cpad, d->t, x, ws_x(e, ws));
        FATAL_CUDNN(cudnnConvolutionBackwardFilter(h, &one, e->x, ws_x(e, ws), e->y, dy, e->conv[PASS_FILTER],
                                                   e->bwd_filter, ws, e->ws_filter, &zero, e->w, ws_w(e, ws)));
        dt_cuda_unpad_channels(rows_w(d), d->c, e->cpad, d->t, ws_w(e, ws), dw, accumulate);
    }
    if (dbias) /* dbias = sums of dy over n, h, w */
        FATAL_CUDNN(cudnnConvolutionBackwardBias(h, &one, e->y, dy, &beta, e->b, dbias));
}
