#!/bin/sh
# comm_mpi.sh: the host communicators' allgatherv (uneven parts, a rank with none), alltoallv (uneven
# splits) and allreduce (SUM, PRODUCT, MIN, MAX on every floating and integer type, fp16 and bf16
# through fp32; DT_AVG refused on int8 with one line) checked by tests/libdt/comm_check against
# values each rank computes alone: one process (the one-rank communicator) and mpirun -np 3 (MPI).
. "$top_srcdir/tests/common.sh"
probe="$top_builddir/tests/libdt/comm_check"
[ -x "$probe" ] || fail "$probe is not built (make check builds it)"

expect_status 0 timeout 60 "$probe"
grep -q "^rank 0 of 1: all [0-9]* checks correct" "$DT_TMP/out" || fail "one process: $(cat "$DT_TMP/out" "$DT_TMP/err")"
grep -q "allreduce: an average of int8 is not defined" "$DT_TMP/err" ||
  fail "one process: no line refusing the average of int8: $(cat "$DT_TMP/err")"
pass "one process: $(cat "$DT_TMP/out")"

use_mpirun
expect_status 0 timeout 120 $MPIRUN -np 3 -x DT_TIMEOUT=30 "$probe"
[ "$(grep -c "^rank [012] of 3: all [0-9]* checks correct" "$DT_TMP/out")" -eq 3 ] ||
  fail "mpirun -np 3: not every rank correct: $(cat "$DT_TMP/out" "$DT_TMP/err")"
[ "$(grep -c "allreduce: an average of int8 is not defined" "$DT_TMP/err")" -eq 3 ] ||
  fail "mpirun -np 3: not every rank refused the average of int8: $(cat "$DT_TMP/err")"
pass "mpirun -np 3: every rank correct ($(head -n 1 "$DT_TMP/out"))"
