/* dt.h: libdt, dtrain's distributed runtime as a C library, with Horovod's model of collectives
 * (doc/libdt.md). dtrain itself and the Python package dtrain.torch (Horovod's PyTorch API) run on it.
 *
 *   #include <dt.h>
 *   if (dt_init() != 0) return 1;            rank, size and local rank from Slurm's PMI2, MPI
 *   float g[n]; ...                          (mpirun, srun --mpi=pmix), torchrun or the Slurm
 *   dt_allreduce(g, g, n, DT_FLOAT32, DT_AVG);  environment
 *   dt_finalize();
 * Build: cc app.c $(pkg-config --cflags --libs dt). Start: srun --mpi=pmix ./app, mpirun -np 4 ./app,
 * srun --mpi=pmi2 ./app (GPU ranks: NCCL, its id through PMI2's key-value store), or plainly ./app.
 *
 * Two layers:
 *   - blocking calls on host buffers (dt_allreduce ... dt_broadcast_parameters), all ranks calling
 *     them in the same order;
 *   - named operations on tensors (dt_tensor: host memory, or CUDA memory with the stream that writes
 *     it), started asynchronously (dt_*_async gives a handle; dt_poll, dt_wait). A background thread
 *     matches the operations across ranks by name, as Horovod does: ranks may submit in different
 *     orders, from any threads; an operation runs once every rank has submitted it. Before it runs,
 *     its kind, type, shape, reduction, scale factors and root are compared across ranks: a mismatch
 *     fails that operation on every rank with one line naming the tensor and what each rank gave,
 *     and the others go on. Small all-reduces are fused into one buffer (DT_FUSION_THRESHOLD bytes,
 *     default 64 MiB; 0 fuses nothing), and the fused buffers go round-robin to DT_ALLREDUCE_STREAMS
 *     communicators (default 1, at most 8), each with its own thread: several reductions in flight.
 *
 * Every function returns 0 on success and a negative dtrain status on failure, after one line on
 * standard error naming the operation. Collectives time out (default 600 s, DT_COMM_TIMEOUT or
 * dt_set_timeout; the same deadline bounds the start-up): a rank that died or stalls makes the others
 * fail instead of hanging, and after such a failure dt_finalize ends the whole job (MPI_Abort).
 * An operation that some ranks submitted and others did not within the timeout fails on the ranks
 * that submitted it, naming the ranks that did not. */
#ifndef DT_H
#define DT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_dtype {
    DT_FLOAT32,
    DT_FLOAT16,
    DT_BFLOAT16,
    DT_FLOAT64,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_INT8
} dt_dtype;
/* DT_AVG is the sum divided by dt_size(); not defined for integer types. fp16 and bf16 are reduced
 * in fp32 and rounded to nearest even once. */
typedef enum dt_redop { DT_SUM, DT_AVG, DT_MAX, DT_MIN, DT_PRODUCT } dt_redop;

/* ---- start, ranks ---------------------------------------------------------------------------- */

/* Detects the launch and sets up the communicators and the background thread. Call once, before
 * anything else here (dt_set_timeout and dt_set_fusion_threshold may come first). */
int dt_init(void);
/* Completes nothing pending: operations not yet run fail. Tears down; after a failed collective,
 * ends every rank of the job. */
int dt_finalize(void);
int dt_is_initialized(void);

int dt_rank(void);        /* 0 .. dt_size() - 1 */
int dt_size(void);
int dt_local_rank(void);  /* among the ranks on this node: the GPU to use */
int dt_local_size(void);
/* Among the ranks with this rank's local rank (one per node when every node has the same number of
 * ranks): Horovod's cross rank and cross size. */
int dt_cross_rank(void);
int dt_cross_size(void);
/* How the ranks were found: "Slurm PMI2", "MPI", "Slurm environment (no PMI)", "torchrun",
 * "single process". */
const char *dt_launch_name(void);

/* Seconds after which a collective fails, and the start-up's deadline (default 600; DT_COMM_TIMEOUT
 * read by dt_init). */
void dt_set_timeout(double seconds);
/* Bytes up to which all-reduces of the same type, reduction and device are fused (default 64 MiB,
 * DT_FUSION_THRESHOLD read by dt_init; 0 fuses nothing). */
void dt_set_fusion_threshold(size_t bytes);
/* Communicators (each with its thread) that all-reduces are spread over (DT_ALLREDUCE_STREAMS, 1 to 8). */
int dt_allreduce_streams(void);

/* ---- blocking calls on host buffers ------------------------------------------------------------ */

/* recv = op over all ranks of send, count elements of type t; send == recv works in place. */
int dt_allreduce(const void *send, void *recv, size_t count, dt_dtype t, dt_redop op);
/* root's buf to every rank */
int dt_broadcast(void *buf, size_t count, dt_dtype t, int root);
/* recv[r * count ...] = rank r's send */
int dt_allgather(const void *send, void *recv, size_t count, dt_dtype t);
/* Returns once every rank has called it (after what each submitted before it has been matched). */
int dt_barrier(void);
/* The n float32 tensors (params[i], counts[i] elements) of root on every rank: the start of
 * data-parallel training, so that all replicas begin from the same weights. */
int dt_broadcast_parameters(float *const *params, const size_t *counts, int n, int root);

/* ---- named operations on tensors ---------------------------------------------------------------- */

#define DT_MAX_DIMS 8
#define DT_HOST (-1)

/* A dense, contiguous (row-major) tensor. */
typedef struct dt_tensor {
    void *data;
    dt_dtype type;
    int ndim; /* 0 (a scalar) .. DT_MAX_DIMS */
    int64_t shape[DT_MAX_DIMS];
    /* DT_HOST, or the CUDA device the data lives on */
    int device;
    /* device tensors: the cudaStream_t that wrote data (NULL: the legacy default stream). The
     * operation waits for the work queued on it before the call; once dt_wait or dt_poll says the
     * operation is done, its result is complete on the device, so work queued after that on any
     * stream sees it. */
    void *stream;
} dt_tensor;

typedef struct dt_handle dt_handle;

/* The number of elements of t. */
size_t dt_tensor_count(const dt_tensor *t);

/* Names: NULL or "" gives "<kind>.noname.<n>", n counting this rank's unnamed submissions of that
 * kind (the same on every rank when they submit unnamed operations in the same order). A name is
 * at most 255 bytes and unique among this rank's operations in flight (DT_ERR_STATE otherwise).
 * The tensors (and their data) must stay valid until the operation is done.
 * Scale factors: the input is multiplied by prescale before the reduction and the result by
 * postscale after it (0 means 1); with DT_AVG, the result is also divided by dt_size(). */

/* out = op over ranks of in (same type and shape; out->data == in->data is in place). */
int dt_allreduce_async(const char *name, const dt_tensor *in, const dt_tensor *out, dt_redop op, double prescale,
                       double postscale, dt_handle **h);
/* n all-reduces as one operation: matched, checked and completed together (one handle). */
int dt_grouped_allreduce_async(const char *name, int n, const dt_tensor *in, const dt_tensor *out, dt_redop op,
                               double prescale, double postscale, dt_handle **h);
/* out = root's in, on every rank (out->data == in->data is in place; same type and shape). */
int dt_broadcast_async(const char *name, const dt_tensor *in, const dt_tensor *out, int root, dt_handle **h);
/* The ranks' tensors concatenated along the first dimension, in rank order; the first dimension
 * may differ between ranks, the others may not. The result is libdt's (dt_output). */
int dt_allgather_async(const char *name, const dt_tensor *in, dt_handle **h);
/* splits[r] rows of in's first dimension (in order) go to rank r; NULL splits the rows as evenly
 * as possible (the first size % rows ranks one more). The result (dt_output) is what every rank
 * sent to this one, in rank order; dt_received_splits gives how many rows came from each. */
int dt_alltoall_async(const char *name, const dt_tensor *in, const int64_t *splits, dt_handle **h);
/* The reduction over ranks of in, of which this rank keeps its share of the first dimension
 * (split as dt_alltoall's NULL splits). The result is libdt's (dt_output). */
int dt_reducescatter_async(const char *name, const dt_tensor *in, dt_redop op, double prescale, double postscale,
                           dt_handle **h);

/* 1 when h's operation is done (successfully or not), 0 while it runs. */
int dt_poll(const dt_handle *h);
/* Waits until h's operation is done; its status (0, or negative after the line). */
int dt_wait(dt_handle *h);
/* After dt_wait: the one line that described h's failure, or NULL. */
const char *dt_handle_error(const dt_handle *h);
/* After dt_wait, for operations whose result is libdt's: its shape and type, and in out->data
 * libdt's copy (valid until dt_handle_free; on the input's device). */
int dt_output(const dt_handle *h, dt_tensor *out);
/* Copies that result to dst (on the same device; device copies are complete on return). */
int dt_output_copy(const dt_handle *h, void *dst);
/* After dt_wait of an all-to-all: rows received from each rank (dt_size() values). */
int dt_received_splits(const dt_handle *h, int64_t *splits);
/* Frees a handle; waits first if the operation is still running. */
void dt_handle_free(dt_handle *h);

/* This rank has run out of data: until every rank has joined, it takes part in the others'
 * all-reduces with zeros, in their all-gathers with no rows and in their broadcasts (as Horovod's
 * join). Returns the rank that joined last (the highest of those that joined in the same round);
 * 0 in a world of one; negative on failure. */
int dt_join(void);

#ifdef __cplusplus
}
#endif
#endif
