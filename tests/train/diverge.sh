#!/bin/sh
# diverge.sh: a diverging run is stopped and never reported as accuracy. With --lr 30000 the weights
# blow up within a few steps: under O0 (a static loss scale) after --max-nonfinite skipped steps in a
# row, under O2 (the dynamic scaler halving at every skipped step) once the scale is at its floor, or
# at an epoch's end when BN's statistics are no longer finite: exit 1, one error line saying the run
# diverged, metrics.jsonl all valid JSON (no NaN written as a number) ending in a "diverged" end line,
# and no model_best.h5 or checkpoint holding a NaN or an inf. Then what was reported wrongly before:
# -e of a checkpoint with an inf tensor is refused in one line (exit 2), and -e of one whose logits
# overflow to inf (finite but huge fc weights) scores 0% top-1, not 100%. Which of the stop rules
# ends a run depends on the float results, so any of them passes; all must say so and exit 1.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
small_fmnist_packed "$DT_TMP/fm"
train() { "$DTRAIN" -a resnet8 -b 20 -j 1 -p 1 --lr 30000 --epochs 30 "$@" "$DT_TMP/fm"; }

# check_diverged NAME: the run under $DT_TMP/NAME stopped as a diverged one
check_diverged() {
  n=$(grep -c "error:" "$DT_TMP/err")
  grep "error:" "$DT_TMP/err"
  grep -q "error: .*diverged" "$DT_TMP/err" || fail "$1: no error line saying the run diverged"
  [ "$n" -le 2 ] || fail "$1: $n error lines"
  "$py" - "$DT_TMP/$1" "$1" <<'PY' || fail "$1: metrics.jsonl or the checkpoints are wrong"
import glob, json, sys, h5py, numpy as np
d, name = sys.argv[1:]
run, = glob.glob(d + "/*/")
lines = [json.loads(l) for l in open(run + "metrics.jsonl")]   # json.loads refuses nothing, so:
for l in lines:
    for k, v in l.items():
        assert not (isinstance(v, float) and not np.isfinite(v)), "%s: %s is %r" % (name, k, v)
assert lines[-1]["kind"] == "end" and lines[-1]["reason"] == "diverged", "%s: last line %s" % (name, lines[-1])
for f in glob.glob(run + "*.h5"):
    h = h5py.File(f, "r")
    def finite(n, o):
        if isinstance(o, h5py.Dataset) and o.dtype.kind == "f":
            assert np.isfinite(o[()]).all(), "%s: %s holds NaN or inf" % (f, n)
    h.visititems(finite)
print("%s: %d metrics lines, all finite numbers, ending %s; %d checkpoint files, all finite" % (
    name, len(lines), lines[-1], len(glob.glob(run + "*.h5"))))
PY
}
expect_status 1 train --results "$DT_TMP/o0"
check_diverged o0
pass "O0, --lr 30000: stopped as diverged, exit 1, nothing non-finite written"
expect_status 1 train --results "$DT_TMP/o2" --opt-level O2
check_diverged o2
pass "O2, --lr 30000: stopped as diverged, exit 1, nothing non-finite written"

# a sane checkpoint, then two damaged copies of it
expect_status 0 "$DTRAIN" -a resnet8 -b 20 -j 1 -p 0 --epochs 1 --max-steps 2 --results "$DT_TMP/ok" "$DT_TMP/fm"
ck=$(ls "$DT_TMP"/ok/*/checkpoint.h5)
"$py" - "$ck" "$DT_TMP" <<'PY'
import shutil, sys, h5py, numpy as np
ck, d = sys.argv[1:]
for name, value in (("inf", np.inf), ("huge", 3e38)):
    shutil.copy(ck, "%s/%s.h5" % (d, name))
    with h5py.File("%s/%s.h5" % (d, name), "r+") as f:
        w = f["model/fc.weight"]
        w[...] = np.full(w.shape, value, np.float32)
PY
expect_status 2 "$DTRAIN" -a resnet8 -e --resume "$DT_TMP/inf.h5" "$DT_TMP/fm"
cat "$DT_TMP/err"
[ "$(grep -c "error:" "$DT_TMP/err")" -eq 1 ] && grep -q "error: .*inf.h5: tensor fc.weight holds inf" "$DT_TMP/err" ||
  fail "-e of a checkpoint with an inf tensor: not one line naming the tensor"
pass "-e of a checkpoint holding inf: refused in one line, exit 2"
expect_status 0 "$DTRAIN" -a resnet8 -e --resume "$DT_TMP/huge.h5" "$DT_TMP/fm"
cat "$DT_TMP/out"; grep "warn:" "$DT_TMP/err" || true
grep -q "^evaluate .*: top-1 0.00%, top-5 0.00%" "$DT_TMP/out" || fail "-e with logits that overflow: not 0% (NaN/inf counted as hits)"
grep -q "warn: .*gave NaN or infinite logits" "$DT_TMP/err" || fail "-e with logits that overflow: no warning"
pass "-e with logits that overflow to inf: 0% and a warning, not a perfect score"
