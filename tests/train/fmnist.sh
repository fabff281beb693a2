#!/bin/sh
# fmnist.sh: a resnet20 trained for 300 steps on real Fashion-MNIST (Debian's
# dataset-fashion-mnist) learns: loss down by a margin, held-out accuracy over 70%.
. "$top_srcdir/tests/common.sh"
fmnist_idx
"$top_builddir/tests/train/fmnist_train" "$DT_TMP/train-images-idx3-ubyte" "$DT_TMP/train-labels-idx1-ubyte" \
  "$DT_TMP/t10k-images-idx3-ubyte" "$DT_TMP/t10k-labels-idx1-ubyte"
