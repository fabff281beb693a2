# common.sh: sourced by every shell test. Strict mode, the build's paths, a private temporary
# directory removed on exit, and helpers. Exit 77 means skipped; the reason goes to the test's log.
set -eu
: "${top_srcdir:?run through make check}" "${top_builddir:?run through make check}"
DT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-test.XXXXXX")
trap 'rm -rf "$DT_TMP"' EXIT
DTRAIN="$top_builddir/dtrain"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }

# expect_status WANT CMD...: run CMD with stdout/stderr into $DT_TMP/out and $DT_TMP/err and
# fail unless it exits with WANT.
expect_status() {
  want=$1; shift
  set +e; "$@" >"$DT_TMP/out" 2>"$DT_TMP/err"; got=$?; set -e
  [ "$got" -eq "$want" ] || { cat "$DT_TMP/out" "$DT_TMP/err"; fail "'$*' exited $got, expected $want"; }
}

# use_mpirun [OPTION...]: skip unless built with MPI and mpirun is here; MPIRUN is then the mpirun
# command line the tests use (oversubscribed, one OpenMP thread per rank, as root where root runs it)
# with OPTION... added
use_mpirun() {
  [ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
  command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
  MPIRUN="mpirun --oversubscribe $* -x OMP_NUM_THREADS=1"
  if [ "$(id -u)" -eq 0 ]; then MPIRUN="$MPIRUN --allow-run-as-root"; fi
}

# fmnist_packed DIR: Debian's Fashion-MNIST packed by dtpack into DIR, or skip
fmnist_packed() {
  fm_src=/usr/share/datasets/fashion-mnist
  [ -f "$fm_src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $fm_src (Debian: dataset-fashion-mnist)"
  expect_status 0 "$top_builddir/dtpack" fashion-mnist "$fm_src" -o "$1"
}

# fmnist_idx: Debian's Fashion-MNIST (dataset-fashion-mnist) decompressed into $DT_TMP, or skip
fmnist_idx() {
  fm_src=/usr/share/datasets/fashion-mnist
  [ -f "$fm_src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $fm_src (Debian: dataset-fashion-mnist)"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -dc "$fm_src/$f.gz" > "$DT_TMP/$f"
  done
}

# torch_oracle NAME CHECK: PyTorch's side, tests/torch/NAME_torch.py, writes $DT_TMP/NAME.h5 (exit 77:
# it could not import what it needs: skip), then tests/torch/CHECK compares ours with it; its exit
# status is the test's
torch_oracle() {
  [ "$DT_TORCH_TESTS" = yes ] || skip "PyTorch tests disabled (configure --disable-torch-tests)"
  [ -n "$DT_PYTHON_TORCH" ] || skip "no python3 with torch and h5py (Debian: python3-torch python3-h5py)"
  set +e
  "$DT_PYTHON_TORCH" "$top_srcdir/tests/torch/$1_torch.py" "$DT_TMP/$1.h5"
  st=$?
  set -e
  [ "$st" -eq 77 ] && skip "$1_torch.py could not import torch, torchvision, numpy or h5py"
  [ "$st" -eq 0 ] || fail "$1_torch.py exited $st"
  "$top_builddir/tests/torch/$2" "$DT_TMP/$1.h5"
}
