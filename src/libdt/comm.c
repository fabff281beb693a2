/* comm.c: the communicator interface's common parts and the one-rank communicator (comm.h). */
#include "config.h"

#include "libdt/comm.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

size_t dt_dtype_size(dt_dtype t)
{
    switch (t) {
    case DT_FLOAT16:
    case DT_BFLOAT16: return 2;
    case DT_FLOAT64:
    case DT_INT64: return 8;
    case DT_UINT8:
    case DT_INT8: return 1;
    default: return 4;
    }
}

const char *dt_dtype_name(dt_dtype t)
{
    static const char *const n[] = {"float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8"};
    return (unsigned)t < sizeof n / sizeof *n ? n[t] : "?";
}

void dt_comm_startup(dt_comm *c, double seconds)
{
    c->startup = seconds > 0;
    c->startup_left = seconds > 0 ? seconds : 0;
    if (c->startup)
        c->step = DT_COMM_STARTUP;
}

double dt_comm_wait_limit(dt_comm *c)
{
    if (c->startup && c->step != DT_COMM_STARTUP) /* the caller is at a step: training began */
        c->startup = 0;
    if (!c->startup)
        return c->timeout_s;
    return c->startup_left < c->timeout_s ? c->startup_left : c->timeout_s;
}

void dt_comm_waited(dt_comm *c, double seconds)
{
    if (c->startup)
        c->startup_left = c->startup_left > seconds ? c->startup_left - seconds : 0;
}

int dt_comm_bind_nothing(dt_comm *c)
{
    (void)c;
    return DT_OK;
}

/* ---- one rank ---------------------------------------------------------------------------------- */

static int self_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    c->n_ops++;
    /* refused here too, so that a program tested on one rank fails the same way on many */
    if (op == DT_AVG && (t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 || t == DT_INT8)) {
        dt_error("allreduce: an average of %s is not defined", dt_dtype_name(t));
        return DT_ERR_STATE;
    }
    if (send != recv)
        memcpy(recv, send, count * dt_dtype_size(t));
    return DT_OK;
}

static int self_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    (void)buf;
    (void)count;
    (void)t;
    c->n_ops++;
    if (root != 0) {
        dt_error("broadcast from rank %d in a world of 1", root);
        return DT_ERR_STATE;
    }
    return DT_OK;
}

static int self_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    c->n_ops++;
    if (send != recv)
        memcpy(recv, send, count * dt_dtype_size(t));
    return DT_OK;
}

static int self_allgatherv(dt_comm *c, const void *send, size_t count, void *recv, const size_t *counts,
                          const size_t *displs, dt_dtype t)
{
    c->n_ops++;
    if (counts[0] != count) {
        dt_error("allgatherv: %zu elements sent but %zu expected from rank 0", count, counts[0]);
        return DT_ERR_STATE;
    }
    char *dst = (char *)recv + displs[0] * dt_dtype_size(t);
    if (count && send != dst)
        memmove(dst, send, count * dt_dtype_size(t));
    return DT_OK;
}

static int self_alltoallv(dt_comm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                          const size_t *rcounts, const size_t *rdispls, dt_dtype t)
{
    c->n_ops++;
    if (scounts[0] != rcounts[0]) {
        dt_error("alltoallv: %zu elements sent to rank 0 but %zu expected from it", scounts[0], rcounts[0]);
        return DT_ERR_STATE;
    }
    size_t size = dt_dtype_size(t);
    const char *src = (const char *)send + sdispls[0] * size;
    char *dst = (char *)recv + rdispls[0] * size;
    if (scounts[0] && src != dst)
        memmove(dst, src, scounts[0] * size);
    return DT_OK;
}

static int self_barrier(dt_comm *c)
{
    c->n_ops++;
    return DT_OK;
}

static void self_destroy(dt_comm *c)
{
    (void)c;
}

static int self_dup(dt_comm *c, dt_comm **out)
{
    (void)c;
    return dt_comm_self(out);
}

static void self_abort(dt_comm *c, int code)
{
    (void)c;
    (void)code;
}

static const dt_comm_ops self_ops = {.name = "self", .bind_thread = dt_comm_bind_nothing, .allreduce = self_allreduce,
                                     .broadcast = self_broadcast, .allgather = self_allgather,
                                     .allgatherv = self_allgatherv, .alltoallv = self_alltoallv,
                                     .barrier = self_barrier, .dup = self_dup, .abort = self_abort, .destroy = self_destroy};

int dt_comm_self(dt_comm **out)
{
    dt_comm *c = calloc(1, sizeof *c);
    if (!c)
        return DT_ERR_NOMEM;
    c->ops = &self_ops;
    c->size = 1;
    *out = c;
    return DT_OK;
}

int dt_comm_host(dt_comm **c, const dt_launch *l, double timeout_s)
{
    *c = NULL;
    if (l->size == 1)
        return dt_comm_self(c);
    if (l->kind == DT_LAUNCH_MPI)
        return dt_comm_mpi(c, timeout_s);
    if (l->kind == DT_LAUNCH_TORCHRUN) { /* every rank says it, and none trains alone */
        dt_error("%d CPU ranks started by torchrun: dtrain reduces CPU ranks' gradients through MPI, which torchrun "
                 "does not start; run mpirun -np %d dtrain ... (one node) or srun --mpi=pmix dtrain ... (Slurm); "
                 "torchrun starts GPU ranks (--device cuda)",
                 l->size, l->size);
        return DT_ERR_STATE;
    }
    dt_error("%d ranks started by %s have no way to reduce host buffers: for CPU training start under MPI "
             "(srun --mpi=pmix, or mpirun)",
             l->size, dt_launch_kind_name(l->kind));
    return DT_ERR_STATE;
}

int dt_comm_connect(const dt_launch *l, int device, double timeout_s, dt_comm **host, dt_comm **dev)
{
    *host = *dev = NULL;
    if (device < 0 || l->size == 1 || l->kind == DT_LAUNCH_MPI)
        return dt_comm_host(host, l, timeout_s);
    int rc = dt_comm_nccl(dev, l, device, timeout_s);
    if (rc == DT_OK)
        rc = dt_comm_nccl_host(host, *dev);
    if (rc != DT_OK) {
        dt_comm_free(*dev);
        *dev = NULL;
    }
    return rc;
}

void dt_comm_free(dt_comm *c)
{
    if (!c)
        return;
    c->ops->destroy(c);
    free(c);
}

#ifndef HAVE_CUDA
int dt_gpu_count(void)
{
    return 0;
}

int dt_comm_nccl(dt_comm **c, const dt_launch *l, int device, double timeout_s)
{
    (void)l;
    (void)device;
    (void)timeout_s;
    *c = NULL;
    dt_error("NCCL communicator: this dtrain was built without CUDA (configure --with-cuda)");
    return DT_ERR_STATE;
}

int dt_comm_nccl_host(dt_comm **c, dt_comm *dev)
{
    (void)dev;
    *c = NULL;
    dt_error("NCCL communicator: this dtrain was built without CUDA (configure --with-cuda)");
    return DT_ERR_STATE;
}
#endif

#ifndef HAVE_MPI
int dt_comm_mpi(dt_comm **c, double timeout_s)
{
    (void)timeout_s;
    *c = NULL;
    dt_error("this dtrain was built without MPI (configure --with-mpi)");
    return DT_ERR_STATE;
}
#endif
