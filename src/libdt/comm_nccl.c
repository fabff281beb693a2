/* comm_nccl.c: the NCCL communicator (comm.h) for device buffers (CUDA builds).
 *
 * The unique id comes from rank 0: through the PMI2 key-value store under srun with PMI2, by
 * MPI_Bcast under MPI, from DT_NCCL_ID (hex, set by the dtrain --nproc-per-node parent) for forked
 * workers, and through a file in the run directory under srun without PMI (rank 0 writes it under
 * a temporary name and renames it; the others wait for it, scoped to the job and step).
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): initialisation and every
 * collective are polled (ncclCommGetAsyncError, cudaStreamQuery) against the deadline, and a
 * timeout aborts the communicator (ncclCommAbort) instead of hanging in the kernel forever; the
 * aborted handle is gone, so every later operation fails at once, and freeing the communicator
 * finalises it against the deadline too (ncclCommFinalize polled, then destroy, or abort).
 * Devices: the communicator, its stream and its buffers live on the device it was created for;
 * bind_thread and the start of every operation make that device current on the calling thread, so
 * that no thread (DDP's communication thread) runs NCCL or CUDA calls on device 0's context.
 * Completion: an operation returns when its stream has drained (finish), which is what callers
 * rely on to use the result from any stream; it does not wait for work on other streams. */
#include "config.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "libdt/comm.h"
#include "libdt/device.h"
#include "libdt/rdzv.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int *scratch; /* one device int for barriers, zeroed at creation */
    int device;   /* the CUDA device of comm, stream and scratch */
    int failed;   /* 0, or the status of the failure after which comm was aborted (the handle is gone) */
} nccl_impl;

/* m's device current on the calling thread (cheap when it already is) */
static int use_device(const nccl_impl *m)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == m->device)
        return DT_OK;
    DT_CHECK_CUDA(cudaSetDevice(m->device));
    return DT_OK;
}

static int nccl_bind(dt_comm *c)
{
    return use_device(c->impl);
}

/* the communicator's end after a failure: aborted once, and status kept for later operations */
static int give_up(nccl_impl *m, int status)
{
    if (m->comm && !m->failed)
        ncclCommAbort(m->comm);
    if (!m->failed)
        m->failed = status;
    return status;
}

/* the start of every operation: counted, refused at once after a failure, on the right device */
static int begin(dt_comm *c, const char *what)
{
    nccl_impl *m = c->impl;
    c->n_ops++;
    if (m->failed) {
        dt_debug("NCCL %s (operation %llu): not started, an earlier operation of this communicator failed", what,
                 (unsigned long long)c->n_ops);
        return m->failed;
    }
    return use_device(m);
}

/* the communicator's stream and its barrier int (zeroed, so a barrier never reads uninitialised
 * memory), on m->device, which is current */
static int stream_and_scratch(nccl_impl *m)
{
    DT_CHECK_CUDA(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    DT_CHECK_CUDA(cudaMalloc((void **)&m->scratch, sizeof(int)));
    DT_CHECK_CUDA(cudaMemsetAsync(m->scratch, 0, sizeof(int), m->stream));
    DT_CHECK_CUDA(cudaStreamSynchronize(m->stream));
    return DT_OK;
}

int dt_gpu_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static ncclDataType_t nccl_type(dt_dtype t)
{
    switch (t) {
    case DT_FLOAT16: return ncclFloat16;
    case DT_BFLOAT16: return ncclBfloat16;
    case DT_FLOAT64: return ncclFloat64;
    case DT_INT32: return ncclInt32;
    case DT_INT64: return ncclInt64;
    case DT_UINT8: return ncclUint8;
    case DT_INT8: return ncclInt8;
    default: return ncclFloat32;
    }
}

static ncclRedOp_t nccl_op(dt_redop op)
{
    switch (op) {
    case DT_AVG: return ncclAvg;
    case DT_MAX: return ncclMax;
    case DT_MIN: return ncclMin;
    case DT_PRODUCT: return ncclProd;
    default: return ncclSum;
    }
}

/* DT_AVG of integers: refused as the MPI communicator refuses it (NCCL would truncate quietly) */
static int check_op(dt_dtype t, dt_redop op, const char *what)
{
    if (op == DT_AVG && (t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 || t == DT_INT8)) {
        dt_error("%s: an average of %s is not defined", what, dt_dtype_name(t));
        return DT_ERR_STATE;
    }
    return DT_OK;
}

/* bytes from src to dst on m's stream (device memory; nothing when they are the same) */
static int copy_on_stream(nccl_impl *m, void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, m->stream));
    return DT_OK;
}

/* alltoallv's exchange (comm.h) as one NCCL group on m's stream, this rank's own part excepted (the
 * caller copies it, copy_on_stream). The group's status (an error of a call inside it, else
 * ncclGroupEnd's), for finish. */
static ncclResult_t group_alltoallv(nccl_impl *m, int rank, int size, const void *send, const size_t *scounts,
                                    const size_t *sdispls, void *recv, const size_t *rcounts, const size_t *rdispls,
                                    dt_dtype t)
{
    size_t es = dt_dtype_size(t);
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return r;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        ncclResult_t q = ncclSuccess;
        if (scounts[p])
            q = ncclSend((const char *)send + sdispls[p] * es, scounts[p], nccl_type(t), p, m->comm, m->stream);
        if ((q == ncclSuccess || q == ncclInProgress) && rcounts[p])
            q = ncclRecv((char *)recv + rdispls[p] * es, rcounts[p], nccl_type(t), p, m->comm, m->stream);
        if (q != ncclSuccess && q != ncclInProgress && r == ncclSuccess)
            r = q;
    }
    ncclResult_t e = ncclGroupEnd(); /* always: a group left open would swallow the next operation */
    return r != ncclSuccess ? r : e;
}

/* allgatherv's exchange (comm.h): an alltoallv in which this rank sends the same count elements at
 * send to every rank, and receives counts[r] from rank r at displs[r]; its own part is the caller's */
static ncclResult_t group_allgatherv(nccl_impl *m, int rank, int size, const void *send, size_t count, void *recv,
                                     const size_t *counts, const size_t *displs, dt_dtype t)
{
    size_t *scounts = malloc(2 * (size_t)size * sizeof *scounts);
    if (!scounts)
        return ncclSystemError;
    size_t *sdispls = scounts + size;
    for (int p = 0; p < size; p++) {
        scounts[p] = count;
        sdispls[p] = 0;
    }
    ncclResult_t r = group_alltoallv(m, rank, size, send, scounts, sdispls, recv, counts, displs, t);
    free(scounts);
    return r;
}

/* the arguments' own consistency, checked before anything is queued */
static int check_allgatherv(const dt_comm *c, size_t count, const size_t *counts)
{
    if (counts[c->rank] != count) {
        dt_error("allgatherv: rank %d sends %zu elements but the counts say %zu", c->rank, count, counts[c->rank]);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

static int check_alltoallv(const dt_comm *c, const size_t *scounts, const size_t *rcounts)
{
    if (scounts[c->rank] != rcounts[c->rank]) {
        dt_error("alltoallv: rank %d sends itself %zu elements but expects %zu", c->rank, scounts[c->rank],
                 rcounts[c->rank]);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

/* waits for the communicator's pending call (ncclInProgress) to settle */
static int settle(dt_comm *c, ncclResult_t r, const char *what, double deadline)
{
    nccl_impl *m = c->impl;
    double start = dt_seconds();
    ncclResult_t st = r;
    while (st == ncclInProgress && dt_seconds() <= deadline) {
        dt_poll_pause(start);
        ncclResult_t q = ncclCommGetAsyncError(m->comm, &st);
        if (q != ncclSuccess) /* the query itself failed: that is the error, not a timeout */
            st = q;
    }
    if (st == ncclSuccess)
        return DT_OK;
    dt_error("NCCL %s (operation %llu, step %lld): %s", what, (unsigned long long)c->n_ops, (long long)c->step,
             st == ncclInProgress ? "did not complete within the timeout" : ncclGetErrorString(st));
    return give_up(m, st == ncclInProgress ? DT_ERR_TIMEOUT : DT_ERR_NCCL);
}

/* waits for the stream's work (the enqueued collective) with the deadline */
static int finish(dt_comm *c, ncclResult_t r, const char *what)
{
    nccl_impl *m = c->impl;
    double start = dt_seconds(), deadline = start + c->timeout_s;
    DT_TRY(settle(c, r, what, deadline));
    for (;;) {
        cudaError_t e = cudaStreamQuery(m->stream);
        if (e == cudaSuccess)
            return DT_OK;
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(m->comm, &st);
        int late = dt_seconds() > deadline;
        if (e != cudaErrorNotReady || (st != ncclSuccess && st != ncclInProgress) || late) {
            dt_error("NCCL %s (operation %llu, step %lld) %s: %s; another rank may have died or stalls", what,
                     (unsigned long long)c->n_ops, (long long)c->step,
                     late ? "did not complete within the timeout" : "failed",
                     e != cudaErrorNotReady ? cudaGetErrorString(e) : ncclGetErrorString(st));
            return give_up(m, late ? DT_ERR_TIMEOUT : DT_ERR_NCCL);
        }
        dt_poll_pause(start);
    }
}

static int nccl_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    nccl_impl *m = c->impl;
    DT_TRY(begin(c, "allreduce"));
    DT_TRY(check_op(t, op, "allreduce"));
    return finish(c, ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), m->comm, m->stream), "allreduce");
}

static int nccl_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    nccl_impl *m = c->impl;
    DT_TRY(begin(c, "broadcast"));
    return finish(c, ncclBroadcast(buf, buf, count, nccl_type(t), root, m->comm, m->stream), "broadcast");
}

static int nccl_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    nccl_impl *m = c->impl;
    DT_TRY(begin(c, "allgather"));
    return finish(c, ncclAllGather(send, recv, count, nccl_type(t), m->comm, m->stream), "allgather");
}

static int nccl_allgatherv(dt_comm *c, const void *send, size_t count, void *recv, const size_t *counts,
                           const size_t *displs, dt_dtype t)
{
    nccl_impl *m = c->impl;
    size_t es = dt_dtype_size(t);
    DT_TRY(begin(c, "allgatherv"));
    DT_TRY(check_allgatherv(c, count, counts));
    DT_TRY(copy_on_stream(m, (char *)recv + displs[c->rank] * es, send, count * es));
    return finish(c, group_allgatherv(m, c->rank, c->size, send, count, recv, counts, displs, t), "allgatherv");
}

static int nccl_alltoallv(dt_comm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                          const size_t *rcounts, const size_t *rdispls, dt_dtype t)
{
    nccl_impl *m = c->impl;
    size_t es = dt_dtype_size(t);
    DT_TRY(begin(c, "alltoallv"));
    DT_TRY(check_alltoallv(c, scounts, rcounts));
    DT_TRY(copy_on_stream(m, (char *)recv + rdispls[c->rank] * es, (const char *)send + sdispls[c->rank] * es,
                          rcounts[c->rank] * es));
    return finish(c, group_alltoallv(m, c->rank, c->size, send, scounts, sdispls, recv, rcounts, rdispls, t),
                  "alltoallv");
}

static int nccl_barrier(dt_comm *c)
{
    nccl_impl *m = c->impl;
    DT_TRY(begin(c, "barrier"));
    return finish(c, ncclAllReduce(m->scratch, m->scratch, 1, ncclInt32, ncclSum, m->comm, m->stream), "barrier");
}

static void nccl_destroy(dt_comm *c)
{
    nccl_impl *m = c->impl;
    if (!m)
        return;
    use_device(m); /* the frees below, on this device (no context on another) */
    if (m->comm && !m->failed) {
        /* a non-blocking communicator finalises in the background (pending work flushed, the
         * connections closed): polled against the deadline, and aborted if a peer never answers,
         * instead of ncclCommDestroy finalising it without one */
        if (settle(c, ncclCommFinalize(m->comm), "finalize", dt_seconds() + c->timeout_s) == DT_OK)
            ncclCommDestroy(m->comm);
    }
    if (m->scratch)
        cudaFree(m->scratch);
    if (m->stream)
        cudaStreamDestroy(m->stream);
    free(m);
}

/* a second communicator over the same ranks and device (ncclCommSplit, NCCL 2.18 and later), with
 * its own stream, so that two threads can each run their own sequence of collectives */
static int nccl_dup(dt_comm *c, dt_comm **out)
{
    *out = NULL;
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    nccl_impl *m = c->impl;
    dt_comm *d = calloc(1, sizeof *d);
    nccl_impl *n = calloc(1, sizeof *n);
    if (!d || !n) {
        free(d);
        free(n);
        return DT_ERR_NOMEM;
    }
    *d = *c;
    d->impl = n;
    d->n_ops = 0;
    n->device = m->device;
    int rc = DT_OK;
    if (m->failed) {
        dt_error("NCCL communicator split: an earlier operation of this communicator failed");
        rc = m->failed;
        goto fail;
    }
    DT_TRY_GOTO(use_device(n), rc, fail); /* the new stream and scratch on the communicator's device */
    DT_TRY_GOTO(stream_and_scratch(n), rc, fail);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommSplit(m->comm, 0, c->rank, &n->comm, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        dt_error("ncclCommSplit on rank %d of %d: %s", c->rank, c->size, ncclGetErrorString(r));
        rc = give_up(n, DT_ERR_NCCL);
        goto fail;
    }
    DT_TRY_GOTO(settle(d, r, "communicator split", dt_seconds() + c->timeout_s), rc, fail);
    *out = d;
    return DT_OK;
fail:
    nccl_destroy(d);
    free(d);
    return rc;
#else
    (void)c;
    dt_error("a second NCCL communicator needs NCCL 2.18 or later (ncclCommSplit); this build has %d.%d",
             NCCL_MAJOR, NCCL_MINOR);
    return DT_ERR_STATE;
#endif
}

static void nccl_abort(dt_comm *c, int code)
{
    nccl_impl *m = c->impl;
    give_up(m, DT_ERR_NCCL); /* the others' collectives fail instead of waiting */
    dt_error("rank %d failed: ending", c->rank);
    exit(code);
}

static const dt_comm_ops nccl_ops = {.name = "nccl", .bind_thread = nccl_bind, .allreduce = nccl_allreduce,
                                     .broadcast = nccl_broadcast, .allgather = nccl_allgather,
                                     .allgatherv = nccl_allgatherv, .alltoallv = nccl_alltoallv,
                                     .barrier = nccl_barrier, .dup = nccl_dup, .abort = nccl_abort,
                                     .destroy = nccl_destroy};

/* --- host buffers over NCCL ---------------------------------------------------------------------
 * For GPU ranks started without MPI (srun --mpi=pmi2): the trainer's few host collectives (start-up
 * agreement, the stop flag each step, metrics) go through a communicator of their own (a split of
 * the device one), staged through pinned host memory and a device buffer on its stream: copy in,
 * the collective, copy out, all polled against the deadline like any other NCCL operation. */
typedef struct host_impl {
    dt_comm *dev;   /* the split communicator */
    void *pinned;   /* cudaMallocHost */
    void *dbuf;     /* cudaMalloc, the same size */
    size_t cap;
} host_impl;

/* room for `bytes` in both staging buffers (grown by doubling), zeroed when made so that no
 * operation can read memory nobody wrote; the split communicator's device is current */
static int host_room(dt_comm *c, size_t bytes)
{
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    if (bytes <= h->cap)
        return DT_OK;
    size_t cap = h->cap ? h->cap : 65536;
    while (cap < bytes)
        cap *= 2;
    cudaFreeHost(h->pinned);
    cudaFree(h->dbuf);
    h->pinned = h->dbuf = NULL;
    h->cap = 0;
    DT_CHECK_CUDA(cudaMallocHost(&h->pinned, cap));
    DT_CHECK_CUDA(cudaMalloc(&h->dbuf, cap));
    memset(h->pinned, 0, cap);
    DT_CHECK_CUDA(cudaMemsetAsync(h->dbuf, 0, cap, m->stream));
    DT_CHECK_CUDA(cudaStreamSynchronize(m->stream));
    h->cap = cap;
    return DT_OK;
}

/* in (n_in bytes) to the device, the collective enqueued by op, out (n_out bytes) back */
typedef ncclResult_t (*host_call)(void *dbuf, size_t count, dt_dtype t, dt_redop op, int root, nccl_impl *m);

/* the start of every host operation: counted, refused after a failure, the device current, and
 * room for `bytes` in the staging buffers (which have the same layout: an offset in one is the
 * same offset in the other) */
static int host_begin(dt_comm *c, size_t bytes, const char *what)
{
    host_impl *h = c->impl;
    h->dev->step = c->step;
    c->n_ops++;
    DT_TRY(begin(h->dev, what));
    return host_room(c, bytes);
}

/* the collective enqueued with status r, then `bytes` at `off` of the device buffer back into the
 * pinned buffer behind it on the stream, and all of it waited for against the deadline */
static int host_end(dt_comm *c, ncclResult_t r, size_t off, size_t bytes, const char *what)
{
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    if (r == ncclSuccess || r == ncclInProgress) { /* enqueued: then the copy back, behind it on the stream */
        DT_TRY(settle(h->dev, r, what, dt_seconds() + c->timeout_s));
        r = ncclSuccess;
    }
    DT_CHECK_CUDA(cudaMemcpyAsync((char *)h->pinned + off, (char *)h->dbuf + off, bytes, cudaMemcpyDeviceToHost,
                                  m->stream));
    return finish(h->dev, r, what);
}

static int host_run(dt_comm *c, const void *in, size_t n_in, void *out, size_t n_out, host_call call, size_t count,
                    dt_dtype t, dt_redop op, int root, const char *what)
{
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    DT_TRY(host_begin(c, n_in > n_out ? n_in : n_out, what));
    memcpy(h->pinned, in, n_in);
    DT_CHECK_CUDA(cudaMemcpyAsync(h->dbuf, h->pinned, n_in, cudaMemcpyHostToDevice, m->stream));
    DT_TRY(host_end(c, call(h->dbuf, count, t, op, root, m), 0, n_out, what));
    memcpy(out, h->pinned, n_out);
    return DT_OK;
}

static ncclResult_t call_allreduce(void *d, size_t count, dt_dtype t, dt_redop op, int root, nccl_impl *m)
{
    (void)root;
    return ncclAllReduce(d, d, count, nccl_type(t), nccl_op(op), m->comm, m->stream);
}

static ncclResult_t call_broadcast(void *d, size_t count, dt_dtype t, dt_redop op, int root, nccl_impl *m)
{
    (void)op;
    return ncclBroadcast(d, d, count, nccl_type(t), root, m->comm, m->stream);
}

/* in place: each rank's part already sits at its offset of the device buffer */
static ncclResult_t call_allgather(void *d, size_t count, dt_dtype t, dt_redop op, int root, nccl_impl *m)
{
    (void)op;
    (void)root;
    size_t part = count * dt_dtype_size(t);
    int rank = 0;
    ncclCommUserRank(m->comm, &rank);
    return ncclAllGather((char *)d + (size_t)rank * part, d, count, nccl_type(t), m->comm, m->stream);
}

static int host_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    size_t n = count * dt_dtype_size(t);
    if (check_op(t, op, "allreduce (host)") != DT_OK) {
        c->n_ops++; /* counted as every refused operation is */
        return DT_ERR_STATE;
    }
    return host_run(c, send, n, recv, n, call_allreduce, count, t, op, 0, "allreduce (host)");
}

static int host_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    size_t n = count * dt_dtype_size(t);
    return host_run(c, buf, n, buf, n, call_broadcast, count, t, DT_SUM, root, "broadcast (host)");
}

static int host_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    size_t part = count * dt_dtype_size(t), all = part * (size_t)c->size;
    char *tmp = calloc(1, all); /* this rank's part at its offset, copied in with the rest */
    if (!tmp)
        return DT_ERR_NOMEM;
    memcpy(tmp + (size_t)c->rank * part, send, part);
    int rc = host_run(c, tmp, all, recv, all, call_allgather, count, t, DT_SUM, 0, "allgather (host)");
    free(tmp);
    return rc;
}

/* the elements from 0 to the end of the furthest of n parts (counts[r] elements at displs[r]) */
static size_t extent(const size_t *counts, const size_t *displs, int n)
{
    size_t end = 0;
    for (int r = 0; r < n; r++)
        if (counts[r] && displs[r] + counts[r] > end)
            end = displs[r] + counts[r];
    return end;
}

/* Staged with the device buffer laid out as recv: this rank's part copied in at its place, the
 * group exchanging the others' parts, and the whole extent copied back; only the parts, not the
 * gaps between them, are copied into recv. */
static int host_allgatherv(dt_comm *c, const void *send, size_t count, void *recv, const size_t *counts,
                           const size_t *displs, dt_dtype t)
{
    static const char what[] = "allgatherv (host)";
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    size_t es = dt_dtype_size(t), all = extent(counts, displs, c->size) * es, mine = displs[c->rank] * es;
    if (check_allgatherv(c, count, counts) != DT_OK) {
        c->n_ops++;
        return DT_ERR_STATE;
    }
    DT_TRY(host_begin(c, all, what));
    char *pin = h->pinned, *dev = h->dbuf;
    if (count) {
        memcpy(pin + mine, send, count * es);
        DT_CHECK_CUDA(cudaMemcpyAsync(dev + mine, pin + mine, count * es, cudaMemcpyHostToDevice, m->stream));
    }
    DT_TRY(host_end(c, group_allgatherv(m, c->rank, c->size, dev + mine, count, dev, counts, displs, t), 0, all, what));
    for (int r = 0; r < c->size; r++)
        if (counts[r] && (char *)recv + displs[r] * es != (const char *)send)
            memcpy((char *)recv + displs[r] * es, pin + displs[r] * es, counts[r] * es);
    return DT_OK;
}

/* Staged with the device buffer holding send's extent, then (from an aligned offset) recv's; the
 * own part is copied on the device, the rest exchanged by the group, and only the received parts
 * copied into recv. */
static int host_alltoallv(dt_comm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                          const size_t *rcounts, const size_t *rdispls, dt_dtype t)
{
    static const char what[] = "alltoallv (host)";
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    size_t es = dt_dtype_size(t), sall = extent(scounts, sdispls, c->size) * es;
    size_t roff = (sall + 255) / 256 * 256, rall = extent(rcounts, rdispls, c->size) * es;
    if (check_alltoallv(c, scounts, rcounts) != DT_OK) {
        c->n_ops++;
        return DT_ERR_STATE;
    }
    DT_TRY(host_begin(c, roff + rall, what));
    char *pin = h->pinned, *dev = h->dbuf;
    if (sall) {
        memcpy(pin, send, sall);
        DT_CHECK_CUDA(cudaMemcpyAsync(dev, pin, sall, cudaMemcpyHostToDevice, m->stream));
    }
    DT_TRY(copy_on_stream(m, dev + roff + rdispls[c->rank] * es, dev + sdispls[c->rank] * es, rcounts[c->rank] * es));
    ncclResult_t r = group_alltoallv(m, c->rank, c->size, dev, scounts, sdispls, dev + roff, rcounts, rdispls, t);
    DT_TRY(host_end(c, r, roff, rall, what));
    for (int p = 0; p < c->size; p++)
        if (rcounts[p])
            memcpy((char *)recv + rdispls[p] * es, pin + roff + rdispls[p] * es, rcounts[p] * es);
    return DT_OK;
}

static int host_barrier(dt_comm *c)
{
    host_impl *h = c->impl;
    c->n_ops++;
    return h->dev->ops->barrier(h->dev);
}

static void host_destroy(dt_comm *c)
{
    host_impl *h = c->impl;
    if (!h)
        return;
    if (h->dev)
        use_device(h->dev->impl);
    cudaFreeHost(h->pinned);
    cudaFree(h->dbuf);
    dt_comm_free(h->dev);
    free(h);
}

static void host_abort(dt_comm *c, int code)
{
    host_impl *h = c->impl;
    h->dev->ops->abort(h->dev, code);
}

static int host_dup(dt_comm *c, dt_comm **out)
{
    return dt_comm_nccl_host(out, ((host_impl *)c->impl)->dev);
}

static int host_bind(dt_comm *c)
{
    host_impl *h = c->impl;
    return h->dev->ops->bind_thread(h->dev);
}

static const dt_comm_ops host_ops = {.name = "nccl (host buffers)", .bind_thread = host_bind,
                                     .allreduce = host_allreduce, .broadcast = host_broadcast,
                                     .allgather = host_allgather, .allgatherv = host_allgatherv,
                                     .alltoallv = host_alltoallv, .barrier = host_barrier, .dup = host_dup,
                                     .abort = host_abort, .destroy = host_destroy};

int dt_comm_nccl_host(dt_comm **out, dt_comm *dev)
{
    *out = NULL;
    dt_comm *c = calloc(1, sizeof *c);
    host_impl *h = calloc(1, sizeof *h);
    if (!c || !h) {
        free(c);
        free(h);
        return DT_ERR_NOMEM;
    }
    *c = *dev;
    c->ops = &host_ops;
    c->impl = h;
    c->n_ops = 0;
    int rc = dev->ops->dup(dev, &h->dev);
    if (rc == DT_OK)
        rc = host_room(c, 65536);
    if (rc != DT_OK) {
        host_destroy(c);
        free(c);
        return rc;
    }
    *out = c;
    return DT_OK;
}

/* the id through a file: rank 0 writes dir/.dtrain-nccl-<job> atomically, the others wait for it */
static int id_by_file(const dt_launch *l, ncclUniqueId *id, double timeout_s)
{
    const char *dir = getenv("DT_RUN_DIR") ? getenv("DT_RUN_DIR") : ".";
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/.dtrain-nccl-%s", dir, l->jobid[0] ? l->jobid : "0");
    if (l->rank == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            dt_error("cannot write the NCCL id to %s: %s (the run directory must be shared by all nodes)", path,
                     strerror(errno));
            return DT_ERR_SYS;
        }
        return DT_OK;
    }
    double start = dt_seconds();
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            int ok = fread(id, sizeof *id, 1, f) == 1;
            fclose(f);
            if (ok)
                return DT_OK;
        }
        if (dt_seconds() - start > timeout_s) {
            dt_error("rank %d: no NCCL id from rank 0 at %s after %.0f s (is the directory shared by all nodes? "
                     "srun --mpi=pmi2 avoids the file)",
                     l->rank, path, timeout_s);
            return DT_ERR_TIMEOUT;
        }
        usleep(50000);
    }
}

static int hex_id(const char *s, ncclUniqueId *id)
{
    unsigned char *b = (unsigned char *)id;
    if (strlen(s) != 2 * sizeof *id)
        return -1;
    for (size_t i = 0; i < sizeof *id; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        b[i] = (unsigned char)v;
    }
    return 0;
}

#ifdef HAVE_MPI
/* the id by broadcast from rank 0, waited for against the deadline like any collective: a rank 0
 * that died or stalls before making the communicator ends the job with a line, instead of every
 * other rank waiting in MPI_Bcast forever */
static int id_by_mpi(ncclUniqueId *id, double timeout_s)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD, &req));
    double start = dt_seconds();
    for (;;) {
        int done = 0;
        DT_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done)
            return DT_OK;
        if (dt_seconds() - start > timeout_s) {
            dt_error("no NCCL id from rank 0 within %.0f s (rank 0 died or stalls before making the NCCL "
                     "communicator; --comm-timeout sets the limit): ending the job",
                     timeout_s);
            MPI_Abort(MPI_COMM_WORLD, 1); /* the broadcast stays pending: MPI_Finalize would wait for it */
            return DT_ERR_TIMEOUT;
        }
        dt_poll_pause(start);
    }
}
#endif

/* rank 0's id on every rank, by whatever the launch offers */
static int share_id(const dt_launch *l, ncclUniqueId *id, double timeout_s)
{
    if (l->rank == 0 && l->kind != DT_LAUNCH_LOCAL)
        DT_CHECK_NCCL(ncclGetUniqueId(id));
    switch (l->kind) {
    case DT_LAUNCH_SINGLE: return DT_OK;
    case DT_LAUNCH_PMI2: return dt_pmi2_bcast_bytes(l, "dtrain-nccl-id", id, (int)sizeof *id, 0);
    case DT_LAUNCH_MPI:
#ifdef HAVE_MPI
        return id_by_mpi(id, timeout_s);
#else
        return DT_ERR_STATE;
#endif
    case DT_LAUNCH_LOCAL: {
        const char *s = getenv("DT_NCCL_ID");
        if (!s || hex_id(s, id) != 0) {
            dt_error("DT_NCCL_ID is missing or malformed: a worker of dtrain --nproc-per-node gets it from its parent");
            return DT_ERR_INPUT;
        }
        return DT_OK;
    }
    case DT_LAUNCH_SLURM_ENV: return id_by_file(l, id, timeout_s);
    case DT_LAUNCH_TORCHRUN: /* the rendezvous at MASTER_ADDR that dt_launch_init opened */
        if (!l->rdzv) {
            dt_error("torchrun launch of %d ranks without its rendezvous", l->size);
            return DT_ERR_STATE;
        }
        return dt_rdzv_bcast(l->rdzv, id, sizeof *id, timeout_s);
    }
    return DT_ERR_STATE;
}

int dt_comm_nccl(dt_comm **out, const dt_launch *l, int device, double timeout_s)
{
    *out = NULL;
    dt_comm *c = calloc(1, sizeof *c);
    nccl_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return DT_ERR_NOMEM;
    }
    c->ops = &nccl_ops;
    c->impl = m;
    c->rank = l->rank;
    c->size = l->size;
    c->timeout_s = timeout_s > 0 ? timeout_s : 600;
    m->device = device;
    int rc = DT_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    /* the device first: the stream, the scratch and NCCL's own resources (ncclCommInitRank takes the
     * current device) all on it; it stays current on this thread (bound) */
    DT_CHECK_CUDA_GOTO(cudaSetDevice(device), rc, fail);
    DT_TRY_GOTO(stream_and_scratch(m), rc, fail);
    DT_TRY_GOTO(share_id(l, &id, c->timeout_s), rc, fail);
    DT_TRY_GOTO(use_device(m), rc, fail); /* still current after the exchange (PMI2, MPI, a file) */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&m->comm, l->size, id, l->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        dt_error("ncclCommInitRankConfig on rank %d of %d: %s", l->rank, l->size, ncclGetErrorString(r));
        rc = give_up(m, DT_ERR_NCCL); /* a handle made before the failure is freed by abort */
        goto fail;
    }
    DT_TRY_GOTO(settle(c, r, "communicator initialisation", dt_seconds() + c->timeout_s), rc, fail);
    *out = c;
    return DT_OK;
fail:
    nccl_destroy(c);
    free(c);
    return rc;
}

void *dt_comm_nccl_stream(dt_comm *c)
{
    return c && c->ops == &nccl_ops ? (void *)((nccl_impl *)c->impl)->stream : NULL;
}
