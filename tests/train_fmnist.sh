#!/bin/sh
# train_fmnist.sh: a resnet20 trained for 300 steps on real Fashion-MNIST (Debian's
# dataset-fashion-mnist) learns: loss down by a margin, held-out accuracy over 70%.
. "$top_srcdir/tests/common.sh"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $src (Debian: dataset-fashion-mnist)"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  gzip -dc "$src/$f.gz" > "$DT_TMP/$f"
done
"$top_builddir/tests/unit/test_train_fmnist" "$DT_TMP/train-images-idx3-ubyte" "$DT_TMP/train-labels-idx1-ubyte" \
  "$DT_TMP/t10k-images-idx3-ubyte" "$DT_TMP/t10k-labels-idx1-ubyte"
