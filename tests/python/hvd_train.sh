#!/bin/sh
# hvd_train.sh: dtrain.torch's training helpers (tests/python/training.py: Compression,
# DistributedOptimizer's ops, groups, predivide, backward_passes_per_step, synchronize,
# broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object, SyncBatchNorm)
# and the equivalence test (tests/python/equivalence.py: 2 and 3 ranks with DistributedOptimizer
# end with one process's weights on the whole batch; without the all-reduce they do not), each on
# one process and under mpirun -np 2 and -np 3 (uneven SyncBatchNorm batches, a root that is not 0).
. "$top_srcdir/tests/common.sh"

use_dtrain_torch
# a failed check on one rank makes the others fail within this, never hang
DT_COMM_TIMEOUT=60
export DT_COMM_TIMEOUT

# run NP SCRIPT: the script on NP ranks (0: one plain process); its output kept in the log
run() {
  np=$1 script=$top_srcdir/tests/python/$2
  if [ "$np" -eq 0 ]; then
    set +e; timeout 300 "$DT_PYTHON_TORCH" "$script" >"$DT_TMP/out" 2>&1; got=$?; set -e
  else
    set +e
    timeout 300 $MPIRUN -np "$np" -x PYTHONPATH -x DT_COMM_TIMEOUT "$DT_PYTHON_TORCH" "$script" >"$DT_TMP/out" 2>&1
    got=$?
    set -e
  fi
  [ "$got" -eq 0 ] || { cat "$DT_TMP/out"; fail "$2 on $np ranks (0: one plain process) exited $got"; }
  grep -v '^ *$' "$DT_TMP/out"
}

run 0 training.py
grep -q "every check passed on 1 rank$" "$DT_TMP/out" || fail "training.py on one process: not every check ran"
pass "training.py: every check on one process"
run 0 equivalence.py
grep -q "ok: 1 rank x" "$DT_TMP/out" || fail "equivalence.py on one process: no result line"

if [ "${DT_HAVE_MPI:-no}" != yes ] || ! command -v mpirun >/dev/null; then
  echo "no MPI build or mpirun: the runs on 2 and 3 ranks are left out"
  exit 0
fi
use_mpirun
for np in 2 3; do
  run $np training.py
  grep -q "every check passed on $np ranks" "$DT_TMP/out" || fail "training.py on $np ranks: not every check ran"
done
pass "training.py: every check on 2 and 3 ranks"

for np in 2 3; do
  run $np equivalence.py
  grep -q "ok: $np ranks x" "$DT_TMP/out" || fail "equivalence.py on $np ranks: no result line"
  # (counted with grep -o: two ranks' lines may come out joined)
  [ "$(grep -o "rank [0-9] of $np: |DistributedOptimizer - one process|" "$DT_TMP/out" | sort -u | wc -l)" -eq "$np" ] ||
    fail "equivalence.py on $np ranks: not every rank compared"
done
pass "equivalence: 2 and 3 ranks with DistributedOptimizer end with one process's weights; without the all-reduce they do not"
