#!/bin/sh
# engine.sh: libdt's named operations (dt.h) checked by tests/libdt/engine_check against values each
# rank computes alone: one process, mpirun -np 2 and -np 3 (uneven), and -np 3 again with several
# all-reduce streams and a small fusion threshold, then with fusion off. Operations submitted in a
# different order on every rank; a shape mismatch fails on every rank with a line naming the tensor
# and the ranks; join; and an operation only rank 0 submits fails there after DT_COMM_TIMEOUT,
# naming the ranks that did not submit it, while the job goes on.
. "$top_srcdir/tests/common.sh"
probe="$top_builddir/tests/libdt/engine_check"
[ -x "$probe" ] || fail "$probe is not built (make check builds it)"

expect_status 0 timeout 60 "$probe"
grep -q "^rank 0 of 1: engine correct" "$DT_TMP/out" || fail "one process: $(cat "$DT_TMP/out" "$DT_TMP/err")"
pass "one process: every operation correct"

use_mpirun
for np in 2 3; do
  expect_status 0 timeout 120 $MPIRUN -np $np "$probe"
  [ "$(grep -c "^rank [0-9] of $np: engine correct" "$DT_TMP/out")" -eq $np ] ||
    fail "mpirun -np $np: not every rank correct: $(cat "$DT_TMP/out" "$DT_TMP/err")"
  want="allreduce 'mismatched': the shape differs across ranks: \[4\] on ranks\? 0\(, 1\)\?; \[5\] on rank $((np - 1))"
  [ "$(grep -c "error: $want" "$DT_TMP/err")" -eq $np ] ||
    fail "mpirun -np $np: not every rank said the mismatch in one line: $(cat "$DT_TMP/err")"
  pass "mpirun -np $np: every operation correct; the mismatch said on every rank: $(grep -m1 -o "allreduce 'mismatched'.*" "$DT_TMP/err")"
done

for settings in "DT_ALLREDUCE_STREAMS=3 DT_FUSION_THRESHOLD=1000" "DT_FUSION_THRESHOLD=0"; do
  x=""; for s in $settings; do x="$x -x $s"; done
  expect_status 0 timeout 120 $MPIRUN -np 3 $x "$probe"
  [ "$(grep -c "^rank [0-9] of 3: engine correct" "$DT_TMP/out")" -eq 3 ] ||
    fail "mpirun -np 3 with $settings: not every rank correct: $(cat "$DT_TMP/out" "$DT_TMP/err")"
  pass "mpirun -np 3 with $settings: every operation correct"
done

expect_status 0 timeout 120 $MPIRUN -np 3 -x DT_COMM_TIMEOUT=2 "$probe" stall
[ "$(grep -c "^rank [0-9] of 3: stall correct" "$DT_TMP/out")" -eq 3 ] ||
  fail "a stalled operation: not every rank correct: $(cat "$DT_TMP/out" "$DT_TMP/err")"
grep -q "rank 0 stall: allreduce 'lonely' was submitted on rank 0 but not on ranks 1, 2 within 2 s" "$DT_TMP/out" ||
  fail "no line naming the operation and the ranks that did not submit it: $(cat "$DT_TMP/out" "$DT_TMP/err")"
pass "an operation only rank 0 submitted fails there after 2 s, naming ranks 1 and 2; the job goes on"
