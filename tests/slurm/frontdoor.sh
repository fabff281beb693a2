#!/bin/sh
# frontdoor.sh: the front door's Slurm lines (issue 39) on a real 2-node cluster whose nodes have 4
# fake GPUs each (cluster.sh), srun's default layout of one task per node:
#   - srun -N2 --gpus-per-node=4 dtrain --print-config, DT_DATA in the environment: a plan of 8
#     workers on 2 nodes, GPU i to local rank i (here "with --device cuda": this build's CPU, or a
#     CUDA build that sees no GPU in a fake device, runs on the CPU and says the GPUs stay idle);
#   - the same line with --device cpu trains a small run to the end, DT_DATA from the environment
#     (CPU ranks reduce through MPI: srun's --mpi=pmix, here from SLURM_MPI_TYPE as a site sets it);
#   - the workers one task per node starts (libdt's dt_spawn_nodes, run by rank_probe on the CPU):
#     RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous across both nodes;
#   - two tasks on a node of 4 GPUs: refused in one line giving the srun lines that work.
# What awaits a GPU: dtrain --device cuda starting its 8 workers and training over NCCL.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/slurm/cluster.sh"
[ "${DT_HAVE_PMI2:-no}" = yes ] || skip "built without PMI2 (Debian: libpmi2-0-dev)"
probe="$top_builddir/tests/libdt/rank_probe"
for v in $(env | sed -n 's/^\(DT_[A-Z0-9_]*\)=.*/\1/p'); do   # the caller's defaults stay out
  case $v in DT_TMP|DT_HAVE_*|DT_PYTHON_TORCH|DT_TORCH_TESTS|DT_LONG) ;; *) unset "$v" ;; esac
done
unset MASTER_ADDR MASTER_PORT
export OMP_NUM_THREADS=1
cluster_start
fmnist_packed "$DT_TMP/fm" 256 64
export DT_DATA="$DT_TMP/fm"

# the plan
expect_status 0 timeout 60 srun -N2 --gpus-per-node=4 "$top_builddir/dtrain" --print-config
cat "$DT_TMP/out"
grep -q "^launch: Slurm PMI2: 2 ranks on 2 nodes, 1 on this node" "$DT_TMP/out" || fail "not srun's 2 tasks under PMI2"
grep -q "^plan[a-zA-Z -]*: 8 workers on 2 nodes, 4 on this node (node 0), started by dtrain, one per GPU" "$DT_TMP/out" ||
  fail "no plan of 8 workers on 2 nodes"
for i in 0 1 2 3; do
  grep -q "^  local rank $i: GPU $i (rank $i)\$" "$DT_TMP/out" || fail "no line giving GPU $i to local rank $i"
done
grep -q "^  DATA  *$DT_DATA (a directory; not read here) *environment DT_DATA" "$DT_TMP/out" || fail "DATA not from DT_DATA"
if ! grep -q "HAVE_CUDA 1" "$top_builddir/config.h" 2>/dev/null; then
  grep -q "this run: the CPU (--device auto: this dtrain was built without CUDA), one rank per task: this node's 4 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3) stay idle" \
    "$DT_TMP/out" || fail "a CPU build does not say that the GPUs stay idle"
fi
pass "srun -N2 --gpus-per-node=4 dtrain --print-config: 8 workers on 2 nodes, GPU i to local rank i, DATA from DT_DATA"

# two tasks a node, 4 GPUs: refused (the rule's own words, through the CPU test hook)
expect_status 2 timeout 60 srun -N2 --ntasks-per-node=2 --gpus-per-node=4 "$probe" nodes
grep -q "2 tasks on this node and 4 GPUs: 2 GPUs would stay idle; run one task per GPU (srun -N2 --ntasks-per-node=4 --gpus-per-node=4 dtrain ...), or one task per node, which starts a worker per GPU (srun -N2 --gpus-per-node=4 dtrain ...)" \
  "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "2 tasks, 4 GPUs: no refusal giving the srun lines"; }
expect_status 2 timeout 60 srun -N2 --ntasks-per-node=2 --gpus-per-node=4 env DT_SPAWN_CPU=1 "$top_builddir/dtrain" --device cpu
[ "$(grep -c "error: --device cpu (DT_SPAWN_CPU=1): 2 tasks on this node and 4 GPUs: 2 GPUs would stay idle" "$DT_TMP/err")" -eq 4 ] ||
  { cat "$DT_TMP/err"; fail "dtrain: 2 tasks, 4 GPUs: not refused by each task"; }
expect_status 4 timeout 60 srun -N2 --ntasks-per-node=4 --gpus-per-node=4 "$probe" nodes
expect_status 4 timeout 60 srun -N2 --gpus-per-task=1 "$probe" nodes
pass "2 tasks on a node of 4 GPUs: refused in one line with the srun lines that work; a task per GPU starts nothing"

# the workers: one task per node starts 4, ranks across the nodes (n1 and n2 are names of this host
# alone: the rendezvous's address is given)
expect_status 0 timeout 60 srun -N2 --gpus-per-node=4 env DT_SPAWN_CPU=1 MASTER_ADDR=127.0.0.1 DT_TIMEOUT=20 "$probe" nodes
sort -n -k2 "$DT_TMP/out" > "$DT_TMP/lines"; cat "$DT_TMP/lines"
[ "$(grep -c " size 8 .* id OK kind torchrun\$" "$DT_TMP/lines")" -eq 8 ] || fail "not 8 workers of 8 meeting at the rendezvous"
awk '{ split($6, a, "/"); if ($2 != NR - 1 || a[1] != $2 % 4 || a[2] != 4 || $8 != int($2 / 4)) bad = 1 } END { exit bad || NR != 8 }' \
  "$DT_TMP/lines" || fail "RANK, LOCAL_RANK or the node is not node*4+i, i, node"
pass "srun -N2 --gpus-per-node=4: 4 workers a node, RANK node*4+i of 8, LOCAL_RANK i, the id through the rendezvous"

# --device cpu trains, DT_DATA from the environment
if [ "${DT_HAVE_MPI:-no}" = yes ]; then
  expect_status 0 timeout 120 env SLURM_MPI_TYPE=pmix DT_ARCH=resnet8 DT_BATCH=8 DT_EPOCHS=1 DT_WORKERS=1 \
    DT_THREADS=1 DT_RESULTS="$DT_TMP/results" srun -N2 --gpus-per-node=4 "$top_builddir/dtrain" --device cpu
  set -- "$DT_TMP"/results/*
  [ $# -eq 1 ] && grep -q '"world_size": *2' "$1/run.json" && grep -q '"nodes": *2' "$1/run.json" ||
    { cat "$DT_TMP/err"; fail "no run of 2 ranks on 2 nodes"; }
  grep -q "\"data\": *\"$DT_DATA\"" "$1/run.json" || { cat "$1/run.json"; fail "run.json: not the data of DT_DATA"; }
  grep -q '"kind": *"epoch"' "$1/metrics.jsonl" || { cat "$1/metrics.jsonl" "$DT_TMP/err"; fail "the run did not reach the end of its epoch"; }
  grep -q "its GPU 0 stays unused (CUDA_VISIBLE_DEVICES=0,1,2,3)" "$1/logs/rank-0.log" || fail "rank 0 does not name its idle GPU"
  pass "srun -N2 --gpus-per-node=4 dtrain --device cpu: 2 CPU ranks train to the end with DT_DATA from the environment"
else
  echo "built without MPI: the CPU training run (srun --mpi=pmix) not tried"
fi
