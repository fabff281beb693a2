#!/bin/sh
# signals.sh: the signals a real run meets besides Slurm's SIGTERM/SIGUSR1 (signal.sh).
# - A signal during validation (10000 images here) ends the pass at the next batch, exit 3 (the pass
#   used to run to its end first); the checkpoint keeps the epoch trained and not validated, so
#   --resume validates it and logs its epoch line (it used to be logged with no validation, a hole
#   in the metrics that an uninterrupted run does not have).
# - SIGHUP (a dropped ssh session) is a stop like SIGTERM: checkpoint, an end line, exit 3 (it used
#   to kill the run with neither).
# - A closed pipe (`dtrain 2>&1 | head -n 1`) does not kill the run: it trains to the end, exit 0.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
fm=/usr/share/datasets/fashion-mnist
small_fmnist "$DT_TMP/idx"
# the small training set with the whole test set (10000 images) for validation
for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do rm -f "$DT_TMP/idx/$f"; ln -s "$fm/$f.gz" "$DT_TMP/idx/$f.gz"; done
expect_status 0 "$DTPACK" fashion-mnist "$DT_TMP/idx" -o "$DT_TMP/fm"
args="-a resnet8 -b 20 -j 1 -p 1"   # 5 steps per epoch

# wait_for FILE PATTERN: until a line of FILE matches (at most 60 s)
wait_for() {
  k=0; while ! grep -q "$2" "$1" && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
  grep -q "$2" "$1" || { cat "$1"; fail "waited 60 s for '$2'"; }
}

"$DTRAIN" $args --warmup-epochs 2 --epochs 3 --results "$DT_TMP/v" "$DT_TMP/fm" >"$DT_TMP/v.out" 2>"$DT_TMP/v.err" &
pid=$!
wait_for "$DT_TMP/v.err" "epoch 0 \[5/5\]"
# at once: the pass (500 batches) has begun or is about to; a signal that lands in the last step
# instead stops the run before validation, with the same outcome, so no timing can fail this
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
grep -E "signal|stopped|valid|error" "$DT_TMP/v.err" || true
[ "$rc" -eq 3 ] || fail "SIGTERM during validation: exit $rc, expected 3"
grep -q "epoch 0: validation top-1" "$DT_TMP/v.err" && fail "SIGTERM during validation: the pass ran to its end"
grep -q '"kind":"epoch"' "$DT_TMP"/v/*/metrics.jsonl && fail "the interrupted epoch was logged before its validation"
grep -q '"kind":"end","reason":"signal","epoch":0,' "$DT_TMP"/v/*/metrics.jsonl || fail "no end line at epoch 0"
expect_status 0 "$DTRAIN" $args --warmup-epochs 2 --epochs 2 --resume auto --results "$DT_TMP/v" "$DT_TMP/fm"
grep -q "resuming from .* at step 5 (epoch 0 \\[5/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume at epoch 0's validation"; }
grep -q "epoch 0: validation top-1" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "the resumed run did not validate epoch 0"; }
for e in 0 1; do
  grep '"kind":"epoch","epoch":'$e, "$DT_TMP"/v/*/metrics.jsonl | grep -q '"val_top1":[0-9]' ||
    fail "epoch $e has no validated epoch line: $(grep '"kind":"epoch"' "$DT_TMP"/v/*/metrics.jsonl)"
done
# the resumed epoch line carries its last step's lr (in warm-up, each step's differs); it once
# carried the next step's, as a requeued Slurm job's metrics showed
lr_of() { grep "$1" "$DT_TMP"/v/*/metrics.jsonl | sed -n 's/.*"lr":\([^,]*\),.*/\1/p'; }
step_lr=$(lr_of '"kind":"step","epoch":0,"epoch_step":5,')
epoch_lr=$(lr_of '"kind":"epoch","epoch":0,')
[ -n "$step_lr" ] && [ "$step_lr" = "$epoch_lr" ] ||
  fail "epoch 0's line has lr '$epoch_lr', its last step had '$step_lr'"
pass "SIGTERM during validation: the pass ends, exit 3; --resume validates epoch 0 and logs it, then trains epoch 1"

"$DTRAIN" $args --epochs 50 --results "$DT_TMP/h" "$DT_TMP/fm" >"$DT_TMP/h.out" 2>"$DT_TMP/h.err" &
pid=$!
wait_for "$DT_TMP/h.err" "epoch 0 \[2/5\]"
kill -HUP $pid
set +e; wait $pid; rc=$?; set -e
[ "$rc" -eq 3 ] || { cat "$DT_TMP/h.err"; fail "SIGHUP: exit $rc, expected 3"; }
# (on a fast machine the signal may land in the epoch's validation: any epoch and step will do)
grep -q "stopped by signal 1 at step [0-9]* (epoch [0-9]* \\[[0-9]*/[0-9]*\\]): checkpoint in" "$DT_TMP/h.err" || { cat "$DT_TMP/h.err"; fail "SIGHUP: no stop line"; }
ls "$DT_TMP"/h/*/checkpoint.h5 >/dev/null || fail "SIGHUP: no checkpoint"
grep -q '"kind":"end","reason":"signal",.*"signal":1,' "$DT_TMP"/h/*/metrics.jsonl || fail "SIGHUP: no end line"
pass "SIGHUP: checkpoint, end line, exit 3"

# sh has no pipefail: the exit status comes back through a file
( "$DTRAIN" $args --epochs 1 --results "$DT_TMP/p" "$DT_TMP/fm" 2>&1; echo $? > "$DT_TMP/p.rc" ) | head -n 1
[ "$(cat "$DT_TMP/p.rc")" -eq 0 ] || fail "output into a pipe closed early: exit $(cat "$DT_TMP/p.rc"), expected 0"
grep -q '"kind":"end","reason":"done"' "$DT_TMP"/p/*/metrics.jsonl || fail "output into a closed pipe: the run did not finish"
grep -q "done: best validation top-1" "$DT_TMP"/p/*/logs/rank-0.log || fail "the rank log does not end with the done line"
pass "output into a pipe closed early (| head -n 1): trained to the end, exit 0, the rank log complete"
