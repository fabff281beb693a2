#!/bin/sh
# zoo.sh: dtrain trains the zoo's new layers end to end on the CPU (the PyTorch fixtures in
# tests/torch check their numbers): efficientnet_b0 (SiLU, squeeze-and-excitation, stochastic depth
# drawing its per-image masks from the step), mobilenet_v3_small under O2 (Hardswish, Hardsigmoid,
# the channel scale on fp16 storage), regnet_y_400mf (grouped convs, SE) and vit_test under O2 (a
# small ViT: tokens, attention, LayerNorm, GELU; on 32x32 CIFAR-format records of random pixels, as
# its position embedding takes 32x32 only). For each, 2 epochs straight equal the same run stopped
# inside the first epoch and resumed, bit for bit (weights, optimizer state, metrics), and for
# efficientnet_b0 and vit_test the step as graphs equals it too: the stochastic depth masks are the
# step's, not the host's, and the attention's saved probabilities are where the graph reads them.
# densenet121 under O2 on the same records (32x32) does both too, its concatenations laid out in
# place (the dense blocks' convs writing channel slices, their batch norms reading them).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
small_fmnist_packed "$DT_TMP/fm"
# CIFAR-10's binary format, 100 training and 20 test records of random pixels, labels 0..7
mkdir -p "$DT_TMP/c"
records() { i=0; while [ "$i" -lt 20 ]; do printf "\\00$((i % 8))"; head -c 3072 /dev/urandom; i=$((i + 1)); done; }
for b in 1 2 3 4 5; do records > "$DT_TMP/c/data_batch_$b.bin"; done
records > "$DT_TMP/c/test_batch.bin"
printf 'airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n' > "$DT_TMP/c/batches.meta.txt"
expect_status 0 "$top_builddir/dtpack" cifar10 "$DT_TMP/c" -o "$DT_TMP/cifar"
args="-b 20 -j 1 -p 0 --deterministic --lr 0.05"  # 5 steps an epoch
for model in "efficientnet_b0" "mobilenet_v3_small --opt-level O2" "regnet_y_400mf" "vit_test --opt-level O2" \
  "densenet121 --opt-level O2"; do
  name=${model%% *}
  data=$DT_TMP/fm
  case $name in vit_test | densenet121) data=$DT_TMP/cifar ;; esac
  expect_status 0 "$DTRAIN" $args -a $model --epochs 2 --results "$DT_TMP/$name-a" "$data"
  expect_status 0 "$DTRAIN" $args -a $model --epochs 2 --max-steps 3 --results "$DT_TMP/$name-b" "$data"
  expect_status 0 "$DTRAIN" $args -a $model --epochs 2 --resume auto --results "$DT_TMP/$name-b" "$data"
  grep -q "resuming from .*checkpoint.h5 at step 3 (epoch 0 \\[3/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "$name: did not resume at step 3"; }
  "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" "$name-a" "$name-b" || fail "-a $model: the resumed run differs"
  "$py" - "$DT_TMP" "$name" <<'PY' || fail "-a $model: the run's losses are not finite and falling"
import glob, json, math, sys
d, name = sys.argv[1:]
ep = [json.loads(l) for f in glob.glob("%s/%s-a/*/metrics.jsonl" % (d, name)) for l in open(f)]
ep = [e for e in ep if e["kind"] == "epoch"]
assert len(ep) == 2 and all(math.isfinite(e["train_loss"]) for e in ep), ep
PY
  pass "-a $model: 2 epochs straight = 3 steps + stop + resume, bit for bit"
done
expect_status 0 "$DTRAIN" $args -a efficientnet_b0 --epochs 2 --graph --results "$DT_TMP/efficientnet_b0-g" "$DT_TMP/fm"
grep -q "captured" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "--graph: no capture line"; }
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" efficientnet_b0-a efficientnet_b0-g ||
  fail "-a efficientnet_b0 --graph differs from the run without"
pass "-a efficientnet_b0 as graphs = issued, bit for bit (stochastic depth's masks drawn on the device side)"
expect_status 0 "$DTRAIN" $args -a vit_test --opt-level O2 --epochs 2 --graph --results "$DT_TMP/vit_test-g" "$DT_TMP/cifar"
grep -q "captured" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "vit_test --graph: no capture line"; }
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" vit_test-a vit_test-g || fail "-a vit_test --graph differs from the run without"
pass "-a vit_test --opt-level O2 as graphs = issued, bit for bit"
expect_status 0 "$DTRAIN" $args -a densenet121 --opt-level O2 --epochs 2 --graph --results "$DT_TMP/densenet121-g" "$DT_TMP/cifar"
grep -q "captured" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "densenet121 --graph: no capture line"; }
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" densenet121-a densenet121-g ||
  fail "-a densenet121 --graph differs from the run without"
pass "-a densenet121 --opt-level O2 (its concatenations in place) as graphs = issued, bit for bit"
