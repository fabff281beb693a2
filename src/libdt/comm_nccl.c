/* comm_nccl.c: the NCCL communicator (comm.h) for device buffers (CUDA builds).
 *
 * The unique id comes from rank 0: through the PMI2 key-value store under srun with PMI2, by
 * MPI_Bcast under MPI, from DT_NCCL_ID (hex, set by the dtrain --nproc-per-node parent) for forked
 * workers, and through a file in the run directory under srun without PMI (rank 0 writes it under
 * a temporary name and renames it; the others wait for it, scoped to the job and step).
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): initialisation and every
 * collective are polled (ncclCommGetAsyncError, cudaStreamQuery) against the deadline, and a
 * timeout aborts the communicator (ncclCommAbort) instead of hanging in the kernel forever. */
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
#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int *scratch; /* one device int for barriers */
    int aborted;
} nccl_impl;

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
    default: return ncclFloat32;
    }
}

static ncclRedOp_t nccl_op(dt_redop op)
{
    return op == DT_AVG ? ncclAvg : op == DT_MAX ? ncclMax : op == DT_MIN ? ncclMin : ncclSum;
}

/* waits for the communicator's pending call (ncclInProgress) to settle */
static int settle(dt_comm *c, ncclResult_t r, const char *what, double deadline)
{
    nccl_impl *m = c->impl;
    double start = dt_seconds();
    ncclResult_t st = r;
    while (st == ncclInProgress) {
        if (dt_seconds() > deadline)
            break;
        dt_poll_pause(start);
        if (ncclCommGetAsyncError(m->comm, &st) != ncclSuccess)
            break;
    }
    if (st == ncclSuccess)
        return DT_OK;
    dt_error("NCCL %s (operation %llu, step %lld): %s", what, (unsigned long long)c->n_ops, (long long)c->step,
             st == ncclInProgress ? "did not complete within the timeout" : ncclGetErrorString(st));
    ncclCommAbort(m->comm);
    m->aborted = 1;
    return st == ncclInProgress ? DT_ERR_TIMEOUT : DT_ERR_NCCL;
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
        if (e != cudaErrorNotReady || (st != ncclSuccess && st != ncclInProgress) || dt_seconds() > deadline) {
            dt_error("NCCL %s (operation %llu, step %lld) %s: %s; another rank may have died or stalls", what,
                     (unsigned long long)c->n_ops, (long long)c->step,
                     dt_seconds() > deadline ? "did not complete within the timeout" : "failed",
                     e != cudaErrorNotReady ? cudaGetErrorString(e) : ncclGetErrorString(st));
            ncclCommAbort(m->comm);
            m->aborted = 1;
            return dt_seconds() > deadline ? DT_ERR_TIMEOUT : DT_ERR_NCCL;
        }
        dt_poll_pause(start);
    }
}

static int nccl_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    nccl_impl *m = c->impl;
    c->n_ops++;
    return finish(c, ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), m->comm, m->stream), "allreduce");
}

static int nccl_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    nccl_impl *m = c->impl;
    c->n_ops++;
    return finish(c, ncclBroadcast(buf, buf, count, nccl_type(t), root, m->comm, m->stream), "broadcast");
}

static int nccl_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    nccl_impl *m = c->impl;
    c->n_ops++;
    return finish(c, ncclAllGather(send, recv, count, nccl_type(t), m->comm, m->stream), "allgather");
}

static int nccl_barrier(dt_comm *c)
{
    nccl_impl *m = c->impl;
    c->n_ops++;
    return finish(c, ncclAllReduce(m->scratch, m->scratch, 1, ncclInt32, ncclSum, m->comm, m->stream), "barrier");
}

static void nccl_destroy(dt_comm *c)
{
    nccl_impl *m = c->impl;
    if (!m)
        return;
    if (m->comm && !m->aborted)
        ncclCommDestroy(m->comm);
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
    int rc = DT_OK;
    DT_CHECK_CUDA_GOTO(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaMalloc((void **)&n->scratch, sizeof(int)), rc, fail);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommSplit(m->comm, 0, c->rank, &n->comm, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        dt_error("ncclCommSplit on rank %d of %d: %s", c->rank, c->size, ncclGetErrorString(r));
        rc = DT_ERR_NCCL;
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
    if (m->comm && !m->aborted) { /* the others' collectives fail instead of waiting */
        ncclCommAbort(m->comm);
        m->aborted = 1;
    }
    dt_error("rank %d failed: ending", c->rank);
    exit(code);
}

static const dt_comm_ops nccl_ops = {"nccl", nccl_allreduce, nccl_broadcast, nccl_allgather, nccl_barrier, nccl_dup,
                                     nccl_abort, nccl_destroy};

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

static int host_room(dt_comm *c, size_t bytes)
{
    host_impl *h = c->impl;
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
    h->cap = cap;
    return DT_OK;
}

/* in (n_in bytes) to the device, the collective enqueued by op, out (n_out bytes) back */
typedef ncclResult_t (*host_call)(void *dbuf, size_t count, dt_dtype t, dt_redop op, int root, nccl_impl *m);

static int host_run(dt_comm *c, const void *in, size_t n_in, void *out, size_t n_out, host_call call, size_t count,
                    dt_dtype t, dt_redop op, int root, const char *what)
{
    host_impl *h = c->impl;
    nccl_impl *m = h->dev->impl;
    DT_TRY(host_room(c, n_in > n_out ? n_in : n_out));
    memcpy(h->pinned, in, n_in);
    DT_CHECK_CUDA(cudaMemcpyAsync(h->dbuf, h->pinned, n_in, cudaMemcpyHostToDevice, m->stream));
    h->dev->step = c->step;
    h->dev->n_ops++;
    c->n_ops++;
    ncclResult_t r = call(h->dbuf, count, t, op, root, m);
    if (r == ncclSuccess || r == ncclInProgress) { /* enqueued: then the copy back, behind it on the stream */
        DT_TRY(settle(h->dev, r, what, dt_seconds() + c->timeout_s));
        r = ncclSuccess;
    }
    DT_CHECK_CUDA(cudaMemcpyAsync(h->pinned, h->dbuf, n_out, cudaMemcpyDeviceToHost, m->stream));
    DT_TRY(finish(h->dev, r, what));
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

static const dt_comm_ops host_ops = {"nccl (host buffers)", host_allreduce, host_broadcast, host_allgather,
                                     host_barrier, host_dup, host_abort, host_destroy};

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
        DT_CHECK_MPI(MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD));
        return DT_OK;
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
    int rc = DT_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    DT_CHECK_CUDA_GOTO(cudaSetDevice(device), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), rc, fail);
    DT_CHECK_CUDA_GOTO(cudaMalloc((void **)&m->scratch, sizeof(int)), rc, fail);
    DT_TRY_GOTO(share_id(l, &id, c->timeout_s), rc, fail);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&m->comm, l->size, id, l->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        dt_error("ncclCommInitRankConfig on rank %d of %d: %s", l->rank, l->size, ncclGetErrorString(r));
        rc = DT_ERR_NCCL;
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
