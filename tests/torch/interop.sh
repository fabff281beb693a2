#!/bin/sh
# interop.sh (make check-long): hidden weights, one model per family of the zoo. PyTorch trains
# torchvision's mobilenet_v3_small, efficientnet_b0 and regnet_y_400mf (their first conv made
# 1-channel, 10 classes) for 120 steps on Fashion-MNIST, saves each state_dict and its own top-1 and
# top-5 on the validation split; tools/dt-export-torchvision exports it and `dtrain -e --pretrained`
# must give PyTorch's counts to within 3 of 10000 images (float rounding near ties). The weights are
# PyTorch's trained ones, which no test of ours has seen: layouts, BN's eps and momentum, SE and
# the activations all show in the accuracy. ConvNeXt, DenseNet and ViT need 32x32 inputs: for
# convnext_tiny (its layer scales started at 0.1), densenet121 and vit_test (a small ViT: ViT-B/16
# takes 224x224 only) the same is done on tests/torch/fm32.py's 32x32 RGB copy of Fashion-MNIST,
# packed with dtpack cifar10. DT_INTEROP_ARCHS in the environment: those models only (one family).
. "$top_srcdir/tests/common.sh"
py=$DT_PYTHON_TORCH
[ -n "$py" ] || skip "no python3 with torch, torchvision and h5py (Debian: python3-torch python3-torchvision python3-h5py)"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $src (Debian: dataset-fashion-mnist)"
expect_status 0 "$top_builddir/dtpack" fashion-mnist "$src" -o "$DT_TMP/fm"
"$py" "$top_srcdir/tests/torch/fm32.py" "$src" "$DT_TMP/fm32-bin" || fail "fm32.py failed"
expect_status 0 "$top_builddir/dtpack" cifar10 "$DT_TMP/fm32-bin" -o "$DT_TMP/fm32"
rm -rf "$DT_TMP/fm32-bin"
for arch in ${DT_INTEROP_ARCHS:-mobilenet_v3_small efficientnet_b0 regnet_y_400mf convnext_tiny densenet121 vit_test}; do
  data=fm
  case $arch in convnext_tiny | densenet121 | vit_test) data=fm32 ;; esac
  "$py" "$top_srcdir/tests/torch/train_eval.py" "$DT_TMP" "$arch" "$data" || fail "the PyTorch side failed for $arch"
  set +e
  "$py" "$top_srcdir/tools/dt-export-torchvision" "$arch" "$DT_TMP/$arch.h5" --state-dict "$DT_TMP/$arch.pth"
  st=$?
  set -e
  [ $st -eq 0 ] || fail "dt-export-torchvision $arch exited $st"
  expect_status 0 "$top_builddir/dtrain" -a "$arch" -b 250 -j 1 --pretrained "$DT_TMP/$arch.h5" -e "$DT_TMP/$data"
  read t1 t5 total < "$DT_TMP/$arch.acc"
  got=$(sed -n 's/^evaluate .*: top-1 \([0-9.]*\)%, top-5 \([0-9.]*\)%.*/\1 \2/p' "$DT_TMP/out")
  [ -n "$got" ] || { cat "$DT_TMP/out" "$DT_TMP/err"; fail "$arch: no evaluate line"; }
  line=$(awk -v g="$got" -v a="$t1" -v b="$t5" -v n="$total" 'BEGIN {
    split(g, v, " "); d1 = v[1] * n / 100 - a; d5 = v[2] * n / 100 - b
    printf "dtrain top-1 %s%%, top-5 %s%%; PyTorch %.2f%%, %.2f%%", v[1], v[2], 100 * a / n, 100 * b / n
    exit !(d1 * d1 <= 9.01 && d5 * d5 <= 9.01) }') || fail "$arch: dtrain's accuracy of PyTorch's weights is not PyTorch's: $line"
  pass "$arch: PyTorch-trained weights exported and evaluated: $line"
done
