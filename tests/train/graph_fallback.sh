#!/bin/sh
# graph_fallback.sh: a capture that meets what no capture can hold (an allocation, a host wait)
# fails cleanly and the run goes on without graphs: one line from the backend naming the call, one
# warning from the trainer naming the step, exit 0, and the run ends where the same run without
# --graph ends, bit for bit (every step's loss; with h5py, the final checkpoints too: the model's
# step and BN's batch counts, which the failed capture counted once already, counted once).
# run.json says what the steps ran as at the end: "graphs" false and "graphs_off_at_step" 2 after
# the failed capture (it said true), true and null for the run whose capture held, false and null
# without --graph; the last checkpoint's record (its config) says the same.
# DT_PLANT_CAPTURE_FAULT (train/step.c) makes the call inside the capture of the second step, through
# the backend, after the forward: alloc (mem_alloc of 4 KiB) or hostwait (event_sync on the model's
# io_event, recorded inside the capture). On the CPU, --graph captures on dt_cpu_graph_backend
# (nn/cpu/capture.c), which fails the capture as the CUDA backend does. resnet8 on synthetic data,
# 5 steps of 8 images: no data set needed, so that tests/gpu/rehearse.sh runs it on the GPU bundle's
# dtrain (DTRAIN_UNDER_TEST=PATH overrides the build's).
. "$top_srcdir/tests/common.sh"
DTRAIN=${DTRAIN_UNDER_TEST:-$DTRAIN}
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || py=

# run NAME FAULT OPTIONS...: resnet8, 5 synthetic steps, into $DT_TMP/NAME, with
# DT_PLANT_CAPTURE_FAULT=FAULT (empty: none), exit 0
run() {
  name=$1 fault=$2
  shift 2
  expect_status 0 env OMP_NUM_THREADS=1 DT_PLANT_CAPTURE_FAULT="$fault" "$DTRAIN" -a resnet8 --synthetic --crop 32 \
    -b 8 --max-steps 5 -p 1 -j 1 --results "$DT_TMP/$name" "$@"
  cp "$DT_TMP/err" "$DT_TMP/$name.err"
}
# losses NAME: every step's number, lr and loss, then the epoch's, as metrics.jsonl records them
losses() {
  grep -o '"step":[0-9]*,"lr":[^,]*,"train_loss":[^,]*' "$DT_TMP/$1"/*/metrics.jsonl
}
# count NAME TEXT: the lines of NAME's log that hold TEXT
count() {
  grep -c -F "$2" "$DT_TMP/$1.err" || true
}
# record NAME GRAPHS STEP: NAME's run.json says "graphs": GRAPHS and "graphs_off_at_step": STEP
record() {
  grep -q "\"graphs\": $2," "$DT_TMP/$1"/*/run.json && grep -q "\"graphs_off_at_step\": $3," "$DT_TMP/$1"/*/run.json ||
    { grep graphs "$DT_TMP/$1"/*/run.json; fail "$1: run.json does not say graphs $2 and graphs_off_at_step $3"; }
  if [ -n "$py" ]; then
    "$py" - "$DT_TMP/$1" "$2" "$3" <<'PY' || fail "$1: the checkpoint's record differs from run.json"
import glob, json, sys, h5py
d, graphs, step = sys.argv[1:]
c = json.loads(h5py.File(glob.glob(d + "/*/checkpoint.h5")[0], "r").attrs["config"])
sys.exit(0 if (json.dumps(c["graphs"]), json.dumps(c["graphs_off_at_step"])) == (graphs, step) else 1)
PY
  fi
}

run issued "" --no-graph
[ "$(losses issued | wc -l)" = 6 ] || { losses issued; fail "the run without --graph logged no 5 steps and an epoch"; }
record issued false null
run graph "" --graph
[ "$(count graph 'step 2: the training step captured as graphs')" = 1 ] ||
  { cat "$DT_TMP/graph.err"; fail "the --graph run without a planted fault did not capture its second step"; }
record graph true null

for fault in alloc:'mem_alloc of 4096 bytes (an allocation)' hostwait:'event_sync (a host wait)'; do
  kind=${fault%%:*} call=${fault#*:}
  run "$kind" "$kind" --graph
  [ "$(count "$kind" "the capture failed: $call inside it")" = 1 ] ||
    { cat "$DT_TMP/$kind.err"; fail "$kind: no one line naming $call"; }
  [ "$(count "$kind" 'step 2: the training step could not be captured as a graph')" = 1 ] ||
    { cat "$DT_TMP/$kind.err"; fail "$kind: no one warning that step 2 runs without graphs"; }
  [ "$(count "$kind" 'captured as graphs')" = 0 ] || fail "$kind: the failed capture was launched"
  [ "$(grep -c 'warn:' "$DT_TMP/$kind.err")" = 2 ] || { cat "$DT_TMP/$kind.err"; fail "$kind: other warnings"; }
  losses issued > "$DT_TMP/a" && losses "$kind" > "$DT_TMP/b"
  cmp -s "$DT_TMP/a" "$DT_TMP/b" || { diff "$DT_TMP/a" "$DT_TMP/b"; fail "$kind: the losses differ from --no-graph's"; }
  if [ -n "$py" ]; then
    "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" issued "$kind" || fail "$kind: the checkpoints differ"
  fi
  record "$kind" false 2
  pass "$kind: the capture fails naming $call, the run goes on without graphs and equals --no-graph's, bit for bit${py:+ (checkpoints too)}; run.json says graphs off at step 2"
done

# a value it does not know: one line naming it, and the run fails (a test's typo must not pass)
expect_status 1 env OMP_NUM_THREADS=1 DT_PLANT_CAPTURE_FAULT=alocc "$DTRAIN" -a resnet8 --synthetic --crop 32 -b 8 \
  --max-steps 3 -j 1 --graph --results "$DT_TMP/bad"
grep -q 'DT_PLANT_CAPTURE_FAULT=alocc: alloc or hostwait' "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "bad value not named"; }
pass "DT_PLANT_CAPTURE_FAULT=alocc is refused in one line"
