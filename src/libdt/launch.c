/* launch.c: rank, size and local rank from PMI2, MPI, Slurm's environment or nothing (launch.h).
 * Under MPI a watchdog thread holds MPI_Init and the launch's collectives to the start-up deadline
 * (dt_launch_set_timeout). */
#include "config.h"

#include "libdt/launch.h"
#include "libdt/rdzv.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_PMI2
#include <slurm/pmi2.h>
#endif
#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "util/check.h"
#include "util/cli.h"
#include "util/clock.h"
#include "util/log.h"

static double launch_timeout; /* dt_launch_set_timeout; 0: none */

void dt_launch_set_timeout(double seconds)
{
    launch_timeout = seconds > 0 ? seconds : 0;
}

const char *dt_launch_kind_name(enum dt_launch_kind k)
{
    switch (k) {
    case DT_LAUNCH_PMI2: return "Slurm PMI2";
    case DT_LAUNCH_MPI: return "MPI";
    case DT_LAUNCH_SLURM_ENV: return "Slurm environment (no PMI)";
    case DT_LAUNCH_LOCAL: return "dtrain --nproc-per-node";
    case DT_LAUNCH_TORCHRUN: return "torchrun";
    default: return "single process";
    }
}

int dt_launch_pick_gpu(const char *visible, int count, int local_rank, int local_size, char *name, size_t n)
{
    int listed = 0;
    if (visible && *visible) /* entries: indices, GPU-<uuid> or MIG-<uuid>, comma-separated */
        for (const char *p = visible; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
            listed++;
    if (count < 0)
        count = listed;
    if (count < 1) {
        snprintf(name, n, "no GPU is visible to this process (CUDA_VISIBLE_DEVICES=%s)",
                 visible ? (*visible ? visible : "empty") : "unset");
        return -1;
    }
    int idx;
    if (count == 1)
        idx = 0;
    else if (count >= local_size)
        idx = local_rank;
    else {
        snprintf(name, n, "%d ranks on this node and %d GPUs visible (CUDA_VISIBLE_DEVICES=%s): ranks would share a "
                 "GPU; ask Slurm for one GPU per task (--gpus-per-node equal to --ntasks-per-node, or "
                 "--gpus-per-task=1)", local_size, count, visible ? visible : "unset");
        return -1;
    }
    const char *p = visible && *visible && idx < listed ? visible : NULL;
    for (int k = 0; p && k < idx; k++)
        p = strchr(p, ',') + 1;
    if (p)
        snprintf(name, n, "%.*s", (int)strcspn(p, ","), p);
    else
        snprintf(name, n, "%d", idx);
    return idx;
}

int dt_pmi_map_rank(const char *map, int size, int rank, int *node, int *local_rank, int *local_size)
{
    const char *v = map ? strstr(map, "vector,") : NULL;
    if (!v || size < 1 || rank < 0 || rank >= size)
        return -1;
    v += 7;
    int *node_of = malloc((size_t)size * sizeof(int));
    if (!node_of)
        return -1;
    int r = 0, progress = 1;
    while (r < size && progress) { /* the vector repeats until every rank has a node */
        progress = 0;
        for (const char *p = strchr(v, '('); p && r < size; p = strchr(p + 1, '(')) {
            int start, nn, ppn;
            if (sscanf(p, "(%d,%d,%d)", &start, &nn, &ppn) != 3 || start < 0 || nn < 1 || ppn < 1) {
                free(node_of);
                return -1;
            }
            for (int k = 0; k < nn * ppn && r < size; k++, r++)
                node_of[r] = start + k / ppn;
            progress = 1;
        }
    }
    if (r < size) {
        free(node_of);
        return -1;
    }
    int lr = 0, ls = 0;
    for (int i = 0; i < size; i++)
        if (node_of[i] == node_of[rank]) {
            lr += i < rank;
            ls++;
        }
    *node = node_of[rank];
    *local_rank = lr;
    *local_size = ls;
    free(node_of);
    return 0;
}

/* an integer environment variable: 1 when set and valid, 0 when unset, -1 (logged) when bad */
static int env_int(const char *name, long min, long max, int *out)
{
    const char *s = getenv(name);
    if (!s)
        return 0;
    long v;
    if (dt_parse_long(name, s, min, max, &v) != DT_OK)
        return -1;
    *out = (int)v;
    return 1;
}

#ifdef HAVE_PMI2
static int init_pmi2(dt_launch *l)
{
    int spawned = 0, appnum = 0, found = 0;
    int rc = PMI2_Init(&spawned, &l->size, &l->rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        dt_error("PMI2_Init failed (code %d) although PMI_FD is set: is srun's PMI2 plugin working?", rc);
        return DT_ERR_PMI2;
    }
    if (PMI2_Job_GetId(l->jobid, sizeof l->jobid) != PMI2_SUCCESS) {
        dt_error("PMI2_Job_GetId failed");
        return DT_ERR_PMI2;
    }
    char map[PMI2_MAX_VALLEN] = "";
    PMI2_Info_GetJobAttr("PMI_process_mapping", map, sizeof map, &found);
    if (!found || dt_pmi_map_rank(map, l->size, l->rank, &l->node, &l->local_rank, &l->local_size) != 0) {
        dt_error("PMI2: no usable PMI_process_mapping ('%s') for rank %d of %d", found ? map : "", l->rank, l->size);
        return DT_ERR_PMI2;
    }
    return DT_OK;
}

int dt_pmi2_bcast_bytes(const dt_launch *l, const char *key, void *buf, int n, int root)
{
    static const char hex[] = "0123456789abcdef";
    char val[PMI2_MAX_VALLEN];
    if (l->kind != DT_LAUNCH_PMI2 || n < 1 || 2 * n + 1 > (int)sizeof val) {
        dt_error("PMI2 broadcast of %d bytes under '%s': needs PMI2 and at most %d bytes", n, key,
                 (int)(sizeof val - 1) / 2);
        return DT_ERR_STATE;
    }
    uint8_t *b = buf;
    if (l->rank == root) {
        for (int i = 0; i < n; i++) {
            val[2 * i] = hex[b[i] >> 4];
            val[2 * i + 1] = hex[b[i] & 15];
        }
        val[2 * n] = 0;
        if (PMI2_KVS_Put(key, val) != PMI2_SUCCESS) {
            dt_error("PMI2_KVS_Put of '%s' failed", key);
            return DT_ERR_PMI2;
        }
    }
    if (PMI2_KVS_Fence() != PMI2_SUCCESS) {
        dt_error("PMI2_KVS_Fence failed while exchanging '%s'", key);
        return DT_ERR_PMI2;
    }
    int len = 0;
    if (PMI2_KVS_Get(l->jobid, root, key, val, sizeof val, &len) != PMI2_SUCCESS || len != 2 * n) {
        dt_error("PMI2_KVS_Get of '%s' from rank %d failed or gave %d characters, expected %d", key, root, len, 2 * n);
        return DT_ERR_PMI2;
    }
    for (int i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(val + 2 * i, "%2x", &v) != 1)
            return DT_ERR_PMI2;
        b[i] = (uint8_t)v;
    }
    return DT_OK;
}
#else
int dt_pmi2_bcast_bytes(const dt_launch *l, const char *key, void *buf, int n, int root)
{
    (void)l;
    (void)buf;
    (void)n;
    (void)root;
    dt_error("PMI2 exchange of '%s': this dtrain was built without PMI2 (configure --with-pmi2)", key);
    return DT_ERR_STATE;
}
#endif

#ifdef HAVE_MPI
/* The watchdog of MPI's start: MPI_Init_thread and init_mpi's collectives wait for every rank, with
 * no deadline of their own. */
typedef struct watchdog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;       /* the start completed (under mu) */
    double seconds; /* the limit */
    int rank, size; /* from the launcher's environment (-1: not given) */
} watchdog;

/* the first of three environment variables that is set, as a number (for a message only), or -1 */
static int env_rank_size(const char *a, const char *b, const char *c)
{
    const char *s = getenv(a);
    s = s ? s : getenv(b);
    s = s ? s : getenv(c);
    return s ? atoi(s) : -1;
}

static void *watch_start(void *arg)
{
    watchdog *w = arg;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    /* rank 0 says it; the others give the launcher time to end them after rank 0 exits */
    double s = w->seconds + (w->rank > 0 ? 2 : 0);
    until.tv_sec += (time_t)s;
    until.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    int fire = !w->done;
    pthread_mutex_unlock(&w->mu);
    if (!fire)
        return NULL;
    char who[160];
    if (w->size == 2 && (w->rank == 0 || w->rank == 1))
        snprintf(who, sizeof who, "rank %d did not arrive", 1 - w->rank);
    else if (w->size > 2)
        snprintf(who, sizeof who, "not every one of the %d ranks arrived (MPI cannot name them before it is up)",
                 w->size);
    else
        snprintf(who, sizeof who, "not every rank arrived");
    if (w->rank >= 0 && w->size > 0)
        dt_log_set_rank(w->rank, w->size);
    dt_error("start-up did not complete within %.0f s: %s (MPI_Init waits for every rank; --comm-timeout sets the "
             "limit): ending this rank, the launcher ends the others", w->seconds, who);
    _exit(1); /* MPI_Init cannot be left or aborted from here; exit handlers could wait on it */
}

static int init_mpi(dt_launch *l)
{
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        DT_CHECK_MPI(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided));
    else
        MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        dt_error("MPI gives thread level %d; dtrain's communication thread needs MPI_THREAD_SERIALIZED or more",
                 provided);
        return DT_ERR_MPI;
    }
    DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &l->rank));
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &l->size));
    MPI_Comm local; /* the ranks of this node; key = world rank, so local rank 0 is the lowest */
    DT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, l->rank, MPI_INFO_NULL, &local));
    MPI_Comm_rank(local, &l->local_rank);
    MPI_Comm_size(local, &l->local_size);
    /* node index: how many nodes have their lowest rank below this node's lowest rank */
    int leader = l->local_rank == 0, node = 0;
    MPI_Exscan(&leader, &node, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (l->rank == 0)
        node = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Bcast(&node, 1, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    l->node = node;
    return DT_OK;
}

/* init_mpi under the watchdog (when a deadline is set) */
static int init_mpi_watched(dt_launch *l)
{
    if (launch_timeout <= 0)
        return init_mpi(l);
    watchdog w = {.seconds = launch_timeout,
                  .rank = env_rank_size("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"),
                  .size = env_rank_size("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")};
    pthread_condattr_t ca;
    DT_CHECK_POSIX(pthread_condattr_init(&ca));
    DT_CHECK_POSIX(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC));
    DT_CHECK_POSIX(pthread_cond_init(&w.cv, &ca));
    pthread_condattr_destroy(&ca);
    DT_CHECK_POSIX(pthread_mutex_init(&w.mu, NULL));
    pthread_t th;
    DT_CHECK_POSIX(pthread_create(&th, NULL, watch_start, &w));
    int rc = init_mpi(l);
    pthread_mutex_lock(&w.mu);
    w.done = 1;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}
#endif

enum dt_launch_kind dt_launch_detect(void)
{
    const char *ntasks = getenv("SLURM_NTASKS");
    if (getenv("TORCHELASTIC_RUN_ID")) /* torchrun's agent started this process: it is the innermost */
        return DT_LAUNCH_TORCHRUN;
    if (getenv("PMI_FD"))
        return DT_LAUNCH_PMI2;
    if (getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK"))
        return DT_LAUNCH_MPI;
    if (getenv("DT_WORLD_SIZE"))
        return DT_LAUNCH_LOCAL;
    if (getenv("RANK") && getenv("WORLD_SIZE")) /* env:// by hand: over srun's bare environment, which it names */
        return DT_LAUNCH_TORCHRUN;
    if (ntasks && atol(ntasks) > 1)
        return DT_LAUNCH_SLURM_ENV;
    return DT_LAUNCH_SINGLE;
}

int dt_launch_visible_count(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int k = v && *v ? 1 : 0;
    for (; v && *v; v++)
        k += *v == ',';
    return k;
}

int dt_slurm_first_host(const char *list, char *out, size_t n)
{
    size_t pre = strcspn(list, "[,");
    if (!pre || pre >= n)
        return -1;
    snprintf(out, n, "%.*s", (int)pre, list);
    if (list[pre] != '[')
        return 0;
    const char *num = list + pre + 1, *close = strchr(num, ']');
    size_t digits = strspn(num, "0123456789");
    if (!digits || !close || pre + digits + strcspn(close + 1, ",") >= n)
        return -1;
    snprintf(out + pre, n - pre, "%.*s%.*s", (int)digits, num, (int)strcspn(close + 1, ","), close + 1);
    return 0;
}

/* SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at node index node: its tasks there, or -1 */
static int tasks_on_node(const char *tpn, int node)
{
    for (int at = 0; *tpn;) {
        char *end;
        long count = strtol(tpn, &end, 10), times = 1;
        if (end == tpn || count < 1)
            return -1;
        if (!strncmp(end, "(x", 2)) {
            times = strtol(end + 2, &end, 10);
            if (times < 1 || *end++ != ')')
                return -1;
        }
        if (node < at + times)
            return (int)count;
        at += (int)times;
        tpn = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return -1;
}

int dt_launch_node_plan(int gpus, dt_node_plan *p, char *why, size_t n)
{
    memset(p, 0, sizeof *p);
    enum dt_launch_kind kind = dt_launch_detect();
    const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
    int node = -1, nodes = 0, tasks = 0;
    /* only a Slurm step's tasks (not a batch script's shell, a worker, or torchrun's ranks) */
    if (gpus < 2 || kind == DT_LAUNCH_TORCHRUN || kind == DT_LAUNCH_LOCAL || !tpn ||
        env_int("SLURM_NODEID", 0, 1 << 20, &node) <= 0 || env_int("SLURM_STEP_NUM_NODES", 1, 1 << 20, &nodes) <= 0 ||
        env_int("SLURM_STEP_NUM_TASKS", 1, 1 << 24, &tasks) <= 0 || node >= nodes)
        return 0;
    int local = tasks_on_node(tpn, node);
    if (local < 1 || local >= gpus)
        return 0; /* a task per GPU (or a layout this cannot read: dt_launch_pick_gpu's checks then) */
    if (tasks != nodes) {
        snprintf(why, n, "%d task%s on this node and %d GPUs: %d GPU%s would stay idle; run one task per GPU "
                 "(srun -N%d --ntasks-per-node=%d --gpus-per-node=%d dtrain ...), or one task per node, which "
                 "starts a worker per GPU (srun -N%d --gpus-per-node=%d dtrain ...)", local, local > 1 ? "s" : "",
                 gpus, gpus - local, gpus - local > 1 ? "s" : "", nodes, gpus, gpus, nodes, gpus);
        return -1;
    }
    const char *addr = getenv("MASTER_ADDR"), *list = getenv("SLURM_STEP_NODELIST");
    if (addr && *addr)
        snprintf(p->master_addr, sizeof p->master_addr, "%s", addr);
    else if (!list || dt_slurm_first_host(list, p->master_addr, sizeof p->master_addr) != 0) {
        snprintf(why, n, "SLURM_STEP_NODELIST=%s: no first host to start %d workers a node at (set MASTER_ADDR to "
                 "node 0's address, or run srun -N%d --ntasks-per-node=%d --gpus-per-node=%d dtrain ...)",
                 list ? list : "unset", gpus, nodes, gpus, gpus);
        return -1;
    }
    const char *port = getenv("MASTER_PORT");
    if (port && *port) {
        char *end;
        long v = strtol(port, &end, 10);
        if (*end || v < 1 || v > 65535)
            return snprintf(why, n, "MASTER_PORT=%s: not a port (1..65535) for the workers' rendezvous", port), -1;
        p->master_port = (int)v;
    } else { /* the same on every node of the step; another step's differs */
        const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
        unsigned long j = job ? strtoul(job, NULL, 10) : 0, s = step ? strtoul(step, NULL, 10) : 0;
        p->master_port = 29500 + (int)((j * 16 + s) % 2048);
    }
    p->workers = gpus;
    p->node = node;
    p->nodes = nodes;
    return 1;
}

/* torchrun (or any PyTorch-style env:// launch): ranks from RANK, WORLD_SIZE and LOCAL_RANK, then the
 * rendezvous at MASTER_ADDR (rdzv.h), which checks the world and says where each rank is */
static int init_torchrun(dt_launch *l)
{
    static const char *const need[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!getenv(need[i])) {
            dt_error("a torchrun launch (%s is set) without %s: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, "
                     "MASTER_ADDR and MASTER_PORT; a launch by hand sets them all too",
                     getenv("TORCHELASTIC_RUN_ID") ? "TORCHELASTIC_RUN_ID" : "RANK and WORLD_SIZE", need[i]);
            return DT_ERR_INPUT;
        }
    if (getenv("DT_WORLD_SIZE")) {
        dt_error("dtrain --nproc-per-node under torchrun: one launcher at a time (torchrun --nproc_per_node "
                 "starts the workers itself)");
        return DT_ERR_INPUT;
    }
    int local_size = 0, group = -1;
    if (env_int("WORLD_SIZE", 1, 1 << 24, &l->size) < 0 || env_int("RANK", 0, l->size - 1, &l->rank) < 0 ||
        env_int("LOCAL_RANK", 0, l->size - 1, &l->local_rank) < 0 ||
        env_int("LOCAL_WORLD_SIZE", 1, l->size, &local_size) < 0 || env_int("GROUP_RANK", 0, l->size - 1, &group) < 0 ||
        env_int("MASTER_PORT", 1, 65535, &l->master_port) < 0)
        return DT_ERR_INPUT;
    snprintf(l->master_addr, sizeof l->master_addr, "%s", getenv("MASTER_ADDR"));
    const char *run_id = getenv("TORCHELASTIC_RUN_ID");
    snprintf(l->jobid, sizeof l->jobid, "%s", run_id ? run_id : "");
    /* torchrun's static rendezvous (its default) keeps a store of its own listening at MASTER_PORT on
     * node 0 for the whole run, and says so: dtrain's rendezvous takes the next port */
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    int shifted = agent && !strcmp(agent, "True");
    l->rdzv_port = l->master_port + shifted;
    if (l->rdzv_port > 65535) {
        dt_error("MASTER_PORT=%d: torchrun's own store holds it and dtrain's rendezvous takes the next port, "
                 "which does not exist: start torchrun with a lower --master_port", l->master_port);
        return DT_ERR_INPUT;
    }
    l->kind = DT_LAUNCH_TORCHRUN;
    l->local_size = l->size;
    if (l->size == 1)
        return DT_OK;
    double timeout = launch_timeout > 0 ? launch_timeout : 600, t0 = dt_seconds();
    int node = 0, ls = 1;
    dt_log_set_rank(l->rank, l->size); /* the rendezvous's lines say which rank */
    DT_TRY(dt_rdzv_open(&l->rdzv, l->master_addr, l->rdzv_port, l->rank, l->size, timeout, &node, &ls));
    l->waited_s = dt_seconds() - t0;
    l->node = group >= 0 ? group : node;     /* torchrun's node rank where it gives one */
    l->local_size = local_size ? local_size : ls; /* else the ranks that share this host name */
    if (l->local_rank >= l->local_size) {
        dt_error("LOCAL_RANK=%d but %s %d rank%s on this node: LOCAL_RANK counts from 0 among them", l->local_rank,
                 local_size ? "LOCAL_WORLD_SIZE says" : "the rendezvous finds", l->local_size,
                 l->local_size > 1 ? "s" : "");
        dt_rdzv_close(&l->rdzv);
        return DT_ERR_INPUT;
    }
    return DT_OK;
}

int dt_launch_init(dt_launch *l)
{
    memset(l, 0, sizeof *l);
    l->kind = DT_LAUNCH_SINGLE;
    l->size = 1;
    l->local_size = 1;
    int ntasks = 0, r;
    if (dt_launch_detect() == DT_LAUNCH_TORCHRUN) {
        DT_TRY(init_torchrun(l));
    } else if (env_int("SLURM_NTASKS", 1, 1 << 24, &ntasks) < 0) {
        return DT_ERR_INPUT;
    } else if (getenv("PMI_FD")) {
#ifdef HAVE_PMI2
        l->kind = DT_LAUNCH_PMI2;
        DT_TRY(init_pmi2(l));
#else
        dt_error("started by srun with PMI2 (PMI_FD is set) but this dtrain was built without PMI2; "
                 "rebuild with --with-pmi2 (Debian: libpmi2-0-dev)");
        return DT_ERR_STATE;
#endif
    } else if (getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK")) {
#ifdef HAVE_MPI
        l->kind = DT_LAUNCH_MPI;
        double t0 = dt_seconds();
        DT_TRY(init_mpi_watched(l));
        l->waited_s = dt_seconds() - t0;
#else
        dt_error("started by mpirun or srun --mpi=pmix but this dtrain was built without MPI; rebuild with --with-mpi");
        return DT_ERR_STATE;
#endif
    } else if ((r = env_int("DT_WORLD_SIZE", 1, 1 << 24, &l->size)) != 0) {
        if (r < 0 || env_int("DT_RANK", 0, l->size - 1, &l->rank) <= 0 ||
            env_int("DT_LOCAL_RANK", 0, l->size - 1, &l->local_rank) <= 0) {
            dt_error("DT_WORLD_SIZE is set but DT_RANK or DT_LOCAL_RANK is missing or out of range");
            return DT_ERR_INPUT;
        }
        l->kind = DT_LAUNCH_LOCAL;
        l->local_size = l->size;
    } else if (ntasks > 1) {
        l->kind = DT_LAUNCH_SLURM_ENV;
        l->size = ntasks;
        int nodes = 1;
        if (env_int("SLURM_PROCID", 0, ntasks - 1, &l->rank) <= 0 ||
            env_int("SLURM_LOCALID", 0, ntasks - 1, &l->local_rank) <= 0 ||
            env_int("SLURM_NODEID", 0, 1 << 20, &l->node) < 0 || env_int("SLURM_NNODES", 1, 1 << 20, &nodes) < 0) {
            dt_error("SLURM_NTASKS=%d but SLURM_PROCID or SLURM_LOCALID is missing or out of range", ntasks);
            return DT_ERR_INPUT;
        }
        const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
        l->local_size = tpn ? atoi(tpn) : ntasks / nodes; /* "2(x2)" or "2,1": the first node's count */
        if (l->local_size < l->local_rank + 1)
            l->local_size = l->local_rank + 1;
        const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
        snprintf(l->jobid, sizeof l->jobid, "%s.%s", job ? job : "0", step ? step : "0");
        if (l->rank == 0)
            dt_warn("srun started %d tasks without a PMI server: ranks come from SLURM_PROCID; run srun --mpi=pmi2 "
                    "(GPU) or --mpi=pmix (CPU, MPI) for a proper launch",
                    ntasks);
    }
    dt_log_set_rank(l->rank, l->size);
    if (l->rank == 0 && l->size > 1 && l->kind == DT_LAUNCH_TORCHRUN)
        dt_info("launch: torchrun, %d ranks, %d on this node, rendezvous at %s:%d%s", l->size, l->local_size,
                l->master_addr, l->rdzv_port, l->rdzv_port != l->master_port ? " (MASTER_PORT + 1)" : "");
    else if (l->rank == 0 && l->size > 1) /* a single process needs no announcement */
        dt_info("launch: %s, %d rank%s, %d on this node", dt_launch_kind_name(l->kind), l->size, l->size > 1 ? "s" : "",
                l->local_size);
    return DT_OK;
}

void dt_launch_finalize(dt_launch *l)
{
    dt_rdzv_close(&l->rdzv);
#ifdef HAVE_PMI2
    if (l->kind == DT_LAUNCH_PMI2)
        PMI2_Finalize();
#endif
#ifdef HAVE_MPI
    int inited = 0, fin = 0;
    if (l->kind == DT_LAUNCH_MPI) {
        MPI_Initialized(&inited);
        MPI_Finalized(&fin);
        if (inited && !fin)
            MPI_Finalize();
    }
#endif
    l->kind = DT_LAUNCH_SINGLE;
}
