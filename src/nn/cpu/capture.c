/* capture.c: graphs on the CPU (nn/backend.h's graph members), in the table dt_cpu_graph_backend
 * returns: dt_backend_cpu, whose ops, uploads and downloads are kept as jobs (nn/jobs.h) instead of
 * run while the calling thread captures; graph_end hands the list over, graph_launch runs it. It
 * is what a captured CUDA graph is (the same calls on the same memory, nothing run until launched),
 * on the CPU, so that the trainer's graph path (train/step.c) and its rules run in the tests on any
 * machine, where the CUDA backend cannot. A CPU run gains nothing from it: dtrain uses it only when
 * --graph asks.
 *
 * The rules of capture are checked as a device would: while capturing, an op with a result (the
 * planning ops), mem_alloc, mem_free, mem_put, mem_get, host_alloc, host_free, event_sync and
 * reserve_scratch cannot be captured (CUDA refuses a host wait or an allocation inside a capture;
 * an op with a result cannot give it). Such a call fails the capture, as the CUDA backend's does:
 * the first one is kept as the reason, the capture goes on keeping (and not running) what comes
 * after it, and graph_end returns NULL after one line naming it, so that the caller runs the work
 * issued instead (train/step.c). The call itself is made safe: an allocation, a free and a planning
 * op are done at once (nothing captured reads their result: the graph is never launched); a host
 * wait (event_sync, mem_get) and mem_put are not done (the kept work they would wait for, or write
 * before, never runs; a put done now could change what the work issued again reads before its own
 * put). graph_launch inside a capture stays a programming error (one line, an abort). Events need
 * nothing (the CPU runs in order). Ops issued by other threads run at once, as before. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/backend_wrap.h"
#include "nn/cpu/cpu.h"
#include "nn/jobs.h"
#include "util/check.h"
#include "util/log.h"

#define BASE dt_backend_cpu

struct dt_graph {
    dt_job *head, *tail;
    size_t n;
    char why[160]; /* while capturing: the first call the capture could not hold ("": none) */
};

static _Thread_local dt_graph *capturing; /* this thread's capture under way */

static void misuse(const char *call)
{
    dt_error("cpu graph: %s while capturing a graph", call);
    abort();
}

/* 1 when this thread is capturing: the capture then fails, the first such call its reason */
static int refused(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refused(const char *fmt, ...)
{
    if (!capturing)
        return 0;
    if (!capturing->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(capturing->why, sizeof capturing->why, fmt, ap);
        va_end(ap);
    }
    return 1;
}

static void keep(dt_job *j)
{
    if (capturing->tail)
        capturing->tail->next = j;
    else
        capturing->head = j;
    capturing->tail = j;
    capturing->n++;
}

/* --- the ops: kept while capturing (an op with a result cannot be) ----------------------------------- */
/* wrap_<name> (nn/backend_wrap.h): an op with no result kept as a job while this thread captures, run
 * otherwise; an op with a result (a planning op) run at once, failing a capture under way */
#define KEPT(name, args)                                                                                      \
    if (capturing) {                                                                                          \
        keep(dt_job_##name(&BASE, DT_PP_UNPAREN_ args));                                                      \
        return;                                                                                               \
    }
#define AT_ONCE(name, args) refused("%s (a planning op: its result)", #name)
#define CAPTURE(name, ret, params, args)                                                                      \
    DT_WRAP_AROUND(name, ret, params, DT_WRAP_IF_VOID(ret, KEPT, AT_ONCE)(name, args), BASE.name args, )
DT_OPS(CAPTURE)
#undef CAPTURE

/* --- memory, copies and events ---------------------------------------------------------------------------- */
/* what a capture cannot hold: done at once (an allocation, a free), or not done (a host wait, a put),
 * the capture failed with the call as its reason */
static void *wrap_mem_alloc(size_t bytes)
{
    refused("mem_alloc of %zu bytes (an allocation)", bytes);
    return BASE.mem_alloc(bytes);
}

static void wrap_mem_free(void *p)
{
    refused("mem_free (a free)");
    BASE.mem_free(p);
}

static void wrap_mem_put(void *dst, const void *src, size_t bytes)
{
    if (!refused("mem_put of %zu bytes (a copy that waits on the host)", bytes))
        BASE.mem_put(dst, src, bytes);
}

static void wrap_mem_get(void *dst, const void *src, size_t bytes)
{
    if (!refused("mem_get of %zu bytes (a host wait)", bytes))
        BASE.mem_get(dst, src, bytes);
}

static void *wrap_host_alloc(size_t bytes)
{
    refused("host_alloc of %zu bytes (an allocation)", bytes);
    return BASE.host_alloc(bytes);
}

static void wrap_host_free(void *p)
{
    refused("host_free (a free)");
    BASE.host_free(p);
}

static void wrap_event_sync(dt_event *e)
{
    if (!refused("event_sync (a host wait)"))
        BASE.event_sync(e);
}

static int wrap_reserve_scratch(size_t bytes)
{
    refused("reserve_scratch of %zu bytes (an allocation)", bytes);
    return BASE.reserve_scratch(bytes);
}

/* upload and download: a copy job that reads its source when the graph runs */
static void wrap_upload(void *dst, const void *src, size_t bytes, int queue)
{
    if (capturing)
        keep(dt_job_copy(dst, src, bytes));
    else
        BASE.upload(dst, src, bytes, queue);
}

static void wrap_download(void *dst, const void *src, size_t bytes, int queue)
{
    if (capturing)
        keep(dt_job_copy(dst, src, bytes));
    else
        BASE.download(dst, src, bytes, queue);
}

/* --- the graph members -------------------------------------------------------------------------------- */
static int g_graph_begin(void)
{
    if (capturing) {
        dt_error("cpu graph: a capture is already under way on this thread");
        return DT_ERR_STATE;
    }
    if (!(capturing = calloc(1, sizeof *capturing)))
        return DT_ERR_NOMEM;
    return DT_OK;
}

static void g_graph_destroy(dt_graph *g);

static dt_graph *g_graph_end(void)
{
    dt_graph *g = capturing;
    capturing = NULL;
    if (!g) {
        dt_error("cpu graph: graph_end without graph_begin");
    } else if (g->why[0]) { /* nothing it kept has run: dropped */
        dt_warn("cpu graph: the capture failed: %s inside it", g->why);
        g_graph_destroy(g);
        g = NULL;
    }
    return g;
}

static void g_graph_launch(dt_graph *g)
{
    if (capturing)
        misuse("graph_launch");
    for (dt_job *j = g->head; j; j = j->next)
        dt_job_run(j);
}

static void g_graph_destroy(dt_graph *g)
{
    if (!g)
        return;
    while (g->head) {
        dt_job *j = g->head;
        g->head = j->next;
        dt_job_free(j);
    }
    free(g);
}

size_t dt_cpu_graph_size(const dt_graph *g)
{
    return g ? g->n : 0;
}

/* --- the table ---------------------------------------------------------------------------------------- */
static dt_backend table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    table = BASE;
    DT_WRAP_SET(&table, &BASE, DT_OPS);
    DT_WRAP_SET(&table, &BASE, DT_BACKEND_MEMORY); /* every one: kept, or refused while capturing */
    table.event_sync = wrap_event_sync;
    table.graph_begin = g_graph_begin;
    table.graph_end = g_graph_end;
    table.graph_launch = g_graph_launch;
    table.graph_destroy = g_graph_destroy;
}

const dt_backend *dt_cpu_graph_backend(void)
{
    pthread_once(&table_once, make_table);
    return &table;
}
