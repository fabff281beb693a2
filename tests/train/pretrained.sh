#!/bin/sh
# pretrained.sh: weights from PyTorch through tools/dt-export-torchvision into `dtrain --pretrained`.
# PyTorch trains a torchvision resnet18 (1-channel stem, 10 classes) for 120 steps, saves its
# state_dict (tests/torch/train_eval.py), the script exports it; `dtrain --pretrained -e` then
# evaluates it on Fashion-MNIST's validation split and must give PyTorch's own top-1 and top-5 of the
# same weights on the same images (to within 3 images: float rounding near ties). make check packs
# the first 7680 training images (the 120 steps' own) and 2000 validation images, make check-long
# all of them. Also: a
# wrong shape is refused in one line naming the tensor (exit 2), and training from the weights runs.
# A grouped-convolution model too: torchvision's own resnext50_32x4d (3 channels, 1000 classes)
# exported by the tool loads and trains at a small input (its values' layout is what
# tests/torch/resnext50_32x4d.sh checks, loading PyTorch's state_dict by the same code).
. "$top_srcdir/tests/common.sh"
py=$DT_PYTHON_TORCH
[ -n "$py" ] || skip "no python3 with torch, torchvision and h5py (Debian: python3-torch python3-torchvision python3-h5py)"
if long; then fmnist_packed "$DT_TMP/fm"; else fmnist_packed "$DT_TMP/fm" 7680 2000; fi

# PyTorch: the model trained, its state_dict, and its accuracy on the val split
"$py" "$top_srcdir/tests/torch/train_eval.py" "$DT_TMP" resnet18 || fail "the PyTorch side failed"

set +e
"$py" "$top_srcdir/tools/dt-export-torchvision" resnet18 "$DT_TMP/r18.h5" --state-dict "$DT_TMP/resnet18.pth"
st=$?
set -e
[ $st -eq 0 ] || fail "dt-export-torchvision exited $st"
expect_status 0 "$top_builddir/dtrain" -a resnet18 -b 250 -j 1 --pretrained "$DT_TMP/r18.h5" -e \
  --results "$DT_TMP/results" "$DT_TMP/fm"
cat "$DT_TMP/out"
read t1 t5 total < "$DT_TMP/resnet18.acc"
got=$(sed -n 's/^evaluate .*: top-1 \([0-9.]*\)%, top-5 \([0-9.]*\)%.*/\1 \2/p' "$DT_TMP/out")
[ -n "$got" ] || fail "no evaluate line"
awk -v g="$got" -v a="$t1" -v b="$t5" -v n="$total" 'BEGIN {
  split(g, v, " "); d1 = v[1] * n / 100 - a; d5 = v[2] * n / 100 - b
  printf "dtrain top-1 %s%%, top-5 %s%%; PyTorch %.2f%%, %.2f%%\n", v[1], v[2], 100 * a / n, 100 * b / n
  exit !(d1 * d1 <= 9.01 && d5 * d5 <= 9.01) }' || fail "dtrain's accuracy of the exported weights is not PyTorch's"
[ ! -e "$DT_TMP/results" ] || fail "-e --pretrained wrote into --results"
pass "torchvision weights exported and evaluated: PyTorch's top-1 and top-5"

# a weights file of the wrong shape: one line naming the tensor, exit 2, nothing written
"$py" - "$DT_TMP" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/r18.h5", "r") as f, h5py.File(d + "/bad.h5", "w") as g:
    for k, v in f.attrs.items():
        g.attrs[k] = v
    for k in f["model"]:
        g.create_dataset("model/" + k, data=f["model"][k][()] if k != "fc.weight" else np.zeros((9, 512), np.float32))
PY
expect_status 2 "$top_builddir/dtrain" -a resnet18 -b 64 --epochs 1 --pretrained "$DT_TMP/bad.h5" \
  --results "$DT_TMP/res_bad" "$DT_TMP/fm"
[ "$(wc -l < "$DT_TMP/err")" -eq 1 ] && grep -q "bad.h5.*fc.weight" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "wrong shape: not one line naming fc.weight"; }
[ -z "$(ls -A "$DT_TMP/res_bad" 2>/dev/null)" ] || fail "a refused --pretrained left files in $DT_TMP/res_bad"
pass "a wrong shape: $(cat "$DT_TMP/err" | sed 's/^.*error: //')"
expect_status 2 "$top_builddir/dtrain" -a resnet34 -b 64 --epochs 1 --pretrained "$DT_TMP/r18.h5" \
  --results "$DT_TMP/res_bad" "$DT_TMP/fm"
grep -q "a weights file of resnet18, not of resnet34" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "another arch"; }
pass "another architecture's weights: refused"

# training from the weights runs, and run.json records them
expect_status 0 "$top_builddir/dtrain" -a resnet18 -b 64 -j 1 --epochs 1 --max-steps 2 -p 1 --pretrained "$DT_TMP/r18.h5" \
  --results "$DT_TMP/res" "$DT_TMP/fm"
run=$(ls -d "$DT_TMP"/res/*)
grep -q '"pretrained": ".*r18.h5"' "$run/run.json" || fail "run.json does not record --pretrained"
pass "training starts from --pretrained weights"

# torchvision's resnext50_32x4d as the tool builds it, into dtrain (synthetic 32x32 images: 3 channels,
# 1000 classes)
set +e
"$py" "$top_srcdir/tools/dt-export-torchvision" resnext50_32x4d "$DT_TMP/rx50.h5" --random --seed 3
st=$?
set -e
[ $st -eq 0 ] || fail "dt-export-torchvision resnext50_32x4d exited $st"
expect_status 0 "$top_builddir/dtrain" -a resnext50_32x4d --synthetic --crop 32 -b 2 --epochs 1 --max-steps 2 -p 1 \
  --pretrained "$DT_TMP/rx50.h5" --results "$DT_TMP/res_rx"
grep -q 'epoch 0 \[2/2\] loss [0-9]' "$DT_TMP/out" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "resnext50_32x4d: no second step"; }
pass "torchvision's resnext50_32x4d exported, loaded and trained from for 2 steps"
