/* dt.c: libdt's public API (dt.h) over the launch and communicator layers. */
#include "config.h"

#include "libdt/dt.h"

#include <stdlib.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "util/check.h"
#include "util/log.h"

static struct {
    int up;
    dt_launch launch;
    dt_comm *comm;
    double timeout;
} g = {.timeout = 600};

static int not_up(const char *what)
{
    dt_error("%s called before dt_init", what);
    return DT_ERR_STATE;
}

int dt_init(void)
{
    if (g.up)
        return DT_OK;
    dt_log_init();
    DT_TRY(dt_launch_init(&g.launch));
    int rc = dt_comm_host(&g.comm, &g.launch, g.timeout);
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
    dt_comm_free(g.comm); /* after a timeout this aborts the job instead of returning */
    g.comm = NULL;
    dt_launch_finalize(&g.launch);
    g.up = 0;
    return DT_OK;
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

const char *dt_launch_name(void)
{
    return dt_launch_kind_name(g.up ? g.launch.kind : DT_LAUNCH_SINGLE);
}

int dt_allreduce(const void *send, void *recv, size_t count, dt_dtype t, dt_redop op)
{
    return g.up ? g.comm->ops->allreduce(g.comm, send, recv, count, t, op) : not_up("dt_allreduce");
}

int dt_broadcast(void *buf, size_t count, dt_dtype t, int root)
{
    return g.up ? g.comm->ops->broadcast(g.comm, buf, count, t, root) : not_up("dt_broadcast");
}

int dt_allgather(const void *send, void *recv, size_t count, dt_dtype t)
{
    return g.up ? g.comm->ops->allgather(g.comm, send, recv, count, t) : not_up("dt_allgather");
}

int dt_barrier(void)
{
    return g.up ? g.comm->ops->barrier(g.comm) : not_up("dt_barrier");
}

int dt_broadcast_parameters(float *const *params, const size_t *counts, int n, int root)
{
    for (int i = 0; i < n; i++)
        DT_TRY(dt_broadcast(params[i], counts[i], DT_FLOAT32, root));
    return DT_OK;
}

void dt_set_timeout(double seconds)
{
    g.timeout = seconds > 0 ? seconds : 600;
    if (g.comm)
        g.comm->timeout_s = g.timeout;
}
