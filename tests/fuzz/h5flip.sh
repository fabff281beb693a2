#!/bin/sh
# h5flip.sh: one changed byte in a shard or a checkpoint (mostly in HDF5's metadata, some in the raw
# data) never crashes or hangs `dtpack verify` or dtrain's start (DATA, --resume, -e, --pretrained):
# exit 0 or the bad-input code, with one error line (tests/fuzz/h5flip.py says how, and prints each
# case and a reproduction line for each failure). DT_FLIP_CASES cases (default 240, about a minute on
# 2 cores), seed DT_FLIP_SEED (default 1; "random": a new one, printed); make check-long runs more.
# DT_FLIP_KEEP=DIR keeps each failing case's file.
. "$top_srcdir/tests/common.sh"
for b in dtrain dtpack; do
  [ -x "$top_builddir/$b" ] || skip "$top_builddir/$b is not built"
done
py=
for p in "${DT_PYTHON_TORCH:-}" python3 /usr/bin/python3; do
  if [ -n "$p" ] && "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || skip "no python3 with h5py and numpy (Debian: python3-h5py)"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  skip "Fashion-MNIST not found in /usr/share/datasets/fashion-mnist (Debian: dataset-fashion-mnist)"
seed=${DT_FLIP_SEED:-1}
set -- --bindir "$top_builddir" --cases "${DT_FLIP_CASES:-240}" --work "$DT_TMP/h5flip"
[ "$seed" = random ] || set -- "$@" --seed "$seed"
[ -z "${DT_FLIP_KEEP:-}" ] || set -- "$@" --keep "$DT_FLIP_KEEP"
set +e
"$py" "$top_srcdir/tests/fuzz/h5flip.py" "$@"
st=$?
set -e
[ "$st" -ne 77 ] || exit 77
[ "$st" -eq 0 ] || fail "a flipped byte crashed, hung or was misreported (the summary above has each reproduction line)"
pass "every flipped byte gave exit 0 or the bad-input code with one error line"
