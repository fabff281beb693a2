/* ddp.h: data-parallel training of a model over a communicator, as PyTorch's
 * DistributedDataParallel does it:
 *   - at creation, rank 0's parameters and buffers go to every rank;
 *   - gradients are grouped in buckets over the flat gradient array, in reverse layer order
 *     (the first bucket holds about first_bucket_bytes, the others bucket_bytes);
 *   - during backward, a bucket's all-reduce (average) starts the moment its last gradient is
 *     final, on a communication thread, while backward goes on (overlap; off: all buckets after
 *     backward, on the calling thread); buckets go out in the same order on every rank;
 *   - sync 0 (gradient accumulation): backward adds into the gradients and nothing is sent;
 *   - BN running statistics stay per replica (PyTorch's default re-sends rank 0's buffers before
 *     every forward: broadcast_buffers does that); sync_bn normalises with every replica's batch
 *     statistics instead (PyTorch's SyncBatchNorm), over a communicator of its own so that its
 *     reductions never interleave with the buckets' on the communication thread.
 * A failed or timed-out all-reduce makes dt_ddp_backward return the error (logged once).
 * Threads: dt_ddp_create binds its calling thread and the communication thread to the communicator
 * (bind_thread: on NCCL, the rank's GPU), the latter before it issues anything; call the others
 * from the thread that called dt_ddp_create.
 * Device memory (a backend without host_memory, NCCL): before every collective on the model's
 * weights, buffers or gradients, the backend's queued ops complete (its sync, on the thread that
 * queued them: in creation and sync_buffers before the broadcast, in backward before a bucket goes
 * to the communication thread); each collective is complete when the communicator returns, so
 * the ops queued afterwards read its result. Gradients stored in several types there (AMP O2/O3 on
 * a device that stores fp16/bf16) travel through a wire in backend memory, filled and emptied by the
 * backend's copy ops on the thread that issues ops (ddp.c, "The wire"). */
#ifndef DT_TRAIN_DDP_H
#define DT_TRAIN_DDP_H

#include <stddef.h>

#include "libdt/comm.h"
#include "nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_ddp_cfg {
    size_t bucket_bytes;        /* 0: 25 MiB */
    size_t first_bucket_bytes;  /* 0: 1 MiB */
    int no_overlap;             /* 1: all-reduce after backward */
    int broadcast_buffers;      /* 1: rank 0's BN buffers to all before each forward */
    float grad_scale;           /* gradients are multiplied by this after averaging; 0: 1 (1/accum for accumulation) */
    int sync_bn;                /* 1: SyncBN, batch statistics over all replicas (on a second communicator) */
    dt_dtype wire;              /* the gradients' type on the wire: DT_FLOAT32 (0), DT_FLOAT16 or DT_BFLOAT16 (AMP O2/O3) */
} dt_ddp_cfg;

typedef struct dt_ddp dt_ddp;

/* Builds the buckets, starts the communication thread and broadcasts rank 0's parameters and
 * buffers. The model must outlive it; its on_grads hook is taken. */
int dt_ddp_create(dt_ddp **out, dt_model *m, dt_comm *comm, const dt_ddp_cfg *cfg);
/* Before a forward: the broadcast of buffers when configured. */
int dt_ddp_before_forward(dt_ddp *d);
/* Rank 0's buffers (BN running statistics) to every rank, now: before validation, so that every rank
 * evaluates the model the checkpoint holds. */
int dt_ddp_sync_buffers(dt_ddp *d);
/* dt_model_backward, plus (when sync) the averaged gradients on every rank at return. */
int dt_ddp_backward(dt_ddp *d, int n, int accumulate, int sync);
/* dt_ddp_backward in three parts, as train/step.c runs every step (issued or captured as graphs):
 * dt_ddp_backward_issue: the backward and, when sync, each bucket's event (and its copies into the
 *   device wire) recorded at its point; capture 1: nothing goes to the communication thread (a
 *   capture runs nothing), else buckets go as they are final (overlap);
 * dt_ddp_reduce: every bucket's all-reduce, each after its event (after a graph's launch, its events
 *   are the launch's marks, so the reductions still overlap what of backward is left); returns
 *   once all are done (or the first error);
 * dt_ddp_unpack: the device wire's averages back into the gradients (ops; nothing elsewhere). */
int dt_ddp_backward_issue(dt_ddp *d, int n, int accumulate, int sync, int capture);
int dt_ddp_reduce(dt_ddp *d);
void dt_ddp_unpack(dt_ddp *d);
int dt_ddp_buckets(const dt_ddp *d);
void dt_ddp_free(dt_ddp *d);

#ifdef __cplusplus
}
#endif
#endif
