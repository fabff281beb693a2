#!/bin/sh
# resume.sh: checkpoints resume exactly. On 2 MPI ranks with --deterministic, resnet8 on Fashion-MNIST
# for 2 epochs straight, against the same run stopped inside the first epoch (make check: 12800
# training and 1000 validation images, 100 steps an epoch, stopped after 60; make check-long: all of
# it, 469 steps an epoch, stopped after 300) and continued with --resume auto: the final checkpoints hold the same weights, BN statistics, momentum
# and scaler state, and metrics.jsonl the same epoch lines (losses, accuracies, lr), bit for bit. The
# same under O2, stopped at a step chosen from the straight run's loss-scale history, so that the
# scaler is mid-window there and halves and doubles after it on any machine. Also: a checkpoint of another
# architecture is refused in one line (exit 2), and a stale temporary file from a killed writer does
# not stop --resume auto from finding the real one.
. "$top_srcdir/tests/common.sh"
use_mpirun --bind-to none
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || skip "no Python with h5py (Debian: python3-h5py)"
if long; then fmnist_packed "$DT_TMP/fm"; stop=300 window=20
else fmnist_packed "$DT_TMP/fm" 12800 1000; stop=60 window=10; fi
# scaler_of NAME: the loss scale (stored as the double's bits) and the clean-step count in NAME's checkpoint
scaler_of() {
  "$py" -c 'import glob, struct, sys, h5py
a = h5py.File(glob.glob(sys.argv[1] + "/" + sys.argv[2] + "/*/checkpoint.h5")[0], "r")["scaler"].attrs
print(struct.unpack("<d", struct.pack("<q", int(a["scale_bits"])))[0], int(a["clean_steps"]))' "$DT_TMP" "$1"
}
run() { expect_status 0 timeout 600 $MPIRUN -np 2 "$top_builddir/dtrain" -a resnet8 -b 64 -j 1 --lr 0.4 \
  --lr-schedule cosine --wd 5e-4 -p 0 --deterministic "$@" "$DT_TMP/fm"; }
# same NAME_A NAME_B: the final checkpoints and the epoch lines of metrics.jsonl are equal
same() {
  "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" "$1" "$2" ||
    fail "the resumed run ($2) differs from the straight one ($1)"
}
run --epochs 2 --results "$DT_TMP/a"
run --epochs 2 --results "$DT_TMP/b" --max-steps $stop
grep -q "stopped after --max-steps $stop at step $stop (epoch 0 \\[$stop/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no stop line"; }
touch "$(ls -d "$DT_TMP"/b/*)/checkpoint.h5.tmp.999999999"   # what a writer killed mid-way leaves
run --epochs 2 --results "$DT_TMP/b" --resume auto
grep -q "resuming from .*checkpoint.h5 at step $stop (epoch 0 \\[$stop/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume at step $stop"; }
same a b
pass "2 epochs straight = $stop steps + stop + resume: weights, momentum and metrics bit for bit, under 2 MPI ranks"

# O2 (fp16 weights, fp32 master weights, dynamic loss scale): the resumed run must carry on the scaler
# (scale and clean-step count) exactly. Which steps overflow depends on float rounding, so on the
# kernels oneDNN and OpenBLAS pick for the machine's instruction set: no fixed stop step is right
# everywhere. With --loss-scale-window W (20; 10 in make check's shorter epoch) the scale moves at
# least once in any W steps (an overflow halves it, W clean steps double it) below its 2^24 cap. The straight run logs the scale
# after every step (-p 1), and the stop is chosen from that history: a step that neither overflowed
# nor grew the scale (so the checkpoint holds a clean-step count above 0), at a scale other than the
# start's, followed by at least one overflow and one growth before the end of the epoch.
o2="--epochs 1 --opt-level O2 --loss-scale-window $window -p 1"
run $o2 --results "$DT_TMP/c"
stop=$("$py" - "$DT_TMP" "$window" <<'PY'
import glob, json, sys
w = int(sys.argv[2])
run = glob.glob(sys.argv[1] + "/c/*/")[0]
s0 = json.load(open(run + "run.json"))["amp"]["loss_scale_start"]
steps = [l for l in map(json.loads, open(run + "metrics.jsonl")) if l["kind"] == "step"]
h = {l["step"]: l["loss_scale"] for l in steps}
n = max(h)
assert sorted(h) == list(range(1, n + 1)), "-p 1: not one step line per step"
h[0] = s0
def suits(s):
    after = [h[k] for k in range(s, n + 1)]
    return (h[s] == h[s - 1] and h[s] != s0 and h[s] < 2 ** 24
            and any(b < a for a, b in zip(after, after[1:])) and any(b > a for a, b in zip(after, after[1:])))
fit = [s for s in range(w, n - w) if suits(s)]
if not fit:
    sys.exit("no step suits a stop; the scale after each step: %s" % [h[k] for k in range(n + 1)])
s = min(fit, key=lambda k: (abs(k - n // 3), k))   # about a third into the epoch
print(s, h[s], n)
PY
) || fail "O2: the straight run's loss-scale history gives no stop to test the scaler's resume with"
set -- $stop
echo "O2: stop at step $1 of $3 (scale $2 there)"
run $o2 --results "$DT_TMP/d" --max-steps "$1"
set -- "$@" $(scaler_of d)
[ "$4" = "$2" ] && [ "$5" -ge 1 ] ||
  fail "O2: the checkpoint at the stop holds scale $4 and $5 clean steps; expected $2 (the straight run's) and at least 1"
run $o2 --results "$DT_TMP/d" --resume auto
same c d
# every step line after the stop (lr, loss, loss scale) is the straight run's, and the scale moved
"$py" - "$DT_TMP" "$1" <<'PY' || fail "O2: the resumed run's steps differ from the straight run's"
import glob, json, sys
d, stop = sys.argv[1], int(sys.argv[2])
def steps(name):
    lines = [json.loads(l) for f in glob.glob("%s/%s/*/metrics.jsonl" % (d, name)) for l in open(f)]
    return {l["step"]: (l["epoch_step"], l["lr"], l["train_loss"], l["loss_scale"]) for l in lines if l["kind"] == "step"}
c, r = steps("c"), steps("d")
assert sorted(c) == sorted(r), "steps logged: %d vs %d" % (len(c), len(r))
bad = [k for k in sorted(c) if c[k] != r[k]]
assert not bad, "step %d: %s vs %s" % (bad[0], c[bad[0]], r[bad[0]])
after = [r[k][3] for k in sorted(r) if k >= stop]
down = sum(b < a for a, b in zip(after, after[1:]))
up = sum(b > a for a, b in zip(after, after[1:]))
assert down and up, "the scale did not both halve and double after the stop: %s" % after
print("after the stop at step %d: %d halvings and %d doublings of the loss scale, every step's lr, loss and scale equal" % (
    stop, down, up))
PY
pass "O2: 1 epoch straight = $1 steps + stop + resume, bit for bit; the stop's scale $2 after $5 clean step(s)"

expect_status 2 "$top_builddir/dtrain" -a resnet20 --results "$DT_TMP/e" --resume "$(ls "$DT_TMP"/a/*/checkpoint.h5)" \
  "$DT_TMP/fm"
grep -q "a checkpoint of resnet8, not of resnet20" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "another arch's checkpoint"; }
[ ! -e "$DT_TMP/e" ] || fail "a refused --resume wrote into --results"
pass "a checkpoint of another architecture: one line, exit 2, nothing written"
