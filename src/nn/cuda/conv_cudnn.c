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
 * reported for the algorithm it chose, but FMA for fp32 whatever was reported). fp32: CUDNN_FMA_MATH, and candidates that use tensor-op
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
 * batch size the run will meet, makes the shape's descriptors and chooses the three algorithms, in
 * one of three modes (dt_cuda_set_conv_search; dtrain --cudnn-search):
 *   heuristic   cuDNN's heuristics (cudnnGet*Algorithm_v7): their list in order of expected speed,
 *               nothing run on the device; the first candidate that qualifies is chosen.
 *   bounded     (the default) the same list, and its first BOUNDED_TOP candidates that qualify timed
 *               on the device (a warm-up run, then one run between two events, on zeroed buffers of
 *               the shape allocated for the search and freed after it), within a cap of SECONDS per
 *               shape, a third per pass (what a pass leaves goes to the next); the fastest timed one
 *               is chosen, and when none could be timed (the cap spent, too little device memory),
 *               the heuristics' first. A cap per shape, not per run: each shape gets its measurement
 *               whatever came before it, and a run's planning takes at most shapes x SECONDS (plus
 *               the last candidate each pass started).
 *   exhaustive  cudnnFind*Algorithm: every algorithm run and timed by cuDNN with memory it allocates
 *               itself (FFT and Winograd included: seconds per shape at batch 256); the fastest.
 * A candidate qualifies when it is deterministic (CUDNN_DETERMINISTIC, so a run's results do not
 * depend on the order of atomics; only while dt_cuda_set_deterministic is on, the default), keeps to
 * fp32 math for fp32 operands, and needs at most WS_CAP of workspace. When none qualifies, the cap is
 * dropped, then determinism (with a warning); none at all is fatal. The answer is the largest
 * workspace of the three, plus the padded copies' room. Timing runs happen only at planning, never
 * between steps. Note that measurement can choose another algorithm in another run (timings are noisy), so
 * two runs are bit-identical only when they choose alike (the heuristic mode always does).
 * Each search is timed and logged at info level, one line per shape with the mode, the time per
 * pass, the algorithms chosen (number and name) and how many candidates were timed per pass
 * (tests/gpu/summary.py reads the lines that start "cuDNN conv " and hold ": search "):
 *   cuDNN conv n256 56x56x64->64 k3x3 s1 g1 float16: search 0.42 s (bounded 1 s; fwd 0.10, bwd data
 *   0.20, bwd filter 0.12); algorithms fwd 1 implicit_precomp_gemm, bwd data 1 algo_1, bwd filter 1
 *   algo_1; timed 4/3/4; workspace 12.0 MiB
 * and reserve_scratch, at the end of a model's planning, logs the totals since the last one
 * (dt_cuda_conv_search_report: "cuDNN algorithm search (MODE): ...").
 * Entries are kept in a cache keyed by the descriptor (bias, dx_accumulate and ys cleared: cuDNN's
 * state does not depend on them, and a slice's staged room comes from the descriptor at each call),
 * never freed. The ops only look their entry up. One missing means the shape was not planned: a
 * smaller batch of a planned shape gets its algorithms there and then, from cuDNN's heuristics
 * whatever the mode (nothing run or allocated on the device: no stall of the device or NCCL) within
 * the planned workspace, with a warning, and counts as an unplanned allocation; any other is fatal.
 *
 * The legacy API is deprecated in cuDNN 9 (the calls remain): this file alone silences the
 * deprecation warnings. Moving to the cuDNN graph API (and fusing bias and activations there) is
 * future work. */
#include "config.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h" /* dt_dtype_name */
#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/grow.h"
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
static int search_mode = DT_CUDA_SEARCH_BOUNDED; /* dt_cuda_set_conv_search */
static double search_cap = 1.0;                  /* bounded: seconds per shape */

void dt_cuda_set_deterministic(int on)
{
    deterministic = on != 0;
}

void dt_cuda_set_conv_search(int mode, double seconds)
{
    search_mode = mode == DT_CUDA_SEARCH_HEURISTIC || mode == DT_CUDA_SEARCH_EXHAUSTIVE ? mode : DT_CUDA_SEARCH_BOUNDED;
    search_cap = seconds > 0 ? seconds : 1.0;
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
static int n_cache;
static size_t cap_cache;
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

/* one candidate algorithm, whichever pass it is for: cuDNN's record of it. time: cudnnFind's
 * milliseconds, or ours (bounded); for one not timed, the heuristics' rank (plus UNTIMED in the
 * bounded mode), so that the least time is always the one to choose. memory: the workspace it needs. */
typedef struct candidate {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} candidate;
#define CANDIDATE(p) ((candidate){(int)(p).algo, (p).status, (p).time, (p).memory, (p).determinism, (p).mathType})

/* bounded: the most candidates timed per pass, and what an untimed one's rank is added to (above any
 * measured milliseconds, below float's whole-number limit) */
#define BOUNDED_TOP 4
#define UNTIMED 1e6f

static int tensor_math(cudnnMathType_t m)
{
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* the math a candidate runs in: its own, but fp32 operands always in FMA math (CUDNN_DEFAULT_MATH,
 * which a candidate may report, would let cuDNN use TF32) */
static cudnnMathType_t math_of(const dt_conv_desc *d, cudnnMathType_t m)
{
    return d->t == DT_FLOAT32 ? CUDNN_FMA_MATH : m;
}

static const char *algo_name(int pass, int algo)
{
    static const char *const fwd[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft",
                                      "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const data[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const filter[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused",
                                         "fft_tiling"};
    const char *const *names = pass == PASS_FWD ? fwd : pass == PASS_DATA ? data : filter;
    const int n = pass == PASS_FWD ? 8 : pass == PASS_DATA ? 6 : 7;
    return algo >= 0 && algo < n ? names[algo] : "unknown";
}

/* whether c may be chosen under the given relaxations; fp32: no tensor-op math (TF32) */
static int qualifies(const candidate *c, int fp32, size_t cap, int any_memory, int any_determinism)
{
    return c->status == CUDNN_STATUS_SUCCESS && !(fp32 && tensor_math(c->math)) && c->time >= 0 &&
           (any_determinism || c->determinism == CUDNN_DETERMINISTIC) && (any_memory || c->memory <= cap);
}

/* index of the candidate with the least time that qualifies under the given relaxations, or -1 */
static int pick_among(const candidate *c, int n, int fp32, size_t cap, int any_memory, int any_determinism)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (qualifies(&c[i], fp32, cap, any_memory, any_determinism) && (best < 0 || c[i].time < c[best].time))
            best = i;
    return best;
}

/* the chosen candidate's index; fatal when none qualifies even relaxed */
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
        dt_error("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d %s: no usable algorithm (%d candidates)",
                 d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh, d->dw, d->groups,
                 pass, n);
        for (int j = 0; j < n; j++)
            dt_error("  algorithm %d: %s", c[j].algo, cudnnGetErrorString(c[j].status));
        dt_cuda_fatal("cuDNN algorithm search", "no usable convolution algorithm");
    }
    return i;
}

/* the workspace pass needs with algo, in the math its descriptor holds now */
static cudnnStatus_t ws_size(const conv_entry *e, cudnnHandle_t h, int pass, int algo, size_t *bytes)
{
    if (pass == PASS_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(h, e->x, e->w, e->conv[pass], e->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (pass == PASS_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w, e->y, e->conv[pass], e->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->x, e->y, e->conv[pass], e->w,
                                                          (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

/* pass's candidates into c (MAX_ALGOS at most); their count. find: cudnnFind*Algorithm's, each run
 * and timed by cuDNN; else the heuristics' (cudnnGet*Algorithm_v7: nothing run), in their order of
 * expected speed, time their rank, memory at least what the workspace query says in the math each
 * would run in (a failing query is the candidate's status) */
static int candidates(conv_entry *e, cudnnHandle_t h, int pass, int find, candidate *c)
{
    int max = 0, got = 0, i;
    if (pass == PASS_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        if (find)
            FATAL_CUDNN(cudnnFindConvolutionForwardAlgorithm(h, e->x, e->w, e->conv[pass], e->y, max, &got, p));
        else
            FATAL_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv[pass], e->y, max, &got, p));
        for (i = 0; i < got; i++)
            c[i] = CANDIDATE(p[i]);
    } else if (pass == PASS_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        if (find)
            FATAL_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(h, e->w, e->y, e->conv[pass], e->x, max, &got, p));
        else
            FATAL_CUDNN(
                cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->w, e->y, e->conv[pass], e->x, max, &got, p));
        for (i = 0; i < got; i++)
            c[i] = CANDIDATE(p[i]);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        FATAL_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
        max = max < 1 ? 1 : max > MAX_ALGOS ? MAX_ALGOS : max;
        if (find)
            FATAL_CUDNN(
                cudnnFindConvolutionBackwardFilterAlgorithm(h, e->x, e->y, e->conv[pass], e->w, max, &got, p));
        else
            FATAL_CUDNN(
                cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->x, e->y, e->conv[pass], e->w, max, &got, p));
        for (i = 0; i < got; i++)
            c[i] = CANDIDATE(p[i]);
    }
    got = got < 0 ? 0 : got > MAX_ALGOS ? MAX_ALGOS : got;
    for (i = 0; i < got && !find; i++) {
        size_t bytes = 0;
        c[i].time = (float)i;
        if (c[i].status != CUDNN_STATUS_SUCCESS)
            continue;
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[pass], math_of(&e->d, c[i].math)));
        cudnnStatus_t s = ws_size(e, h, pass, c[i].algo, &bytes);
        if (s != CUDNN_STATUS_SUCCESS)
            c[i].status = s;
        else if (bytes > c[i].memory)
            c[i].memory = bytes;
    }
    return got;
}

/* bounded: device memory to time one shape's candidates on (its x, w and y, zeroed; a workspace
 * grown as needed) and the two events; freed when the shape is done */
typedef struct bench {
    void *x, *w, *y, *ws;
    size_t ws_bytes;
    cudaEvent_t t0, t1;
    int ready, failed;
} bench;

static int bench_alloc(void **p, size_t bytes)
{
    if (cudaMalloc(p, bytes ? bytes : 256) == cudaSuccess)
        return 1;
    cudaGetLastError(); /* out of memory is not sticky: clear it so later checks do not see it */
    *p = NULL;
    return 0;
}

/* b ready for e's shape with a workspace of ws bytes: 1; 0 when the device lacks the memory, after
 * one warning for the shape (its untimed candidates then keep the heuristics' order) */
static int bench_ready(bench *b, const conv_entry *e, size_t ws)
{
    const dt_conv_desc *d = &e->d;
    const size_t es = dt_cuda_elem_bytes(d->t);
    const size_t bx = (size_t)d->n * d->h * d->w * e->cpad * es, by = (size_t)d->n * d->oh * d->ow * d->oc * es;
    const size_t bw = (size_t)d->oc * d->kh * d->kw * (e->cpad / d->groups) * es;
    size_t want;
    if (b->failed)
        return 0;
    if (!b->ready) {
        cudaStream_t s = (cudaStream_t)dt_cuda_stream();
        want = bx + bw + by;
        if (!bench_alloc(&b->x, bx) || !bench_alloc(&b->w, bw) || !bench_alloc(&b->y, by))
            goto none;
        FATAL_CUDA(cudaMemsetAsync(b->x, 0, bx, s)); /* on the stream cuDNN runs on: done before any run */
        FATAL_CUDA(cudaMemsetAsync(b->w, 0, bw, s));
        FATAL_CUDA(cudaMemsetAsync(b->y, 0, by, s));
        FATAL_CUDA(cudaEventCreate(&b->t0));
        FATAL_CUDA(cudaEventCreate(&b->t1));
        b->ready = 1;
    }
    if (ws > b->ws_bytes) {
        want = ws;
        if (b->ws)
            FATAL_CUDA(cudaFree(b->ws));
        b->ws = NULL;
        b->ws_bytes = 0;
        if (!bench_alloc(&b->ws, ws))
            goto none;
        b->ws_bytes = ws;
    }
    return 1;
none:
    dt_warn("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%d g%d: no device memory to time its candidates (%.1f MiB): "
            "cuDNN's heuristics choose",
            d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, want / 1048576.0);
    b->failed = 1;
    return 0;
}

static void bench_free(bench *b)
{
    void *p[4] = {b->x, b->w, b->y, b->ws};
    for (int i = 0; i < 4; i++)
        if (p[i])
            FATAL_CUDA(cudaFree(p[i]));
    if (b->ready) {
        FATAL_CUDA(cudaEventDestroy(b->t0));
        FATAL_CUDA(cudaEventDestroy(b->t1));
    }
}

/* one run of pass with algo on b's buffers (backward data writes b->x, backward filter b->w) */
static cudnnStatus_t run_pass(const conv_entry *e, cudnnHandle_t h, int pass, int algo, const bench *b, size_t ws)
{
    const float one = 1.0f, zero = 0.0f;
    if (pass == PASS_FWD)
        return cudnnConvolutionForward(h, &one, e->x, b->x, e->w, b->w, e->conv[pass], (cudnnConvolutionFwdAlgo_t)algo,
                                       b->ws, ws, &zero, e->y, b->y);
    if (pass == PASS_DATA)
        return cudnnConvolutionBackwardData(h, &one, e->w, b->w, e->y, b->y, e->conv[pass],
                                            (cudnnConvolutionBwdDataAlgo_t)algo, b->ws, ws, &zero, e->x, b->x);
    return cudnnConvolutionBackwardFilter(h, &one, e->x, b->x, e->y, b->y, e->conv[pass],
                                          (cudnnConvolutionBwdFilterAlgo_t)algo, b->ws, ws, &zero, e->w, b->w);
}

/* bounded: times pass's first BOUNDED_TOP candidates that qualify (c in the heuristics' order) on
 * the compute stream, starting none after deadline (one started is finished: the cap can be passed
 * by one candidate's two runs): a run to warm up (a kernel's first launch loads it), then one timed
 * with events. A timed candidate's time becomes its milliseconds, one that fails to run gets the
 * failure as its status, the others UNTIMED plus their rank. Nothing runs when fewer than two
 * qualify (nothing to compare). Returns the number timed. */
static int time_candidates(conv_entry *e, cudnnHandle_t h, int pass, candidate *c, int n, size_t cap,
                           double deadline, bench *b)
{
    const int fp32 = e->d.t == DT_FLOAT32;
    char timed[MAX_ALGOS] = {0};
    int i, q = 0, n_timed = 0, tried = 0;
    size_t ws = 0;
    for (i = 0; i < n; i++)
        if (qualifies(&c[i], fp32, cap, 0, !deterministic) && q++ < BOUNDED_TOP)
            ws = c[i].memory > ws ? c[i].memory : ws;
    if (q >= 2 && dt_seconds() < deadline && bench_ready(b, e, ws)) {
        cudaStream_t s = (cudaStream_t)dt_cuda_stream();
        for (i = 0; i < n && tried < BOUNDED_TOP && dt_seconds() < deadline; i++) {
            if (!qualifies(&c[i], fp32, cap, 0, !deterministic))
                continue;
            tried++;
            FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[pass], math_of(&e->d, c[i].math)));
            cudnnStatus_t st = run_pass(e, h, pass, c[i].algo, b, c[i].memory);
            if (st == CUDNN_STATUS_SUCCESS) {
                FATAL_CUDA(cudaEventRecord(b->t0, s));
                st = run_pass(e, h, pass, c[i].algo, b, c[i].memory);
                FATAL_CUDA(cudaEventRecord(b->t1, s));
                FATAL_CUDA(cudaEventSynchronize(b->t1));
            }
            if (st != CUDNN_STATUS_SUCCESS) {
                dt_debug("cuDNN conv n%d %dx%dx%d->%d: algorithm %d %s failed to run: %s", e->d.n, e->d.h, e->d.w,
                         e->d.c, e->d.oc, c[i].algo, algo_name(pass, c[i].algo), cudnnGetErrorString(st));
                c[i].status = st;
                continue;
            }
            FATAL_CUDA(cudaEventElapsedTime(&c[i].time, b->t0, b->t1));
            timed[i] = 1;
            n_timed++;
        }
    }
    for (i = 0; i < n; i++)
        if (!timed[i])
            c[i].time += UNTIMED;
    return n_timed;
}

/* descriptors and algorithms for e->d, by the search mode (dt_cuda_set_conv_search) */
/* cap: the most workspace an algorithm may take; hard_cap: never more (a shape met at run time must
 * fit the workspace planned for the larger batch; it takes the heuristics' choice: no device work,
 * nothing allocated, no stall) */
static void build(conv_entry *e, cudnnHandle_t h, size_t cap, int hard_cap)
{
    static const char *const pass_name[3] = {"forward", "backward data", "backward filter"};
    const dt_conv_desc *d = &e->d;
    const int mode = hard_cap ? DT_CUDA_SEARCH_HEURISTIC : search_mode;
    candidate c[MAX_ALGOS];
    int algo[3], timed[3] = {0, 0, 0}, i, p;
    size_t wsp[3];
    double t[3];
    bench b;
    memset(&b, 0, sizeof b);

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

    /* bounded: each pass may time candidates until its third of the cap, what an earlier pass left
     * unused going to the next */
    const double start = dt_seconds();
    for (p = 0; p < 3; p++) {
        const double t0 = dt_seconds();
        int n = candidates(e, h, p, mode == DT_CUDA_SEARCH_EXHAUSTIVE, c);
        if (mode == DT_CUDA_SEARCH_BOUNDED)
            timed[p] = time_candidates(e, h, p, c, n, cap, start + search_cap * (p + 1) / 3, &b);
        for (i = 0; i < n && mode == DT_CUDA_SEARCH_EXHAUSTIVE; i++)
            timed[p] += c[i].status == CUDNN_STATUS_SUCCESS;
        i = pick(c, n, pass_name[p], d, cap, hard_cap);
        algo[p] = c[i].algo;
        FATAL_CUDNN(cudnnSetConvolutionMathType(e->conv[p], math_of(d, c[i].math)));
        FATAL_CUDNN(ws_size(e, h, p, algo[p], &wsp[p]));
        wsp[p] = wsp[p] > c[i].memory ? wsp[p] : c[i].memory;
        t[p] = dt_seconds() - t0;
    }
    bench_free(&b);
    const double total = dt_seconds() - start;
    e->fwd = (cudnnConvolutionFwdAlgo_t)algo[PASS_FWD];
    e->bwd_data = (cudnnConvolutionBwdDataAlgo_t)algo[PASS_DATA];
    e->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)algo[PASS_FILTER];
    e->ws_fwd = wsp[PASS_FWD];
    e->ws_data = wsp[PASS_DATA];
    e->ws_filter = wsp[PASS_FILTER];
    dt_debug("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d %s: algorithms fwd %d / bwd data %d / bwd "
             "filter %d, workspace %zu / %zu / %zu bytes, channels padded to %d",
             d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh, d->dw, d->groups,
             dt_dtype_name(d->t), (int)e->fwd, (int)e->bwd_data, (int)e->bwd_filter, e->ws_fwd, e->ws_data,
             e->ws_filter, e->cpad);
    size_t ws = e->ws_fwd > e->ws_data ? e->ws_fwd : e->ws_data;
    ws = e->ws_filter > ws ? e->ws_filter : ws;
    e->ws = (ws + 255) & ~(size_t)255;
    ws += e->pad_x + e->pad_w;
    char how[48];
    if (mode == DT_CUDA_SEARCH_BOUNDED)
        snprintf(how, sizeof how, "bounded %g s", search_cap);
    else
        snprintf(how, sizeof how, "%s", mode == DT_CUDA_SEARCH_EXHAUSTIVE ? "exhaustive"
                                        : hard_cap                        ? "heuristic, mid-run"
                                                                          : "heuristic");
    /* the format tests/gpu/summary.py reads: "cuDNN conv " SHAPE ": search " SECONDS " s (" MODE */
    dt_info("cuDNN conv n%d %dx%dx%d->%d k%dx%d s%d g%d %s: search %.2f s (%s; fwd %.2f, bwd data %.2f, bwd filter "
            "%.2f); algorithms fwd %d %s, bwd data %d %s, bwd filter %d %s; timed %d/%d/%d; workspace %.1f MiB",
            d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, dt_dtype_name(d->t), total, how, t[0], t[1],
            t[2], algo[0], algo_name(PASS_FWD, algo[0]), algo[1], algo_name(PASS_DATA, algo[1]), algo[2],
            algo_name(PASS_FILTER, algo[2]), timed[0], timed[1], timed[2], ws / 1048576.0);
    n_searched++;
    for (i = 0; i < 3; i++)
        searched_s[i] += t[i];
}

void dt_cuda_conv_search_report(void)
{
    pthread_mutex_lock(&cache_lock);
    if (n_searched > 0) {
        char how[48];
        if (search_mode == DT_CUDA_SEARCH_BOUNDED)
            snprintf(how, sizeof how, "bounded, %g s per shape", search_cap);
        else
            snprintf(how, sizeof how, "%s", search_mode == DT_CUDA_SEARCH_EXHAUSTIVE ? "exhaustive" : "heuristic");
        dt_info("cuDNN algorithm search (%s): %d convolution shape%s in %.2f s (fwd %.2f, bwd data %.2f, bwd "
                "filter %.2f)",
                how, n_searched, n_searched == 1 ? "" : "s", searched_s[0] + searched_s[1] + searched_s[2],
                searched_s[0], searched_s[1], searched_s[2]);
    }
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
    if (dt_grow((void **)&cache, &cap_cache, (size_t)n_cache + 1, sizeof *cache) != DT_OK)
        dt_cuda_fatal("cuDNN convolution cache", "out of host memory");
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
    if (!e) { /* a search: device work, which a capture cannot hold (cuda.h, dt_cuda_capture_break) */
        int broke = dt_cuda_capture_break("conv_workspace n%d %dx%dx%d->%d k%dx%d (a cuDNN algorithm search)", d->n,
                                          d->h, d->w, d->c, d->oc, d->kh, d->kw);
        e = add_locked(&key, WS_CAP, 0);
        if (broke)
            dt_cuda_capture_resume();
    }
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
            dt_warn("convolution n%d %dx%dx%d->%d k%dx%d s%d g%d (batch %d, planned for %d) was not planned: its "
                    "algorithms from cuDNN's heuristics, mid-run",
                    d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw, d->sh, d->groups, d->n, planned->d.n);
            dt_cuda_count_unplanned("cuDNN algorithm search", 0);
            /* not inside a capture: the graph would hold an unplanned shape's choice (cuda.h) */
            int broke = dt_cuda_capture_break("convolution n%d %dx%dx%d->%d k%dx%d not planned (its algorithms chosen "
                                              "mid-run)", d->n, d->h, d->w, d->c, d->oc, d->kh, d->kw);
            e = add_locked(&key, planned->ws, 1); /* its padded copies are no larger than planned's */
            if (broke)
                dt_cuda_capture_resume();
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
