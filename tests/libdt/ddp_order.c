/* ddp_order.c: the order in which DDP issues its collectives, checked by recording them; run by
 * tests/libdt/ddp_order.sh under mpirun (2 ranks). Two recorders wrap real objects:
 *   - a communicator whose operations are the MPI communicator's, each call noted: which thread,
 *     whether that thread had called bind_thread (the thread that made the communicator counts as
 *     bound, as comm.h says), which model memory it reads;
 *   - a backend that is dt_backend_cpu with a device backend's contract (host_memory 0, so DDP takes
 *     the path it takes on a GPU), each op noted with a sequence number and the model memory it
 *     changed (the model's weights, gradients and buffers are compared with a shadow copy after
 *     every op), each event with the last op before its record, each wait on one with the ops it
 *     covers.
 * A collective passes when every element of model memory it reads or writes was last changed by an
 * op that a wait on an event has covered since (on a GPU that is what orders the communicator's stream after the
 * compute stream), and when its thread was bound. The recorders are first shown to catch both faults
 * (a broadcast of BN buffers that a forward wrote, with no sync between; a thread that calls a
 * collective without binding itself); then DDP runs with overlap (small buckets, so the
 * communication thread reduces while backward goes on), without overlap, and with gradient
 * accumulation: creation right after ops wrote the weights and buffers, the broadcast of buffers
 * before each forward, backward, SGD, sync_buffers right after a forward.
 * Prints one line per case on rank 0 and exits non-zero when any rank saw a fault. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "nn/backend_wrap.h"
#include "nn/model.h"
#include "train/ddp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/log.h"
#include "util/rng.h"

enum { HW = 16, B = 4, STEPS = 2, MAX_FLIGHT = 4 };

static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static int rank;

/* --- the backend recorder ---------------------------------------------------------------------- */

typedef struct watched {
    const char *name;
    const float *p;
    float *shadow;  /* the values as the recorder last saw them */
    uint64_t *last; /* per element: the op that last changed it (0: complete, by a copy or collective) */
    int64_t n;
} watched;
static watched watch[3];
static int n_watch;
static uint64_t op_seq; /* ops run so far */
static uint64_t synced; /* ops 1..synced are covered by a sync */
static int n_syncs;
/* memory a collective is reading or writing now (another thread's ops must not be read there) */
static struct {
    uintptr_t lo, hi;
} flight[MAX_FLIGHT];

/* does [p, q) meet memory in flight? */
static int in_flight(const float *p, const float *q)
{
    uintptr_t a = (uintptr_t)p, z = (uintptr_t)q;
    for (int k = 0; k < MAX_FLIGHT; k++)
        if (a < flight[k].hi && z > flight[k].lo)
            return 1;
    return 0;
}

/* under lk: what changed since the last look is marked as written by op seq */
static void note_changes(uint64_t seq)
{
    for (int w = 0; w < n_watch; w++) {
        watched *v = &watch[w];
        for (int64_t i = 0; i < v->n; i += 64) {
            int64_t e = i + 64 < v->n ? i + 64 : v->n;
            int some = in_flight(v->p + i, v->p + e); /* never read there: a collective writes it now */
            if (!some && !memcmp(v->p + i, v->shadow + i, (size_t)(e - i) * sizeof(float)))
                continue;
            for (int64_t j = i; j < e; j++)
                if (!(some && in_flight(v->p + j, v->p + j + 1)) && memcmp(v->p + j, v->shadow + j, sizeof(float))) {
                    memcpy(v->shadow + j, v->p + j, sizeof(float));
                    v->last[j] = seq;
                }
        }
    }
}

static void after_op(void)
{
    pthread_mutex_lock(&lk);
    note_changes(++op_seq);
    pthread_mutex_unlock(&lk);
}

/* each op of nn/backend.h's list: wrap_<name> runs the CPU backend's op, then notes what it changed */
#define CPU dt_backend_cpu
#define RECORD(name, ret, params, args) DT_WRAP_AROUND(name, ret, params, , CPU.name args, after_op())
DT_OPS(RECORD)
#undef RECORD

/* events: one in-order queue, so an event reached means every op up to its record is complete */
struct dt_event {
    uint64_t seq; /* the ops issued before its record */
};

static dt_event *wrap_event_create(void)
{
    return calloc(1, sizeof(dt_event));
}

static void wrap_event_destroy(dt_event *e)
{
    free(e);
}

static void wrap_event_record(dt_event *e, int queue)
{
    (void)queue;
    pthread_mutex_lock(&lk);
    e->seq = op_seq;
    pthread_mutex_unlock(&lk);
}

static void wrap_event_wait(int queue, dt_event *e)
{
    (void)queue;
    (void)e;
}

static void wrap_event_sync(dt_event *e)
{
    pthread_mutex_lock(&lk);
    synced = e->seq > synced ? e->seq : synced; /* ops 1..seq are complete */
    n_syncs++;
    pthread_mutex_unlock(&lk);
}

/* all ops issued so far complete (what DDP does before a broadcast) */
static void rec_drain(void)
{
    dt_event *e = wrap_event_create();
    wrap_event_record(e, DT_QUEUE_COMPUTE);
    wrap_event_sync(e);
    wrap_event_destroy(e);
}

static void rec_put(void *dst, const void *src, size_t bytes)
{
    CPU.mem_put(dst, src, bytes); /* complete on return (backend.h) */
    pthread_mutex_lock(&lk);
    note_changes(0);
    pthread_mutex_unlock(&lk);
}

static dt_backend recording;

static void make_recording(void)
{
    recording = dt_backend_cpu;
    recording.name = "cpu-recorded";
    recording.host_memory = 0;
    recording.mem_put = rec_put;
    DT_WRAP_SET(&recording, &CPU, DT_BACKEND_EVENTS);
    DT_WRAP_SET(&recording, &CPU, DT_OPS);
}

static void watch_add(const char *name, const float *p, int64_t n)
{
    watched *v = &watch[n_watch++];
    v->name = name;
    v->p = p;
    v->n = n;
    v->shadow = malloc((size_t)(n ? n : 1) * sizeof(float));
    v->last = calloc((size_t)(n ? n : 1), sizeof(uint64_t));
    if (!v->shadow || !v->last)
        abort();
    memcpy(v->shadow, p, (size_t)n * sizeof(float));
}

static void watch_model(const dt_model *m)
{
    pthread_mutex_lock(&lk);
    watch_add("weights", m->weights, m->n_weights);
    watch_add("gradients", m->grads, m->n_weights);
    watch_add("buffers", m->buffers, m->n_buffers);
    pthread_mutex_unlock(&lk);
}

static void unwatch(void)
{
    pthread_mutex_lock(&lk);
    for (int w = 0; w < n_watch; w++) {
        free(watch[w].shadow);
        free(watch[w].last);
    }
    n_watch = 0;
    pthread_mutex_unlock(&lk);
}

/* --- the communicator recorder ----------------------------------------------------------------- */

static _Thread_local int tl_bound;
static pthread_t main_thread;
static int n_unbound;      /* collectives from a thread that had not bound itself */
static int n_other;        /* collectives from a thread other than main */
static int n_other_binds;  /* bind_thread from a thread other than main */
static int n_checked;      /* collectives on model memory */
static int n_unsynced;     /* of those, reading or writing what an op changed after the last sync */

static void reset_counts(void)
{
    pthread_mutex_lock(&lk);
    n_unbound = n_other = n_other_binds = n_checked = n_unsynced = n_syncs = 0;
    pthread_mutex_unlock(&lk);
}

/* under lk: the collective's memory [p, p + bytes) against the ops that changed it */
static void check_range(const char *what, const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, z = a + bytes;
    for (int w = 0; p && bytes && w < n_watch; w++) {
        watched *v = &watch[w];
        uintptr_t lo = (uintptr_t)v->p, hi = lo + (uintptr_t)v->n * sizeof(float);
        if (a < lo || z > hi)
            continue;
        n_checked++;
        int64_t i0 = (int64_t)((a - lo) / sizeof(float)), i1 = (int64_t)((z - lo) / sizeof(float));
        for (int64_t i = i0; i < i1; i++)
            if (v->last[i] > synced) {
                if (n_unsynced++ < 3)
                    fprintf(stderr, "rank %d: %s of %s [%lld, %lld): element %lld was changed by op %llu, after "
                            "the last sync (which covers ops up to %llu)\n",
                            rank, what, v->name, (long long)i0, (long long)i1, (long long)i,
                            (unsigned long long)v->last[i], (unsigned long long)synced);
                break;
            }
    }
}

static void before(const char *what, const void *rd, const void *wr, size_t bytes)
{
    int on_main = pthread_equal(pthread_self(), main_thread);
    pthread_mutex_lock(&lk);
    if (!tl_bound && n_unbound++ < 3)
        fprintf(stderr, "rank %d: %s from the %s thread, which did not call bind_thread first\n", rank, what,
                on_main ? "main" : "other");
    n_other += !on_main;
    check_range(what, rd, bytes);
    if (wr != rd)
        check_range(what, wr, bytes);
    for (int k = 0, placed = 0; k < MAX_FLIGHT && placed < 2; k++) /* reads and writes in flight */
        if (!flight[k].hi) {
            const void *p = placed++ ? wr : rd;
            flight[k].lo = (uintptr_t)p;
            flight[k].hi = p ? (uintptr_t)p + bytes : 0;
        }
    pthread_mutex_unlock(&lk);
}

static void after(const void *rd, const void *wr, size_t bytes)
{
    pthread_mutex_lock(&lk);
    for (int k = 0; k < MAX_FLIGHT; k++)
        if (flight[k].hi && (flight[k].lo == (uintptr_t)rd || flight[k].lo == (uintptr_t)wr))
            flight[k].lo = flight[k].hi = 0;
    /* what the collective wrote is complete (comm.h): the shadow takes it, as nobody's op */
    for (int w = 0; wr && bytes && w < n_watch; w++) {
        watched *v = &watch[w];
        uintptr_t a = (uintptr_t)wr, lo = (uintptr_t)v->p, hi = lo + (uintptr_t)v->n * sizeof(float);
        if (a < lo || a + bytes > hi)
            continue;
        int64_t i0 = (int64_t)((a - lo) / sizeof(float)), n = (int64_t)(bytes / sizeof(float));
        memcpy(v->shadow + i0, v->p + i0, (size_t)n * sizeof(float));
        memset(v->last + i0, 0, (size_t)n * sizeof(uint64_t));
    }
    pthread_mutex_unlock(&lk);
}

#define INNER(c) ((dt_comm *)(c)->impl)

static int w_bind(dt_comm *c)
{
    int rc = INNER(c)->ops->bind_thread(INNER(c));
    tl_bound = rc == DT_OK;
    pthread_mutex_lock(&lk);
    n_other_binds += !pthread_equal(pthread_self(), main_thread);
    pthread_mutex_unlock(&lk);
    return rc;
}

static int w_allreduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    size_t bytes = count * dt_dtype_size(t);
    before("allreduce", send, recv, bytes);
    int rc = INNER(c)->ops->allreduce(INNER(c), send, recv, count, t, op);
    after(send, recv, bytes);
    return rc;
}

static int w_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype t, int root)
{
    size_t bytes = count * dt_dtype_size(t);
    before("broadcast", buf, buf, bytes);
    int rc = INNER(c)->ops->broadcast(INNER(c), buf, count, t, root);
    after(buf, buf, bytes);
    return rc;
}

static int w_allgather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype t)
{
    size_t bytes = count * dt_dtype_size(t);
    before("allgather", send, NULL, bytes);
    int rc = INNER(c)->ops->allgather(INNER(c), send, recv, count, t);
    after(send, NULL, bytes);
    return rc;
}

static int w_barrier(dt_comm *c)
{
    before("barrier", NULL, NULL, 0);
    int rc = INNER(c)->ops->barrier(INNER(c));
    after(NULL, NULL, 0);
    return rc;
}

static int w_dup(dt_comm *c, dt_comm **out)
{
    return INNER(c)->ops->dup(INNER(c), out);
}

static void w_abort(dt_comm *c, int code)
{
    INNER(c)->ops->abort(INNER(c), code);
}

static void w_destroy(dt_comm *c)
{
    dt_comm_free(INNER(c));
}

static const dt_comm_ops recorded_ops = {.name = "recorded", .bind_thread = w_bind, .allreduce = w_allreduce,
                                         .broadcast = w_broadcast, .allgather = w_allgather, .barrier = w_barrier,
                                         .dup = w_dup, .abort = w_abort, .destroy = w_destroy};

static dt_comm *wrap(dt_comm *inner)
{
    dt_comm *c = malloc(sizeof *c);
    if (!c)
        abort();
    *c = *inner;
    c->ops = &recorded_ops;
    c->impl = inner;
    c->n_ops = 0;
    tl_bound = 1; /* the thread that makes a communicator is bound (comm.h) */
    return c;
}

static void *unbound_thread(void *arg)
{
    dt_comm *c = arg;
    c->ops->barrier(c);
    return NULL;
}

/* --- the cases --------------------------------------------------------------------------------- */

static float *device_batch(int n, uint64_t seed)
{
    size_t len = (size_t)n * HW * HW * 3;
    float *h = malloc(len * sizeof(float)), *x = recording.mem_alloc(len * sizeof(float));
    if (!h || !x)
        abort();
    dt_rng g;
    dt_rng_seed(&g, seed, 0);
    for (size_t i = 0; i < len; i++)
        h[i] = (float)dt_rng_normal(&g);
    recording.mem_put(x, h, len * sizeof(float));
    free(h);
    return x;
}

/* the same on every rank (an allreduce over the real communicator, not recorded) */
static int all_max(dt_comm *raw, int v)
{
    raw->ops->allreduce(raw, &v, &v, 1, DT_INT32, DT_MAX);
    return v;
}

int main(void)
{
    dt_log_init();
    dt_launch l;
    dt_comm *raw;
    if (dt_launch_init(&l) || dt_comm_host(&raw, &l, 120))
        return 1;
    rank = raw->rank;
    if (raw->size < 2) {
        fprintf(stderr, "ddp_order: needs at least 2 ranks (mpirun -np 2)\n");
        return 1;
    }
    main_thread = pthread_self();
    make_recording();
    dt_comm *c = wrap(raw);
    int bad = 0;

    /* the recorders catch the faults they are for */
    {
        dt_model m;
        int ok = dt_model_create(&m, "resnet8", 3, 10, &recording) == DT_OK && dt_model_plan(&m, B, HW, HW) == DT_OK;
        dt_model_init_weights(&m, 1, 0);
        watch_model(&m);
        m.training = 1; /* the forward updates the BN running statistics: ops write the buffers */
        float *x = device_batch(B, 3 + (uint64_t)rank);
        reset_counts();
        ok = ok && dt_model_forward(&m, x, B) == DT_OK;
        c->ops->broadcast(c, m.buffers, (size_t)m.n_buffers, DT_FLOAT32, 0); /* no sync: caught */
        int caught_sync = n_unsynced > 0;
        rec_drain();
        n_unsynced = 0;
        c->ops->broadcast(c, m.buffers, (size_t)m.n_buffers, DT_FLOAT32, 0); /* after a sync: passes */
        int clean_sync = n_unsynced == 0 && n_checked == 2;
        pthread_t th;
        ok = ok && pthread_create(&th, NULL, unbound_thread, c) == 0 && pthread_join(th, NULL) == 0;
        int caught_bind = n_unbound == 1;
        int fine = all_max(raw, !(ok && caught_sync && clean_sync && caught_bind)) == 0;
        bad += !fine;
        if (rank == 0)
            printf("recorders: a broadcast of buffers a forward wrote, without a sync, is caught: %s; with one, "
                   "passes: %s; a collective from an unbound thread is caught: %s\n",
                   caught_sync ? "yes" : "no", clean_sync ? "yes" : "no", caught_bind ? "yes" : "no");
        recording.mem_free(x);
        unwatch();
        dt_model_free(&m);
    }

    struct {
        const char *name;
        dt_ddp_cfg cfg;
        int accum;
    } runs[] = {
        {"overlap, 4 KiB buckets", {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .broadcast_buffers = 1}, 1},
        {"no overlap", {.bucket_bytes = 4096, .first_bucket_bytes = 1024, .broadcast_buffers = 1, .no_overlap = 1}, 1},
        {"overlap, 2 accumulation steps", {.bucket_bytes = 4096, .first_bucket_bytes = 1024}, 2},
    };
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        int mb = B / runs[k].accum;
        dt_model m;
        dt_optim o;
        dt_ddp *d = NULL;
        int ok = dt_model_create(&m, "resnet8", 3, 10, &recording) == DT_OK &&
                 dt_model_plan(&m, mb, HW, HW) == DT_OK && dt_optim_init(&o, &m, 0.05f, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
        dt_model_init_weights(&m, 10 + (uint64_t)rank, 0); /* different on every rank until DDP's broadcast */
        watch_model(&m);
        m.training = 1;
        float *x = device_batch(mb, 20 + (uint64_t)rank);
        int32_t y[B];
        for (int i = 0; i < B; i++)
            y[i] = (int32_t)((i * 7 + rank) % 10);
        reset_counts();
        /* ops write the weights and buffers just before DDP broadcasts them (as AMP's rounding and a
         * forward would): creation must wait for them */
        ok = ok && dt_model_forward(&m, x, mb) == DT_OK;
        recording.scale(m.n_weights, DT_FLOAT32, 0.5f, m.weights);
        ok = ok && dt_ddp_create(&d, &m, c, &runs[k].cfg) == DT_OK;
        double loss;
        for (int s = 0; ok && s < STEPS; s++) {
            dt_model_step_begin(&m, 0.05f, s, 0);
            for (int a = 0; ok && a < runs[k].accum; a++)
                ok = dt_ddp_before_forward(d) == DT_OK && dt_model_forward(&m, x, mb) == DT_OK &&
                     dt_model_loss(&m, y, mb, 0, &loss) == DT_OK &&
                     dt_ddp_backward(d, mb, a > 0, a == runs[k].accum - 1) == DT_OK;
            if (ok)
                dt_optim_step(&o, &m, NULL);
        }
        /* a forward writes the buffers, then sync_buffers sends rank 0's */
        ok = ok && dt_model_forward(&m, x, mb) == DT_OK && dt_ddp_sync_buffers(d) == DT_OK;
        int buckets = d ? dt_ddp_buckets(d) : 0;
        dt_ddp_free(d);
        /* the wrapper forwarded real collectives: every replica holds rank 0's weights */
        size_t wb = (size_t)m.n_weights * sizeof(float);
        float *w = malloc(wb), *w0 = malloc(wb);
        recording.mem_get(w, m.weights, wb);
        memcpy(w0, w, wb);
        raw->ops->broadcast(raw, w0, (size_t)m.n_weights, DT_FLOAT32, 0);
        int same = !memcmp(w, w0, wb);
        pthread_mutex_lock(&lk);
        int synced_all = n_unsynced == 0 && n_checked > 2 && n_syncs > 0, bound_all = n_unbound == 0;
        int thread = runs[k].cfg.no_overlap ? n_other == 0 : n_other > 0 && n_other_binds > 0;
        int checked = n_checked, other = n_other;
        pthread_mutex_unlock(&lk);
        int fine = all_max(raw, !(ok && synced_all && bound_all && thread && same)) == 0;
        bad += !fine;
        if (rank == 0)
            printf("ddp %s: %d buckets, %d collectives on model memory, each after a sync of the ops that wrote "
                   "it: %s; %d from the communication thread, every thread bound first: %s; replicas identical: "
                   "%s%s\n",
                   runs[k].name, buckets, checked, synced_all ? "yes" : "no", other, bound_all && thread ? "yes" : "no",
                   same ? "yes" : "no", fine ? "" : " (FAILED on some rank)");
        free(w);
        free(w0);
        recording.mem_free(x);
        unwatch();
        dt_optim_free(&o);
        dt_model_free(&m);
    }
    dt_comm_free(c); /* and raw with it */
    dt_launch_finalize(&l);
    return bad != 0;
}
