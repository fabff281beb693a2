#!/bin/sh
# pack_tree.sh: dtpack on a small ImageNet-style tree made from a real photo (Debian's
# python-matplotlib-data) with ImageNet's quirks: a PNG named .JPEG, CMYK and grayscale JPEGs
# become RGB JPEGs, progressive ones and one with stray bytes before its end marker are stored as
# they are, the truncated and the empty file are reported by path and skipped (fatal with
# --strict), and h5py reads back the classes, labels, names and pixels.
. "$top_srcdir/tests/common.sh"
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || skip "no sample photo at $photo (Debian: python-matplotlib-data)"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy, PIL' 2>/dev/null || skip "no Python with h5py, numpy and PIL (Debian: python3-h5py python3-pil)"
DTPACK="$top_builddir/dtpack"
"$py" "$top_srcdir/tests/data/tree.py" make "$photo" "$DT_TMP/src"

expect_status 0 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/sh" --threads 2
cat "$DT_TMP/out" "$DT_TMP/err"
grep -q "truncated.JPEG: skipped: Premature end of JPEG file" "$DT_TMP/err" || fail "the truncated file is not reported by path"
grep -q "empty.JPEG: skipped: empty file" "$DT_TMP/err" || fail "the empty file is not reported by path"
grep -q "dtpack imagenet: 23 images in 2 shards" "$DT_TMP/out" || fail "summary: expected 23 images (17 train, 6 val) in 2 shards"
grep -q "1 PNG, 1 grayscale and 1 CMYK converted to RGB JPEG, 0 resized, 2 skipped" "$DT_TMP/out" ||
  fail "summary: the conversions and skips are not counted"
pass "packed, quirks converted, bad files reported and counted"
"$py" "$top_srcdir/tests/data/tree.py" check "$DT_TMP/src" "$DT_TMP/sh" || fail "shards differ from the tree"
expect_status 0 "$DTPACK" verify "$DT_TMP/sh"
pass "dtpack verify: $(cat "$DT_TMP/out" | tr '\n' ' ')"

# the same tree with one thread gives the same shards, byte for byte
expect_status 0 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/sh1" --threads 1
cmp "$DT_TMP/sh/train-00000.h5" "$DT_TMP/sh1/train-00000.h5" >/dev/null 2>&1 ||
  h5diff "$DT_TMP/sh/train-00000.h5" "$DT_TMP/sh1/train-00000.h5" >/dev/null || fail "1 and 2 threads give different shards"
pass "1 and 2 threads: the same shard contents"

# --strict: the first bad file is fatal (bad input: exit 2), named, and no train split is left in the manifest
expect_status 2 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/sh" --strict
[ "$(grep -c . "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "--strict: not one line"; }
grep -q "empty.JPEG: empty file (--strict: stopping)" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "--strict: the file is not named"; }
grep -q "^train" "$DT_TMP/sh/manifest.tsv" && fail "--strict: a failed split must not stay in the manifest"
pass "--strict stops at the empty file and leaves no train split listed"

# --resize-short re-encodes every image whose shorter side exceeds 64
expect_status 0 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/small" --resize-short 64 --quality 80 --split val
"$py" - "$DT_TMP/small" <<'PY' || fail "--resize-short 64: wrong sizes"
import io, sys, h5py
from PIL import Image
with h5py.File(sys.argv[1] + "/val-00000.h5", "r") as f:
    off = f["offsets"][:]
    sizes = [Image.open(io.BytesIO(f["images"][off[i]:off[i + 1]].tobytes())).size for i in range(len(off) - 1)]
assert len(sizes) == 6 and all(min(s) == 64 for s in sizes), sizes
print("val resized:", sizes)
PY
pass "--resize-short 64 --split val: 6 images with a shorter side of 64"

# bad command lines: one line, exit 2
expect_status 2 "$DTPACK" imagenet "$DT_TMP/src"
grep -q -- "-o/--out: missing" "$DT_TMP/err" || fail "no -o: not named"
expect_status 2 "$DTPACK" imagenet "$DT_TMP/src" -o "$DT_TMP/x" --quality 101
grep -q -- "--quality" "$DT_TMP/err" || fail "--quality 101: not named"
expect_status 2 "$DTPACK" tiff "$DT_TMP/src" -o "$DT_TMP/x"
expect_status 2 "$DTPACK" verify "$DT_TMP/src"
grep -q "manifest.tsv: cannot open the manifest" "$DT_TMP/err" || fail "verify of an unpacked directory: not said"
pass "bad command lines and an unpacked directory refused in one line"
