#!/bin/sh
# pack_fmnist.sh: dtpack on real Fashion-MNIST (Debian's dataset-fashion-mnist): 60000 + 10000
# images, every pixel and label equal to the IDX source, readable with h5py.
. "$top_srcdir/tests/common.sh"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $src (Debian: dataset-fashion-mnist)"
expect_status 0 "$top_builddir/dtpack" fashion-mnist "$src" -o "$DT_TMP/fm"
grep -q "dtpack fashion-mnist: 70000 images in 2 shards" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "counts"; }
py=${DT_PYTHON_TORCH:-}
if [ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null; then
  "$py" - "$src" "$DT_TMP/fm" <<'PY' || fail "shards differ from the IDX files"
import gzip, sys, h5py, numpy as np
src, out = sys.argv[1:3]
for idx, split in (("train", "train"), ("t10k", "val")):
    img = np.frombuffer(gzip.open("%s/%s-images-idx3-ubyte.gz" % (src, idx)).read()[16:], np.uint8)
    lab = np.frombuffer(gzip.open("%s/%s-labels-idx1-ubyte.gz" % (src, idx)).read()[8:], np.uint8)
    with h5py.File("%s/%s-00000.h5" % (out, split), "r") as f:
        px, lb = f["pixels"][:], f["labels"][:]
        assert f.attrs["schema"] == "dtrain-shard" and f.attrs["kind"] == "raw", dict(f.attrs)
        assert [c.decode() for c in f["classes"][:2]] == ["T-shirt/top", "Trouser"]
    assert px.shape == (len(lab), 28, 28, 1), px.shape
    assert (px.reshape(-1) == img).all() and (lb == lab).all()
    print(split, px.shape, "pixels and labels equal the IDX source; image 0 label", lb[0])
PY
  pass "every pixel and label matches the IDX files (h5py)"
else
  echo "h5py not found: the pixel comparison is skipped, counts checked"
fi
expect_status 0 "$top_builddir/dtpack" verify "$DT_TMP/fm"
pass "$(cat "$DT_TMP/out" | tr '\n' ' ')"
