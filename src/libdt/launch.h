/* launch.h: where this process's rank, world size and local rank come from (doc/design.md, "Launch").
 *
 *   TORCHELASTIC_RUN_ID               torchrun or torch.distributed.launch: RANK, WORLD_SIZE, LOCAL_RANK,
 *                                     and a TCP rendezvous at MASTER_ADDR:MASTER_PORT (rdzv.h) that
 *                                     checks the world and carries the NCCL id. First, over every other
 *                                     launcher: torchrun is always the innermost (srun or mpirun start
 *                                     torchrun, never the reverse), so PMI_FD, PMIX_RANK and SLURM_*
 *                                     beside its variables are its agent's, inherited. With
 *                                     DT_WORLD_SIZE too: refused.
 *   PMI_FD set                        srun with a PMI2 server: libpmi2, local rank from the job's
 *                                     PMI_process_mapping
 *   PMIX_RANK or OMPI_COMM_WORLD_RANK srun --mpi=pmix or mpirun: MPI (local rank from
 *                                     MPI_Comm_split_type)
 *   SLURM_NTASKS > 1, neither above   srun without a PMI server: SLURM_PROCID, SLURM_NTASKS,
 *                                     SLURM_LOCALID, with a warning recommending --mpi=pmi2
 *   DT_RANK/DT_WORLD_SIZE/...         a worker forked by dtrain --nproc-per-node
 *   RANK and WORLD_SIZE, none above   a PyTorch-style (env://) launch by hand: as torchrun. Over
 *                                     SLURM_NTASKS alone (the variables set on purpose are the more
 *                                     precise); under PMI2 or MPI they are left alone (a site's prolog
 *                                     may set them for PyTorch).
 *   nothing                           a single process
 * Never a silent singleton: a Slurm step of several tasks always gets its ranks. */
#ifndef DT_DIST_LAUNCH_H
#define DT_DIST_LAUNCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dt_launch_kind {
    DT_LAUNCH_SINGLE,
    DT_LAUNCH_PMI2,
    DT_LAUNCH_MPI,
    DT_LAUNCH_SLURM_ENV,
    DT_LAUNCH_LOCAL,
    DT_LAUNCH_TORCHRUN
};

struct dt_rdzv;

typedef struct dt_launch {
    enum dt_launch_kind kind;
    int rank, size;
    int local_rank, local_size; /* among the ranks on this node */
    int node;                   /* this node's index (0 for a single node) */
    char jobid[64];             /* PMI2's job id, or Slurm's job.step, or "" */
    double waited_s;            /* seconds dt_launch_init took (under MPI: waiting for every rank in MPI_Init) */
    /* DT_LAUNCH_TORCHRUN only: MASTER_ADDR and MASTER_PORT as given, the port dtrain's rendezvous
     * listens on (MASTER_PORT, or MASTER_PORT + 1 where torchrun's own store holds MASTER_PORT:
     * TORCHELASTIC_USE_AGENT_STORE=True), and the open rendezvous (NULL for a world of 1) */
    char master_addr[256];
    int master_port, rdzv_port;
    struct dt_rdzv *rdzv;
} dt_launch;

/* Which launcher started this process, from the environment alone (the order above; nothing is
 * initialised, nothing is logged): for printing a launch plan before any launch. dt_launch_init
 * decides the same way. */
enum dt_launch_kind dt_launch_detect(void);

/* The start-up deadline for dt_launch_init (dtrain's --comm-timeout), 0 (the default) for none
 * (torchrun's rendezvous then has 600 s: it cannot leave its deadline to a launcher).
 * MPI_Init and the launch's collectives wait for every rank, and a rank that never starts (its node's
 * file system hangs before it could load) would keep them waiting forever: past the deadline this
 * process says so in one line (naming the rank when the world is 2; MPI cannot say which before it
 * is up) and exits 1, and the launcher (mpirun, srun --kill-on-bad-exit) ends the others. Rank 0
 * says it; the other ranks wait 2 s more for the launcher, and say it only when it did not end them. */
void dt_launch_set_timeout(double seconds);

/* Detects how this process was started and initialises PMI2 or MPI accordingly (MPI with thread
 * support for a communication thread), or meets the other ranks at torchrun's rendezvous. DT_OK, or
 * an error after one line (a PMI2 or MPI failure, inconsistent environment variables, the
 * rendezvous's port in use, its rank 0 not answering, world sizes that differ). */
int dt_launch_init(dt_launch *l);
/* Finalises what dt_launch_init started (PMI2_Finalize, MPI_Finalize, the rendezvous's connections). */
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

/* Idle GPUs (doc/design.md, "Launch"): a Slurm step whose tasks on a node see more GPUs than there
 * are tasks there (srun -N2 --gpus-per-node=4 dtrain: one task per node) would leave GPUs idle. With
 * one task per node, that task becomes a launcher of one worker per GPU (dt_spawn_nodes): worker i
 * of node k is rank k*G+i of nodes*G, local rank i, taking GPU i; the workers meet as a torchrun
 * launch (RANK, WORLD_SIZE, LOCAL_RANK ... and the TCP rendezvous, which carries the NCCL id) at
 * node 0's host (the first of SLURM_STEP_NODELIST, or MASTER_ADDR where set) and a port made from
 * the job and step ids (29500 + (job * 16 + step) % 2048, or MASTER_PORT where set): Slurm's
 * environment alone, the same on every node, so no launcher is started to agree on them. Several
 * tasks on a node but fewer than its GPUs cannot be helped so: refused. */
typedef struct dt_node_plan {
    int workers;      /* per node: its GPUs */
    int node, nodes;  /* SLURM_NODEID, SLURM_STEP_NUM_NODES */
    char master_addr[256];
    int master_port;
} dt_node_plan;

/* The plan for gpus GPUs seen by this task (CUDA's count, or Slurm's grant for a plan only), from
 * the environment (nothing is started): 1 and *p filled when this task is to start the workers; 0
 * when it is a rank as launched (not a Slurm step, 1 GPU or none, as many tasks as GPUs, already a
 * worker or under torchrun); -1 with the one line of the refusal in why (the srun line that works). */
int dt_launch_node_plan(int gpus, dt_node_plan *p, char *why, size_t n);

/* The number of entries in CUDA_VISIBLE_DEVICES (the GPUs Slurm granted this task), 0 when unset
 * or empty: what a plan counts where CUDA cannot (a CPU build, or no driver). */
int dt_launch_visible_count(void);

/* The first host of a Slurm host list ("n[1-2]" is n1, "gpu[007-010]-ib,x" gpu007-ib): 0, or -1
 * when it does not parse. */
int dt_slurm_first_host(const char *list, char *out, size_t n);

/* PMI2 key-value exchange (only with DT_LAUNCH_PMI2): rank `root` publishes n bytes under key
 * (hex-encoded, n <= 500), everyone fences and reads them. DT_OK or an error after one line. */
int dt_pmi2_bcast_bytes(const dt_launch *l, const char *key, void *buf, int n, int root);

#ifdef __cplusplus
}
#endif
#endif
