#!/bin/sh
# gpu_scripts.sh: the GPU batch scripts and the scaling study on a real 2-node Slurm cluster whose
# nodes have 4 fake GPUs each (character devices as gres), with the CPU override DT_DEVICE=cpu: the
# same #SBATCH lines, variables and dtrain-srun, on CPU ranks. Each rank parses CUDA_VISIBLE_DEVICES
# as Slurm set it and logs the GPU its local rank takes (and leaves unused). resnet50_2x4 (8 ranks,
# 2 nodes), resnet50_1x4, resnet50_1x1, a node asked for fewer GPUs than tasks (refused for GPUs,
# said in the log), then slurm/scaling.sh: 1, 2, 4 and 8 "GPUs" and the dtreport job after them.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/slurm/cluster.sh"
. "$top_srcdir/tests/slurm/jobs.sh"
CL_CPUS=8 jobs_start
fmnist_packed "$DT_TMP/fm" 1024 256   # 4 steps an epoch at 8 ranks of 32, 32 at 1
export DT_DATA="$DT_TMP/fm" DT_ARCH=resnet8 DT_BATCH=32 DT_EPOCHS=1 DT_DEVICE=cpu DT_ARGS="-p 2"

# submit SCRIPT SBATCH_OPTIONS...: the job id, after it left the queue COMPLETED with exit 0
submit() {
  script=$1; shift
  id=$(sbatch --parsable --cpus-per-task=1 --time=10 --output="$DT_TMP/job-%j.out" "$@" "$top_srcdir/slurm/$script")
  job_wait "$id" 300
  [ "$(job_field "$id" JobState)" = COMPLETED ] || { cat "$DT_TMP/job-$id.out"; fail "$script: job $id $(job_field "$id" JobState)"; }
}
# gpus_logged ID RANKS PER_NODE: every rank's log says it leaves the GPU of its local rank unused
gpus_logged() {
  set -- "$DT_RESULTS"/*-job"$1" "$2" "$3" "$4"
  r=0
  while [ $r -lt "$2" ]; do
    l=$((r % $3))
    grep -q "rank $r of $2: node [01], local rank $l of $3, pid [0-9]*, cpu, 1 compute thread; its GPU $l stays unused (CUDA_VISIBLE_DEVICES=$4)" \
      "$1/logs/rank-$r.log" || { cat "$1/logs/rank-$r.log"; fail "rank $r: no line naming GPU $l of $4"; }
    r=$((r + 1))
  done
}

submit resnet50_2x4.sbatch
grep -q "srun '--mpi=pmix'" "$DT_TMP/job-$id.out" || fail "2x4 with DT_DEVICE=cpu: not started under PMIx"
grep -q "opt-level O2" "$DT_TMP/job-$id.out" || fail "2x4: the script's O2 default is not what ran"
grep -q "resnet8 on 8 ranks (MPI)" "$DT_TMP/job-$id.out" || fail "2x4: not 8 ranks"
set -- "$DT_RESULTS"/*-job"$id"
gpus_logged "$id" 8 4 0,1,2,3
pass "resnet50_2x4.sbatch, DT_DEVICE=cpu: 8 ranks on 2 nodes, O2; rank r logs GPU r%4 of CUDA_VISIBLE_DEVICES=0,1,2,3"

submit resnet50_1x4.sbatch
gpus_logged "$id" 4 4 0,1,2,3
pass "resnet50_1x4.sbatch: 4 ranks on one node, each naming its GPU"
submit resnet50_1x1.sbatch
gpus_logged "$id" 1 1 0
pass "resnet50_1x1.sbatch: one rank, GPU 0"

# the user asked for fewer GPUs than tasks: a GPU run would be refused, a CPU run says so
submit resnet50_1x4.sbatch --gpus-per-node=2
grep -q "rank 3 of 4: .*with --device cuda: 4 ranks on this node and 2 GPUs visible (CUDA_VISIBLE_DEVICES=0,1): ranks would share a GPU" \
  "$DT_RESULTS"/*-job"$id"/logs/rank-3.log || { cat "$DT_RESULTS"/*-job"$id"/logs/rank-3.log; fail "2 GPUs for 4 tasks: not said"; }
pass "4 tasks and --gpus-per-node=2: each rank logs that GPU ranks would share a GPU"

# as shipped (--device cuda) where there is no GPU: srun --mpi=pmi2, and every rank stops at its
# device check with one line and exit 2: a dtrain built without CUDA on its command line, before the
# launch (a rank refusing later got its slower peers killed by --kill-on-bad-exit under load: exit
# 143), a CUDA build past the launch (GPU ranks need no MPI)
if [ "${DT_HAVE_CUDA:-no}" = yes ]; then want="--device cuda: no GPU is visible"; else want="this dtrain was built without CUDA"; fi
[ "${DT_HAVE_PMI2:-no}" = yes ] || skip_pmi2=1
if [ -z "${skip_pmi2:-}" ]; then
  id=$(DT_DEVICE=cuda sbatch --parsable --cpus-per-task=1 --time=10 --output="$DT_TMP/job-%j.out" "$top_srcdir/slurm/resnet50_2x4.sbatch")
  job_wait "$id" 120
  cat "$DT_TMP/job-$id.out"
  grep -q "srun '--mpi=pmi2'" "$DT_TMP/job-$id.out" || fail "2x4 as shipped: not started under PMI2"
  [ "$(job_field "$id" ExitCode)" = 2:0 ] || fail "2x4 as shipped without a GPU: job exit $(job_field "$id" ExitCode), expected 2:0"
  [ "$(grep -c "error: .*$want" "$DT_TMP/job-$id.out")" -eq 8 ] || fail "2x4 as shipped: expected 8 ranks saying '$want'"
  pass "resnet50_2x4.sbatch as shipped, no GPU here: srun --mpi=pmi2, each of the 8 ranks says '$want', exit 2"
else
  echo "built without PMI2: resnet50_2x4.sbatch as shipped (srun --mpi=pmi2) not tried"
fi

# the scaling study: four runs and the report job that waits for them
export DT_RESULTS="$DT_TMP/scaling"
expect_status 0 env SCALING_GPUS="1 2 4 8" sh "$top_srcdir/slurm/scaling.sh" --cpus-per-task=1 --time=10
cat "$DT_TMP/out"
[ "$(grep -c "^submitted [1248] GPUs" "$DT_TMP/out")" -eq 4 ] || fail "scaling.sh: not 4 submissions"
report=$(sed -n 's/^submitted the report: job \([0-9]*\),.*/\1/p' "$DT_TMP/out")
[ -n "$report" ] || fail "scaling.sh: no report job"
job_wait "$report" 300
cat "$DT_RESULTS"/report-*.out
[ "$(job_field "$report" JobState)" = COMPLETED ] || fail "the report job: $(job_field "$report" JobState)"
cat "$DT_RESULTS/RESULTS.md"
for g in 1 2 4 8; do
  case $g in 1) layout="1 rank (1 x 1)" ;; 2) layout="2 ranks (1 x 2)" ;; 4) layout="4 ranks (1 x 4)" ;; 8) layout="8 ranks (2 x 4)" ;; esac
  grep -q "^| [^|]*-w$g-job[0-9]* | $layout | cpu | 32 | $((32 * g)) | O2 fp16 | 1/1 | [0-9.]* |" "$DT_RESULTS/RESULTS.md" ||
    fail "RESULTS.md: no row for $g ranks ($layout)"
done
[ "$(grep -c '^| [^|]*-w[248]-job[0-9]* | .* | [0-9.]*x | [0-9.]*% |' "$DT_RESULTS/RESULTS.md")" -eq 3 ] ||
  fail "RESULTS.md: the 2, 4 and 8-rank rows should have a speed-up and an efficiency"
[ -s "$DT_RESULTS/plots/resnet8-fm-throughput.svg" ] || { ls "$DT_RESULTS/plots"; fail "no throughput plot"; }
pass "scaling.sh: 1, 2, 4 and 8-rank runs, then dtreport's table with speed-up and efficiency, and the throughput plot"
