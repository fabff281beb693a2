#!/bin/sh
# cli.sh: dtrain's command line. Bad input (an unknown model, non-numeric or out-of-range values,
# a combination Apex refused, a directory without shards, an unwritable results directory) gets one
# line naming it, exit 2, and nothing written. A short synthetic run writes run.json and
# metrics.jsonl (valid JSON), and rank 0 prints the resolved mixed-precision properties.
. "$top_srcdir/tests/common.sh"
DTRAIN="$top_builddir/dtrain"
cd "$DT_TMP"
mkdir empty
bad() { # bad WHAT PATTERN ARGS...: exit 2, one error line matching PATTERN, no results/
  what=$1; pat=$2; shift 2
  expect_status 2 "$DTRAIN" --results "$DT_TMP/res" "$@"
  [ "$(grep -c "error:" "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "$what: not exactly one error line"; }
  grep -q -- "$pat" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "$what: the line does not say '$pat'"; }
  [ ! -e "$DT_TMP/res" ] || [ -z "$(ls "$DT_TMP/res")" ] || fail "$what: something was written"
}
bad "unknown arch" "unknown model 'resnet51'" -a resnet51 --synthetic
bad "non-numeric --lr" "--lr" --lr abc --synthetic
bad "out-of-range --batch-size" "--batch-size" -b 0 --synthetic
bad "unknown --opt-level" "--opt-level" --opt-level O5 --synthetic
bad "keep-batchnorm-fp32 under O1" "--keep-batchnorm-fp32" --opt-level O1 --keep-batchnorm-fp32 true --synthetic
bad "no data" "no data directory" -a resnet8
bad "a directory without shards" "manifest" -a resnet8 empty
bad "unknown option" "--frobnicate" --frobnicate
touch file
bad "results under a file" "--results" -a resnet8 --crop 32 --synthetic --results "$DT_TMP/file/sub"
# a model that cannot take the input size is refused from its layers' shapes before its weights are
# made (it took VGG 5-25 s): under a 700 MB address-space limit VGG-16's gigabyte of parameters cannot
# be allocated, so the line names the layer only when the check comes first (not in a CUDA build: its
# CUDA libraries alone map more address space than that)
if [ "${DT_HAVE_CUDA:-no}" != yes ]; then
  (ulimit -v 700000 && bad "VGG at 28x28" "vgg16: an input of 28x28 is too small for layer maxpool" -a vgg16 \
    --crop 28 --synthetic) || exit 1
fi
pass "bad input: one line naming it, exit 2, nothing written"

expect_status 0 env OMP_NUM_THREADS=1 "$DTRAIN" -a resnet8 --crop 32 -b 8 --synthetic --max-steps 3 --epochs 1 \
  --opt-level O2 --results "$DT_TMP/res" --run-name smoke
grep -q "Selected optimization level O2:  FP16 training with FP32 batchnorm and FP32 master weights." "$DT_TMP/out" ||
  { cat "$DT_TMP/out"; fail "the resolved AMP properties were not printed"; }
run=$(ls -d "$DT_TMP"/res/*-resnet8-w1-smoke)
[ -f "$run/run.json" ] && [ -f "$run/metrics.jsonl" ] || fail "run.json or metrics.jsonl missing in $run"
py=${DT_PYTHON_TORCH:-}
if [ -n "$py" ]; then
  "$py" - "$run" <<'PY' || fail "run.json or metrics.jsonl is not what it should be"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
assert run["arch"] == "resnet8" and run["world_size"] == 1 and run["amp"]["opt_level"] == 2, run
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
kinds = [l["kind"] for l in lines]
assert kinds == ["step", "epoch", "end"], kinds   # -p 10 (default) and 3 steps: the epoch's last step prints
assert all(l["step"] == 3 and l["loss_scale"] == 65536 for l in lines[:2]), lines
assert lines[1]["val_top1"] is None, lines[1]   # synthetic: no validation
assert lines[2]["reason"] == "max-steps" and lines[2]["epoch"] == 1 and lines[2]["step"] == 3, lines[2]   # --max-steps 3
print("run.json and metrics.jsonl parse:", lines[1])
PY
fi
pass "a synthetic O2 run writes run.json and metrics.jsonl"
