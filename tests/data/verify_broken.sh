#!/bin/sh
# verify_broken.sh: dtpack verify refuses what dtrain refuses at start-up, through the same checks
# (data/shard.c): an empty manifest, one with only its header, a manifest that is a directory, a
# shard listed twice, a class renamed in one split only, a changed or truncated shard. Each gets
# one line naming the file (and line or class index) and exit 2, from verify and from dtrain.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
small_fmnist "$DT_TMP/src"
expect_status 0 "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/ok"
expect_status 0 "$DTPACK" verify "$DT_TMP/ok"
grep -q "split val: 50 images of 10 classes in 1 shards" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "the good set"; }
pass "a good set verifies"

# both refuse: broken NAME PATTERN (the set is $DT_TMP/NAME)
broken() {
  refused "dtpack verify: $3" "$2" "$DTPACK" verify "$DT_TMP/$1"
  refused "dtrain: $3" "$2" "$DTRAIN" "$DT_TMP/$1" -a resnet8 -b 10 -j 1 --epochs 1 --max-steps 1 --results "$DT_TMP/res"
  [ ! -e "$DT_TMP/res" ] || fail "dtrain on $3: wrote results"
  pass "$3: verify and dtrain refuse it in one line"
}
copy() { rm -rf "$DT_TMP/${1:?}"; cp -r "$DT_TMP/ok" "$DT_TMP/$1"; }

copy empty; : > "$DT_TMP/empty/manifest.tsv"
broken empty "empty/manifest.tsv: the manifest is empty" "an empty manifest"
copy header; head -n 2 "$DT_TMP/ok/manifest.tsv" > "$DT_TMP/header/manifest.tsv"
broken header "header/manifest.tsv lists no shards" "a manifest with only its header"
copy mdir; rm "$DT_TMP/mdir/manifest.tsv"; mkdir "$DT_TMP/mdir/manifest.tsv"
broken mdir "mdir/manifest.tsv: the manifest is a directory" "a manifest that is a directory"
copy twice; grep '^val' "$DT_TMP/ok/manifest.tsv" >> "$DT_TMP/twice/manifest.tsv"
broken twice "twice/manifest.tsv:5: shard val-00000.h5 is listed again (first on line 4)" "a shard listed twice"
copy trunc; head -c 40000 "$DT_TMP/ok/val-00000.h5" > "$DT_TMP/trunc/val-00000.h5"
broken trunc "trunc/val-00000.h5 is 40000 bytes but the manifest says" "a truncated shard"

# a changed byte: the size agrees, only the CRC-32 (verify) sees it; dtrain reads on
copy crc
b=$(od -An -tu1 -j 80000 -N 1 "$DT_TMP/crc/train-00000.h5")
printf "\\$(printf %03o $(((b + 1) % 256)))" | dd of="$DT_TMP/crc/train-00000.h5" bs=1 seek=80000 conv=notrunc 2>/dev/null
cmp -s "$DT_TMP/ok/train-00000.h5" "$DT_TMP/crc/train-00000.h5" && fail "the byte did not change"
refused "dtpack verify: a changed byte" "crc/train-00000.h5 has CRC-32 .* but the manifest says" "$DTPACK" verify "$DT_TMP/crc"
pass "a changed byte: verify names the shard"

# a class renamed in one split: CIFAR-10 batches packed twice with class 3 named differently, the
# train split of one and the val split of the other in one directory
cifar_batches "$DT_TMP/c1"
cifar_batches "$DT_TMP/c2" kitten
expect_status 0 "$DTPACK" cifar10 "$DT_TMP/c1" -o "$DT_TMP/p1"
expect_status 0 "$DTPACK" cifar10 "$DT_TMP/c2" -o "$DT_TMP/p2"
mkdir "$DT_TMP/renamed"
cp "$DT_TMP/p1/train-00000.h5" "$DT_TMP/p2/val-00000.h5" "$DT_TMP/renamed/"
{ grep -v '^val' "$DT_TMP/p1/manifest.tsv"; grep '^val' "$DT_TMP/p2/manifest.tsv"; } > "$DT_TMP/renamed/manifest.tsv"
broken renamed "split val (.*renamed/val-00000.h5): class 3 is 'kitten', in split train (.*renamed/train-00000.h5) 'cat'" \
  "a class renamed in one split"

# a third split is checked against train too (dtrain does not read it; verify does): an ImageNet
# tree packed with train and val, then another tree's test split, whose classes differ, into the
# same directory
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || { echo "no sample photo at $photo (Debian: python-matplotlib-data): the test split is not tried"; exit 0; }
for d in t1/train/a t1/train/b t1/val/a t1/val/b t2/test/a t2/test/c; do mkdir -p "$DT_TMP/$d"; cp "$photo" "$DT_TMP/$d/1.jpg"; done
expect_status 0 "$DTPACK" imagenet "$DT_TMP/t1" -o "$DT_TMP/three" --threads 1
expect_status 0 "$DTPACK" imagenet "$DT_TMP/t2" -o "$DT_TMP/three" --split test --threads 1
refused "dtpack verify: a test split with other classes" \
  "split test (.*three/test-00000.h5): class 1 is 'c', in split train (.*three/train-00000.h5) 'b'" \
  "$DTPACK" verify "$DT_TMP/three"
pass "a test split packed from another tree: verify refuses its class list"
