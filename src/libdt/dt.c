/* dt.c: libdt's public API (dt.h): the launch, the communicators it allows, and the engine
 * (engine.c) that every collective goes through, the blocking host-buffer calls included. */
#include "config.h"

#include "libdt/dt.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h"
#include "libdt/engine.h"
#include "libdt/launch.h"
#include "util/check.h"
#include "util/log.h"

static struct {
    int up;
    dt_launch launch;
    double timeout;
    int timeout_set;
    size_t fusion;
    int fusion_set;
    int streams;
    int cross_rank, cross_size;
} g = {.timeout = 600, .fusion = 64u << 20, .streams = 1};

static int not_up(const char *what)
{
    dt_error("%s called before dt_init", what);
    return DT_ERR_STATE;
}

/* a number from the environment within [lo, hi]: DT_OK (left alone when unset), or one line */
static int env_number(const char *var, double lo, double hi, double *out)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return DT_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || x < lo || x > hi) {
        dt_error("%s=%s: expected a number from %g to %g", var, v, lo, hi);
        return DT_ERR_INPUT;
    }
    *out = x;
    return DT_OK;
}

/* Horovod's cross communicator: the ranks with this rank's local rank */
static int find_cross(dt_comm *c)
{
    int32_t me = g.launch.local_rank, *all = malloc((size_t)g.launch.size * sizeof *all);
    if (!all)
        return DT_ERR_NOMEM;
    int rc = c->ops->allgather(c, &me, all, 1, DT_INT32);
    g.cross_rank = 0;
    g.cross_size = 0;
    for (int r = 0; rc == DT_OK && r < g.launch.size; r++)
        if (all[r] == me) {
            g.cross_size++;
            g.cross_rank += r < g.launch.rank;
        }
    free(all);
    return rc;
}

int dt_init(void)
{
    if (g.up)
        return DT_OK;
    dt_log_init();
    double t = g.timeout, fusion = (double)g.fusion, streams = g.streams, cycle_ms = 1;
    if (!g.timeout_set)
        DT_TRY(env_number("DT_COMM_TIMEOUT", 0.001, 1e7, &t));
    if (!g.fusion_set)
        DT_TRY(env_number("DT_FUSION_THRESHOLD", 0, 1e12, &fusion));
    DT_TRY(env_number("DT_ALLREDUCE_STREAMS", 1, DT_ENGINE_MAX_STREAMS, &streams));
    DT_TRY(env_number("DT_CYCLE_TIME", 0.01, 1000, &cycle_ms));
    if (streams != (int)streams) {
        dt_error("DT_ALLREDUCE_STREAMS=%s: expected a whole number from 1 to %d", getenv("DT_ALLREDUCE_STREAMS"),
                 DT_ENGINE_MAX_STREAMS);
        return DT_ERR_INPUT;
    }
    g.timeout = t;
    g.fusion = (size_t)fusion;
    g.streams = (int)streams;
    dt_launch_set_timeout(g.timeout); /* the start-up's deadline */
    DT_TRY(dt_launch_init(&g.launch));
    dt_log_set_rank(g.launch.rank, g.launch.size);
    dt_comm *ctrl = NULL, *dev = NULL;
    /* this rank's GPU, as dtrain picks it (CUDA_VISIBLE_DEVICES, the local rank); -1 on a CPU */
    char gpu[256];
    int device = dt_gpu_count() > 0 ? dt_launch_pick_gpu(getenv("CUDA_VISIBLE_DEVICES"), dt_gpu_count(),
                                                        g.launch.local_rank, g.launch.local_size, gpu, sizeof gpu)
                                    : -1;
    int rc = DT_OK;
    if (device < 0 && dt_gpu_count() > 0 && g.launch.size > 1 && g.launch.kind != DT_LAUNCH_MPI) {
        dt_error("libdt: %d ranks started by %s need a GPU each: %s", g.launch.size,
                 dt_launch_kind_name(g.launch.kind), gpu);
        rc = DT_ERR_STATE;
    }
    if (rc == DT_OK)
        rc = dt_comm_connect(&g.launch, device, g.timeout, &ctrl, &dev);
    if (rc == DT_OK)
        rc = find_cross(ctrl);
    if (rc != DT_OK) {
        dt_comm_free(ctrl);
        dt_comm_free(dev);
        dt_launch_finalize(&g.launch);
        return rc;
    }
    dt_engine_cfg cfg = {.launch = &g.launch,
                         .ctrl = ctrl,
                         .dev = dev,
                         .device = device,
                         .timeout_s = g.timeout,
                         .fusion_bytes = g.fusion,
                         .streams = g.streams,
                         .cycle_s = cycle_ms / 1000};
    rc = dt_engine_start(&cfg);
    if (rc != DT_OK) {
        dt_launch_finalize(&g.launch);
        return rc;
    }
    g.up = 1;
    return DT_OK;
}

int dt_finalize(void)
{
    if (!g.up)
        return DT_OK;
    int rc = dt_engine_stop(); /* after a timeout this ends the job instead of returning */
    dt_launch_finalize(&g.launch);
    g.up = 0;
    return rc;
}

int dt_is_initialized(void)
{
    return g.up;
}

int dt_rank(void)
{
    return g.up ? g.launch.rank : 0;
}

int dt_size(void)
{
    return g.up ? g.launch.size : 1;
}

int dt_local_rank(void)
{
    return g.up ? g.launch.local_rank : 0;
}

int dt_local_size(void)
{
    return g.up ? g.launch.local_size : 1;
}

int dt_cross_rank(void)
{
    return g.up ? g.cross_rank : 0;
}

int dt_cross_size(void)
{
    return g.up ? g.cross_size : 1;
}

const char *dt_launch_name(void)
{
    return dt_launch_kind_name(g.up ? g.launch.kind : DT_LAUNCH_SINGLE);
}

void dt_set_timeout(double seconds)
{
    g.timeout = seconds > 0 ? seconds : 600;
    g.timeout_set = 1;
    if (g.up)
        dt_engine_set_timeout(g.timeout);
}

void dt_set_fusion_threshold(size_t bytes)
{
    g.fusion = bytes;
    g.fusion_set = 1;
}

int dt_allreduce_streams(void)
{
    return g.streams;
}

/* ---- the blocking calls: one named operation each, waited for ------------------------------------ */

static dt_tensor host_vector(const void *p, size_t count, dt_dtype t)
{
    dt_tensor x = {.data = (void *)(uintptr_t)p, .type = t, .ndim = 1, .device = DT_HOST}; /* read only where const */
    x.shape[0] = (int64_t)count;
    return x;
}

static int finish(int rc, dt_handle *h)
{
    if (h) {
        int w = dt_wait(h);
        rc = rc == DT_OK ? w : rc;
    }
    dt_handle_free(h);
    return rc;
}

int dt_allreduce(const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    if (!g.up)
        return not_up("dt_allreduce");
    dt_tensor in = host_vector(send, count, t), out = host_vector(recv, count, t);
    dt_handle *h = NULL;
    int rc = dt_allreduce_async(NULL, &in, &out, op, 1, 1, &h);
    return finish(rc, h);
}

int dt_broadcast(void *buf, size_t count, dt_dtype t, int root)
{
    if (!g.up)
        return not_up("dt_broadcast");
    dt_tensor x = host_vector(buf, count, t);
    dt_handle *h = NULL;
    int rc = dt_broadcast_async(NULL, &x, &x, root, &h);
    return finish(rc, h);
}

int dt_allgather(const void *send, void *recv, size_t count, dt_dtype t)
{
    if (!g.up)
        return not_up("dt_allgather");
    dt_tensor in = host_vector(send, count, t);
    dt_handle *h = NULL;
    int rc = dt_allgather_async(NULL, &in, &h);
    if (rc == DT_OK)
        rc = dt_wait(h);
    if (rc == DT_OK)
        rc = dt_output_copy(h, recv);
    dt_handle_free(h);
    return rc;
}

int dt_barrier(void)
{
    return g.up ? dt_engine_barrier() : not_up("dt_barrier");
}

int dt_join(void)
{
    return g.up ? dt_engine_join() : not_up("dt_join");
}

int dt_broadcast_parameters(float *const *params, const size_t *counts, int n, int root)
{
    if (!g.up)
        return not_up("dt_broadcast_parameters");
    dt_handle **h = calloc((size_t)(n > 0 ? n : 1), sizeof *h);
    if (!h)
        return DT_ERR_NOMEM;
    int rc = DT_OK;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        dt_tensor x = host_vector(params[i], counts[i], DT_FLOAT32);
        rc = dt_broadcast_async(NULL, &x, &x, root, &h[i]);
    }
    for (int i = 0; i < n; i++)
        rc = finish(rc, h[i]);
    free(h);
    return rc;
}
