/* launch.h: where this process's rank, world size and local rank come from (doc/design.md, "Launch").
 *
 *   PMI_FD set                        srun with a PMI2 server: libpmi2, local rank from the job's
 *                                     PMI_process_mapping
 *   PMIX_RANK or OMPI_COMM_WORLD_RANK srun --mpi=pmix or mpirun: MPI (local rank from
 *                                     MPI_Comm_split_type)
 *   SLURM_NTASKS > 1, neither above   srun without a PMI server: SLURM_PROCID, SLURM_NTASKS,
 *                                     SLURM_LOCALID, with a warning recommending --mpi=pmi2
 *   DT_RANK/DT_WORLD_SIZE/...         a worker forked by dtrain --nproc-per-node
 *   nothing                           a single process
 * Never a silent singleton: a Slurm step of several tasks always gets its ranks. */
#ifndef DT_DIST_LAUNCH_H
#define DT_DIST_LAUNCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dt_launch_kind { DT_LAUNCH_SINGLE, DT_LAUNCH_PMI2, DT_LAUNCH_MPI, DT_LAUNCH_SLURM_ENV, DT_LAUNCH_LOCAL };

typedef struct dt_launch {
    enum dt_launch_kind kind;
    int rank, size;
    int local_rank, local_size; /* among the ranks on this node */
    int node;                   /* this node's index (0 for a single node) */
    char jobid[64];             /* PMI2's job id, or Slurm's job.step, or "" */
    double waited_s;            /* seconds dt_launch_init took (under MPI: waiting for every rank in MPI_Init) */
} dt_launch;

/* The start-up deadline for dt_launch_init (dtrain's --comm-timeout), 0 (the default) for none.
 * MPI_Init and the launch's collectives wait for every rank, and a rank that never starts (its node's
 * file system hangs before it could load) would keep them waiting forever: past the deadline this
 * process says so in one line (naming the rank when the world is 2; MPI cannot say which before it
 * is up) and exits 1, and the launcher (mpirun, srun --kill-on-bad-exit) ends the others. Rank 0
 * says it; the other ranks wait 2 s more for the launcher, and say it only when it did not end them. */
void dt_launch_set_timeout(double seconds);

/* Detects how this process was started and initialises PMI2 or MPI accordingly (MPI with thread
 * support for a communication thread). DT_OK, or an error after one line (a PMI2 or MPI failure,
 * inconsistent environment variables). */
int dt_launch_init(dt_launch *l);
/* Finalises what dt_launch_init started (PMI2_Finalize, MPI_Finalize). */
void dt_launch_finalize(dt_launch *l);
const char *dt_launch_kind_name(enum dt_launch_kind k);

/* PMI_process_mapping, "(vector,(start,nodes,per_node),...)" (the list repeats when it covers
 * fewer ranks than size): the node, local rank and local size of rank. 0, or -1 when the text
 * does not parse or does not cover the rank. */
int dt_pmi_map_rank(const char *map, int size, int rank, int *node, int *local_rank, int *local_size);

/* The GPU of a rank, as an index among the devices CUDA sees. visible: CUDA_VISIBLE_DEVICES as Slurm
 * (or the user) set it, or NULL; count: how many devices CUDA sees, or -1 to count visible's entries.
 * One device: that one (Slurm bound a GPU to each task: --gpus-per-task=1, --gpu-bind); at least
 * local_size: the local rank's; fewer would make ranks share a GPU, so that is refused. Returns the
 * index and writes the device's name in visible's list (or its index) into name; or -1 with the
 * reason in name. */
int dt_launch_pick_gpu(const char *visible, int count, int local_rank, int local_size, char *name, size_t n);

/* PMI2 key-value exchange (only with DT_LAUNCH_PMI2): rank `root` publishes n bytes under key
 * (hex-encoded, n <= 500), everyone fences and reads them. DT_OK or an error after one line. */
int dt_pmi2_bcast_bytes(const dt_launch *l, const char *key, void *buf, int n, int root);

#ifdef __cplusplus
}
#endif
#endif
