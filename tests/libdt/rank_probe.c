/* rank_probe.c: run under srun or mpirun by the tests in tests/libdt (not a TAP test). Each rank prints
 *   rank R size S local L/LS node N slurm_localid X id OK|BAD|none kind K
 * where the id is a 128-byte value (an NCCL unique id's size) that rank 0 makes and every rank
 * receives: through the PMI2 key-value store under PMI2, through MPI under MPI, through the
 * rendezvous at MASTER_ADDR under torchrun (which then also meets at its barrier). Exits non-zero
 * when something fails. Fault modes (MPI), the others then join a barrier and must time out
 * (DT_TIMEOUT seconds, default 5) naming rank R:
 *   hang R   rank R sleeps instead of joining
 *   die R    rank R kills itself (SIGKILL)
 *   sleep    every rank sleeps 60 s (for signal tests)
 * Spawning (libdt/spawn.h, as dtrain --nproc-per-node; run with DT_SPAWN_CPU=1 on a CPU):
 *   spawn N [ARGS...]  fork N workers running this program with ARGS, and wait for them
 *   exit R             (a worker) rank R exits with status 3 at once, the others sleep 30 s
 *   nodes [ARGS...]    as dtrain with idle GPUs (launch.h, dt_launch_node_plan): one worker per GPU of
 *                      CUDA_VISIBLE_DEVICES (as Slurm granted) running this program with ARGS, or the
 *                      plan's refusal (exit 2), or "no plan" (exit 4) */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "libdt/rdzv.h"
#include "libdt/spawn.h"
#include "util/check.h"
#include "util/log.h"

int main(int argc, char **argv)
{
    dt_log_init();
    if (argc >= 3 && !strcmp(argv[1], "spawn")) {
        char *child[8] = {"/proc/self/exe"};
        for (int i = 3; i < argc && i < 9; i++)
            child[i - 2] = argv[i];
        return dt_spawn_local(atoi(argv[2]), child, 0, 3.0);
    }
    if (argc >= 2 && !strcmp(argv[1], "nodes")) {
        char *child[8] = {"/proc/self/exe"}, why[512];
        for (int i = 2; i < argc && i < 9; i++)
            child[i - 1] = argv[i];
        dt_node_plan p;
        int k = dt_launch_node_plan(dt_launch_visible_count(), &p, why, sizeof why);
        if (k < 0)
            dt_error("%s", why);
        if (k <= 0)
            return k < 0 ? 2 : (printf("no plan\n"), 4);
        return dt_spawn_nodes(p.workers, child, 0, p.node, p.nodes, p.master_addr, p.master_port, 3.0);
    }
    double timeout = getenv("DT_TIMEOUT") ? atof(getenv("DT_TIMEOUT")) : 5;
    if (dt_launch_detect() == DT_LAUNCH_TORCHRUN) /* the rendezvous's deadline (not MPI_Init's: mpi.sh's starts vary) */
        dt_launch_set_timeout(timeout);
    dt_launch l;
    if (dt_launch_init(&l) != DT_OK)
        return 1;
    unsigned char id[128], want[128];
    for (int i = 0; i < 128; i++)
        want[i] = (unsigned char)(i * 37 + 11); /* covers 0x00 and 0xff-like bytes */
    memcpy(id, want, sizeof id);
    if (l.rank != 0)
        memset(id, 0, sizeof id);
    const char *status = "none";
    dt_comm *c = NULL;
    if (l.kind == DT_LAUNCH_TORCHRUN && l.rdzv) {
        status = dt_rdzv_bcast(l.rdzv, id, 128, timeout) == DT_OK && !memcmp(id, want, 128) &&
                         dt_rdzv_barrier(l.rdzv, timeout) == DT_OK
                     ? "OK"
                     : "BAD";
    } else if (l.kind == DT_LAUNCH_PMI2) {
        status = dt_pmi2_bcast_bytes(&l, "dt-test-id", id, 128, 0) == DT_OK && !memcmp(id, want, 128) ? "OK" : "BAD";
    } else if (l.kind == DT_LAUNCH_MPI) {
        if (dt_comm_mpi(&c, timeout) != DT_OK)
            return 1;
        status = c->ops->broadcast(c, id, 128, DT_UINT8, 0) == DT_OK && !memcmp(id, want, 128) ? "OK" : "BAD";
    }
    const char *lid = getenv("SLURM_LOCALID");
    printf("rank %d size %d local %d/%d node %d slurm_localid %s id %s kind %s\n", l.rank, l.size, l.local_rank,
           l.local_size, l.node, lid ? lid : "-", status, dt_launch_kind_name(l.kind));
    fflush(stdout);
    int rc = strcmp(status, "BAD") == 0;
    if (argc == 2 && !strcmp(argv[1], "sleep"))
        sleep(60);
    if (argc == 3 && !strcmp(argv[1], "exit")) {
        if (l.rank == atoi(argv[2]))
            return 3;
        sleep(30);
    }
    if (argc == 3 && (!strcmp(argv[1], "hang") || !strcmp(argv[1], "die")) && c) {
        if (l.rank == atoi(argv[2])) {
            if (argv[1][0] == 'd')
                raise(SIGKILL);
            sleep(60); /* never arrives; the launcher kills it when the others fail */
        } else {
            c->step = 17;
            rc = c->ops->barrier(c) != DT_OK ? 3 : 0;
        }
    }
    dt_comm_free(c); /* after a timeout: MPI_Abort */
    dt_launch_finalize(&l);
    return rc;
}
