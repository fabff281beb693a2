#!/bin/sh
# hvd_autograd.sh: gradients through dtrain.torch's out-of-place collectives (src/python/autograd.c,
# Horovod's autograd Functions): tests/python/autograd.py, which checks x.grad after
# (hvd.op(x) * w).sum().backward() for allreduce, allgather, broadcast, alltoall and reducescatter
# against values each rank computes from the known per-rank weights, on one process and under
# mpirun -np 2 and -np 3 (uneven rows and splits). Every rank must print its "all N checks passed".
. "$top_srcdir/tests/common.sh"
[ "${DT_HAVE_PYTHON_EXT:-no}" = yes ] ||
  skip "dtrain.torch was not built (configure found no Python.h for \$PYTHON_TORCH or python3; Debian: python3-dev)"
[ -n "${DT_PYTHON_TORCH:-}" ] || skip "no python3 with torch (Debian: python3-torch)"
"$DT_PYTHON_TORCH" -c 'import torch' 2>/dev/null || skip "$DT_PYTHON_TORCH cannot import torch"
[ -e "$DT_PYTHONPATH/dtrain/torch.so" ] || fail "no $DT_PYTHONPATH/dtrain/torch.so after make (all-local)"
PYTHONPATH="$DT_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
# a collective that cannot complete (a gradient's collective left unmatched) fails in 30 s, no hang
DT_COMM_TIMEOUT=30
export PYTHONPATH DT_COMM_TIMEOUT DT_HAVE_MPI
py="$top_srcdir/tests/python/autograd.py"

# every rank's line: "rank R of N: all K checks passed"
ranks_passed() {
  r=0
  while [ "$r" -lt "$1" ]; do
    grep -q "rank $r of $1: all [0-9]* checks passed" "$DT_TMP/out" ||
      { cat "$DT_TMP/out" "$DT_TMP/err"; fail "$2: rank $r did not pass every check"; }
    r=$((r + 1))
  done
}

expect_status 0 timeout 60 "$DT_PYTHON_TORCH" "$py"
ranks_passed 1 "one process"
pass "one process: $(grep "^rank 0" "$DT_TMP/out")"

if [ "${DT_HAVE_MPI:-no}" != yes ] || ! command -v mpirun >/dev/null; then
  echo "no MPI build or mpirun: the runs on 2 and 3 ranks are left out"
  exit 0
fi
use_mpirun -x PYTHONPATH -x DT_COMM_TIMEOUT -x DT_HAVE_MPI
for np in 2 3; do
  expect_status 0 timeout 120 $MPIRUN -np $np "$DT_PYTHON_TORCH" "$py"
  ranks_passed $np "mpirun -np $np"
  pass "mpirun -np $np: $(grep -c "checks passed" "$DT_TMP/out") ranks passed every check"
done
