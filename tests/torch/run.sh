# run.sh: sourced by tests/torch/<model>.sh with $model set. Makes the PyTorch fixture for the model
# (kept in the build tree between runs, remade when the generator changes) and checks our engine
# against it with compare.
. "$top_srcdir/tests/common.sh"
[ "$DT_TORCH_TESTS" = yes ] || skip "PyTorch tests disabled (configure --disable-torch-tests)"
[ -n "$DT_PYTHON_TORCH" ] || skip "no python3 with torch, torchvision and h5py (Debian: python3-torch python3-torchvision python3-h5py)"
gen="$top_srcdir/tests/fixtures/make_fixtures.py"
dir="$top_builddir/tests/fixtures"
fixture="$dir/$model.h5"
mkdir -p "$dir"
if [ ! -f "$fixture" ] || [ "$fixture" -ot "$gen" ]; then
  set +e
  "$DT_PYTHON_TORCH" "$gen" --out "$dir" --threads 2 "$model"
  st=$?
  set -e
  [ "$st" -eq 77 ] && skip "the fixture generator could not import torch/h5py"
  [ "$st" -eq 0 ] || fail "make_fixtures.py $model exited $st"
fi
exec "$top_builddir/tests/torch/compare" "$fixture"
