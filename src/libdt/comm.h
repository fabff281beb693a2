/* comm.h: collective operations behind one small interface, with three implementations:
 *   self  world size 1: every operation is a copy or nothing;
 *   mpi   host buffers through MPI (non-blocking collectives polled against a deadline);
 *   nccl  device buffers through NCCL (CUDA builds), on its own stream; and host buffers staged
 *         through the device, for GPU ranks without MPI.
 * Every operation either completes or fails within the communicator's timeout: a rank that died
 * or stalls makes the others fail with one line naming the operation and the step, never hang.
 * Ordering with device work: an operation returns only once it is complete (NCCL: its stream has
 * drained, cudaStreamQuery), so CUDA work queued after the return, on any stream, sees its result;
 * it is not ordered after CUDA work queued before the call on other streams, so the caller first
 * makes sure that what the operation reads is written (DDP: the backend's sync).
 * fp16 and bf16 are reduced in fp32 on hosts (MPI has no such types), with correct rounding. */
#ifndef DT_DIST_COMM_H
#define DT_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "libdt/dt.h"
#include "libdt/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dt_dtype and dt_redop come from the public dt.h */
size_t dt_dtype_size(dt_dtype t);
const char *dt_dtype_name(dt_dtype t);

typedef struct dt_comm dt_comm;

typedef struct dt_comm_ops {
    const char *name;
    /* Makes this thread ready to call the communicator: every thread other than the one that
     * created it calls this once, before its first operation (DDP's communication thread does it
     * first thing). NCCL: makes the communicator's CUDA device current on the calling thread
     * (cudaSetDevice), so that the thread's NCCL and CUDA calls (and any CUDA work it queues later)
     * run on the rank's GPU instead of creating a context on device 0; MPI and self: nothing to do.
     * Creating a communicator (and dup) leaves the creating thread bound. DT_OK, or an error after
     * one line. */
    int (*bind_thread)(dt_comm *c);
    /* recv = op over ranks of send (count elements); send == recv is allowed (in place). Every op of
     * dt_redop on every dt_dtype (DT_AVG: not on integers); fp16/bf16 in fp32 */
    int (*allreduce)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op);
    int (*broadcast)(dt_comm *c, void *buf, size_t count, dt_dtype t, int root);
    /* recv[rank * count ...] = each rank's send */
    int (*allgather)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t);
    /* recv = the ranks' sends concatenated in rank order: counts[r] elements from rank r, at
     * recv + displs[r] elements (count == counts[this rank]); counts may be 0 */
    int (*allgatherv)(dt_comm *c, const void *send, size_t count, void *recv, const size_t *counts,
                      const size_t *displs, dt_dtype t);
    /* rank r receives send's scounts[r] elements at sdispls[r]; this rank receives rcounts[r] elements
     * from rank r at recv + rdispls[r] (every rank's scounts[x] equals rank x's rcounts[its rank]) */
    int (*alltoallv)(dt_comm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                     const size_t *rcounts, const size_t *rdispls, dt_dtype t);
    int (*barrier)(dt_comm *c);
    /* a second communicator over the same ranks whose collectives never mix with this one's (two
     * threads may then each run their own sequence: DDP's buckets and SyncBN's statistics) */
    int (*dup)(dt_comm *c, dt_comm **out);
    /* this rank failed for good: end every rank of the job now (MPI_Abort), instead of leaving the
     * others to wait for it until their timeout; returns only where there is nothing to end */
    void (*abort)(dt_comm *c, int code);
    void (*destroy)(dt_comm *c);
} dt_comm_ops;

struct dt_comm {
    const dt_comm_ops *ops;
    int rank, size;
    double timeout_s;       /* every operation's deadline */
    int64_t step;           /* the training step, for messages (set by the caller) */
    uint64_t n_ops;         /* operations so far (the same sequence on every rank) */
    int startup;            /* dt_comm_startup: in the start-up phase */
    double startup_left;    /* its seconds of waiting left, shared by all of its operations */
    void *impl;
};

/* c->step during start-up: the caller setting a step (>= 0) ends the phase */
#define DT_COMM_STARTUP (-1)

/* Start-up: from now until the caller first sets c->step (training began), the operations share one
 * budget of `seconds` of waiting, instead of timeout_s each, so a rank that never arrives ends the
 * start-up once, within the budget, however many collectives the start-up has; a time-out then says
 * "start-up" and names the missing ranks. Only waiting counts: a slow start whose ranks are all
 * busy (opening data, loading a checkpoint) uses none of it. Honoured by the MPI communicator (the
 * NCCL ones keep timeout_s per operation). seconds <= 0 ends the phase. */
void dt_comm_startup(dt_comm *c, double seconds);
/* For implementations: the seconds the next operation may wait (timeout_s, or what is left of the
 * start-up's budget), and the charge of one that waited `seconds`. */
double dt_comm_wait_limit(dt_comm *c);
void dt_comm_waited(dt_comm *c, double seconds);
/* For implementations whose threads need no set-up: bind_thread that does nothing. */
int dt_comm_bind_nothing(dt_comm *c);

/* World size 1. */
int dt_comm_self(dt_comm **c);
/* MPI_COMM_WORLD (the launch must be DT_LAUNCH_MPI). */
int dt_comm_mpi(dt_comm **c, double timeout_s);
/* NCCL over the launch's ranks on CUDA device `device` (the local rank's), for device buffers
 * (CUDA builds; DT_ERR_STATE otherwise). */
int dt_comm_nccl(dt_comm **c, const dt_launch *l, int device, double timeout_s);
/* Host buffers over NCCL, for GPU ranks started without MPI (srun --mpi=pmi2): a communicator of its
 * own (split from dev, which stays the caller's), staged through pinned memory and the device
 * (CUDA builds with NCCL 2.18 or later; DT_ERR_STATE otherwise). */
int dt_comm_nccl_host(dt_comm **c, dt_comm *dev);
/* CUDA devices this process can use (0 without CUDA or a driver). */
int dt_gpu_count(void);
/* The communicator a launch gives for host (CPU) buffers: self for one rank, MPI under MPI; other
 * launches get DT_ERR_STATE with a line saying how to start (srun --mpi=pmix or mpirun). */
int dt_comm_host(dt_comm **c, const dt_launch *l, double timeout_s);
/* The communicators a launch gives, dt_init's and dtrain's one rule: GPU ranks (device >= 0) of several
 * started without MPI (srun --mpi=pmi2, torchrun, Slurm's environment, dtrain's own workers) get NCCL on
 * that device in *dev (its id through the launch) and host buffers staged through it in *host; every
 * other launch gets dt_comm_host's communicator in *host and *dev NULL (NCCL, where wanted, comes later).
 * On failure both are NULL, after one line. */
int dt_comm_connect(const dt_launch *l, int device, double timeout_s, dt_comm **host, dt_comm **dev);
void dt_comm_free(dt_comm *c);


#ifdef __cplusplus
}
#endif
#endif
