#!/bin/sh
# records.sh: no accuracy that isn't one, no record lost (issue 36). Each part failed before its fix:
# - tied logits were hits: a model with zeroed classifier (every logit equal) scored top-1 100%.
#   Ties now rank in class order (torch.argmax's first maximum, a stable sort): the expected figures
#   are the shares of validation labels 0 and 0..4, counted here from the shard;
# - -e --model-ema on a file without an average evaluated an all-zero "average" (100% with ties),
#   with an empty file name for --pretrained; now one warning and the model alone;
# - a resume that trains nothing (--epochs at or below the checkpoint's epoch, stopped inside it)
#   said "stopped after --max-steps 0", exit 0, end line "done": now refused, exit 2;
# - a resume with another opt level, batch size, momentum or --model-ema than the checkpoint's was
#   silent (O2 to O0, -b, momentum, EMA off) or refused as if the file were damaged (O0 to O2): now
#   one line naming each difference, exit 2, either way round;
# - a failed start (a full disk) left an empty or cut run directory, and run.json's line had no reason;
# - a full disk at model_best.h5 after the epoch's checkpoint lost that epoch's metrics line for
#   good (resume started at the next epoch): now the checkpoint, the line, then model_best.h5, and
#   a resume writes a missing model_best.h5 from the checkpoint; dtreport showed such a record as
#   complete with no note (it now names the missing epochs).
. "$top_srcdir/tests/common.sh"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py' 2>/dev/null || skip "no python3 with h5py (Debian: python3-h5py)"
fmnist_packed "$DT_TMP/fm" 512 300
export OMP_NUM_THREADS=1
run() { "$DTRAIN" -a resnet8 -b 64 -j 1 "$@"; }
cd "$DT_TMP"

# --- ties ---------------------------------------------------------------------------------------
expect_status 0 run --epochs 2 --max-steps 3 --results "$DT_TMP/r0" fm
ck=$(ls "$DT_TMP"/r0/*/checkpoint.h5)
cp "$ck" zero.h5
"$py" - zero.h5 fm/val-00000.h5 >want <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["model/fc.weight"][...] = 0
    f["model/fc.bias"][...] = 0
labels = h5py.File(sys.argv[2], "r")["labels"][...]
n = len(labels)
print("top-1 %.2f%%, top-5 %.2f%%" % (100.0 * (labels == 0).sum() / n, 100.0 * (labels < 5).sum() / n))
PY
expect_status 0 run -e --pretrained zero.h5 fm
grep -q "^evaluate zero.h5: $(cat want)\$" out || { cat out want; fail "zeroed classifier: not the shares of classes 0 and 0..4"; }
pass "tied logits rank in class order: a zeroed classifier scores $(cat want), not 100%"

# --- -e --model-ema without an average -----------------------------------------------------------
expect_status 0 run -e --model-ema --pretrained zero.h5 fm
! grep -q "average" out || { cat out; fail "-e --model-ema --pretrained: evaluated an average that does not exist"; }
grep -q "warn: --model-ema: zero.h5 holds no model average" err || { cat err; fail "-e --model-ema --pretrained: no warning"; }
expect_status 0 run -e --model-ema --resume "$ck" fm
! grep -q "average" out || { cat out; fail "-e --model-ema --resume (no average): evaluated one"; }
grep -q "warn: --model-ema: .*checkpoint.h5 holds no model average (trained without --model-ema)" err ||
  { cat err; fail "-e --model-ema --resume: no warning"; }
pass "-e --model-ema on weights without an average: one warning, the model alone"

# --- resume that trains nothing -----------------------------------------------------------------
expect_status 0 run --epochs 3 --max-steps 11 --results "$DT_TMP/r1" fm # stops at step 11, epoch 1 [3/8]
d1=$(ls -d "$DT_TMP"/r1/*)
cp "$d1/metrics.jsonl" metrics.before
expect_status 2 run --epochs 1 --resume auto --results "$DT_TMP/r1" fm
grep -q "error: --epochs 1: .*checkpoint.h5 is at step 11 (epoch 1 \\[3/8\\]), past this run's last epoch (0): nothing would train (give --epochs 2 or more" err ||
  { cat err; fail "a resume that trains nothing: not refused in one line"; }
cmp -s metrics.before "$d1/metrics.jsonl" || fail "a refused resume wrote to metrics.jsonl"
pass "a resume past the last epoch is refused (exit 2), nothing written"

# --- resume keeps what the state was made with --------------------------------------------------
refused() { # refused WHAT PATTERN ARGS...: a resume of r1's run with ARGS is refused naming PATTERN
  what=$1 pat=$2; shift 2
  expect_status 2 run --epochs 3 --resume auto --results "$DT_TMP/r1" "$@" fm
  [ "$(grep -c error: err)" -eq 1 ] && grep -q -- "error: --resume .*trained with $pat" err ||
    { cat err; fail "$what on resume: not one line naming it"; }
}
refused "O0 to O2" "--opt-level O0 (this command: O2)" --opt-level O2
refused "another batch" "--batch-size 64 (this command: 32)" -b 32
refused "another momentum" "--momentum 0.9 (this command: 0.5)" --momentum 0.5
refused "EMA turned on" "--model-ema off (this command: on)" --model-ema
cmp -s metrics.before "$d1/metrics.jsonl" || fail "a refused resume wrote to metrics.jsonl"
expect_status 0 run --epochs 3 --max-steps 2 --opt-level O2 --model-ema --results "$DT_TMP/r2" fm
refused2() {
  what=$1 pat=$2; shift 2
  expect_status 2 run --epochs 3 --resume auto --results "$DT_TMP/r2" "$@" fm
  grep -q -- "error: --resume .*trained with $pat" err || { cat err; fail "$what on resume: not refused naming it"; }
}
refused2 "O2 to O0" "--opt-level O2 (this command: O0)" --model-ema
refused2 "EMA turned off" "--model-ema on (this command: off)" --opt-level O2
expect_status 0 run --epochs 3 --max-steps 1 --resume auto --results "$DT_TMP/r2" --opt-level O2 --model-ema --lr 0.2 fm
pass "a resume with another opt level, batch, momentum or --model-ema: one line, exit 2, both ways; the lr may change"

# --- a full disk at model_best.h5 ---------------------------------------------------------------
. "$top_srcdir/tests/data/common.sh"
private_tmpfs "$DT_TMP/mnt"
# resnet8's checkpoint is about 640 kB: the tmpfs holds one and the run's small files, not two. The
# first epoch's end writes the checkpoint, then model_best.h5 finds the disk full; the disk is then
# made larger and the run resumed to its end.
$ns sh -c '
  mnt=$1 tmp=$2 dtrain=$3
  mount -t tmpfs -o size=1000k tmpfs "$mnt" || exit 99
  cd "$tmp"
  "$dtrain" -a resnet8 -b 64 -j 1 --epochs 3 --results "$mnt/r" fm >out.1 2>err.1
  echo $? >rc.1
  mount -o remount,size=8m "$mnt" || exit 99
  "$dtrain" -a resnet8 -b 64 -j 1 --epochs 3 --resume auto --results "$mnt/r" fm >out.2 2>err.2
  echo $? >rc.2
  cp "$mnt"/r/*/metrics.jsonl metrics.full
  ls -A "$mnt"/r/* >ls.full
  exit 0' sh "$DT_TMP/mnt" "$DT_TMP" "$DTRAIN" || fail "the namespace script failed"
grep error: err.1 || true
[ "$(cat rc.1)" -eq 1 ] || { cat err.1; fail "disk full at model_best.h5: exit $(cat rc.1), expected 1"; }
grep -q "error: checkpoint .*/model_best.h5 not written: No space left on device" err.1 || { cat err.1; fail "it was not model_best.h5 that found the disk full"; }
[ "$(cat rc.2)" -eq 0 ] || { cat err.2; fail "the resume after the full disk: exit $(cat rc.2)"; }
"$py" - metrics.full <<'PY' || fail "metrics.jsonl after a full disk and a resume is not the run's three epochs"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
epochs = [l["epoch"] for l in lines if l.get("kind") == "epoch"]
print("epoch lines:", epochs)
sys.exit(0 if epochs == [0, 1, 2] else 1)
PY
grep -q "model_best.h5" ls.full || fail "no model_best.h5 after the resume"
pass "a full disk at model_best.h5: exit 1, and the resume completes the record (epochs 0, 1, 2 once each)"

# --- a full disk at the start -------------------------------------------------------------------
# run.json (4 kB tmpfs) or the events file (12 kB) cannot be written: one line with the reason,
# exit 1, and no run directory left behind (it was left empty, or holding a cut run.json)
$ns sh -c '
  mnt=$1 tmp=$2 dtrain=$3
  for kb in 4 12; do
    mount -t tmpfs -o size=${kb}k tmpfs "$mnt" || exit 99
    "$dtrain" -a resnet8 -b 64 -j 1 --epochs 1 --results "$mnt/r" "$tmp/fm" >"$tmp/out.$kb" 2>"$tmp/err.$kb"
    echo $? >"$tmp/rc.$kb"
    ls -A "$mnt/r" >"$tmp/ls.$kb"
    umount "$mnt"
  done
  exit 0' sh "$DT_TMP/mnt" "$DT_TMP" "$DTRAIN" || fail "the namespace script failed"
for kb in 4 12; do
  grep error: "err.$kb" || true
  [ "$(cat "rc.$kb")" -eq 1 ] || fail "a full disk at the start ($kb kB): exit $(cat "rc.$kb"), expected 1"
  [ "$(grep -c error: "err.$kb")" -eq 1 ] && grep -q "error: .*: No space left on device" "err.$kb" ||
    fail "a full disk at the start ($kb kB): not one line with the reason"
  [ ! -s "ls.$kb" ] || fail "a full disk at the start ($kb kB): a run directory was left: $(cat "ls.$kb")"
done
pass "a full disk at the start: one line with the reason, exit 1, no run directory left"

# --- dtreport names epochs missing from a record ------------------------------------------------
# (the record the full disk used to leave: epochs 1 and 2 logged, not 0; the run ended "done")
mkdir -p lost/run
cp "$d1/run.json" lost/run/
grep -v '"kind":"epoch","epoch":0,' metrics.full > lost/run/metrics.jsonl
expect_status 0 "$top_builddir/dtreport" lost
grep -q "1 epoch missing from metrics.jsonl (the first: epoch 0): a record was lost" out ||
  { cat out err; fail "dtreport: no note of the epoch missing from the record"; }
pass "dtreport notes an epoch missing from metrics.jsonl"
