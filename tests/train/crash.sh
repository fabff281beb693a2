#!/bin/sh
# crash.sh: dtrain killed with SIGKILL while it writes a checkpoint leaves the previous checkpoint
# valid, and --resume auto continues from it (removing the dead writer's temporary file).
# resnet50's checkpoint (weights and momentum, about 200 MB) takes long enough to write that polling
# for its temporary file catches the write under way; a kill that lands after the rename does not
# test anything and is tried again (up to 5 times).
. "$top_srcdir/tests/common.sh"
args="-a resnet50 --synthetic --crop 64 -b 2 -j 1 --threads 1 --epochs 1 --max-steps 40 --checkpoint-every 1 -p 0"
caught=0
for try in 1 2 3 4 5; do
  res="$DT_TMP/res$try"
  "$top_builddir/dtrain" $args --results "$res" >"$DT_TMP/out" 2>"$DT_TMP/err" &
  pid=$!
  # the first checkpoint complete, then the next one under way
  k=0
  while [ $k -lt 3000 ] && ! ls "$res"/*/checkpoint.h5 >/dev/null 2>&1; do sleep 0.02; k=$((k + 1)); done
  while [ $k -lt 3000 ] && ! ls "$res"/*/checkpoint.h5.tmp.* >/dev/null 2>&1; do k=$((k + 1)); done
  kill -KILL $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
  if ls "$res"/*/checkpoint.h5.tmp.* >/dev/null 2>&1; then caught=1; break; fi
  echo "try $try: the kill missed the write (k=$k); again"
done
[ $caught -eq 1 ] || fail "could not kill dtrain during a checkpoint write in 5 tries"
run=$(ls -d "$res"/*)
echo "killed during the write: $(ls "$run")"
pass "dtrain killed (SIGKILL) while writing a checkpoint"
expect_status 0 "$top_builddir/dtrain" $args --results "$res" --resume auto --max-steps 2
grep -q "resuming from $run/checkpoint.h5 at step [1-9][0-9]* (epoch 0 \\[[1-9]" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume from the previous checkpoint"; }
grep -q "checkpoint.h5.tmp.*removed, left by a writer that died" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "the dead writer's temporary file was not removed"; }
! ls "$run"/*.tmp.* >/dev/null 2>&1 || fail "temporary files left after the resumed run: $(ls "$run")"
pass "the previous checkpoint was valid and --resume auto continued from it: $(grep -o 'resuming from .*' "$DT_TMP/err")"
