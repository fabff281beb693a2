#!/bin/sh
# fmnist_amp.sh: a resnet20 trained for 300 steps on real Fashion-MNIST (Debian's
# dataset-fashion-mnist) learns, at every mixed-precision level (O0, O1, O2, O3, and O2 in bf16),
# each with its loss scaler: every one must pass fmnist_train's own margins (loss down by a margin,
# held-out top-1 over 70%) and end within 4 points of O0's held-out top-1 (all 10000 test
# images: about +-0.4 points of sampling noise; with 1000 it was +-1.2, and O2 measured 84.8 on an
# AVX-512 machine against 82.6 with oneDNN and OpenBLAS held to AVX2, O0 84.4).
. "$top_srcdir/tests/common.sh"
fmnist_idx
acc() { sed -n "s/^# accuracy $1 \([0-9.]*\)$/\1/p" "$DT_TMP/out"; }
for level in O0 O1 O2 O3 O2-bf16; do
  expect_status 0 "$top_builddir/tests/train/fmnist_train" "$DT_TMP/train-images-idx3-ubyte" \
    "$DT_TMP/train-labels-idx1-ubyte" "$DT_TMP/t10k-images-idx3-ubyte" "$DT_TMP/t10k-labels-idx1-ubyte" "$level"
  grep -E "^(ok|not ok) [34] " "$DT_TMP/out"
  a=$(acc "$level")
  [ -n "$a" ] || fail "$level: no accuracy reported"
  [ "$level" = O0 ] && base=$a
  awk -v a="$a" -v b="$base" 'BEGIN { exit !(a >= b - 4) }' || fail "$level: top-1 $a is more than 4 points below O0's $base"
  pass "$level: top-1 $a (O0: $base)"
done
