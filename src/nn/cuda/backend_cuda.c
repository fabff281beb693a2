/* backend_cuda.c: the CUDA backend's op table (CUDA builds only): runtime.c's members (memory,
 * host buffers, copies, events, timers, graphs) and the ops, dt_cuda_<name>, with the two members
 * that reach into the ops' files: .init (the device, then cuDNN's choices: conv_cudnn.c) and
 * .reserve_scratch (the cuDNN searches reported, the scratch grown, linear_cublas.c's vectors of
 * ones made as long as planned). The top of the backend: nothing of it calls this file.
 *
 * Types: fp32, fp16 and bf16 stored for real (storage_types); each op's file says how it computes. */
#include "config.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/log.h"

/* --- reserve_scratch: planning's end (cuda.h) ------------------------------------------------------ */
static int reserve_scratch(size_t bytes)
{
    dt_cuda_conv_search_report();
    DT_TRY(dt_cuda_grow_scratch(bytes));
    DT_TRY(dt_cuda_linear_reserve());
    FATAL_CUDA(cudaStreamSynchronize((cudaStream_t)dt_cuda_stream())); /* zeroed before it returns */
    dt_debug("CUDA backend: scratch %.1f MiB reserved (%zu bytes asked)", dt_cuda_scratch_bytes() / 1048576.0,
             bytes);
    return DT_OK;
}

int dt_cuda_reserve_scratch(size_t bytes)
{
    dt_cuda_ready();
    int broke = dt_cuda_capture_break("reserve_scratch of %zu bytes (an allocation)", bytes);
    int rc = reserve_scratch(bytes);
    if (broke)
        dt_cuda_capture_resume();
    return rc;
}

/* --- the table ----------------------------------------------------------------------------------- */
/* .init: the device, then cuDNN's choices (conv_cudnn.c) */
static int backend_init(const dt_backend_options *o)
{
    _Static_assert(DT_CUDA_SEARCH_HEURISTIC == 0 && DT_CUDA_SEARCH_BOUNDED == 1 && DT_CUDA_SEARCH_EXHAUSTIVE == 2,
                   "dt_backend_options.conv_search counts as cuda.h does");
    DT_TRY(dt_cuda_init(o->device));
    dt_cuda_set_deterministic(o->deterministic);
    dt_cuda_set_conv_search(o->conv_search, o->conv_search_s);
    return DT_OK;
}

/* .<name> = dt_cuda_<name> for each op of nn/backend.h's list */
#define CUDA_OP(name, ret, params, args) .name = dt_cuda_##name,

const dt_backend dt_backend_cuda = {
    .name = "cuda",
    .init = backend_init,
    .host_memory = 0,
    .storage_types = 1u << DT_FLOAT32 | 1u << DT_FLOAT16 | 1u << DT_BFLOAT16, /* real half storage (cuda.h) */
    /* BN's kernels take the ReLU and the residual (bn.cu); not DT_FUSE_BN_ACT (BN and the activation run
     * apart), so bn.cu's relu is 0 or 1 */
    .fuses = DT_FUSE_BN_RELU | DT_FUSE_BN_ADD_RELU,
    .mem_alloc = dt_cuda_mem_alloc,
    .mem_free = dt_cuda_mem_free,
    .mem_put = dt_cuda_mem_put,
    .mem_get = dt_cuda_mem_get,
    .host_alloc = dt_cuda_host_alloc,
    .host_free = dt_cuda_host_free,
    .upload = dt_cuda_upload,
    .download = dt_cuda_download,
    .event_create = dt_cuda_event_create,
    .event_destroy = dt_cuda_event_destroy,
    .event_record = dt_cuda_event_record,
    .event_wait = dt_cuda_event_wait,
    .event_sync = dt_cuda_event_sync,
    .timer_create = dt_cuda_timer_create,
    .timer_destroy = dt_cuda_timer_destroy,
    .timer_record = dt_cuda_timer_record,
    .timer_ms = dt_cuda_timer_ms,
    .reserve_scratch = dt_cuda_reserve_scratch,
    .max_tensor_elems = INT32_MAX,
    .graph_begin = dt_cuda_graph_begin,
    .graph_end = dt_cuda_graph_end,
    .graph_launch = dt_cuda_graph_launch,
    .graph_destroy = dt_cuda_graph_destroy,
    DT_OPS(CUDA_OP)
};
