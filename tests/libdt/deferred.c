/* deferred.c: the deferred test backend (deferred.h). Every op of nn/backend.h's list gets a job
 * type holding its arguments (from DT_OPS_TYPED: each parameter's type and name), a function that
 * runs dt_backend_cpu's op on them, and the table member that queues the job (or, for an op with a
 * result, waits for the compute queue and runs it at once). */
#include "config.h"

#include "deferred.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CPU dt_backend_cpu

typedef struct job job;
struct job {
    void (*run)(job *j);
    job *next;
    union { /* the descriptor the op reads, copied when queued */
        dt_conv_desc conv;
        dt_bn_desc bn;
        dt_pool_desc pool;
    } desc;
    void *owned; /* freed after the job ran (normalize_u8's copies of its host arrays) */
};

/* record and replay (deferred.h): the ops kept while recording */
static struct {
    int active;   /* this process uses the replay backend: ops run at once */
    int on;       /* recording now */
    job *head, *tail;
    size_t kept;
} rec;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head[DT_QUEUES], *tail[DT_QUEUES];
    uint64_t issued[DT_QUEUES], done[DT_QUEUES];
    pthread_t thread[DT_QUEUES];
    int started;
    unsigned delay_us;
    int ignore_events;
    uint64_t ran;
} q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void pause_us(unsigned us)
{
    if (!us)
        return;
    struct timespec t = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static void job_free(job *j);

static void *worker(void *arg)
{
    const int k = (int)(intptr_t)arg;
    pthread_mutex_lock(&q.mu);
    for (;;) {
        while (!q.head[k])
            pthread_cond_wait(&q.cv, &q.mu);
        job *j = q.head[k];
        pthread_mutex_unlock(&q.mu);
        pause_us(q.delay_us);
        j->run(j);
        pthread_mutex_lock(&q.mu);
        q.head[k] = j->next;
        if (!q.head[k])
            q.tail[k] = NULL;
        q.done[k]++;
        q.ran++;
        pthread_cond_broadcast(&q.cv);
        job_free(j);
    }
    return NULL;
}

static void enqueue(int k, job *j)
{
    pthread_mutex_lock(&q.mu);
    if (q.tail[k])
        q.tail[k]->next = j;
    else
        q.head[k] = j;
    q.tail[k] = j;
    q.issued[k]++;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
}

/* until queue k has run its first `upto` jobs */
static void wait_done(int k, uint64_t upto)
{
    pthread_mutex_lock(&q.mu);
    while (q.done[k] < upto)
        pthread_cond_wait(&q.cv, &q.mu);
    pthread_mutex_unlock(&q.mu);
}

/* every job issued to queue k so far has run */
static void drain(int k)
{
    pthread_mutex_lock(&q.mu);
    uint64_t upto = q.issued[k];
    pthread_mutex_unlock(&q.mu);
    wait_done(k, upto);
}

/* the replay backend's: j joins the recording */
static void keep(job *j)
{
    j->next = NULL;
    if (rec.tail)
        rec.tail->next = j;
    else
        rec.head = j;
    rec.tail = j;
    rec.kept++;
}

static void job_free(job *j)
{
    free(j->owned);
    free(j);
}

/* an op with no result: queued on queue k (deferred), or run at once and kept while recording (replay) */
static void submit_to(job *j, int k)
{
    if (!rec.active) {
        enqueue(k, j);
        return;
    }
    j->run(j);
    if (rec.on)
        keep(j);
    else
        job_free(j);
}

static void submit(job *j)
{
    submit_to(j, DT_QUEUE_COMPUTE);
}

static void *job_new(size_t bytes, void (*run)(job *))
{
    job *j = calloc(1, bytes);
    if (!j)
        abort();
    j->run = run;
    return j;
}

/* a descriptor argument points at the job's copy; any other argument stays as it is */
static void keep_conv(job *j, void *slot)
{
    const dt_conv_desc **p = slot;
    j->desc.conv = **p;
    *p = &j->desc.conv;
}
static void keep_bn(job *j, void *slot)
{
    const dt_bn_desc **p = slot;
    j->desc.bn = **p;
    *p = &j->desc.bn;
}
static void keep_pool(job *j, void *slot)
{
    const dt_pool_desc **p = slot;
    j->desc.pool = **p;
    *p = &j->desc.pool;
}
static void keep_value(job *j, void *slot)
{
    (void)j;
    (void)slot;
}

/* --- the ops ------------------------------------------------------------------------------------
 * For op `name`: struct job_name (the job and its arguments), run_name (dt_backend_cpu's op on them)
 * and def_name (the member: queues the job, or waits and runs an op with a result at once). */
#define MEMBER_(type, name) type name;
#define STORE_(type, name) j->a.name = name;
#define KEEP_(type, name)                                                                                     \
    _Generic(j->a.name, const dt_conv_desc *: keep_conv, const dt_bn_desc *: keep_bn,                         \
             const dt_pool_desc *: keep_pool, default: keep_value)(&j->hdr, (void *)&j->a.name);
#define STORED_(type, name) j->a.name
#define JOB_(name, ...)                                                                                       \
    struct job_##name *j = job_new(sizeof *j, run_##name);                                                    \
    DT_PP_MAP_(STORE_, DT_PP_NOTHING_, __VA_ARGS__)                                                           \
    DT_PP_MAP_(KEEP_, DT_PP_NOTHING_, __VA_ARGS__)
#define QUEUED_void(name, ...)                                                                                \
    JOB_(name, __VA_ARGS__)                                                                                   \
    submit(&j->hdr);
/* an op with a result: at once (after the queue); recorded too, its result then unused on replay */
#define AT_ONCE_(name, ...)                                                                                   \
    if (rec.active && rec.on) {                                                                               \
        JOB_(name, __VA_ARGS__)                                                                               \
        keep(&j->hdr);                                                                                        \
    }                                                                                                         \
    drain(DT_QUEUE_COMPUTE);                                                                                  \
    return CPU.name(DT_PP_MAP_(DT_PP_NAME_, DT_PP_COMMA_, __VA_ARGS__));
#define QUEUED_int AT_ONCE_
#define QUEUED_double AT_ONCE_
#define QUEUED_size_t AT_ONCE_
#define DEFER(name, ret, ...)                                                                                 \
    struct job_##name {                                                                                       \
        job hdr;                                                                                              \
        struct {                                                                                              \
            DT_PP_MAP_(MEMBER_, DT_PP_NOTHING_, __VA_ARGS__)                                                  \
        } a;                                                                                                  \
    };                                                                                                        \
    static inline void run_##name(job *h)                                                                     \
    {                                                                                                         \
        struct job_##name *j = (struct job_##name *)(void *)h;                                                \
        (void)CPU.name(DT_PP_MAP_(STORED_, DT_PP_COMMA_, __VA_ARGS__));                                       \
    }                                                                                                         \
    static inline ret def_##name(DT_PP_MAP_(DT_PP_DECL_, DT_PP_COMMA_, __VA_ARGS__))                          \
    {                                                                                                         \
        QUEUED_##ret(name, __VA_ARGS__)                                                                       \
    }
DT_OPS_TYPED(DEFER)
#undef DEFER

/* normalize_u8 reads host arrays when issued: copies of them go with the job */
static void def_normalize_u8_copied(int64_t n, int c, const uint8_t *u, const float *mean_host, const float *std_host,
                                    dt_dtype t, void *x)
{
    struct job_normalize_u8 *j = job_new(sizeof *j, run_normalize_u8);
    float *own = malloc(2 * (size_t)c * sizeof(float));
    if (!own)
        abort();
    memcpy(own, mean_host, (size_t)c * sizeof(float));
    memcpy(own + c, std_host, (size_t)c * sizeof(float));
    j->hdr.owned = own;
    j->a.n = n;
    j->a.c = c;
    j->a.u = u;
    j->a.mean_host = own;
    j->a.std_host = own + c;
    j->a.t = t;
    j->a.x = x;
    submit(&j->hdr);
}

/* upload and download: a copy job on the queue they name, reading its source when it runs (the host
 * keeps the host buffer until an event after the copy); recorded and replayed like an op, so a
 * replayed step takes what the host put in the buffer since, as a captured graph's copy does */
struct job_copy {
    job hdr;
    void *dst;
    const void *src;
    size_t bytes;
};

static void run_copy(job *h)
{
    struct job_copy *j = (struct job_copy *)(void *)h;
    memcpy(j->dst, j->src, j->bytes);
}

static void def_copy_queued(void *dst, const void *src, size_t bytes, int queue)
{
    struct job_copy *j = job_new(sizeof *j, run_copy);
    j->dst = dst;
    j->src = src;
    j->bytes = bytes;
    submit_to(&j->hdr, queue);
}

/* --- memory: ordered after the compute queue, complete on return ------------------------------- */
static void def_mem_put(void *dst, const void *src, size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_put(dst, src, bytes);
}

static void def_mem_get(void *dst, const void *src, size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_get(dst, src, bytes);
}

static void def_mem_free(void *p)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_free(p);
}

static int def_reserve_scratch(size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    return CPU.reserve_scratch(bytes);
}

/* --- events: a mark in a queue's count of jobs ---------------------------------------------------- */
struct dt_event {
    int queue;
    uint64_t mark; /* reached once the queue has run this many jobs (0: never recorded) */
};

static dt_event *def_event_create(void)
{
    return calloc(1, sizeof(dt_event));
}

static void def_event_destroy(dt_event *e)
{
    free(e);
}

static void def_event_record(dt_event *e, int queue)
{
    pthread_mutex_lock(&q.mu);
    e->queue = queue;
    e->mark = q.issued[queue];
    pthread_mutex_unlock(&q.mu);
}

static void def_event_sync(dt_event *e)
{
    if (!q.ignore_events)
        wait_done(e->queue, e->mark);
}

struct job_wait {
    job hdr;
    dt_event e; /* a copy: the event may be recorded again before this job runs */
};

static void run_wait(job *h)
{
    struct job_wait *j = (struct job_wait *)(void *)h;
    def_event_sync(&j->e);
}

static void def_event_wait(int queue, dt_event *e)
{
    if (rec.active) /* the replay backend runs everything at once: nothing to wait for */
        return;
    struct job_wait *j = job_new(sizeof *j, run_wait);
    pthread_mutex_lock(&q.mu);
    j->e = *e;
    pthread_mutex_unlock(&q.mu);
    enqueue(queue, &j->hdr);
}

/* --- the table -------------------------------------------------------------------------------------- */
static dt_backend deferred, replaying;

/* t: dt_backend_cpu with every member that runs an op, moves memory or orders them replaced */
static void make_table(dt_backend *t, const char *name, int host_memory)
{
    *t = CPU;
    t->name = name;
    t->host_memory = host_memory;
#define SET(name, ret, params, args) t->name = def_##name;
    DT_OPS(SET)
#undef SET
    t->normalize_u8 = def_normalize_u8_copied;
    t->mem_put = def_mem_put;
    t->mem_get = def_mem_get;
    t->upload = def_copy_queued;
    t->download = def_copy_queued;
    t->mem_free = def_mem_free;
    t->reserve_scratch = def_reserve_scratch;
    t->event_create = def_event_create;
    t->event_destroy = def_event_destroy;
    t->event_record = def_event_record;
    t->event_wait = def_event_wait;
    t->event_sync = def_event_sync;
}

const dt_backend *dt_deferred_backend(unsigned delay_us, int ignore_events)
{
    pthread_mutex_lock(&q.mu);
    q.delay_us = delay_us;
    q.ignore_events = ignore_events;
    int start = !q.started;
    q.started = 1;
    pthread_mutex_unlock(&q.mu);
    if (start) {
        make_table(&deferred, "cpu-deferred", 0);
        for (int k = 0; k < DT_QUEUES; k++)
            if (pthread_create(&q.thread[k], NULL, worker, (void *)(intptr_t)k) != 0)
                abort();
    }
    return &deferred;
}

uint64_t dt_deferred_ops_run(void)
{
    pthread_mutex_lock(&q.mu);
    uint64_t n = q.ran;
    pthread_mutex_unlock(&q.mu);
    return n;
}

const dt_backend *dt_replay_backend(void)
{
    if (!rec.active) {
        make_table(&replaying, "cpu-replay", 1);
        rec.active = 1;
    }
    return &replaying;
}

void dt_replay_record(int on)
{
    if (on) { /* a new recording */
        while (rec.head) {
            job *j = rec.head;
            rec.head = j->next;
            job_free(j);
        }
        rec.tail = NULL;
        rec.kept = 0;
    }
    rec.on = on;
}

size_t dt_replay_run(void)
{
    for (job *j = rec.head; j; j = j->next)
        j->run(j);
    return rec.kept;
}
