/* comm_mpi.c: the MPI communicator (comm.h). Collectives are MPI's non-blocking ones, tested in a
 * loop against the communicator's deadline: a rank that died or stalls turns into a timeout with
 * one line (the operation, its size, the step, the ranks that did not arrive), never a hang. In the
 * start-up phase (dt_comm_startup) the deadline is what is left of the start-up's budget, and the
 * asking who is missing fits inside it. A timeout leaves a collective pending, which no MPI call can
 * cancel: every later operation fails at once without a line, and freeing the communicator ends
 * the job (MPI_Abort with exit code 1, a failure at run time: never 3, which says "stopped with a
 * checkpoint") instead of waiting in MPI_Finalize forever. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libdt/comm.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/half.h"
#include "util/log.h"

typedef struct mpi_impl {
    MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD: its own sequence of collectives */
    float *tmp; /* fp16/bf16 reductions in fp32 */
    size_t tmp_n;
    int *iv; /* 4 * size ints: the MPI counts and displacements of allgatherv and alltoallv, kept here
              * because MPI may read them until the operation completes (after a timeout: never) */
    int failed; /* a timeout left a collective pending: its status */
    int other_said; /* the timeout was said by a lower rank (this one logged it at debug level) */
} mpi_impl;

static MPI_Datatype mpi_type(dt_dtype t)
{
    switch (t) {
    case DT_FLOAT64: return MPI_DOUBLE;
    case DT_INT32: return MPI_INT32_T;
    case DT_INT64: return MPI_INT64_T;
    case DT_UINT8: return MPI_UINT8_T;
    case DT_INT8: return MPI_INT8_T;
    default: return MPI_FLOAT; /* fp16 and bf16 too: reduced in fp32 */
    }
}

/* an MPI type of t's width, for operations that only move elements (fp16 and bf16 have no MPI type);
 * counts in elements reach further than counts in bytes */
static MPI_Datatype mpi_move_type(dt_dtype t)
{
    switch (dt_dtype_size(t)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 8: return MPI_UINT64_T;
    default: return MPI_UINT32_T;
    }
}

static MPI_Op mpi_op(dt_redop op)
{
    switch (op) {
    case DT_MAX: return MPI_MAX;
    case DT_MIN: return MPI_MIN;
    case DT_PRODUCT: return MPI_PROD;
    default: return MPI_SUM; /* DT_AVG: the sum, divided afterwards */
    }
}

/* how long the ranks that timed out listen for each other */
static double grace_of(const dt_comm *c)
{
    return c->timeout_s < 10 ? c->timeout_s / 2 + 0.5 : 5;
}

/* After a timeout: which ranks reached this operation? Every rank that timed out sends its
 * operation number to all others (point to point, a tag of its own) and listens for `grace`
 * seconds; the ranks it hears nothing from died or stall elsewhere. Returns the description in buf,
 * and the lowest rank heard from (this rank, or one below it that reports too). */
static int who_is_missing(dt_comm *c, double grace, char *buf, size_t n)
{
    enum { TAG = 31337 };
    int lowest = c->rank;
    unsigned long long me = c->n_ops, *seen = calloc((size_t)c->size, sizeof *seen);
    char *heard = calloc((size_t)c->size, 1);
    MPI_Request *sends = calloc((size_t)c->size, sizeof *sends);
    if (!seen || !heard || !sends) {
        snprintf(buf, n, "(no memory to ask the other ranks)");
        goto out;
    }
    for (int r = 0; r < c->size; r++)
        if (r != c->rank)
            MPI_Isend(&me, 1, MPI_UNSIGNED_LONG_LONG, r, TAG, ((mpi_impl *)c->impl)->comm, &sends[r]);
    heard[c->rank] = 1;
    int got = 1;
    double end = dt_seconds() + grace;
    while (got < c->size && dt_seconds() < end) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG, ((mpi_impl *)c->impl)->comm, &flag, &st);
        if (!flag) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        unsigned long long op;
        MPI_Recv(&op, 1, MPI_UNSIGNED_LONG_LONG, st.MPI_SOURCE, TAG, ((mpi_impl *)c->impl)->comm, MPI_STATUS_IGNORE);
        if (!heard[st.MPI_SOURCE])
            got++;
        heard[st.MPI_SOURCE] = 1;
        seen[st.MPI_SOURCE] = op;
        if (st.MPI_SOURCE < lowest)
            lowest = st.MPI_SOURCE;
    }
    size_t k = (size_t)snprintf(buf, n, "rank%s", c->size - got > 1 ? "s" : "");
    int listed = 0;
    for (int r = 0; r < c->size && k < n; r++)
        if (!heard[r]) {
            k += (size_t)snprintf(buf + k, n - k, "%s %d", listed ? "," : "", r);
            listed++;
        }
    if (k < n)
        snprintf(buf + k, n - k, "%s", listed ? " did not arrive" : " none missing: every rank waits here too");
    for (int r = 0; r < c->size; r++) /* a rank at another operation is worth saying too */
        if (heard[r] && r != c->rank && seen[r] != me && strlen(buf) + 48 < n) {
            snprintf(buf + strlen(buf), n - strlen(buf), "; rank %d is at operation %llu", r, seen[r]);
            break;
        }
    for (int r = 0; r < c->size; r++) /* the sends to dead ranks never complete: let MPI drop them */
        if (r != c->rank)
            MPI_Request_free(&sends[r]);
out:
    free(seen);
    free(heard);
    free(sends);
    return lowest;
}

/* An operation on a communicator whose earlier one timed out or failed: that one was said, and a
 * collective is still pending, so this one fails at once (the caller is on its way out). */
static int refuse_after_failure(dt_comm *c, const char *what)
{
    dt_debug("%s (operation %llu): not started, an earlier operation of this communicator failed", what,
             (unsigned long long)c->n_ops);
    return ((mpi_impl *)c->impl)->failed;
}

/* Tests req until it completes or the deadline passes. Spins briefly (small collectives finish in
 * microseconds), then sleeps between tests so that a waiting thread leaves the cores to compute.
 * Of the ranks that time out together, the lowest says it (the others at debug level): one line. */
static int wait_deadline(dt_comm *c, MPI_Request *req, const char *what, size_t count, dt_dtype t)
{
    double limit = dt_comm_wait_limit(c), ask = grace_of(c);
    int startup = c->startup;
    if (startup) { /* one deadline for the whole start-up: asking who is missing fits inside it */
        double budget = limit;
        ask = ask < budget ? ask : budget;
        ask = ask > 0.5 ? ask : 0.5;
        limit = budget > ask ? budget - ask : 0;
    }
    double start = dt_seconds(), deadline = start + limit;
    char desc[96];
    if (count)
        snprintf(desc, sizeof desc, "%s of %zu %s", what, count, dt_dtype_name(t));
    else
        snprintf(desc, sizeof desc, "%s", what);
    for (long i = 0;; i++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            dt_error("%s (operation %llu, step %lld) failed: %s", desc, (unsigned long long)c->n_ops,
                     (long long)c->step, dt_errstr_mpi(rc, 0));
            ((mpi_impl *)c->impl)->failed = DT_ERR_MPI;
            return DT_ERR_MPI;
        }
        if (done) {
            dt_comm_waited(c, dt_seconds() - start);
            return DT_OK;
        }
        if (i > 200) {
            double t_now = dt_seconds();
            if (t_now > deadline) {
                char missing[256];
                int lowest = who_is_missing(c, ask, missing, sizeof missing);
                dt_comm_waited(c, dt_seconds() - start);
                enum dt_log_level lv = lowest == c->rank ? DT_LOG_ERROR : DT_LOG_DEBUG;
                ((mpi_impl *)c->impl)->other_said = lowest != c->rank;
                if (startup)
                    dt_log(lv, "start-up did not complete within %.0f s: %s (%s, operation %llu; --comm-timeout "
                           "sets the limit)", c->timeout_s, missing, desc, (unsigned long long)c->n_ops);
                else
                    dt_log(lv, "%s (operation %llu, step %lld) did not complete within %.0f s: %s (--comm-timeout "
                           "sets the limit)", desc, (unsigned long long)c->n_ops, (long long)c->step, c->timeout_s,
                           missing);
                ((mpi_impl *)c->impl)->failed = DT_ERR_TIMEOUT;
                return DT_ERR_TIMEOUT;
            }
            dt_poll_pause(start);
        }
    }
}

#define ALLREDUCE_PIECE ((size_t)2 << 20)

static int mpi_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "allreduce");
    if (count > (size_t)INT32_MAX) {
        dt_error("allreduce of %zu elements: MPI takes at most %d per call", count, INT32_MAX);
        return DT_ERR_STATE;
    }
    if (op == DT_AVG && (t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 || t == DT_INT8)) {
        dt_error("allreduce: an average of %s is not defined", dt_dtype_name(t));
        return DT_ERR_STATE;
    }
    int half = t == DT_FLOAT16 || t == DT_BFLOAT16;
    const void *s = send == recv ? MPI_IN_PLACE : send;
    void *r = recv;
    if (half) { /* reduce in fp32 */
        if (count > m->tmp_n) { /* exactly count, not dt_grow's doubling: it can be the whole gradient */
            float *q = realloc(m->tmp, count * sizeof(float));
            if (!q)
                return DT_ERR_NOMEM;
            m->tmp = q;
            m->tmp_n = count;
        }
        const uint16_t *h = send;
        for (size_t i = 0; i < count; i++)
            m->tmp[i] = t == DT_FLOAT16 ? dt_f16_to_f32(h[i]) : dt_bf16_to_f32(h[i]);
        s = MPI_IN_PLACE;
        r = m->tmp;
    }
    /* in pieces of ALLREDUCE_PIECE bytes: Open MPI's non-blocking all-reduce of one large buffer runs at
     * about half the speed of its blocking one (64 MiB on 2 ranks: 90 ms against 50), pieces of a few
     * MiB at the blocking one's speed or better (20-50 ms), with the deadline kept. Elementwise, so
     * the result is the same; only the reduction's grouping of ranks may follow the piece's size. */
    size_t es = half ? sizeof(float) : dt_dtype_size(t), piece = ALLREDUCE_PIECE / es;
    for (size_t off = 0; off < count || off == 0; off += piece) {
        size_t k = count - off < piece ? count - off : piece;
        MPI_Request req;
        void *ro = (char *)r + off * es;
        const void *so = s == MPI_IN_PLACE ? MPI_IN_PLACE : (const char *)s + off * es;
        DT_CHECK_MPI(MPI_Iallreduce(so, ro, (int)k, mpi_type(t), mpi_op(op), m->comm, &req));
        DT_TRY(wait_deadline(c, &req, "allreduce", count, t));
        if (!count)
            break;
    }
    if (op == DT_AVG && !half) {
        if (t == DT_FLOAT64)
            for (size_t i = 0; i < count; i++)
                ((double *)recv)[i] /= c->size;
        else
            for (size_t i = 0; i < count; i++)
                ((float *)recv)[i] /= (float)c->size;
    }
    if (half) {
        uint16_t *h = recv;
        float scale = op == DT_AVG ? 1.0f / (float)c->size : 1.0f;
        for (size_t i = 0; i < count; i++)
            h[i] = t == DT_FLOAT16 ? dt_f32_to_f16(m->tmp[i] * scale) : dt_f32_to_bf16(m->tmp[i] * scale);
    }
    return DT_OK;
}

static int mpi_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "broadcast");
    size_t bytes = count * dt_dtype_size(t);
    if (bytes > (size_t)INT32_MAX || root < 0 || root >= c->size) {
        dt_error("broadcast of %zu bytes from rank %d of %d: too large or no such rank", bytes, root, c->size);
        return DT_ERR_STATE;
    }
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, m->comm, &req));
    return wait_deadline(c, &req, "broadcast", count, t);
}

static int mpi_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "allgather");
    size_t bytes = count * dt_dtype_size(t);
    if (bytes > (size_t)INT32_MAX) {
        dt_error("allgather of %zu bytes per rank: too large for one MPI call", bytes);
        return DT_ERR_STATE;
    }
    const void *s = send;
    if ((const char *)send == (const char *)recv + (size_t)c->rank * bytes)
        s = MPI_IN_PLACE;
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallgather(s, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->comm, &req));
    return wait_deadline(c, &req, "allgather", count, t);
}

/* n size_t values (elements) as MPI's int counts in out; DT_ERR_STATE after one line naming the
 * operation and the rank when one is too large for MPI */
static int mpi_counts(const char *what, const char *name, const size_t *in, int *out, int n)
{
    for (int r = 0; r < n; r++) {
        if (in[r] > (size_t)INT32_MAX) {
            dt_error("%s: %s %zu (rank %d) is more elements than MPI takes (%d)", what, name, in[r], r, INT32_MAX);
            return DT_ERR_STATE;
        }
        out[r] = (int)in[r];
    }
    return DT_OK;
}

static int mpi_allgatherv(dt_comm *c, const void *send, size_t count, void *recv, const size_t *counts,
                          const size_t *displs, dt_dtype t)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "allgatherv");
    if (counts[c->rank] != count) {
        dt_error("allgatherv: rank %d sends %zu elements but the counts say %zu", c->rank, count, counts[c->rank]);
        return DT_ERR_STATE;
    }
    int *n = m->iv, *d = m->iv + c->size;
    DT_TRY(mpi_counts("allgatherv", "count", counts, n, c->size));
    DT_TRY(mpi_counts("allgatherv", "displacement", displs, d, c->size));
    const void *s = send;
    if ((const char *)send == (const char *)recv + displs[c->rank] * dt_dtype_size(t))
        s = MPI_IN_PLACE;
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallgatherv(s, (int)count, mpi_move_type(t), recv, n, d, mpi_move_type(t), m->comm, &req));
    return wait_deadline(c, &req, "allgatherv", count, t);
}

static int mpi_alltoallv(dt_comm *c, const void *send, const size_t *scounts, const size_t *sdispls, void *recv,
                         const size_t *rcounts, const size_t *rdispls, dt_dtype t)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "alltoallv");
    int *sn = m->iv, *sd = m->iv + c->size, *rn = m->iv + 2 * c->size, *rd = m->iv + 3 * c->size;
    DT_TRY(mpi_counts("alltoallv", "send count", scounts, sn, c->size));
    DT_TRY(mpi_counts("alltoallv", "send displacement", sdispls, sd, c->size));
    DT_TRY(mpi_counts("alltoallv", "receive count", rcounts, rn, c->size));
    DT_TRY(mpi_counts("alltoallv", "receive displacement", rdispls, rd, c->size));
    size_t total = 0; /* for the message: what this rank sends */
    for (int r = 0; r < c->size; r++)
        total += scounts[r];
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ialltoallv(send, sn, sd, mpi_move_type(t), recv, rn, rd, mpi_move_type(t), m->comm, &req));
    return wait_deadline(c, &req, "alltoallv", total, t);
}

static int mpi_barrier(dt_comm *c)
{
    mpi_impl *m = c->impl;
    c->n_ops++;
    if (m->failed)
        return refuse_after_failure(c, "barrier");
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibarrier(m->comm, &req));
    return wait_deadline(c, &req, "barrier", 0, DT_UINT8);
}

/* A collective is still pending: MPI_Finalize would wait for it forever, so the job ends here, with
 * exit code 1 (a failure at run time; mpirun exits with MPI_Abort's code). A rank whose timeout a
 * lower rank says first gives it a second to be written: MPI_Abort ends every rank at once, and on a
 * loaded machine the line naming the missing rank was lost that way. */
static void abort_pending(int rank, int other_said)
{
    dt_error("rank %d: a collective did not complete: ending every rank of the job", rank);
    if (other_said) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void mpi_destroy(dt_comm *c)
{
    mpi_impl *m = c->impl;
    if (m->failed)
        abort_pending(c->rank, m->other_said);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m->tmp);
    free(m->iv);
    free(m);
}

static int mpi_dup(dt_comm *c, dt_comm **out)
{
    return dt_comm_mpi(out, c->timeout_s);
}

static void mpi_abort(dt_comm *c, int code)
{
    dt_error("rank %d failed: ending every rank of the job", c->rank);
    MPI_Abort(MPI_COMM_WORLD, code);
}

/* a new thread needs nothing of MPI (launch.c initialises it for threads) */
static const dt_comm_ops mpi_ops = {.name = "mpi", .bind_thread = dt_comm_bind_nothing, .allreduce = mpi_allreduce,
                                    .broadcast = mpi_broadcast, .allgather = mpi_allgather,
                                    .allgatherv = mpi_allgatherv, .alltoallv = mpi_alltoallv, .barrier = mpi_barrier,
                                    .dup = mpi_dup, .abort = mpi_abort, .destroy = mpi_destroy};

int dt_comm_mpi(dt_comm **out, double timeout_s)
{
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        dt_error("MPI communicator asked for before MPI was initialised (not started by mpirun or srun --mpi=pmix?)");
        return DT_ERR_STATE;
    }
    dt_comm *c = calloc(1, sizeof *c);
    mpi_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return DT_ERR_NOMEM;
    }
    c->ops = &mpi_ops;
    c->impl = m;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* a dead peer is an error to report, not an abort */
    c->timeout_s = timeout_s > 0 ? timeout_s : 600;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    m->iv = malloc(4 * (size_t)c->size * sizeof *m->iv);
    if (!m->iv) {
        free(c);
        free(m);
        return DT_ERR_NOMEM;
    }
    /* the duplicate is a collective too: waited for against the deadline (asking on the world) */
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request req;
    m->comm = MPI_COMM_WORLD; /* not counted in n_ops: operation 1 stays the caller's first */
    int rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req);
    if (rc != MPI_SUCCESS) {
        dt_error("MPI_Comm_idup(MPI_COMM_WORLD) failed: %s", dt_errstr_mpi(rc, 0));
        free(m->iv);
        free(c);
        free(m);
        return DT_ERR_MPI;
    }
    if (wait_deadline(c, &req, "duplicate of MPI_COMM_WORLD", 0, DT_UINT8) != DT_OK)
        abort_pending(c->rank, m->other_said); /* the caller would finalize MPI, which waits for the duplicate forever */
    m->comm = dup;
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    *out = c;
    return DT_OK;
}
