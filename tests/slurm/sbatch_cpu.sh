#!/bin/sh
# sbatch_cpu.sh: the CPU batch script, submitted with sbatch to a real 2-node Slurm cluster started
# here, on a small packed dataset: the job completes, its output says what ran, the run directory
# holds run.json (4 ranks on 2 nodes, the job id), 2 epoch lines, a checkpoint and one log per rank
# written on that rank's node, and dtreport tables the run. A bad data path ends the job at once
# with dtrain's one line and exit 2 in the job's output.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/slurm/cluster.sh"
. "$top_srcdir/tests/slurm/jobs.sh"
CL_CPUS=8 jobs_start
fmnist_packed "$DT_TMP/fm" 2048 512

export DT_DATA="$DT_TMP/fm" DT_ARCH=resnet8 DT_BATCH=32 DT_EPOCHS=2 DT_THREADS=1 DT_ARGS="--deterministic -p 8"
id=$(sbatch --parsable --cpus-per-task=1 --time=10 --output="$DT_TMP/job-%j.out" "$top_srcdir/slurm/cpu_2x2.sbatch")
job_wait "$id" 300
out="$DT_TMP/job-$id.out"
cat "$out"
[ "$(job_field "$id" JobState)" = COMPLETED ] && [ "$(job_field "$id" ExitCode)" = 0:0 ] ||
  { job_debug "$id"; fail "job $id: $(job_field "$id" JobState), exit $(job_field "$id" ExitCode)"; }
grep -q "dtrain-srun: job $id (run 0 after requeues): srun '--mpi=pmix'" "$out" || fail "dtrain-srun did not say how it ran"
grep -q "dtrain-srun: dtrain finished" "$out" || fail "no closing line"
pass "sbatch slurm/cpu_2x2.sbatch: job $id COMPLETED, exit 0:0, under srun --mpi=pmix"

set -- "$DT_RESULTS"/*-job"$id"
[ $# -eq 1 ] && [ -d "$1" ] || fail "expected one run directory of job $id under $DT_RESULTS: $*"
run=$1
grep -q '"world_size": *4' "$run/run.json" && grep -q '"nodes": *2' "$run/run.json" &&
  grep -q '"ranks_per_node": *2' "$run/run.json" || { cat "$run/run.json"; fail "run.json: not 4 ranks on 2 nodes"; }
[ "$(grep -c '"kind": *"epoch"' "$run/metrics.jsonl")" -eq 2 ] || fail "metrics.jsonl: expected 2 epoch lines"
[ -s "$run/checkpoint.h5" ] || fail "no checkpoint.h5"
for r in 0 1 2 3; do
  log="$run/logs/rank-$r.log"
  [ -s "$log" ] || fail "no $log"
  grep -q "\[rank $r/4 n[12]\]" "$log" || { head -n 3 "$log"; fail "$log: lines not tagged with rank $r and a node name"; }
done
[ "$(cat "$run"/logs/*.log | grep -o '\[rank [0-9]/4 n[12]\]' | sort -u | sed 's/.* //' | sort -u | tr -d '\n')" = "n1]n2]" ] ||
  fail "the ranks' logs do not come from both nodes"
pass "results: run directory named with the job id, run.json (4 ranks, 2 nodes), 2 epochs, checkpoint, 4 rank logs from n1 and n2"

expect_status 0 "$top_builddir/dtreport" "$DT_RESULTS"
cat "$DT_TMP/out"
grep -q "^| $(basename "$run") | 4 ranks (2 x 2) | cpu | 32 | 128 | O0 | 2/2 |" "$DT_TMP/out" ||
  fail "dtreport: no row for the run with 2 x 2 ranks, batch 32 (128 global), O0, 2 epochs"
pass "dtreport tables the job's run"

DT_DATA="$DT_TMP/nowhere" DT_ARGS="" id=$(sbatch --parsable --cpus-per-task=1 --time=10 --output="$DT_TMP/job-%j.out" \
  "$top_srcdir/slurm/cpu_2x2.sbatch")
job_wait "$id" 120
cat "$DT_TMP/job-$id.out"
[ "$(job_field "$id" ExitCode)" = 2:0 ] ||
  { job_debug "$id"; fail "a bad data path: job exit $(job_field "$id" ExitCode), expected 2:0"; }
grep -q "error: .*$DT_TMP/nowhere" "$DT_TMP/job-$id.out" || fail "the job's output does not name the bad path"
grep -q "dtrain-srun: error: dtrain refused its input (exit 2)" "$DT_TMP/job-$id.out" || fail "no closing line for exit 2"
pass "a bad DT_DATA: the job ends with exit 2 and the line naming the path"
