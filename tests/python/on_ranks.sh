# on_ranks.sh: sourced by tests/python/hvd_mpi.sh and tests/python/hvd_autograd.sh, whose Python
# scripts each end with one line per rank, "rank R of N: all K checks passed".

# ranks_passed N WHAT: every one of the N ranks printed its line in $DT_TMP/out, or fail naming WHAT
ranks_passed() {
  r=0
  while [ "$r" -lt "$1" ]; do
    grep -q "rank $r of $1: all [0-9]* checks passed" "$DT_TMP/out" ||
      { cat "$DT_TMP/out" "$DT_TMP/err"; fail "$2: rank $r did not pass every check"; }
    r=$((r + 1))
  done
}

# on_ranks SCRIPT LIMIT1 LIMITN: SCRIPT on one process (within LIMIT1 seconds), then under mpirun
# -np 2 and -np 3 (within LIMITN), each rank passing every check; the MPI runs are left out, saying
# so, without an MPI build or mpirun
on_ranks() {
  expect_status 0 timeout "$2" "$DT_PYTHON_TORCH" "$1"
  ranks_passed 1 "one process"
  pass "one process: $(grep "^rank 0" "$DT_TMP/out")"
  if [ "${DT_HAVE_MPI:-no}" != yes ] || ! command -v mpirun >/dev/null; then
    echo "no MPI build or mpirun: the runs on 2 and 3 ranks are left out"
    return 0
  fi
  use_mpirun -x PYTHONPATH -x DT_COMM_TIMEOUT -x DT_HAVE_MPI
  for np in 2 3; do
    expect_status 0 timeout "$3" $MPIRUN -np $np "$DT_PYTHON_TORCH" "$1"
    ranks_passed $np "mpirun -np $np"
    pass "mpirun -np $np: $(grep -c "checks passed" "$DT_TMP/out") ranks passed every check"
  done
}
