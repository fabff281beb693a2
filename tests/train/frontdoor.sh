#!/bin/sh
# frontdoor.sh: the front door (issue 39). Defaults from the environment (the table's .env), their
# order (command line over --recipe over environment over built-in), a bad variable's one line,
# DATA from DT_DATA, --print-config's sources and plan, --device auto's first log line, the
# PyTorch tutorials' flags (aliases, checked or refused in one line), and --desired-acc as a
# fraction: refused above 1, logged as "stop at 75.00% top-1", and stopping a small run.
. "$top_srcdir/tests/common.sh"
export OMP_NUM_THREADS=1
# no environment default of the caller's may leak into these checks
for v in $(env | sed -n 's/^\(DT_[A-Z0-9_]*\)=.*/\1/p'); do
  case $v in DT_TMP|DT_HAVE_*|DT_PYTHON_TORCH|DT_TORCH_TESTS|DT_LONG) ;; *) unset "$v" ;; esac
done
cfg() { expect_status 0 env "$@" "$DTRAIN" --print-config --synthetic; }
# the value and source of an option in --print-config's output: "OPTION VALUE SOURCE..."
row() { awk -v o="$1" '$1 == o { $1 = $1; print; exit }' "$DT_TMP/out"; }
# WANT CMD...: exits 2 with exactly one line on stderr holding WANT
one_line() {
  want=$1; shift
  expect_status 2 "$@"
  [ "$(wc -l < "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "'$*': not one line"; }
  grep -qF -- "$want" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "'$*': no '$want'"; }
}

# environment defaults and their order
cfg DT_BATCH=8 DT_ARCH=resnet8 DT_EPOCHS=3 DT_OPT_LEVEL=O1 DT_WORKERS=2 DT_RESULTS="$DT_TMP/res"
[ "$(row --batch-size)" = "--batch-size 8 environment DT_BATCH" ] || fail "DT_BATCH: $(row --batch-size)"
[ "$(row --arch)" = "--arch resnet8 environment DT_ARCH" ] || fail "DT_ARCH: $(row --arch)"
[ "$(row --opt-level)" = "--opt-level O1 environment DT_OPT_LEVEL" ] || fail "DT_OPT_LEVEL: $(row --opt-level)"
[ "$(row --results)" = "--results $DT_TMP/res environment DT_RESULTS" ] || fail "DT_RESULTS: $(row --results)"
[ "$(row --lr)" = "--lr 0.1 default" ] || fail "a default: $(row --lr)"
expect_status 0 env DT_BATCH=8 "$DTRAIN" --print-config --synthetic -b 4
[ "$(row --batch-size)" = "--batch-size 4 command line" ] || fail "command line over environment: $(row --batch-size)"
expect_status 0 env DT_LR=0.3 DT_SEED=7 "$DTRAIN" --print-config --synthetic --recipe resnet50 --no-model-ema
[ "$(row --lr)" = "--lr 0.125 recipe resnet50" ] && [ "$(row --seed)" = "--seed 7 environment DT_SEED" ] ||
  fail "recipe over environment: $(row --lr); $(row --seed)"
expect_status 0 env DT_RECIPE=resnet50 "$DTRAIN" --print-config --synthetic --no-model-ema
[ "$(row --recipe)" = "--recipe resnet50 environment DT_RECIPE" ] || fail "DT_RECIPE: $(row --recipe)"
cfg DT_SYNC_BN=yes DT_NO_LR_SCALING=1
[ "$(row --sync-bn)" = "--sync-bn on environment DT_SYNC_BN" ] && [ "$(row --no-lr-scaling)" = "--no-lr-scaling on environment DT_NO_LR_SCALING" ] ||
  fail "switches from the environment: $(row --sync-bn); $(row --no-lr-scaling)"
pass "environment defaults: command line over recipe over environment over built-in"

# a bad value: one line naming the variable, exit 2
one_line "environment variable DT_BATCH: 'abc' is not an integer" env DT_BATCH=abc "$DTRAIN" --synthetic
one_line "environment variable DT_LR_SCHEDULE" env DT_LR_SCHEDULE=sawtooth "$DTRAIN" --synthetic
one_line "environment variable DT_RECIPE" env DT_RECIPE=nosuch "$DTRAIN" --synthetic
one_line "DT_AMP and DT_OPT_LEVEL" env DT_AMP=1 DT_OPT_LEVEL=O2 "$DTRAIN" --synthetic
one_line "--lars-eta (from the environment's DT_LARS_ETA) has no effect" env DT_LARS_ETA=0.01 "$DTRAIN" --synthetic
expect_status 0 env DT_LARS_ETA=0.01 "$DTRAIN" --print-config --synthetic --opt adam # the command line chose: unused
pass "a bad environment value is one line naming it"

# DATA from DT_DATA; none at all is refused
mkdir -p "$DT_TMP/data"
expect_status 0 env DT_DATA="$DT_TMP/data" "$DTRAIN" --print-config
[ "$(row DATA)" = "DATA $DT_TMP/data (a directory; not read here) environment DT_DATA" ] || fail "DT_DATA: $(row DATA)"
expect_status 0 env DT_DATA="$DT_TMP/data" "$DTRAIN" --print-config "$DT_TMP"
[ "$(row DATA)" = "DATA $DT_TMP (a directory; not read here) command line" ] || fail "DATA over DT_DATA: $(row DATA)"
one_line "set DT_DATA" "$DTRAIN" -a resnet8
pass "DATA from DT_DATA"

# --print-config's plan, and --device auto
cfg
grep -q "^launch: single process: 1 rank on 1 node, 1 on this node" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "the plan"; }
row --device | grep -q "^--device [a-z]* default (auto: " || fail "--device auto's source: $(row --device)"
expect_status 0 env DT_SPAWN_CPU=1 "$DTRAIN" --print-config --synthetic --nproc_per_node 2 --device cpu
grep -q "^launch: dtrain --nproc-per-node: 2 ranks on 1 node, 2 on this node" "$DT_TMP/out" &&
  [ "$(row --nproc-per-node)" = "--nproc-per-node 2 command line" ] || { cat "$DT_TMP/out"; fail "--nproc_per_node"; }
expect_status 0 "$DTRAIN" --synthetic -a resnet8 --crop 32 -b 8 -j 1 --max-steps 1 --epochs 1 --results "$DT_TMP/r"
first=$(head -n 1 "$DT_TMP/err")
case $first in
  *"rank 0 of 1"*"(--device auto: "*) ;;
  *) cat "$DT_TMP/err"; fail "the first log line does not say --device auto's choice: $first" ;;
esac
if grep -q "HAVE_CUDA 1" "$top_builddir/config.h" 2>/dev/null; then :; else
  case $first in *"cpu, 1 compute thread (--device auto: this dtrain was built without CUDA)"*) ;;
    *) fail "a CPU build's first line: $first" ;; esac
fi
expect_status 0 "$DTRAIN" --print-config --synthetic --device cpu
[ "$(row --device)" = "--device cpu command line" ] || fail "--device cpu: $(row --device)"
pass "--print-config's plan; --device auto's first line: ${first#*info: }"

# the tutorials' flags: aliases, checked, refused
expect_status 0 "$DTRAIN" --print-config --synthetic --batch-size 5 --workers 3 --world-size 1 --dist-url env:// --dist-backend mpi --device cpu
[ "$(row --batch-size)" = "--batch-size 5 command line" ] && [ "$(row --workers)" = "--workers 3 command line" ] ||
  fail "--batch-size, --workers"
one_line "--world-size 8: this launch (single process) has 1 rank" "$DTRAIN" --synthetic --world-size 8
one_line "--dist-backend nccl: dtrain's CPU ranks communicate over MPI" "$DTRAIN" --synthetic --dist-backend nccl --device cpu
one_line "--dist-backend: 'gloo' is not one of nccl, mpi" "$DTRAIN" --synthetic --dist-backend gloo
one_line "--dist-url tcp://10.0.0.1:23456: dtrain's ranks meet as their launcher says" "$DTRAIN" --synthetic --dist-url tcp://10.0.0.1:23456
one_line "--rank: refused: each rank comes from its launcher" "$DTRAIN" --synthetic --rank 0
one_line "--multiprocessing-distributed: refused: one process per GPU is the launch's" "$DTRAIN" --synthetic --multiprocessing-distributed
one_line "--gpu: refused: each rank takes its local rank's GPU" "$DTRAIN" --synthetic --gpu 0
one_line "--master_addr: refused: torchrun's" "$DTRAIN" --synthetic --master_addr 127.0.0.1
one_line "--master_port: refused: torchrun's" "$DTRAIN" --synthetic --master_port 29500
pass "the tutorials' flags: aliases, checks and one-line refusals"

# --desired-acc: a fraction
one_line "--desired-acc 75: a fraction of the validation images" "$DTRAIN" -a resnet8 --desired-acc 75 "$DT_TMP/data"
one_line "environment variable DT_DESIRED_ACC 75.9: a fraction" env DT_DESIRED_ACC=75.9 "$DTRAIN" -a resnet8 "$DT_TMP/data"
fmnist_packed "$DT_TMP/fm" 256 200
expect_status 0 "$DTRAIN" -a resnet8 -b 64 -j 1 --epochs 1 --max-steps 1 --desired-acc 0.75 --results "$DT_TMP/r75" "$DT_TMP/fm"
grep -q "info: --desired-acc 0.75: stop at 75.00% top-1" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no 'stop at 75.00% top-1'"; }
# 1% of 200 images: reached at the first validation (a 10-class model puts at least 2 right), so the
# run stops after epoch 1 of 3
expect_status 0 "$DTRAIN" -a resnet8 -b 64 -j 1 --epochs 3 --desired-acc 0.01 --results "$DT_TMP/r1" "$DT_TMP/fm"
grep -q "reached --desired-acc 0.01 (1.00%): stopping" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "not stopped at 1%"; }
m=$(echo "$DT_TMP"/r1/*/metrics.jsonl)
grep -q '"reason": *"desired-acc"' "$m" && ! grep -q '"epoch": *1,.*"val_top1"' "$m" || { cat "$m"; fail "metrics: not stopped after epoch 0"; }
j=$(echo "$DT_TMP"/r1/*/run.json)
grep -q '"desired_acc": *1\.0*[,}]\|"desired_acc": *1[,}]' "$j" || { cat "$j"; fail "run.json's desired_acc is not 1 (percent)"; }
pass "--desired-acc 0.75 logs stop at 75.00% top-1; 0.01 stops at the first epoch's 1%"

# 0.75 itself: a set of one class is 100% right at the first validation, so the run stops after
# epoch 0 of 3; the 10-class set stays below 75% over 2 short epochs, so that run trains both
py=${DT_PYTHON_TORCH:-}
if [ -n "$py" ] && "$py" -c 'import PIL' 2>/dev/null; then
  "$py" - "$DT_TMP/one" <<'PY'
import os, sys
from PIL import Image
for split, n in (("train", 16), ("val", 8)):
    d = os.path.join(sys.argv[1], split, "n00000001")
    os.makedirs(d)
    for k in range(n):
        Image.new("RGB", (40, 40), (16 * k, 255 - 8 * k, 7 * k)).save(os.path.join(d, "img_%d.JPEG" % k), quality=90)
PY
  expect_status 0 "$top_builddir/dtpack" imagenet "$DT_TMP/one" -o "$DT_TMP/onesh"
  expect_status 0 "$DTRAIN" -a resnet8 --crop 32 -b 4 -j 1 --epochs 3 --desired-acc 0.75 --results "$DT_TMP/r75one" \
    "$DT_TMP/onesh"
  grep -q "reached --desired-acc 0.75 (75.00%): stopping" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "not stopped at 75%"; }
  m=$(echo "$DT_TMP"/r75one/*/metrics.jsonl)
  grep -q '"reason": *"desired-acc"' "$m" && ! grep -q '"epoch": *1,.*"val_top1"' "$m" ||
    { cat "$m"; fail "metrics: the 0.75 run did not stop after epoch 0"; }
  expect_status 0 "$DTRAIN" -a resnet8 -b 64 -j 1 --epochs 2 --desired-acc 0.75 --results "$DT_TMP/r75fm" "$DT_TMP/fm"
  m=$(echo "$DT_TMP"/r75fm/*/metrics.jsonl)
  grep -q '"epoch": *1,.*"val_top1"' "$m" && ! grep -q '"reason": *"desired-acc"' "$m" ||
    { cat "$m"; fail "metrics: a run below 75% stopped early"; }
  pass "--desired-acc 0.75 stops a run at 75% (a one-class set at 100%), not one below it"
else
  echo "note: no Python with PIL (Debian: python3-pil): --desired-acc 0.75's stopping run not made"
fi

# run.json records which options came from the environment
expect_status 0 env DT_BATCH=8 DT_DATA="$DT_TMP/fm" "$DTRAIN" -a resnet8 -j 1 --max-steps 1 --epochs 1 --results "$DT_TMP/renv"
python3 - "$DT_TMP"/renv/*/run.json <<'EOF' || fail "run.json's environment record"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["options"]["batch-size"] == "8", j["options"]
assert j["environment"] == {"DT_BATCH": "8", "DT_DATA": j["environment"]["DT_DATA"]}, j["environment"]
assert j["environment"]["DT_DATA"].endswith("/fm"), j["environment"]
EOF
pass "run.json: options in force, and the environment's"
