/* runtime.c: the CUDA backend beneath its ops and its table (CUDA builds only): the device state
 * (device, streams, cuDNN and cuBLAS handles), the fatal path (dt_cuda_fatal, and the ops' type
 * check dt_cuda_bad_type), device scratch and memory, pinned host buffers and the asynchronous
 * copies, events, timers, graphs and the capture's failure bookkeeping (cuda.h). The ops' files
 * (conv_cudnn.c, linear_cublas.c, the kernels) and the table (backend_cuda.c) call it; it calls none
 * of them, so that what they share runs one way.
 *
 * State: one device per process (a compute stream and a copy stream), chosen by dt_cuda_init; an op or accessor called before it
 * initialises device 0 (under a mutex, so concurrent first calls initialise once). The CUDA current
 * device is per host thread, so the accessors also make the backend's device current on each thread
 * the first time that thread uses them.
 *
 * Math: cuBLAS runs in CUBLAS_DEFAULT_MATH, which keeps fp32 GEMMs in fp32 (TF32 tensor cores
 * would need CUBLAS_TF32_TENSOR_OP_MATH), so results stay comparable with the CPU backend, while
 * fp16/bf16 GEMMs (cublasGemmEx, fp32 compute: linear_cublas.c) use tensor cores;
 * cuBLAS's atomics mode stays at its default (not allowed), which keeps its results bit-reproducible
 * run to run on one GPU model. (cuDNN's math type is set per convolution: conv_cudnn.c.)
 *
 * Memory: plain cudaMalloc (no caching allocator), zeroed on the compute stream. mem_put and mem_get
 * are queued on the compute stream, so they are ordered after the ops already queued, and wait for
 * it. host_alloc is cudaHostAlloc (pinned, so that upload and download run asynchronously, as DMA);
 * upload and download are cudaMemcpyAsync on the stream of the queue named, and do not wait.
 *
 * Scratch (cuda.h): allocated when a model is planned (the table's reserve_scratch, backend_cuda.c,
 * grows it here: dt_cuda_grow_scratch), so the ops of a planned model never allocate; a larger
 * request inside an op still works (ops_check calls ops with no model) but counts as unplanned. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h" /* dt_dtype_name */
#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

/* cuBLAS's workspace, given to it (cublasSetWorkspace) so that it never allocates one inside a
 * captured graph; 32 MiB is what cuBLAS asks for on Hopper */
#define CUBLAS_WORKSPACE ((size_t)32 << 20)

static struct {
    int device;
    cudaStream_t stream, copy; /* the compute queue's stream, the copy queue's */
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *cublas_ws;
    cudaEvent_t fork, join; /* a capture's: the copy stream joins it and rejoins the compute stream */
} st = {.device = -1};
static atomic_int st_ready;                  /* 1 once st is complete (release/acquire with st's fields) */
static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int thread_device = -1; /* the device this thread has made current */

void (*dt_cuda_fatal_hook)(const char *what, const char *message);

DT_NORETURN void dt_cuda_fatal(const char *what, const char *message)
{
    dt_error("CUDA backend: %s: %s", what, message ? message : "failed");
    if (dt_cuda_fatal_hook)
        dt_cuda_fatal_hook(what, message ? message : "failed");
    abort();
}

DT_NORETURN void dt_cuda_bad_type(const char *op, dt_dtype t)
{
    dt_error("CUDA backend: %s: operand of type %s, which this backend does not store (storage_types)", op,
             dt_dtype_name(t));
    if (dt_cuda_fatal_hook) {
        char why[96];
        snprintf(why, sizeof why, "operand of type %s, which this backend does not store", dt_dtype_name(t));
        dt_cuda_fatal_hook(op, why);
    }
    abort();
}

int dt_cuda_init(int device)
{
    int rc = DT_OK;
    cudaStream_t stream = NULL, copy = NULL;
    cudnnHandle_t cudnn = NULL;
    cublasHandle_t cublas = NULL;
    void *cublas_ws = NULL;
    cudaEvent_t fork = NULL, join = NULL;
    pthread_mutex_lock(&st_lock);
    if (atomic_load_explicit(&st_ready, memory_order_acquire)) {
        if (st.device != device) {
            dt_error("CUDA backend: already initialised on device %d, cannot switch to device %d", st.device,
                     device);
            rc = DT_ERR_STATE;
            goto out;
        }
        DT_CHECK_CUDA_GOTO(cudaSetDevice(device), rc, out); /* current on the calling thread too */
        thread_device = device;
        goto out;
    }
    DT_CHECK_CUDA_GOTO(cudaSetDevice(device), rc, out);
    DT_CHECK_CUDA_GOTO(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), rc, fail);
    DT_CHECK_CUDNN_GOTO(cudnnCreate(&cudnn), rc, fail);
    DT_CHECK_CUDNN_GOTO(cudnnSetStream(cudnn, stream), rc, fail);
    DT_CHECK_CUBLAS_GOTO(cublasCreate(&cublas), rc, fail);
    DT_CHECK_CUBLAS_GOTO(cublasSetStream(cublas, stream), rc, fail);
    /* fp32 stays fp32: no TF32 (results comparable with the CPU backend) */
    DT_CHECK_CUBLAS_GOTO(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH), rc, fail);
    DT_CHECK_CUBLAS_GOTO(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaMalloc(&cublas_ws, CUBLAS_WORKSPACE), rc, fail);
    DT_CHECK_CUBLAS_GOTO(cublasSetWorkspace(cublas, cublas_ws, CUBLAS_WORKSPACE), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), rc, fail);
    st.device = device;
    st.stream = stream;
    st.copy = copy;
    st.cudnn = cudnn;
    st.cublas = cublas;
    st.cublas_ws = cublas_ws;
    st.fork = fork;
    st.join = join;
    thread_device = device;
    atomic_store_explicit(&st_ready, 1, memory_order_release);
    dt_debug("CUDA backend: device %d, stream, cuDNN %zu and cuBLAS handles ready", device, cudnnGetVersion());
    goto out;
fail:
    if (fork)
        cudaEventDestroy(fork);
    if (join)
        cudaEventDestroy(join);
    if (cublas)
        cublasDestroy(cublas);
    if (cublas_ws)
        cudaFree(cublas_ws);
    if (cudnn)
        cudnnDestroy(cudnn);
    if (stream)
        cudaStreamDestroy(stream);
    if (copy)
        cudaStreamDestroy(copy);
out:
    pthread_mutex_unlock(&st_lock);
    return rc;
}

/* the backend ready on this thread: initialised (device 0 when nobody chose), its device current */
static void ready(void)
{
    if (!atomic_load_explicit(&st_ready, memory_order_acquire) && dt_cuda_init(0) != DT_OK)
        dt_cuda_fatal("initialisation on device 0", "failed (the line above says why)");
    if (thread_device != st.device) {
        FATAL_CUDA(cudaSetDevice(st.device));
        thread_device = st.device;
    }
}

void *dt_cuda_stream(void)
{
    ready();
    return st.stream;
}

void *dt_cuda_cudnn(void)
{
    ready();
    return st.cudnn;
}

void *dt_cuda_cublas(void)
{
    ready();
    return st.cublas;
}

/* --- scratch ------------------------------------------------------------------------------------- */
static void *scratch;
static size_t scratch_bytes;
static atomic_long unplanned;

long dt_cuda_unplanned_allocs(void)
{
    return atomic_load(&unplanned);
}

void dt_cuda_count_unplanned(const char *what, size_t bytes)
{
    long k = atomic_fetch_add(&unplanned, 1) + 1;
    dt_debug("CUDA backend: %s (%zu bytes) inside an op: not planned (unplanned allocation %ld)", what, bytes, k);
}

/* the scratch at least bytes (whole MiB, at least one), zeroed: DT_OK, or DT_ERR_NOMEM after one line
 * with the old scratch kept */
static int grow_scratch(size_t bytes)
{
    if (scratch && bytes <= scratch_bytes)
        return DT_OK;
    const size_t mib = (size_t)1 << 20;
    size_t want = bytes > mib ? (bytes + mib - 1) & ~(mib - 1) : mib;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, want);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(p, 0, want, st.stream);
    if (e == cudaSuccess && scratch) /* queued work may still read the old buffer */
        e = cudaStreamSynchronize(st.stream);
    if (e != cudaSuccess) {
        dt_error("CUDA backend: %.1f MiB of scratch on device %d: %s", want / 1048576.0, st.device,
                 dt_errstr_cuda(e, 0));
        if (p)
            cudaFree(p);
        cudaGetLastError(); /* out of memory is not sticky: clear it so later checks do not see it */
        return DT_ERR_NOMEM;
    }
    if (scratch)
        FATAL_CUDA(cudaFree(scratch));
    scratch = p;
    scratch_bytes = want;
    return DT_OK;
}

/* for the table's reserve_scratch (cuda.h) */
void dt_cuda_ready(void)
{
    ready();
}

int dt_cuda_grow_scratch(size_t bytes)
{
    return grow_scratch(bytes);
}

size_t dt_cuda_scratch_bytes(void)
{
    return scratch_bytes;
}

void *dt_cuda_scratch(size_t bytes)
{
    ready();
    if (scratch && bytes <= scratch_bytes)
        return scratch;
    dt_cuda_count_unplanned("scratch grown", bytes);
    int broke = dt_cuda_capture_break("the scratch grown to %zu bytes in an op (an allocation)", bytes);
    if (grow_scratch(bytes) != DT_OK)
        dt_cuda_fatal("dt_cuda_scratch", "out of device memory (the line above says how much)");
    if (broke)
        dt_cuda_capture_resume();
    return scratch;
}

/* --- memory -------------------------------------------------------------------------------------- */
/* Inside a capture, an allocation or a free is made for real after the capture is broken there, a
 * put or a get (host waits) is not made: dt_cuda_capture_break and _refuse, cuda.h. */
static void *mem_alloc(size_t bytes);

void *dt_cuda_mem_alloc(size_t bytes)
{
    ready();
    int broke = dt_cuda_capture_break("mem_alloc of %zu bytes (an allocation)", bytes);
    void *p = mem_alloc(bytes);
    if (broke)
        dt_cuda_capture_resume();
    return p;
}

static void *mem_alloc(size_t bytes)
{
    void *p = NULL;
    bytes = bytes ? (bytes + 255) & ~(size_t)255 : 256; /* cudaMalloc aligns to 256 bytes at least */
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        dt_error("CUDA backend: cudaMalloc of %zu bytes on device %d: %s", bytes, st.device, dt_errstr_cuda(e, 0));
        cudaGetLastError(); /* out of memory is not sticky: clear it so later checks do not see it */
        return NULL;
    }
    e = cudaMemsetAsync(p, 0, bytes, st.stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st.stream);
    if (e != cudaSuccess) {
        dt_error("CUDA backend: zeroing %zu bytes on device %d: %s", bytes, st.device, dt_errstr_cuda(e, 0));
        cudaFree(p);
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void dt_cuda_mem_free(void *p)
{
    if (!p)
        return;
    ready();
    int broke = dt_cuda_capture_break("mem_free (a free)");
    FATAL_CUDA(cudaFree(p)); /* waits for the device's queued work */
    if (broke)
        dt_cuda_capture_resume();
}

/* a copy in either direction, on the stream, complete at return */
static void copy_and_wait(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    if (!bytes)
        return;
    ready();
    FATAL_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, st.stream));
    FATAL_CUDA(cudaStreamSynchronize(st.stream));
}

void dt_cuda_mem_put(void *dst, const void *src_host, size_t bytes)
{
    if (!dt_cuda_capture_refuse("mem_put of %zu bytes (a copy that waits on the host)", bytes))
        copy_and_wait(dst, src_host, bytes, cudaMemcpyHostToDevice);
}

void dt_cuda_mem_get(void *dst_host, const void *src, size_t bytes)
{
    if (!dt_cuda_capture_refuse("mem_get of %zu bytes (a host wait)", bytes))
        copy_and_wait(dst_host, src, bytes, cudaMemcpyDeviceToHost);
}

/* pinned host memory for upload and download: NULL after one line when there is none */
void *dt_cuda_host_alloc(size_t bytes)
{
    ready();
    void *p = NULL;
    int broke = dt_cuda_capture_break("host_alloc of %zu bytes (an allocation)", bytes);
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (broke)
        dt_cuda_capture_resume();
    if (e != cudaSuccess) {
        dt_error("CUDA backend: cudaHostAlloc of %zu bytes (pinned host memory): %s", bytes, dt_errstr_cuda(e, 0));
        cudaGetLastError(); /* out of memory is not sticky: clear it so later checks do not see it */
        return NULL;
    }
    return p;
}

void dt_cuda_host_free(void *p)
{
    if (!p)
        return;
    ready();
    int broke = dt_cuda_capture_break("host_free (a free)");
    FATAL_CUDA(cudaFreeHost(p)); /* waits for the device's queued work (a copy may still use p) */
    if (broke)
        dt_cuda_capture_resume();
}

/* --- events: cudaEvent_t (without timing) on the queues' streams ----------------------------------- */
/* Inside a capture (graphs, below) an event is recorded twice: ev, which orders the two streams
 * inside the graph (the capture's own dependencies), and ext as an external event-record node, which
 * every launch of the graph records at that point: after the capture, waits on the host or on a
 * stream use ext, the launched graph's mark. */
struct dt_event {
    cudaEvent_t ev, ext;
    int recorded;      /* an event never recorded is complete */
    int in_graph;      /* last recorded inside a capture: waits use ext */
    unsigned capture;  /* which capture (capture_no) recorded it */
};

static _Thread_local int capturing;    /* this thread is capturing a graph */
static _Thread_local unsigned capture_no; /* its captures, counted */
/* the events the capture under way records, which every launch of its graph marks as recorded in it
 * again: an event recorded outside a graph after the capture (an epoch's short batch, issued) must
 * not leave later waits on ev once a launch has recorded ext (a bucket's all-reduce would start
 * before the launch's backward wrote its gradients) */
static _Thread_local dt_event **capture_marks;
static _Thread_local int n_capture_marks, capture_marks_lost;
static _Thread_local size_t cap_capture_marks;

static cudaStream_t queue_stream(int queue)
{
    return queue == DT_QUEUE_COPY ? st.copy : st.stream;
}

dt_event *dt_cuda_event_create(void)
{
    ready();
    dt_event *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    if (cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming) != cudaSuccess) {
        free(e);
        return NULL;
    }
    if (cudaEventCreateWithFlags(&e->ext, cudaEventDisableTiming) != cudaSuccess) {
        cudaEventDestroy(e->ev);
        free(e);
        return NULL;
    }
    return e;
}

void dt_cuda_event_destroy(dt_event *e)
{
    if (!e)
        return;
    ready();
    cudaEventDestroy(e->ev);
    cudaEventDestroy(e->ext);
    free(e);
}

void dt_cuda_event_record(dt_event *e, int queue)
{
    ready();
    FATAL_CUDA(cudaEventRecord(e->ev, queue_stream(queue)));
    if (capturing) {
        FATAL_CUDA(cudaEventRecordWithFlags(e->ext, queue_stream(queue), cudaEventRecordExternal));
        size_t need = (size_t)n_capture_marks + 1;
        if (dt_grow((void **)&capture_marks, &cap_capture_marks, need, sizeof *capture_marks) == DT_OK)
            capture_marks[n_capture_marks++] = e;
        else
            capture_marks_lost = 1; /* graph_end fails the capture */
    }
    e->recorded = 1;
    e->in_graph = capturing;
    e->capture = capture_no;
}

void dt_cuda_event_wait(int queue, dt_event *e)
{
    ready();
    if (!e->recorded)
        return;
    if (capturing && e->in_graph && e->capture == capture_no) /* recorded in this capture: inside the graph */
        FATAL_CUDA(cudaStreamWaitEvent(queue_stream(queue), e->ev, 0));
    else if (capturing) /* recorded before it: the graph waits for it at every launch */
        FATAL_CUDA(cudaStreamWaitEvent(queue_stream(queue), e->in_graph ? e->ext : e->ev, cudaEventWaitExternal));
    else
        FATAL_CUDA(cudaStreamWaitEvent(queue_stream(queue), e->in_graph ? e->ext : e->ev, 0));
}

void dt_cuda_event_sync(dt_event *e)
{
    ready();
    if (dt_cuda_capture_refuse("event_sync (a host wait)"))
        return;
    if (e->recorded)
        FATAL_CUDA(cudaEventSynchronize(e->in_graph ? e->ext : e->ev));
}

/* --- timers (the profile): cudaEvent_t with timing on the compute stream ---------------------- */
struct dt_timer {
    cudaEvent_t ev;
};

dt_timer *dt_cuda_timer_create(void)
{
    ready();
    dt_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (cudaEventCreate(&t->ev) != cudaSuccess) {
        free(t);
        return NULL;
    }
    return t;
}

void dt_cuda_timer_destroy(dt_timer *t)
{
    if (!t)
        return;
    ready();
    cudaEventDestroy(t->ev);
    free(t);
}

void dt_cuda_timer_record(dt_timer *t)
{
    ready();
    if (capturing) /* backend.h: never inside a capture (a timed event there would end it) */
        return;
    FATAL_CUDA(cudaEventRecord(t->ev, st.stream));
}

double dt_cuda_timer_ms(dt_timer *a, dt_timer *b)
{
    ready();
    float ms = 0;
    FATAL_CUDA(cudaEventSynchronize(b->ev));
    FATAL_CUDA(cudaEventElapsedTime(&ms, a->ev, b->ev));
    return ms;
}

/* --- graphs: stream capture of the compute stream, the copy stream joined to it ------------------ */
struct dt_graph {
    cudaGraphExec_t exec;
    size_t nodes;
    dt_event **marks; /* the events its capture recorded: each launch records their ext */
    int n_marks;
};

/* begins capturing the compute stream, the copy stream joined to it */
static cudaError_t begin_capture(void)
{
    /* thread-local: the communication thread may go on with its own CUDA calls */
    cudaError_t e = cudaStreamBeginCapture(st.stream, cudaStreamCaptureModeThreadLocal);
    /* the copy stream joins the capture: its work from now on is part of the graph */
    if (e == cudaSuccess)
        e = cudaEventRecord(st.fork, st.stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(st.copy, st.fork, 0);
    return e;
}

/* ends the capture of the compute stream (whatever happened inside it), the copy stream rejoined
 * first, as a capture must end joined; *graph: what it holds, or NULL */
static cudaError_t end_capture(cudaGraph_t *graph)
{
    cudaError_t e = cudaEventRecord(st.join, st.copy);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(st.stream, st.join, 0);
    cudaError_t e2 = cudaStreamEndCapture(st.stream, graph);
    return e == cudaSuccess ? e2 : e;
}

/* the capture ended and its graph dropped; the stream usable as before it */
static void drop_capture(void)
{
    cudaGraph_t graph = NULL;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st.stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
        end_capture(&graph);
    if (graph)
        cudaGraphDestroy(graph);
    cudaGetLastError(); /* a capture's errors are not sticky: cleared so that later checks do not see them */
}

/* --- a capture that fails (cuda.h: dt_cuda_capture_refuse, _break, _resume, _lost) --------------- */
static _Thread_local char capture_why[200]; /* the capture under way fails: the first call it could not hold */
static _Thread_local int capture_broken;    /* breaks not yet resumed: the stream is not capturing */

static int refuse(const char *fmt, va_list ap)
{
    if (!capturing)
        return 0;
    if (!capture_why[0])
        vsnprintf(capture_why, sizeof capture_why, fmt, ap);
    return 1;
}

int dt_cuda_capture_refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = refuse(fmt, ap);
    va_end(ap);
    return r;
}

int dt_cuda_capture_break(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = refuse(fmt, ap);
    va_end(ap);
    if (r && capture_broken++ == 0)
        drop_capture();
    return r;
}

void dt_cuda_capture_resume(void)
{
    if (!capturing || capture_broken == 0 || --capture_broken > 0)
        return;
    /* a capture again, whose work graph_end drops: what the caller issues until then must not run.
     * Events recorded before the break belong to the dropped graph: waits on them from here are
     * external waits (another capture number), which need nothing from it. */
    capture_no++;
    cudaError_t e = begin_capture();
    if (e != cudaSuccess) { /* the rest of the step would run here and again issued: no way on */
        drop_capture();
        dt_cuda_fatal("resuming a failed capture (cudaStreamBeginCapture)", dt_errstr_cuda(e, 0));
    }
}

int dt_cuda_capture_lost(const char *call, int e)
{
    if (!capturing)
        return 0;
    switch ((cudaError_t)e) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread:
        break;
    default:
        return 0;
    }
    dt_cuda_capture_refuse("%s: %s", call, dt_errstr_cuda(e, 0));
    cudaGetLastError();
    return 1;
}

int dt_cuda_graph_begin(void)
{
    ready();
    if (capturing) {
        dt_error("CUDA backend: graph_begin: a capture is already under way on this thread");
        return DT_ERR_STATE;
    }
    cudaError_t e = begin_capture();
    if (e != cudaSuccess) {
        drop_capture();
        dt_error("CUDA backend: beginning a capture: %s", dt_errstr_cuda(e, 0));
        return DT_ERR_CUDA;
    }
    capturing = 1;
    capture_no++;
    n_capture_marks = 0;
    capture_marks_lost = 0;
    capture_why[0] = 0;
    capture_broken = 0;
    return DT_OK;
}

dt_graph *dt_cuda_graph_end(void)
{
    ready();
    if (!capturing) {
        dt_error("CUDA backend: graph_end without graph_begin");
        return NULL;
    }
    capturing = 0;
    if (capture_why[0]) { /* it failed: nothing of it runs, the stream as before it */
        if (!capture_broken)
            drop_capture();
        capture_broken = 0;
        dt_warn("CUDA backend: the capture failed: %s inside it", capture_why);
        capture_why[0] = 0;
        return NULL;
    }
    cudaGraph_t graph = NULL;
    cudaError_t e = end_capture(&graph);
    dt_graph *g = calloc(1, sizeof *g);
    if (g && n_capture_marks) {
        g->marks = malloc((size_t)n_capture_marks * sizeof *g->marks);
        if (g->marks && !capture_marks_lost) {
            memcpy(g->marks, capture_marks, (size_t)n_capture_marks * sizeof *g->marks);
            g->n_marks = n_capture_marks;
        } else {
            free(g->marks);
            free(g);
            g = NULL;
        }
    }
    if (e == cudaSuccess && g)
        e = cudaGraphGetNodes(graph, NULL, &g->nodes);
    if (e == cudaSuccess && g)
        e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    if (e != cudaSuccess || !g) {
        dt_error("CUDA backend: capturing a graph: %s", g ? dt_errstr_cuda(e, 0) : "out of host memory");
        cudaGetLastError(); /* not sticky: the caller runs the work without a graph */
        if (g)
            free(g->marks);
        free(g);
        return NULL;
    }
    dt_debug("CUDA backend: graph of %zu nodes captured", g->nodes);
    return g;
}

void dt_cuda_graph_launch(dt_graph *g)
{
    ready();
    FATAL_CUDA(cudaGraphLaunch(g->exec, st.stream));
    for (int i = 0; i < g->n_marks; i++) { /* from here, waits on them wait for this launch's marks */
        g->marks[i]->recorded = 1;
        g->marks[i]->in_graph = 1;
    }
}

void dt_cuda_graph_destroy(dt_graph *g)
{
    if (!g)
        return;
    ready();
    cudaGraphExecDestroy(g->exec);
    free(g->marks);
    free(g);
}

/* --- asynchronous copies: queued on a queue's stream, not waited for (backend.h) -------------------- */
void dt_cuda_upload(void *dst, const void *src_host, size_t bytes, int queue)
{
    if (!bytes)
        return;
    ready();
    FATAL_CUDA(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, queue_stream(queue)));
}

void dt_cuda_download(void *dst_host, const void *src, size_t bytes, int queue)
{
    if (!bytes)
        return;
    ready();
    FATAL_CUDA(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, queue_stream(queue)));
}
