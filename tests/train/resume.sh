#!/bin/sh
# resume.sh: checkpoints resume exactly. On 2 MPI ranks, resnet8 on Fashion-MNIST for 2 epochs
# straight, against the same run stopped after 300 steps (inside the first epoch) and continued
# with --resume auto: the final checkpoints hold the same weights, BN statistics and momentum, bit
# for bit. Also: a checkpoint of another architecture is refused in one line (exit 2), and a
# stale temporary file from a killed writer does not stop --resume auto from finding the real one.
. "$top_srcdir/tests/common.sh"
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || skip "no Python with h5py (Debian: python3-h5py)"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $src (Debian: dataset-fashion-mnist)"
MPIRUN="mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
expect_status 0 "$top_builddir/dtpack" fashion-mnist "$src" -o "$DT_TMP/fm"
run() { expect_status 0 timeout 600 $MPIRUN -np 2 "$top_builddir/dtrain" -a resnet8 -b 64 -j 1 --epochs 2 --lr 0.4 \
  --lr-schedule cosine --wd 5e-4 -p 0 "$@" "$DT_TMP/fm"; }
run --results "$DT_TMP/a"
run --results "$DT_TMP/b" --max-steps 300
touch "$(ls -d "$DT_TMP"/b/*)/checkpoint.h5.tmp.12345"   # what a writer killed mid-way leaves
run --results "$DT_TMP/b" --resume auto
grep -q "resuming from .*checkpoint.h5 at epoch 0, step 300" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume at step 300"; }
"$py" - "$DT_TMP" <<'PY' || fail "the resumed run differs from the straight one"
import glob, sys, h5py, numpy as np
a = h5py.File(glob.glob(sys.argv[1] + "/a/*/checkpoint.h5")[0], "r")
b = h5py.File(glob.glob(sys.argv[1] + "/b/*/checkpoint.h5")[0], "r")
assert a.attrs["epoch"] == b.attrs["epoch"] == 2 and a.attrs["global_step"] == b.attrs["global_step"]
bad = [k for k in a["model"] if not np.array_equal(a["model"][k][()], b["model"][k][()])]
assert not bad, "tensors differ: %s" % bad[:5]
assert np.array_equal(a["optimizer/momentum"][()], b["optimizer/momentum"][()]), "momentum differs"
print("straight and resumed: %d tensors and the momentum bit for bit, step %d" % (len(a["model"]), a.attrs["global_step"]))
PY
pass "2 epochs straight = 300 steps + stop + resume, bit for bit, under 2 MPI ranks"
expect_status 2 "$top_builddir/dtrain" -a resnet20 --results "$DT_TMP/c" --resume "$(ls "$DT_TMP"/a/*/checkpoint.h5)" \
  "$DT_TMP/fm"
grep -q "a checkpoint of resnet8, not of resnet20" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "another arch's checkpoint"; }
pass "a checkpoint of another architecture: one line, exit 2"
