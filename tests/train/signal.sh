#!/bin/sh
# signal.sh: SIGTERM during training (what Slurm sends before a time limit) makes dtrain finish its
# step, write the checkpoint and exit 3; --resume auto then finishes the run; --evaluate of the
# final checkpoint reproduces the validation accuracy logged in metrics.jsonl exactly, and writes
# nothing. resnet8 on Fashion-MNIST at batch 128: in make check its first 12800 training and 1000
# validation images (100 steps), in make check-long all of it (469 steps); the signal comes at step 20.
. "$top_srcdir/tests/common.sh"
if long; then fmnist_packed "$DT_TMP/fm"; else fmnist_packed "$DT_TMP/fm" 12800 1000; fi
args="-a resnet8 -b 128 -j 1 --epochs 1 --lr 0.4 --lr-schedule cosine --wd 5e-4 -p 10 --results $DT_TMP/res $DT_TMP/fm"
"$top_builddir/dtrain" $args >"$DT_TMP/out1" 2>"$DT_TMP/err1" &
pid=$!
k=0; while ! grep -q "\[20/" "$DT_TMP/err1" && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
cat "$DT_TMP/err1" | grep -E "signal|stopped|error" || true
[ "$rc" -eq 3 ] || fail "SIGTERM: exit $rc, expected 3"
grep -q "stopped by signal 15 at step [0-9]* (epoch 0 \\[[0-9]*/[0-9]*\\]): checkpoint in" "$DT_TMP/err1" || fail "no stop line"
grep -q '^{"kind":"end","reason":"signal","epoch":0,"step":[1-9][0-9]*,"signal":15,' "$DT_TMP"/res/*/metrics.jsonl ||
  fail "metrics.jsonl: no end line saying signal 15"
pass "SIGTERM: step finished, checkpoint written, exit 3"
expect_status 0 "$top_builddir/dtrain" --resume auto $args
grep -q "resuming from .* at step [1-9][0-9]* (epoch 0 \\[[1-9]" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume mid-epoch"; }
pass "--resume auto finished the epoch"
run=$(ls -d "$DT_TMP"/res/*)
logged=$(grep '"kind":"epoch"' "$run/metrics.jsonl" | tail -n 1 | sed -n 's/.*"val_top1":\([0-9.]*\).*/\1/p')
before=$(ls -l --time-style=+%s.%N "$run" | md5sum)
expect_status 0 "$top_builddir/dtrain" -e --resume "$run/checkpoint.h5" -a resnet8 -b 128 -j 1 --results "$DT_TMP/res" \
  "$DT_TMP/fm"
got=$(sed -n 's/^evaluate .*: top-1 \([0-9.]*\)%.*/\1/p' "$DT_TMP/out")
awk -v a="$got" -v b="$logged" 'BEGIN { exit !(a + 0 == sprintf("%.2f", b) + 0) }' ||
  fail "--evaluate gives $got, metrics.jsonl logged $logged"
[ "$(ls -l --time-style=+%s.%N "$run" | md5sum)" = "$before" ] || fail "--evaluate wrote into the run directory"
pass "--evaluate reproduces the logged top-1 ($got%) and writes nothing"
