#!/bin/sh
# spawn.sh: dtrain --nproc-per-node's worker launcher (libdt/spawn.c) on this machine: N workers
# get ranks 0..N-1 from their parent; a worker that fails makes the parent stop the others and
# exit with its status; SIGTERM to the parent ends every worker; without a GPU it refuses in one
# line saying to use mpirun, exit 2 as any refused command line (DT_SPAWN_CPU=1 lets the tests run
# the launcher on a CPU).
. "$top_srcdir/tests/common.sh"
probe="$top_builddir/tests/libdt/rank_probe"

expect_status 2 "$probe" spawn 2
grep -q "no GPU: for CPU training start the ranks with mpirun -np 2" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no refusal"; }
expect_status 2 "$top_builddir/dtrain" --nproc-per-node 4 --synthetic # (without data: "no data directory" first)
grep -q "no GPU: for CPU training start the ranks with mpirun -np 4" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "dtrain: no refusal"; }
expect_status 2 "$top_builddir/dtrain" --nproc-per-node 0
grep -q -- "--nproc-per-node" "$DT_TMP/err" || fail "dtrain --nproc-per-node 0: not named"
pass "without a GPU: refused, pointing to mpirun (the launcher and dtrain --nproc-per-node)"

export DT_SPAWN_CPU=1
expect_status 0 timeout 60 "$probe" spawn 3
sort "$DT_TMP/out" > "$DT_TMP/lines"; cat "$DT_TMP/lines"
[ "$(grep -c "size 3 local ./3 .*kind dtrain --nproc-per-node" "$DT_TMP/lines")" -eq 3 ] || fail "3 workers of 3"
[ "$(awk '{print $2}' "$DT_TMP/lines" | tr '\n' ' ')" = "0 1 2 " ] || fail "ranks are not 0, 1, 2"
pass "3 workers with ranks 0..2 from their parent"

start=$(date +%s)
expect_status 3 timeout 60 "$probe" spawn 3 exit 1
took=$(( $(date +%s) - start ))
grep -q "worker 1 (pid [0-9]*) exited with status 3: stopping the other workers" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "the failed worker is not named"; }
[ "$took" -lt 20 ] || fail "the others were not stopped ($took s)"
pass "worker 1 fails: the parent names it, stops the others ($took s) and exits 3"

"$probe" spawn 2 sleep >/dev/null 2>&1 &
ppid=$!
k=0; while [ "$(pgrep -c -P $ppid || true)" -lt 2 ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
kids=$(pgrep -P $ppid | tr '\n' ' ')
[ -n "$kids" ] || fail "no workers started"
kill -TERM $ppid
set +e; wait $ppid; rc=$?; set -e
sleep 0.2
for k in $kids; do kill -0 "$k" 2>/dev/null && fail "worker $k survived SIGTERM to its parent"; done
[ "$rc" -ne 0 ] || fail "the parent exited 0 after SIGTERM"
pass "SIGTERM to the parent ends both workers (parent exit $rc)"
