#!/bin/sh
# pack_empty.sh: empty and truncated inputs are refused, not packed as "0 images": CIFAR-10
# batches (empty, cut inside a record), IDX files (empty, cut in the header or the data, gzip
# cut short, a header saying 0 images) and an ImageNet split whose files are all unreadable.
# Each gets one line naming the file and exit 2; the input files are all checked before the
# output directory is touched.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
cd "$DT_TMP"

# CIFAR-10
cifar_batches c
for b in 1 2 3 4 5; do : > "c/data_batch_$b.bin"; done
: > c/test_batch.bin
refused "cifar10: empty batches" "c/data_batch_1.bin: empty file" "$DTPACK" cifar10 c -o o
[ ! -e o ] || fail "cifar10 of empty batches: the output directory was created"
cifar_batches c
: > c/test_batch.bin
refused "cifar10: an empty test batch" "c/test_batch.bin: empty file" "$DTPACK" cifar10 c -o o
[ ! -e o ] || fail "cifar10 with an empty test_batch.bin: train was packed before val was checked"
cifar_records 3 | head -c 5000 > c/test_batch.bin
refused "cifar10: a cut record" "c/test_batch.bin: record 1 is cut short (1927 of 3073 bytes)" "$DTPACK" cifar10 c -o o
cifar_batches c
expect_status 0 "$DTPACK" cifar10 c -o o
grep -q "dtpack cifar10: 13 images in 2 shards" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "cifar10 counts"; }
pass "cifar10: empty and cut batches refused by name before anything is written"

# IDX
small_fmnist src
cp -r src s
: > s/t10k-labels-idx1-ubyte
refused "IDX: an empty label file" "s/t10k-labels-idx1-ubyte: empty file" "$DTPACK" fashion-mnist s -o fo
[ ! -e fo ] || fail "IDX: train was packed before the empty t10k file was seen"
cp src/t10k-labels-idx1-ubyte s/
head -c 10 src/t10k-images-idx3-ubyte > s/t10k-images-idx3-ubyte
refused "IDX: a cut header" "s/t10k-images-idx3-ubyte: truncated: 10 bytes, shorter than the IDX header" \
  "$DTPACK" mnist s -o fo
head -c 20000 src/t10k-images-idx3-ubyte > s/t10k-images-idx3-ubyte
refused "IDX: cut data" "s/t10k-images-idx3-ubyte: truncated: its header promises 50 images of 28x28, the data holds 25" \
  "$DTPACK" mnist s -o fo
printf '\000\000\010\003\000\000\000\000\000\000\000\034\000\000\000\034' > s/train-images-idx3-ubyte
refused "IDX: 0 images" "s/train-images-idx3-ubyte: its header says 0 images" "$DTPACK" mnist s -o fo
cp src/train-images-idx3-ubyte s/
gzip -c src/t10k-images-idx3-ubyte | head -c 3000 > s/t10k-images-idx3-ubyte.gz
refused "IDX: a cut .gz" "s/t10k-images-idx3-ubyte.gz: " "$DTPACK" mnist s -o fo
[ ! -e fo ] || fail "IDX: the output directory was created"
pass "IDX: empty, cut and zero-image files refused by name before anything is written"

# ImageNet: a split whose only file is empty, and one with no files
mkdir -p t/train/a t/val/a
: > t/train/a/1.jpg
: > t/val/a/1.jpg
expect_status 2 timeout 20 "$DTPACK" imagenet t -o to --threads 1
grep -q "t/train/a/1.jpg: skipped: empty file" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "the empty image is not reported"; }
[ "$(grep -c "error:" "$DT_TMP/err")" -eq 1 ] &&
  grep -q "error: t/train: none of its 1 files is a readable image: split train would be empty" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "imagenet: a split of unreadable files is not refused in one line"; }
grep -q "^train" to/manifest.tsv && fail "imagenet: the empty train split is listed"
rm t/val/a/1.jpg
refused "imagenet: a split with no files" "t/val: no image files under its class folders" \
  "$DTPACK" imagenet t -o to2 --threads 1
[ ! -e to2 ] || fail "imagenet: the output directory was created although val has no files"
pass "imagenet: a split with no files, or none readable, is refused"
