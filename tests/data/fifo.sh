#!/bin/sh
# fifo.sh: a FIFO (or a directory) where a file should be never hangs dtrain or dtpack: a FIFO
# manifest.tsv, a FIFO or directory shard, FIFO input files of dtpack (CIFAR-10 batch, class
# names, IDX) and a FIFO manifest in the output directory each get one line naming the path and
# exit 2. Every command runs under timeout, so a regression fails (124) instead of hanging.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
small_fmnist "$DT_TMP/src"
expect_status 0 "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/ok"
copy() { rm -rf "$DT_TMP/${1:?}"; cp -r "$DT_TMP/ok" "$DT_TMP/$1"; }
both() { # both SET PATTERN WHAT: dtpack verify and dtrain refuse SET
  refused "dtpack verify: $3" "$2" "$DTPACK" verify "$DT_TMP/$1"
  refused "dtrain: $3" "$2" "$DTRAIN" "$DT_TMP/$1" -a resnet8 -b 10 -j 1 --epochs 1 --max-steps 1 --results "$DT_TMP/res"
  pass "$3: verify and dtrain refuse it at once"
}

copy m; rm "$DT_TMP/m/manifest.tsv"; mkfifo "$DT_TMP/m/manifest.tsv"
both m "m/manifest.tsv: the manifest is a FIFO, not a regular file" "a FIFO manifest"
copy s; rm "$DT_TMP/s/val-00000.h5"; mkfifo "$DT_TMP/s/val-00000.h5"
both s "s/val-00000.h5: the shard is a FIFO, not a regular file" "a FIFO shard"
copy d; rm "$DT_TMP/d/train-00000.h5"; mkdir "$DT_TMP/d/train-00000.h5"
both d "d/train-00000.h5: the shard is a directory, not a regular file" "a directory shard"

# dtpack's inputs and its output's manifest
refused "dtpack: a FIFO manifest in the output" "m/manifest.tsv: the manifest is a FIFO" \
  "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/m"
rm "$DT_TMP/src/t10k-labels-idx1-ubyte"; mkfifo "$DT_TMP/src/t10k-labels-idx1-ubyte"
refused "dtpack: a FIFO IDX file" "src/t10k-labels-idx1-ubyte: the IDX file is a FIFO" \
  "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/o1"
cifar_batches "$DT_TMP/c"
rm "$DT_TMP/c/batches.meta.txt"; mkfifo "$DT_TMP/c/batches.meta.txt"
refused "dtpack: a FIFO batches.meta.txt" "c/batches.meta.txt: the class name file is a FIFO" \
  "$DTPACK" cifar10 "$DT_TMP/c" -o "$DT_TMP/o2"
rm "$DT_TMP/c/batches.meta.txt" "$DT_TMP/c/test_batch.bin"; mkfifo "$DT_TMP/c/test_batch.bin"
refused "dtpack: a FIFO CIFAR-10 batch" "c/test_batch.bin: the CIFAR-10 batch is a FIFO" \
  "$DTPACK" cifar10 "$DT_TMP/c" -o "$DT_TMP/o2"
pass "FIFO inputs and a FIFO manifest in the output: dtpack refuses them at once"
