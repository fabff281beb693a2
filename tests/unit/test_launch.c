/* test_launch.c: the pure parts of launch detection. Which GPU a rank takes from CUDA_VISIBLE_DEVICES
 * as Slurm sets it (all of a node's GPUs, one bound GPU per task, UUIDs, too few, none), and where
 * PMI_process_mapping puts a rank (block, cyclic, uneven, repeated lists, bad text), and which launcher
 * wins when several have left their variables (torchrun under srun: torchrun); the first host of a
 * Slurm host list, and the idle-GPU plan from a step's variables (workers, node, address, port, refusals). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "libdt/launch.h"
#include "tap.h"
#include "util/check.h"

/* pick: the index and name dt_launch_pick_gpu gives, or -1 and its reason */
static int pick(const char *visible, int count, int lr, int ls, char *name)
{
    return dt_launch_pick_gpu(visible, count, lr, ls, name, 256);
}

int main(void)
{
    char name[256];
    /* --gpus-per-node=4, 4 tasks per node: every task sees the node's four */
    for (int lr = 0; lr < 4; lr++) {
        int i = pick("0,1,2,3", -1, lr, 4, name);
        char want[8];
        snprintf(want, sizeof want, "%d", lr);
        TAP_OK(i == lr && !strcmp(name, want), "0,1,2,3, local rank %d of 4: device %d named %s", lr, i, name);
    }
    /* the same GPUs with other physical numbers (a node shared with another job) */
    TAP_OK(pick("4,5,6,7", -1, 2, 4, name) == 2 && !strcmp(name, "6"), "4,5,6,7, local rank 2: device 2 = GPU 6 (%s)",
           name);
    /* --gpus-per-task=1 or --gpu-bind: each task sees only its own */
    TAP_OK(pick("3", -1, 3, 4, name) == 0 && !strcmp(name, "3"), "one bound GPU: device 0 = GPU 3 (%s)", name);
    /* CUDA's own count wins over the list (a MIG or UUID list CUDA counts differently) */
    TAP_OK(pick("GPU-aa,GPU-bb", 2, 1, 2, name) == 1 && !strcmp(name, "GPU-bb"), "UUIDs: %s", name);
    TAP_OK(pick(NULL, 8, 5, 8, name) == 5 && !strcmp(name, "5"), "unset, CUDA sees 8: local rank 5 takes device 5");
    TAP_OK(pick(NULL, 1, 0, 1, name) == 0, "unset, one GPU, one rank");
    /* more ranks than GPUs on the node: refused, saying how to ask Slurm */
    TAP_OK(pick("0,1", -1, 2, 4, name) == -1 && strstr(name, "4 ranks on this node and 2 GPUs visible") &&
               strstr(name, "--gpus-per-task=1"),
           "0,1 for 4 ranks refused: %s", name);
    TAP_OK(pick("", -1, 0, 1, name) == -1 && strstr(name, "CUDA_VISIBLE_DEVICES=empty"), "empty list: %s", name);
    TAP_OK(pick(NULL, 0, 0, 1, name) == -1 && strstr(name, "unset"), "no GPU at all: %s", name);
    TAP_OK(pick("0,1,2,3", -1, 0, 2, name) == 0 && pick("0,1,2,3", -1, 1, 2, name) == 1,
           "more GPUs than ranks: the first ones");

    /* PMI_process_mapping */
    int node, lr, ls;
    TAP_OK(dt_pmi_map_rank("(vector,(0,2,4))", 8, 5, &node, &lr, &ls) == 0 && node == 1 && lr == 1 && ls == 4,
           "block 2x4: rank 5 is node 1, local 1 of 4");
    TAP_OK(dt_pmi_map_rank("(vector,(0,2,1))", 4, 3, &node, &lr, &ls) == 0 && node == 1 && lr == 1 && ls == 2,
           "cyclic (the list repeats): rank 3 is node 1, local 1 of 2");
    TAP_OK(dt_pmi_map_rank("(vector,(0,1,2),(1,1,1))", 3, 2, &node, &lr, &ls) == 0 && node == 1 && lr == 0 &&
               ls == 1,
           "uneven 2+1: rank 2 alone on node 1");
    TAP_OK(dt_pmi_map_rank("(vector,(0,1,2),(1,1,1))", 3, 1, &node, &lr, &ls) == 0 && node == 0 && lr == 1 &&
               ls == 2,
           "uneven 2+1: rank 1 second of 2 on node 0");
    TAP_OK(dt_pmi_map_rank("(vector,(0,2", 4, 1, &node, &lr, &ls) == -1, "cut text refused");
    TAP_OK(dt_pmi_map_rank("hello", 4, 1, &node, &lr, &ls) == -1, "not a mapping refused");

    /* which launcher: the environment alone */
    static const char *const vars[] = {"TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "PMI_FD", "PMIX_RANK",
                                       "OMPI_COMM_WORLD_RANK", "DT_WORLD_SIZE", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_SINGLE, "nothing set: a single process");
    setenv("SLURM_NTASKS", "1", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_SINGLE, "one Slurm task: a single process");
    setenv("SLURM_NTASKS", "2", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_SLURM_ENV, "two Slurm tasks, no PMI: the Slurm environment");
    setenv("PMIX_RANK", "0", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_MPI, "PMIX_RANK over SLURM_*: MPI");
    setenv("PMI_FD", "5", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_PMI2, "PMI_FD over PMIX_RANK: PMI2");
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "8", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_PMI2, "RANK and WORLD_SIZE under PMI2 (a site's prolog): PMI2");
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_TORCHRUN, "TORCHELASTIC_RUN_ID over srun's PMI_FD: torchrun (innermost)");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("PMI_FD");
    unsetenv("PMIX_RANK");
    TAP_OK(dt_launch_detect() == DT_LAUNCH_TORCHRUN, "RANK and WORLD_SIZE over a bare srun's SLURM_NTASKS: env://");
    unsetenv("WORLD_SIZE");
    TAP_OK(dt_launch_detect() == DT_LAUNCH_SLURM_ENV, "RANK alone (a stray variable) is no launch");
    unsetenv("RANK");
    unsetenv("SLURM_NTASKS");
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    TAP_OK(dt_launch_detect() == DT_LAUNCH_TORCHRUN, "TORCHELASTIC_RUN_ID alone: torchrun (its variables checked at init)");
    dt_launch l;
    TAP_OK(dt_launch_init(&l) == DT_ERR_INPUT, "torchrun without RANK: refused at init, not a single process");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    TAP_OK(dt_launch_init(&l) == DT_OK && l.kind == DT_LAUNCH_TORCHRUN && l.size == 1 && !l.rdzv,
           "torchrun with a world of 1: no rendezvous, a world of 1");
    setenv("DT_WORLD_SIZE", "1", 1);
    TAP_OK(dt_launch_init(&l) == DT_ERR_INPUT, "dtrain --nproc-per-node's worker under torchrun: refused");

    /* idle GPUs: Slurm's host lists, and the plan from a step's variables */
    static const char *const lists[][2] = {{"n1", "n1"}, {"n[1-2]", "n1"}, {"gpu[007-010,012]", "gpu007"},
                                           {"a1,b[2-3]", "a1"}, {"n[3-4]-ib,x1", "n3-ib"}, {"[1-2]", NULL},
                                           {"n[x]", NULL}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        int rc = dt_slurm_first_host(lists[i][0], name, sizeof name);
        TAP_OK(lists[i][1] ? rc == 0 && !strcmp(name, lists[i][1]) : rc == -1, "host list %s: first %s", lists[i][0],
               lists[i][1] ? lists[i][1] : "refused");
    }
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("DT_WORLD_SIZE");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    setenv("SLURM_JOB_ID", "1000", 1);
    setenv("SLURM_STEP_ID", "2", 1);
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_STEP_NUM_NODES", "2", 1);
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "1(x2)", 1);
    setenv("SLURM_STEP_NODELIST", "g[07-08]", 1);
    dt_node_plan p;
    char why[512];
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == 1 && p.workers == 4 && p.node == 1 && p.nodes == 2 &&
               !strcmp(p.master_addr, "g07") && p.master_port == 29500 + (1000 * 16 + 2) % 2048,
           "one task a node, 4 GPUs: 4 workers, node 1 of 2, rendezvous at g07, the port from job and step");
    TAP_OK(dt_launch_node_plan(1, &p, why, sizeof why) == 0, "one GPU: no workers");
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "4000", 1);
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == 1 && !strcmp(p.master_addr, "10.0.0.1") && p.master_port == 4000,
           "MASTER_ADDR and MASTER_PORT where set");
    setenv("MASTER_PORT", "70000", 1);
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == -1 && strstr(why, "MASTER_PORT=70000"), "a bad MASTER_PORT: %s",
           why);
    unsetenv("MASTER_PORT");
    setenv("SLURM_STEP_NUM_TASKS", "3", 1); /* srun -N2 -n3: 2 on node 0, 1 on node 1 */
    setenv("SLURM_STEP_TASKS_PER_NODE", "2,1", 1);
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == -1 && strstr(why, "srun -N2 --ntasks-per-node=4 --gpus-per-node=4"),
           "uneven tasks, fewer than the GPUs: refused (%s)", why);
    setenv("SLURM_STEP_TASKS_PER_NODE", "4,4", 1);
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == 0, "a task per GPU: no workers");
    unsetenv("SLURM_STEP_TASKS_PER_NODE");
    TAP_OK(dt_launch_node_plan(4, &p, why, sizeof why) == 0, "not a Slurm step (a batch script's shell): no workers");
    return tap_done();
}
