#!/bin/sh
# pack_inside.sh: dtpack imagenet refuses an output directory inside the input tree (it would read
# its own output: `-o img/train/out` added a class "out"), compared by real path so that "..",
# "." and symbolic links do not hide it, and whether or not the directory exists yet: one line,
# exit 2, nothing created. An output beside the tree, named through "..", is fine.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || skip "no sample photo at $photo (Debian: python-matplotlib-data)"
cd "$DT_TMP"
for d in img/train/a img/train/b img/val/a img/val/b; do mkdir -p "$d"; cp "$photo" "$d/1.jpg"; done
ln -s "$DT_TMP/img/val" link

inside() { # inside OUT: refused, naming OUT, and nothing created
  before=$(find img | sort)
  refused "-o $1" "-o $1: the output directory (.*) is inside the input tree img" "$DTPACK" imagenet img -o "$1" --threads 1
  [ "$(find img | sort)" = "$before" ] || { find img; fail "-o $1: the input tree changed"; }
}
inside img/train/out
inside img
inside ./img/../img/val/new/../x
inside link/new
mkdir img/val/existing
inside img/val/existing
rmdir img/val/existing
pass "an output directory inside the input tree (new, existing, via .. or a link) is refused in one line"

expect_status 0 "$DTPACK" imagenet img -o img/../packed --threads 1
grep -q "dtpack imagenet: 4 images in 2 shards" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "counts"; }
expect_status 0 "$DTPACK" verify packed
grep -q "split train: 2 images of 2 classes" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "classes"; }
pass "an output beside the tree (img/../packed) packs 2 classes"
touch file
refused "-o a file" "file: the output directory exists and is not a directory" "$DTPACK" imagenet img -o file --threads 1
pass "an output path that is a file: refused in one line"
