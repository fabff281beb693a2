# common.sh: sourced by every shell test. Strict mode, the build's paths, a private temporary
# directory removed on exit, and helpers. Exit 77 means skipped; the reason goes to the test's log.
set -eu
: "${top_srcdir:?run through make check}" "${top_builddir:?run through make check}"
DT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-test.XXXXXX")
trap 'rm -rf "$DT_TMP"' EXIT
DTRAIN="$top_builddir/dtrain"
# the suite checks the CPU backend (the GPU's checks are tests/gpu/check.sh's): --device auto, the
# default, would take a GPU where the machine has one; a test of auto itself unsets it
export DT_DEVICE="${DT_DEVICE:-cpu}"

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

# use_dtrain_torch [MODULES]: the build tree's Python package dtrain.torch on PYTHONPATH (exported) for
# $DT_PYTHON_TORCH, which must import MODULES (default torch; comma-separated), or skip saying what is
# missing; a build that made the package without its build-tree copy fails
use_dtrain_torch() {
  [ "${DT_HAVE_PYTHON_EXT:-no}" = yes ] ||
    skip "dtrain.torch was not built (configure found no Python.h for \$PYTHON_TORCH or python3; Debian: python3-dev)"
  [ -n "${DT_PYTHON_TORCH:-}" ] || skip "no python3 with torch (Debian: python3-torch)"
  "$DT_PYTHON_TORCH" -c "import ${1:-torch}" 2>/dev/null || skip "$DT_PYTHON_TORCH cannot import ${1:-torch}"
  [ -e "$DT_PYTHONPATH/dtrain/torch.so" ] || fail "no $DT_PYTHONPATH/dtrain/torch.so after make (all-local)"
  PYTHONPATH="$DT_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
}

# long: true under make check-long (DT_LONG=1), where the tests that have a fast form in make check
# run at their full length (doc/design.md, "Tests": which test guards what, fast and long)
long() { [ "${DT_LONG:-0}" = 1 ]; }

FMNIST=/usr/share/datasets/fashion-mnist

# idx_head FILE.gz N HEADER_BYTES BYTES_PER_ITEM: the IDX file cut to its first N items, uncompressed,
# on stdout (the count in the header, bytes 4..7, set to N)
idx_head() {
  gzip -dc "$1" | head -c "$3" > "$DT_TMP/idx.hdr"
  { head -c 4 "$DT_TMP/idx.hdr"
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)))"
    tail -c +9 "$DT_TMP/idx.hdr"
    gzip -dc "$1" | tail -c +$(($3 + 1)) | head -c $(($2 * $4)); }
}

# fmnist_idx DIR [N_TRAIN N_TEST]: Debian's Fashion-MNIST (dataset-fashion-mnist) as uncompressed IDX
# files in DIR, all of it or its first N_TRAIN training and N_TEST test images, or skip
fmnist_idx() {
  [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $FMNIST (Debian: dataset-fashion-mnist)"
  mkdir -p "$1"
  for part in train:"${2:-60000}" t10k:"${3:-10000}"; do
    set -- "$1" "${part%%:*}" "${part#*:}"
    idx_head "$FMNIST/$2-images-idx3-ubyte.gz" "$3" 16 784 > "$1/$2-images-idx3-ubyte"
    idx_head "$FMNIST/$2-labels-idx1-ubyte.gz" "$3" 8 1 > "$1/$2-labels-idx1-ubyte"
    [ "$(wc -c < "$1/$2-images-idx3-ubyte")" -eq $((16 + $3 * 784)) ] && [ "$(wc -c < "$1/$2-labels-idx1-ubyte")" -eq $((8 + $3)) ] ||
      fail "fmnist_idx: $2 cut to $3 images came out short"
  done
}

# fmnist_packed DIR [N_TRAIN N_TEST]: Debian's Fashion-MNIST, all of it or its first images (as
# fmnist_idx), packed by dtpack into DIR (splits train and val), or skip
fmnist_packed() {
  if [ $# -eq 1 ]; then
    [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $FMNIST (Debian: dataset-fashion-mnist)"
    expect_status 0 "$top_builddir/dtpack" fashion-mnist "$FMNIST" -o "$1"
  else
    rm -rf "$DT_TMP/fm-idx"
    fmnist_idx "$DT_TMP/fm-idx" "$2" "$3"
    expect_status 0 "$top_builddir/dtpack" fashion-mnist "$DT_TMP/fm-idx" -o "$1"
  fi
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
