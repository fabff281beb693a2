#!/bin/sh
# augment.sh: dtrain on JPEG shards with torchvision's new recipe's data flags: training at
# --train-crop-size 24 through --auto-augment ta_wide and --random-erase 0.5 with bicubic
# resampling, validation at --val-crop-size 32 after --val-resize-size 36 (the model planned for
# both sizes; tests/torch/augment.sh checks the pixels against torchvision, test_model_plan the
# second size). 2 epochs straight equal the run stopped after 2 steps and resumed, bit for bit (each
# image's draws follow from seed, epoch and position), and the step as graphs equals it issued
# (graphs captured at 24 x 24 launched again after each validation at 32 x 32); the augmentation
# changes training; -e on the checkpoint at 32 gives the run's last validation loss exactly, and at
# 24 another; every policy runs; augmix and the crop flags on raw shards are refused in one line.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || skip "no sample photo at $photo (Debian: python-matplotlib-data)"
need_h5py
"$py" -c 'import PIL' 2>/dev/null || skip "no PIL for $py (Debian: python3-pil)"
"$py" "$top_srcdir/tests/data/tree.py" make "$photo" "$DT_TMP/src"
expect_status 0 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/sh" --threads 2
args="-a resnet8 -b 4 -j 2 -p 0 --deterministic --epochs 2 --train-crop-size 24 --val-crop-size 32 --val-resize-size 36"
aug="--auto-augment ta_wide --random-erase 0.5 --interpolation bicubic"
expect_status 0 "$DTRAIN" $args $aug --results "$DT_TMP/a" "$DT_TMP/sh"
grep -q "validation top-1" "$DT_TMP/out" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no validation line"; }
run_json=$(ls "$DT_TMP"/a/*/run.json)
grep -q '"train_crop_size": *24' "$run_json" && grep -q '"val_crop_size": *32' "$run_json" &&
  grep -q '"auto_augment": *"ta_wide"' "$run_json" && grep -q '"interpolation": *"bicubic"' "$run_json" ||
  fail "run.json does not record the augmentation: $(grep -o '"augmentation"[^}]*}' "$run_json")"
expect_status 0 "$DTRAIN" $args $aug --max-steps 2 --results "$DT_TMP/b" "$DT_TMP/sh"
expect_status 0 "$DTRAIN" $args $aug --resume auto --results "$DT_TMP/b" "$DT_TMP/sh"
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a b || fail "augmented: the resumed run differs"
pass "ta_wide + erasing + bicubic at 24, validated at 32: 2 epochs straight = 2 steps + stop + resume, bit for bit"
expect_status 0 "$DTRAIN" $args $aug --graph --results "$DT_TMP/g" "$DT_TMP/sh"
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a g || fail "augmented: the run as graphs differs"
pass "as graphs (captured at 24x24, launched again after validating at 32x32) = issued, bit for bit"
expect_status 0 "$DTRAIN" $args --results "$DT_TMP/plain" "$DT_TMP/sh"
if "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a plain >/dev/null 2>&1; then
  fail "the augmented run ended where the plain one did: no augmentation happened"
fi
pass "the augmentation changes the run"

# -e at the run's validation size gives its last validation loss; at another size, another loss
ckpt=$(ls "$DT_TMP"/a/*/checkpoint.h5)
last=$("$py" -c 'import json, sys
e = [l for l in map(json.loads, open(sys.argv[1])) if l.get("kind") == "epoch"]
print("%.6f" % e[-1]["val_loss"])' "$(ls "$DT_TMP"/a/*/metrics.jsonl)")
evalargs="-a resnet8 -b 4 -j 2 -p 0 --deterministic --train-crop-size 24 --val-resize-size 36 --interpolation bicubic"
expect_status 0 "$DTRAIN" $evalargs --val-crop-size 32 -e --resume "$ckpt" "$DT_TMP/sh"
grep -q "loss $last on 6 images" "$DT_TMP/out" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "-e at 32x32: not the run's last loss $last"; }
expect_status 0 "$DTRAIN" $evalargs --val-crop-size 24 -e --resume "$ckpt" "$DT_TMP/sh"
grep -q "loss $last on" "$DT_TMP/out" "$DT_TMP/err" && fail "-e at 24x24 gives the loss of 32x32: --val-crop-size is not used"
pass "-e at --val-crop-size 32 = the run's last validation loss ($last); at 24 another"

for p in imagenet cifar10 svhn ra; do
  mag=; [ $p != ra ] || mag="--ra-magnitude 15" # RandAugment's alone: refused with the others (flags.sh)
  expect_status 0 "$DTRAIN" $args --epochs 1 --max-steps 2 --auto-augment $p $mag --results "$DT_TMP/p-$p" "$DT_TMP/sh"
done
pass "--auto-augment imagenet, cifar10, svhn and ra train"

refused "--auto-augment augmix" "--auto-augment augmix: imagenet, cifar10, svhn, ra or ta_wide" \
  "$DTRAIN" $args --auto-augment augmix --results "$DT_TMP/x" "$DT_TMP/sh"
small_fmnist_packed "$DT_TMP/fm"
refused "--val-crop-size on raw shards" "are for encoded images" \
  "$DTRAIN" -a resnet8 -b 4 --val-crop-size 32 --results "$DT_TMP/x" "$DT_TMP/fm"
pass "augmix, and the crop flags on raw shards: one line, exit 2"
