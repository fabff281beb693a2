#!/bin/sh
# pack_ilsvrc.sh: dtpack imagenet on ImageNet as downloaded: ILSVRC2012's flat val/ with its ground
# truth, Kaggle's LOC_val_solution.csv or the devkit's ILSVRC2012_validation_ground_truth.txt with
# meta.mat (compressed or not) or "ID WNID" lines, packs to the same shards as its sorted twin
# (val/<wnid>/<file>): the same files, manifest lines, attributes and datasets (images, offsets,
# labels, names, classes), when SRC is the same path (the shards record it). Not byte for byte:
# HDF5 stamps each dataset with the second it was made, so the CRC-32s may differ. The labels are
# the WNIDs' places among train/'s sorted folders. What is missing or inconsistent is one line and
# exit 2, before anything is written.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy, PIL' 2>/dev/null || skip "no Python with h5py, numpy and PIL (Debian: python3-h5py python3-pil)"
DTPACK=$(cd "$top_builddir" && pwd)/dtpack
T=$(cd "$DT_TMP" && pwd)
"$py" "$top_srcdir/tests/data/ilsvrc.py" make "$T/il"
G=$T/il/gt
csv=$G/LOC_val_solution.csv devkit=$G/ILSVRC2012_validation_ground_truth.txt

# SRC is "src" in both trees: the shards record it
cd "$T/il/sorted"
expect_status 0 "$DTPACK" imagenet src -o "$T/sorted.out" --threads 2
cd "$T/il/flat"
same() { # same NAME: NAME.out holds the sorted twin's shards: the same files, manifest lines, attributes and datasets
  "$py" - "$T/sorted.out" "$T/$1.out" <<'PY' || fail "$1: the shards differ from the sorted twin's"
import os, sys, h5py, numpy as np
a, b = sys.argv[1:]
assert sorted(os.listdir(a)) == sorted(os.listdir(b)), (os.listdir(a), os.listdir(b))
man = lambda d: [l.split("\t")[:4] for l in open(d + "/manifest.tsv")]  # split, file, count, bytes
assert man(a) == man(b), (man(a), man(b))
for f in os.listdir(a):
    if f.endswith(".h5"):
        with h5py.File(a + "/" + f, "r") as x, h5py.File(b + "/" + f, "r") as y:
            assert sorted(x.keys()) == sorted(y.keys()) and dict(x.attrs) == dict(y.attrs), f
            for k in x:
                assert np.array_equal(x[k][()], y[k][()]) and dict(x[k].attrs) == dict(y[k].attrs), (f, k)
PY
}
expect_status 0 "$DTPACK" imagenet src -o "$T/csv.out" --val-labels "$csv" --threads 2
grep -q "16 images in 2 shards" "$T/out" || { cat "$T/out"; fail "csv: not 9 train and 7 val images"; }
same csv
expect_status 0 "$DTPACK" verify "$T/csv.out"
grep -q "split val: 7 images of 3 classes" "$T/out" || { cat "$T/out"; fail "csv: dtpack verify"; }
pass "LOC_val_solution.csv: the sorted twin's shards; dtpack verify passes"
for m in meta.mat meta_plain.mat synsets.txt; do
  expect_status 0 "$DTPACK" imagenet src -o "$T/$m.out" --val-labels "$devkit" --synsets "$G/$m" --threads 1
  same "$m"
done
pass "the devkit's ground truth with meta.mat (compressed, plain) or ID WNID lines: the sorted twin's shards"

# and what they hold: each val image under <wnid>/<file> with its WNID's place among train/'s folders
"$py" - "$T/csv.out/val-00000.h5" <<'PY' || fail "val labels or names wrong"
import sys, h5py
VAL = ["n01443537", "n01440764", "n01484850", "n01443537", "n01440764", "n01484850", "n01484850"]
with h5py.File(sys.argv[1], "r") as f:
    classes = [c.decode() for c in f["classes"][:]]
    got = sorted((n.decode(), int(l)) for n, l in zip(f["names"][:], f["labels"][:]))
want = sorted(("%s/ILSVRC2012_val_%08d.JPEG" % (w, k + 1), classes.index(w)) for k, w in enumerate(VAL))
assert classes == sorted(set(VAL)) and got == want, (classes, got, want)
PY
pass "val: names <wnid>/<file>, labels by train/'s sorted folders"

# refusals: one line, exit 2, nothing written
bad=$T/bad
mkdir -p "$bad"
refused "flat val/ without its ground truth" "src/val: 7 files and no class folders: .*--val-labels" \
  "$DTPACK" imagenet src -o "$T/x"
head -n 6 "$devkit" > "$bad/short.txt"
refused "a file without a label" "src/val/ILSVRC2012_val_00000007.JPEG: no label in --val-labels .*short.txt (1 file of src/val without one)" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/short.txt" --synsets "$G/meta.mat"
{ cat "$csv"; echo "ILSVRC2012_val_00000099,n01440764 1 2 3 4"; } > "$bad/extra.csv"
refused "a label for a missing file" "extra.csv: line 9: ILSVRC2012_val_00000099 has no file in src/val (1 label for missing files)" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/extra.csv"
sed '3s/.*/1001/' "$devkit" > "$bad/range.txt"
refused "a class ID out of range" "range.txt: line 3: class ID 1001 is out of range: not among the 5 ILSVRC2012_IDs" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/range.txt" --synsets "$G/meta.mat"
sed '2s/.*/1/' "$devkit" > "$bad/fox.txt"
refused "an ID whose WNID has no train folder" "fox.txt: line 2: ILSVRC2012_val_00000002 is n02119789 (class ID 1), not among the 3 class folders of src/train" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/fox.txt" --synsets "$G/synsets.txt"
sed '4s/,n01[0-9]*/,n09999999/' "$csv" > "$bad/wnid.csv"
refused "a WNID not among train/'s folders" "wnid.csv: line 4: ILSVRC2012_val_00000005 is n09999999, not among the 3 class folders of src/train" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/wnid.csv"
{ cat "$csv"; sed -n 5p "$csv"; } > "$bad/dup.csv"
refused "a duplicate entry" "dup.csv: lines 5 and 9 both label ILSVRC2012_val_00000004 (a duplicate entry)" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$bad/dup.csv"
cp -r src "$T/il/dupfile" && cp src/val/ILSVRC2012_val_00000003.JPEG "$T/il/dupfile/val/ILSVRC2012_val_00000003.jpg"
refused "two files of one ImageId" "ILSVRC2012_val_00000003.JPEG and ILSVRC2012_val_00000003.jpg are both ImageId" \
  "$DTPACK" imagenet "$T/il/dupfile" -o "$T/x" --val-labels "$csv"
[ ! -e "$T/x" ] || fail "a refused pack created its output directory"
pass "file without a label, label without a file, ID out of range, WNID without a class, duplicates: one line each"

refused "the devkit's ground truth without its mapping" "the devkit's ground truth gives class IDs, not WNIDs: add --synsets" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$devkit"
refused "LOC_synset_mapping.txt by position" "LOC_synset_mapping.txt: line 1: .* is not '<ILSVRC2012_ID> <WNID>'" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$devkit" --synsets "$G/LOC_synset_mapping.txt"
head -c 300 "$G/meta_plain.mat" > "$bad/cut.mat"
refused "a truncated meta.mat" "cut.mat: an element at byte 200 runs past the end" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$devkit" --synsets "$bad/cut.mat"
refused "--synsets with the CSV" "names the WNIDs itself" \
  "$DTPACK" imagenet src -o "$T/x" --val-labels "$csv" --synsets "$G/meta.mat"
refused "--synsets alone" "--synsets .*: maps the class IDs of the devkit's ground truth" \
  "$DTPACK" imagenet src -o "$T/x" --synsets "$G/meta.mat"
refused "--val-labels on a sorted val/" "src/val: holds class folders (n01440764): --val-labels" \
  "$DTPACK" imagenet ../sorted/src -o "$T/x" --val-labels "$csv"
refused "--val-labels without train first" "labels a flat split val packed after train" \
  "$DTPACK" imagenet src -o "$T/x" --split val --val-labels "$csv"
refused "--val-labels for cifar10" "--val-labels: only for imagenet" \
  "$DTPACK" cifar10 src -o "$T/x" --val-labels "$csv"
[ ! -e "$T/x" ] || fail "a refused pack created its output directory"
pass "ground truth and mapping that do not go together, a truncated meta.mat, misplaced flags: one line each"
