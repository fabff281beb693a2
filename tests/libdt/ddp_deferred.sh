#!/bin/sh
# ddp_deferred.sh: DDP's fences on 2 MPI ranks. tests/libdt/ddp_deferred.c trains on a backend whose
# ops run later on their own thread (as a GPU's do) and on the CPU backend: equal bit for bit with
# overlap, without, with accumulation, and at O2 with fp16 gradients (the device wire's copies against
# the host's packing); with the backend's event waits ignored, different.
. "$top_srcdir/tests/common.sh"
use_mpirun
expect_status 0 timeout 300 $MPIRUN -np 2 "$top_builddir/tests/libdt/ddp_deferred"
cat "$DT_TMP/out"
[ "$(grep -c "equal the CPU backend's: as they must" "$DT_TMP/out")" -eq 5 ] ||
  fail "DDP on the deferred backend did not equal the CPU backend in all 5 settings"
pass "DDP with ops run later equals the CPU backend bit for bit: overlap, no overlap, accumulation, O2 fp16 gradients through the device wire (2 settings)"
grep -q "fences removed: [0-9]* ops run later; training ran; .* differ from the CPU backend's: as they must" \
  "$DT_TMP/out" || fail "with the fences removed the results did not change: the test cannot see a missing fence"
pass "with the backend's event waits ignored the results differ: a missing fence is seen"
