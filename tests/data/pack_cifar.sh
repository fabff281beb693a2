#!/bin/sh
# pack_cifar.sh: dtpack on CIFAR-10's binary format (batches written here: the real ones are not a
# Debian package): records become 32x32x3 raw shards with channels last, labels kept, class
# names read from batches.meta.txt; a cut-short record and a label over 9 are refused by name.
. "$top_srcdir/tests/common.sh"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || skip "no Python with h5py and numpy (Debian: python3-h5py)"
mkdir "$DT_TMP/c"
"$py" - "$DT_TMP/c" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
for name, n in [("data_batch_%d.bin" % i, 3) for i in range(1, 6)] + [("test_batch.bin", 4)]:
    rec = rng.integers(0, 256, size=(n, 3073), dtype=np.uint8)
    rec[:, 0] = rng.integers(0, 10, size=n)
    rec.tofile("%s/%s" % (d, name))
open(d + "/batches.meta.txt", "w").write("\n".join("class%d" % i for i in range(10)) + "\n\n")
PY
expect_status 0 "$top_builddir/dtpack" cifar10 "$DT_TMP/c" -o "$DT_TMP/sh"
grep -q "dtpack cifar10: 19 images in 2 shards" "$DT_TMP/out" || { cat "$DT_TMP/out" "$DT_TMP/err"; fail "counts"; }
"$py" - "$DT_TMP/c" "$DT_TMP/sh" <<'PY' || fail "shards differ from the batches"
import sys, h5py, numpy as np
src, out = sys.argv[1:3]
rec = np.concatenate([np.fromfile("%s/data_batch_%d.bin" % (src, i), np.uint8).reshape(-1, 3073) for i in range(1, 6)])
with h5py.File(out + "/train-00000.h5", "r") as f:
    px, lb = f["pixels"][:], f["labels"][:]
    assert [c.decode() for c in f["classes"][:]] == ["class%d" % i for i in range(10)]
want = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)   # planes R, G, B -> channels last
assert px.shape == (15, 32, 32, 3) and (px == want).all() and (lb == rec[:, 0]).all()
print("train: 15 records as HWC pixels with their labels and class names")
PY
pass "records packed as 32x32x3, labels and class names kept"
head -c 5000 "$DT_TMP/c/test_batch.bin" > "$DT_TMP/cut" && mv "$DT_TMP/cut" "$DT_TMP/c/test_batch.bin"
expect_status 2 "$top_builddir/dtpack" cifar10 "$DT_TMP/c" -o "$DT_TMP/sh"
grep -q "test_batch.bin: record 1 is cut short" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "a cut record is not named"; }
pass "a cut-short batch is refused (exit 2), naming the file and record"
