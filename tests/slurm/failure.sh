#!/bin/sh
# failure.sh: one task of a running job killed (kill -9 of rank 3's dtrain, as the OOM killer or a
# failing node would): srun --kill-on-bad-exit ends the others, the job ends FAILED within seconds
# instead of hanging, its output names the killed task and says where the ranks' logs are, no dtrain
# process is left on the nodes, and the checkpoint of the last finished epoch is intact.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/slurm/cluster.sh"
. "$top_srcdir/tests/slurm/jobs.sh"
jobs_start
fmnist_packed "$DT_TMP/fm" 2048 256
export DT_DATA="$DT_TMP/fm" DT_ARCH=resnet8 DT_BATCH=32 DT_EPOCHS=1000 DT_THREADS=1 DT_ARGS="-p 4"
id=$(sbatch --parsable --cpus-per-task=1 --time=10 --output="$DT_TMP/job-%j.out" "$top_srcdir/slurm/cpu_2x2.sbatch")
out="$DT_TMP/job-$id.out"
# wait for the first epoch's checkpoint, then kill rank 3 (its pid is in its log's first line)
k=0
until [ -f "$DT_RESULTS"/*-job"$id"/checkpoint.h5 ] 2>/dev/null && grep -q "epoch 1 \[" "$out"; do
  [ $k -lt 600 ] || { cat "$out"; fail "job $id: no checkpoint after 60 s"; }
  sleep 0.1; k=$((k + 1))
done
run=$(echo "$DT_RESULTS"/*-job"$id")
pid=$(sed -n 's/.* rank 3 of 4: node 1, local rank 1 of 2, pid \([0-9]*\), .*/\1/p' "$run/logs/rank-3.log")
[ -n "$pid" ] && kill -0 "$pid" || fail "rank 3's pid not found in its log"
start=$(date +%s)
kill -KILL "$pid"
job_wait "$id" 120
took=$(($(date +%s) - start))
cat "$out"
[ "$(job_field "$id" JobState)" = FAILED ] || fail "job $id: $(job_field "$id" JobState) after a task was killed"
grep -q "srun: error: n2: task 3: Killed" "$out" || fail "srun's line naming task 3 is missing"
grep -q "dtrain-srun: error: the job step failed (srun exit [0-9]*): srun's lines above name the task; each rank's log is in $DT_RESULTS/\*-job$id\*/logs/" "$out" ||
  fail "no closing line saying where the logs are"
left=$(pgrep -f -- "--results $DT_RESULTS" || true)
[ -z "$left" ] || fail "dtrain processes left behind: $left"
pass "kill -9 of rank 3: job FAILED after $took s, srun names task 3, dtrain-srun says where the logs are, no process left"
expect_status 0 "$top_builddir/dtrain" -e --resume "$run/checkpoint.h5" -a resnet8 -b 32 --threads 1 "$DT_TMP/fm"
grep -q "^evaluate $run/checkpoint.h5: top-1 " "$DT_TMP/out" || { cat "$DT_TMP/out" "$DT_TMP/err"; fail "the checkpoint does not evaluate"; }
pass "the last checkpoint is intact: $(cat "$DT_TMP/out")"
