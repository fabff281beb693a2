/* cuda.h: the CUDA backend's functions (the table is in backend_cuda.c; the state, memory, events
 * and graphs that the ops and the table share in runtime.c, beneath both) and its shared state.
 *
 * Contracts are those of the matching dt_backend members in nn/backend.h, on device memory, with the
 * CPU backend (nn/cpu) as the reference: each op must compute what the CPU op computes, to float
 * rounding (ops the CPU does exactly, such as copies, ReLU, max pool, dropout masks and fp16/bf16
 * rounding, bit for bit). Storage: fp32, fp16 and bf16 (storage_types), each operand of the type
 * its descriptor or dt_dtype argument names (nn/backend.h's type rule), computed in fp32 with every
 * reduced result rounded once when stored; convolutions and linear layers on half operands run on
 * tensor cores (the products exact, summed in fp32 in cuDNN's and cuBLAS's own order: the one
 * freedom backend.h allows). Any other dt_dtype is a programming error: one line, and an abort
 * (dt_cuda_bad_type).
 *
 * Execution: every op is queued on one compute stream (dt_cuda_stream()) and returns without
 * waiting (SyncBN's exchange of statistics aside: its device buffer goes to the communicator); the
 * step's numbers stay on the device, in the dt_scalars block (nn/scalars.h) that xent,
 * unscale_check, sgd and step_end read and write in their kernels. mem_put and mem_get synchronise
 * the stream; upload and download are queued on the stream of the queue they name (the compute
 * stream or the copy stream) and do not wait. cuDNN and cuBLAS handles are bound to the stream.
 * The device is the one dt_cuda_init selected; ops called before it use device 0.
 *
 * Planning (nn/backend.h): conv_workspace runs cuDNN's algorithm search per shape, the *_scratch
 * ops say what scratch each shape needs, reserve_scratch allocates it; after that, the ops of a
 * planned model allocate nothing (dt_cuda_unplanned_allocs counts any that do).
 *
 * Errors: ops cannot return one (the table's contract: descriptors are validated when built). A
 * failing CUDA, cuDNN or cuBLAS call in an op logs one line naming the call and aborts the process
 * (dt_cuda_fatal): the job's other ranks then see a lost peer instead of a hang. */
#ifndef DT_NN_CUDA_CUDA_H
#define DT_NN_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- state (runtime.c) -------------------------------------------------------------------------- */
/* Selects the device, creates the stream and the cuDNN and cuBLAS handles. DT_OK, or DT_ERR_CUDA /
 * DT_ERR_CUDNN / DT_ERR_CUBLAS after one line. Idempotent for the same device. */
int dt_cuda_init(int device);
/* The compute stream, as a cudaStream_t (void * so that C files need no CUDA header). */
void *dt_cuda_stream(void);
void *dt_cuda_cudnn(void);  /* cudnnHandle_t */
void *dt_cuda_cublas(void); /* cublasHandle_t */
/* Logs "CUDA backend: <what>: <message>" and aborts. */
#ifdef __cplusplus
#define DT_NORETURN [[noreturn]]
#else
#define DT_NORETURN _Noreturn
#endif
DT_NORETURN void dt_cuda_fatal(const char *what, const char *message);
/* Called by dt_cuda_fatal and dt_cuda_bad_type after their line and before the abort, when set (NULL:
 * none; dtrain sets none). It may leave by longjmp (tests/gpu/ops_check.c does, so that a failing op
 * costs its row, not the run); if it returns, the process aborts. Nothing is released on the way out:
 * a lock the failing function held stays held (conv_cudnn.c's cache lock, in conv_workspace and in a
 * convolution's first call for a shape), and after a sticky error (an illegal address) the context
 * is lost: the caller must then not use the backend again in this process. */
extern void (*dt_cuda_fatal_hook)(const char *what, const char *message);
/* For files that include the CUDA, cuBLAS or cuDNN header (and util/check.h for the messages): a
 * failing call inside an op is fatal, with the call and the library's message. */
#define DT_CUDA_FATAL_IF_(type, ok, call, errstr)                                                     \
    do {                                                                                             \
        type s_ = (call);                                                                            \
        if (s_ != (ok))                                                                              \
            dt_cuda_fatal(#call, errstr((long long)s_, 0));                                          \
    } while (0)
/* a CUDA call's error: fatal, except a capture's own (dt_cuda_capture_lost: the capture fails instead) */
#define FATAL_CUDA(call)                                                                             \
    do {                                                                                             \
        cudaError_t s_ = (call);                                                                     \
        if (s_ != cudaSuccess && !dt_cuda_capture_lost(#call, (int)s_))                              \
            dt_cuda_fatal(#call, dt_errstr_cuda((long long)s_, 0));                                  \
    } while (0)
#define FATAL_CUBLAS(call) DT_CUDA_FATAL_IF_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, call, dt_errstr_cublas)
#define FATAL_CUDNN(call) DT_CUDA_FATAL_IF_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, call, dt_errstr_cudnn)
/* Types: an op given a dt_dtype that is not DT_FLOAT32, DT_FLOAT16 or DT_BFLOAT16 (a programming
 * error: descriptors are validated when built) logs "CUDA backend: <op>: operand of type <t>, which
 * this backend does not store" and aborts. The kernels dispatch on the type with DT_CUDA_TYPED
 * (kernels.h); C files check with DT_CUDA_STORED(op, t). */
DT_NORETURN void dt_cuda_bad_type(const char *op, dt_dtype t);
#define DT_CUDA_STORED(op, t)                                                                        \
    do {                                                                                             \
        if ((t) != DT_FLOAT32 && (t) != DT_FLOAT16 && (t) != DT_BFLOAT16)                            \
            dt_cuda_bad_type(op, t);                                                                 \
    } while (0)
/* Bytes of one element of a stored type (4 or 2). */
static inline size_t dt_cuda_elem_bytes(dt_dtype t)
{
    return t == DT_FLOAT32 ? 4 : 2;
}
/* Algorithm choice (conv_cudnn.c): 1 (the default) keeps to deterministic algorithms, so a run's
 * results do not depend on the order of atomics (bit-reproducible run to run on one GPU model);
 * 0 lets cuDNN's search choose the fastest algorithm whatever it is (dtrain's default without
 * --deterministic: PyTorch's cudnn.benchmark without cudnn.deterministic). Before planning: shapes
 * already searched keep their choice. */
void dt_cuda_set_deterministic(int on);
/* How planning chooses each convolution's three algorithms (conv_cudnn.c; dtrain --cudnn-search):
 * DT_CUDA_SEARCH_HEURISTIC, cuDNN's heuristics only (cudnnGet*Algorithm_v7: their first candidate
 * that qualifies, nothing run); DT_CUDA_SEARCH_BOUNDED (the default, seconds 1), the heuristics'
 * first candidates that qualify timed on the device, within `seconds` per shape; and
 * DT_CUDA_SEARCH_EXHAUSTIVE, cudnnFind*Algorithm (every algorithm timed: PyTorch's
 * cudnn.benchmark). seconds counts only for BOUNDED (> 0). Every mode keeps to
 * dt_cuda_set_deterministic's choice. Before planning: shapes already searched keep their choice. */
enum { DT_CUDA_SEARCH_HEURISTIC, DT_CUDA_SEARCH_BOUNDED, DT_CUDA_SEARCH_EXHAUSTIVE };
void dt_cuda_set_conv_search(int mode, double seconds);
/* Layout helpers for the C files (layout.cu), queued on the compute stream:
 * dt_cuda_pad_channels: dst [rows, cpad] = src [rows, c] with channels c..cpad-1 zero (type t both);
 * dt_cuda_unpad_channels: dst [rows, c] = (or += with accumulate) the first c channels of src
 * [rows, cpad] (type t both; the sum rounded once);
 * dt_cuda_broadcast_rows: y [n, k] = b [k] in every row (type t both). */
void dt_cuda_pad_channels(int64_t rows, int c, int cpad, dt_dtype t, const void *src, void *dst);
void dt_cuda_unpad_channels(int64_t rows, int c, int cpad, dt_dtype t, const void *src, void *dst, int accumulate);
void dt_cuda_broadcast_rows(int64_t n, int k, dt_dtype t, const void *b, void *y);
/* Scratch: one device buffer the ops share for their temporaries (not thread-safe; one op at a
 * time uses it). Planning sizes it: the *_scratch ops say what each planned shape needs and
 * dt_cuda_reserve_scratch (the table's reserve_scratch) allocates the most of them, zeroed, and
 * the per-shape state the planning ops recorded (linear_cublas.c's vector of ones); it also logs
 * the cuDNN searches since the last call (dt_cuda_conv_search_report). DT_OK, or DT_ERR_NOMEM after
 * one line. */
int dt_cuda_reserve_scratch(size_t bytes);
/* runtime.c's side of it, for backend_cuda.c: dt_cuda_ready makes the backend ready on this thread
 * (initialised, device 0 when nobody chose; its device current), as every accessor and member does
 * first; dt_cuda_grow_scratch grows the scratch to at least bytes (whole MiB, at least one), zeroed
 * on the compute stream: DT_OK, or DT_ERR_NOMEM after one line with the old scratch kept;
 * dt_cuda_scratch_bytes is its size now. */
void dt_cuda_ready(void);
int dt_cuda_grow_scratch(size_t bytes);
size_t dt_cuda_scratch_bytes(void);
/* The scratch for an op: at least bytes. More than was reserved (an op called on a shape no model
 * planned: ops_check calls ops directly) grows it here, the safety net: it waits for the stream,
 * reallocates, and counts as an unplanned allocation (logged at debug level). */
void *dt_cuda_scratch(size_t bytes);
/* Allocations made inside ops because planning did not cover them (the scratch grown, a vector of
 * ones grown, a cuDNN algorithm search for an unplanned shape), since the process started. A
 * planned model's steps make none (ops_check checks it); dt_cuda_count_unplanned adds one and logs
 * what at debug level. */
long dt_cuda_unplanned_allocs(void);
void dt_cuda_count_unplanned(const char *what, size_t bytes);
/* conv_cudnn.c: one info line with the cuDNN algorithm searches (shapes, seconds) since the last
 * call, when there were any */
void dt_cuda_conv_search_report(void);
/* linear_cublas.c: the vector of ones as long as the longest batch linear_scratch saw. DT_OK, or
 * DT_ERR_NOMEM after one line */
int dt_cuda_linear_reserve(void);

/* memory */
void *dt_cuda_mem_alloc(size_t bytes);
void dt_cuda_mem_free(void *p);
void dt_cuda_mem_put(void *dst, const void *src_host, size_t bytes);
void dt_cuda_mem_get(void *dst_host, const void *src, size_t bytes);
/* pinned host buffers (cudaHostAlloc; NULL after one line), and the copies queued on DT_QUEUE_COMPUTE's
 * or DT_QUEUE_COPY's stream (cudaMemcpyAsync, not waited for) */
void *dt_cuda_host_alloc(size_t bytes);
void dt_cuda_host_free(void *p);
void dt_cuda_upload(void *dst, const void *src_host, size_t bytes, int queue);
void dt_cuda_download(void *dst_host, const void *src, size_t bytes, int queue);
/* events (backend.h): cudaEvent_t on the compute stream (DT_QUEUE_COMPUTE) or the copy stream */
dt_event *dt_cuda_event_create(void);
void dt_cuda_event_destroy(dt_event *e);
void dt_cuda_event_record(dt_event *e, int queue);
void dt_cuda_event_wait(int queue, dt_event *e);
void dt_cuda_event_sync(dt_event *e);
/* timers (backend.h): cudaEvent_t with timing, recorded on the compute stream */
dt_timer *dt_cuda_timer_create(void);
void dt_cuda_timer_destroy(dt_timer *t);
void dt_cuda_timer_record(dt_timer *t);
double dt_cuda_timer_ms(dt_timer *a, dt_timer *b);
/* A capture that fails (backend.h: graph_end returns NULL after one line): what no capture can hold,
 * met inside one on this thread (an allocation, a free, a host wait, a cuDNN search, a CUDA error
 * of the capture's own), fails it instead of aborting, the first such call kept as its reason.
 * dt_cuda_capture_refuse(fmt, ...): 1 when this thread is capturing (the capture now fails with that
 * reason), and the caller then skips the call (a host wait, a put: what it would wait for, or write
 * before, never runs); 0 outside a capture. dt_cuda_capture_break(fmt, ...): the same, and it also
 * ends the capture there (its graph dropped, the error state cleared), so that the caller makes the
 * call for real (memory an op is about to use, the search whose algorithm it needs); the caller
 * then calls dt_cuda_capture_resume(), which begins a capture that keeps the rest of the work until
 * graph_end drops it: nothing of a failed capture runs, and the caller issues it again (train/step.c).
 * Breaks nest (one resume each). dt_cuda_capture_lost(call, e): 1 when e (a cudaError_t) is a stream
 * capture's error on a capturing thread (the capture was invalidated, or refused the call), which
 * then fails the capture with the call as its reason: FATAL_CUDA and DT_LAUNCHED let it pass. */
int dt_cuda_capture_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int dt_cuda_capture_break(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dt_cuda_capture_resume(void);
int dt_cuda_capture_lost(const char *call, int e);
/* graphs (backend.h): stream capture of the compute stream with the copy stream joined to it
 * (thread-local capture mode), instantiated at graph_end; an event recorded inside is also an
 * external event-record node, so waits after a launch find the launch's mark */
int dt_cuda_graph_begin(void);
dt_graph *dt_cuda_graph_end(void);
void dt_cuda_graph_launch(dt_graph *g);
void dt_cuda_graph_destroy(dt_graph *g);

/* --- the ops: dt_cuda_<name> for each op of nn/backend.h's list ----------------------------------
 * conv_cudnn.c     the convolutions: cuDNN, NHWC tensors and KRSC (= our OHWI) filters
 * linear_cublas.c  linear_scratch, linear_fwd, linear_bwd: cuBLAS GEMMs in the operands' type, fp32 compute
 * layout.cu        channel padding and row broadcasts for the two files above; chan_copy
 * our kernels, one file per family as in nn/cpu (kernels.h: what they share):
 *   bn.cu          batch norm (bn_scratch and the three ops)
 *   ln.cu          layer norm (ln_fwd, ln_bwd)
 *   attn.cu        ViT's tokens_fwd, tokens_bwd and attention (attn_scratch, attn_fwd, attn_bwd: cuBLAS's
 *                  fp32 batched GEMMs and our softmax kernels) (nn/cpu/attn.c)
 *   pool.cu        max and average pooling
 *   linear.cu      xent_scratch, xent (the rest of nn/cpu/linear.c)
 *   act.cu         act_fwd, act_bwd (relu6 ... gelu), chanmul_fwd, chanmul_bwd (nn/cpu/act.c)
 *   optim.cu       the optimizer step: unscale_check, grad_sumsq, sgd, adam, rmsprop, tensor_sumsq, lars,
 *                  lamb_moments, lamb_apply, ema_update, step_end (nn/cpu/optim.c)
 *   eltwise.cu     everything else: relu, add, copy_grad, dropout, sdepth, flatten, fill, scale,
 *                  round_half, normalize_scratch, normalize_u8 */
#define DT_CUDA_DECLARE(name, ret, params, args) ret dt_cuda_##name params;
DT_OPS(DT_CUDA_DECLARE)
#undef DT_CUDA_DECLARE

#ifdef __cplusplus
}
#endif
#endif
