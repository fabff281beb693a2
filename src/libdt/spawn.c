/* spawn.c: forked local workers and their watcher (contract in spawn.h). */
#include "config.h"

#include "libdt/spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef HAVE_CUDA
#include <nccl.h>
#endif

#include "util/check.h"
#include "util/clock.h"
#include "util/log.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

/* the NCCL id the workers share, hex-encoded into buf; "" without CUDA */
static int make_id(char *buf, size_t n)
{
    buf[0] = 0;
#ifdef HAVE_CUDA
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
        dt_error("ncclGetUniqueId: %s", ncclGetErrorString(r));
        return -1;
    }
    const unsigned char *b = (const unsigned char *)&id;
    for (size_t i = 0; i < sizeof id && 2 * i + 2 < n; i++)
        snprintf(buf + 2 * i, 3, "%02x", b[i]);
#else
    (void)n;
#endif
    return 0;
}

static void signal_all(const pid_t *pid, const int *alive, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (alive[i])
            kill(pid[i], sig);
}

/* where the workers are: NULL for dt_spawn_local's one machine, else dt_spawn_nodes's node */
typedef struct nodes_env {
    int node, nodes;
    const char *addr;
    int port;
} nodes_env;

static int spawn(int n, char *const *argv, int gpu, double grace, const nodes_env *ne);

int dt_spawn_local(int n, char *const *argv, int gpu, double grace)
{
    return spawn(n, argv, gpu, grace, NULL);
}

int dt_spawn_nodes(int n, char *const *argv, int gpu, int node, int nodes, const char *addr, int port, double grace)
{
    nodes_env ne = {.node = node, .nodes = nodes, .addr = addr, .port = port};
    return spawn(n, argv, gpu, grace, &ne);
}

/* a worker of dt_spawn_nodes: a torchrun launch of its own (launch.h), nothing of the srun task's */
static void worker_env_nodes(const nodes_env *ne, int n, int i)
{
    static const char *const launcher[] = {"PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_JOBID", "PMIX_RANK",
                                           "OMPI_COMM_WORLD_RANK", "DT_WORLD_SIZE", "DT_RANK", "DT_LOCAL_RANK",
                                           "DT_NCCL_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE"};
    for (size_t k = 0; k < sizeof launcher / sizeof *launcher; k++)
        unsetenv(launcher[k]);
    char v[32];
    snprintf(v, sizeof v, "%d", ne->node * n + i);
    setenv("RANK", v, 1);
    snprintf(v, sizeof v, "%d", ne->nodes * n);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", i);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("LOCAL_WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", ne->node);
    setenv("GROUP_RANK", v, 1);
    setenv("MASTER_ADDR", ne->addr, 1);
    snprintf(v, sizeof v, "%d", ne->port);
    setenv("MASTER_PORT", v, 1);
}

int dt_spawn_cpu_allowed(void)
{
    const char *cpu = getenv("DT_SPAWN_CPU");
    return cpu && !strcmp(cpu, "1");
}

static int spawn(int n, char *const *argv, int gpu, double grace, const nodes_env *ne)
{
    if (!gpu && !dt_spawn_cpu_allowed()) {
        dt_error("--nproc-per-node starts one worker per GPU and this run has no GPU: for CPU training start "
                 "the ranks with mpirun -np %d %s ... (or srun --mpi=pmix)",
                 n, program_invocation_short_name);
        return 2; /* a refused command line, as every other (spawn.h) */
    }
    if (n < 1 || n > 1024) {
        dt_error("--nproc-per-node %d: must be 1..1024", n);
        return 2;
    }
    char id[300];
    if (gpu && !ne && make_id(id, sizeof id) != 0) /* across nodes the rendezvous carries it */
        return 1;
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    int *alive = calloc((size_t)n, sizeof *alive);
    if (!pid || !alive) {
        free(pid);
        free(alive);
        return 1;
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    fflush(NULL);
    int status = 0, running = 0;
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            dt_error("fork of worker %d failed: %s", i, strerror(errno));
            status = 1;
            break;
        }
        if (pid[i] == 0) {
            char v[32];
            sigaction(SIGINT, &old_int, NULL);
            sigaction(SIGTERM, &old_term, NULL);
            snprintf(v, sizeof v, "%d", i);
            if (ne)
                worker_env_nodes(ne, n, i);
            else {
                setenv("DT_RANK", v, 1);
                setenv("DT_LOCAL_RANK", v, 1);
                snprintf(v, sizeof v, "%d", n);
                setenv("DT_WORLD_SIZE", v, 1);
                if (gpu)
                    setenv("DT_NCCL_ID", id, 1);
            }
            execv(argv[0], argv);
            fprintf(stderr, "worker %d: cannot run %s: %s\n", i, argv[0], strerror(errno));
            _exit(127);
        }
        alive[i] = 1;
        running++;
    }
    double stop_at = 0; /* when the others were told to stop: SIGKILL after grace */
    if (status) { /* a fork failed: stop the ones started */
        signal_all(pid, alive, n, SIGTERM);
        stop_at = dt_seconds();
    }
    while (running > 0) {
        int ws;
        pid_t p = waitpid(-1, &ws, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < n; i++)
                if (pid[i] == p && alive[i]) {
                    alive[i] = 0;
                    running--;
                    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
                    if (code != 0 && !status) {
                        status = code;
                        if (WIFSIGNALED(ws))
                            dt_error("worker %d (pid %d) died of signal %d: stopping the other workers", i, (int)p,
                                     WTERMSIG(ws));
                        else
                            dt_error("worker %d (pid %d) exited with status %d: stopping the other workers", i, (int)p,
                                     code);
                        signal_all(pid, alive, n, SIGTERM);
                        stop_at = dt_seconds();
                    }
                }
            continue;
        }
        if (got_signal) { /* pass it on, once; then the same grace as after a failure */
            int sig = got_signal;
            got_signal = 0;
            signal_all(pid, alive, n, sig);
            if (!stop_at)
                stop_at = dt_seconds();
            if (!status)
                status = 128 + sig;
        }
        if (stop_at && dt_seconds() - stop_at > grace) {
            dt_error("%d worker%s still running %.0f s after being told to stop: killing", running, running > 1 ? "s" : "",
                     grace);
            signal_all(pid, alive, n, SIGKILL);
            stop_at = dt_seconds() + 1e9; /* once */
        }
        usleep(20000);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(pid);
    free(alive);
    return status;
}
