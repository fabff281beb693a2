/* spawn.h: dtrain --nproc-per-node N without Slurm: the parent forks N workers of the same program
 * on this machine, one per GPU, as torch.distributed.launch does, and watches them.
 *   - each worker gets DT_RANK, DT_LOCAL_RANK (0..N-1) and DT_WORLD_SIZE=N (launch.h reads them),
 *     and DT_NCCL_ID: the parent makes the NCCL unique id, so no address or port is needed;
 *   - SIGINT and SIGTERM to the parent go to every worker;
 *   - when a worker fails (non-zero exit, or a signal), the others get SIGTERM, then SIGKILL after
 *     grace seconds, and the parent exits with the failure: no worker is left behind.
 * CPU training has no NCCL: there the parent refuses with one line saying to use mpirun. */
#ifndef DT_DIST_SPAWN_H
#define DT_DIST_SPAWN_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runs argv (argv[0] a path, NULL-terminated) as n workers and waits for them. Returns the exit
 * status for the parent: 0 when all succeeded, else the first failure's (128 + signal for a
 * signal); 2 after one line when the request is refused (no GPU, n outside 1..1024: a bad command
 * line), 1 after one line when spawning failed (fork, memory, the NCCL id). gpu: 1 when the workers
 * will use NCCL (a CUDA build with a device); a CPU build refuses unless DT_SPAWN_CPU=1 is set
 * (tests). */
int dt_spawn_local(int n, char *const *argv, int gpu, double grace);
/* 1 when DT_SPAWN_CPU=1: the tests' way to run the launchers on a CPU */
int dt_spawn_cpu_allowed(void);

/* The same for a node of several (launch.h, dt_launch_node_plan: one srun task per node starting
 * one worker per GPU): worker i gets RANK node*n+i, WORLD_SIZE nodes*n, LOCAL_RANK i,
 * LOCAL_WORLD_SIZE n, GROUP_RANK node, MASTER_ADDR addr and MASTER_PORT port, as torchrun gives
 * them, and none of the srun task's launcher (PMI_FD, PMIX_RANK ...): the workers meet at the
 * rendezvous at addr:port, which carries the NCCL id. Failures and signals as above, on this node;
 * a failed node's workers leave the others' at their deadline (the rendezvous's or NCCL's). */
int dt_spawn_nodes(int n, char *const *argv, int gpu, int node, int nodes, const char *addr, int port, double grace);

#ifdef __cplusplus
}
#endif
#endif
