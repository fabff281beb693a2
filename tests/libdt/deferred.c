/* deferred.c: the deferred test backend (deferred.h). Every op of nn/backend.h's list is kept as a
 * job of dt_backend_cpu's op (nn/jobs.h) and queued by the table's member (an op with a result
 * waits for the compute queue and runs at once). */
#include "config.h"

#include "deferred.h"
#include "nn/backend_wrap.h"
#include "nn/jobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CPU dt_backend_cpu

typedef dt_job job; /* nn/jobs.h: an op call kept with its arguments */

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
        dt_job_run(j);
        pthread_mutex_lock(&q.mu);
        q.head[k] = j->next;
        if (!q.head[k])
            q.tail[k] = NULL;
        q.done[k]++;
        q.ran++;
        pthread_cond_broadcast(&q.cv);
        dt_job_free(j);
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

/* an op with no result: queued on queue k */
static void submit_to(job *j, int k)
{
    enqueue(k, j);
}

static void submit(job *j)
{
    submit_to(j, DT_QUEUE_COMPUTE);
}

/* --- the ops ------------------------------------------------------------------------------------
 * For op `name`, wrap_name (the member): queues dt_job_name (nn/jobs.h) on the compute queue, or, for
 * an op with a result, waits for the compute queue and runs it at once. */
#define QUEUED(name, args) submit(dt_job_##name(&CPU, DT_PP_UNPAREN_ args));
#define AT_ONCE(name, args)                                                                                   \
    drain(DT_QUEUE_COMPUTE);                                                                                  \
    return CPU.name args;
#define DEFER(name, ret, params, args)                                                                        \
    DT_WRAP_DEFINE(name, ret, params, DT_WRAP_IF_VOID(ret, QUEUED, AT_ONCE)(name, args))
DT_OPS(DEFER)
#undef DEFER

/* upload and download: a copy job on the queue they name, reading its source when it runs (the host
 * keeps the host buffer until an event after the copy) */
static void copy_queued(void *dst, const void *src, size_t bytes, int queue)
{
    submit_to(dt_job_copy(dst, src, bytes), queue);
}

/* --- memory: ordered after the compute queue, complete on return ------------------------------- */
static void wrap_mem_put(void *dst, const void *src, size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_put(dst, src, bytes);
}

static void wrap_mem_get(void *dst, const void *src, size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_get(dst, src, bytes);
}

static void wrap_mem_free(void *p)
{
    drain(DT_QUEUE_COMPUTE);
    CPU.mem_free(p);
}

static int wrap_reserve_scratch(size_t bytes)
{
    drain(DT_QUEUE_COMPUTE);
    return CPU.reserve_scratch(bytes);
}

/* --- events: a mark in a queue's count of jobs ---------------------------------------------------- */
struct dt_event {
    int queue;
    uint64_t mark; /* reached once the queue has run this many jobs (0: never recorded) */
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
    pthread_mutex_lock(&q.mu);
    e->queue = queue;
    e->mark = q.issued[queue];
    pthread_mutex_unlock(&q.mu);
}

static void wrap_event_sync(dt_event *e)
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
    wrap_event_sync(&j->e);
}

static void wrap_event_wait(int queue, dt_event *e)
{
    struct job_wait *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    j->hdr.run = run_wait;
    pthread_mutex_lock(&q.mu);
    j->e = *e;
    pthread_mutex_unlock(&q.mu);
    enqueue(queue, &j->hdr);
}

/* --- the table -------------------------------------------------------------------------------------- */
static dt_backend deferred;

/* t: dt_backend_cpu with every member that runs an op, moves memory or orders them replaced */
static void make_table(dt_backend *t)
{
    *t = CPU;
    t->name = "cpu-deferred";
    t->host_memory = 0; /* code takes a device backend's paths */
    DT_WRAP_SET(t, &CPU, DT_OPS);
    DT_WRAP_SET(t, &CPU, DT_BACKEND_EVENTS);
    t->mem_put = wrap_mem_put;
    t->mem_get = wrap_mem_get;
    t->upload = copy_queued;
    t->download = copy_queued;
    t->mem_free = wrap_mem_free;
    t->reserve_scratch = wrap_reserve_scratch;
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
        make_table(&deferred);
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
