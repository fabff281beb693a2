#!/bin/sh
# ddp_order.sh: DDP's collectives in the order a GPU needs, on 2 MPI ranks: every thread that calls
# the communicator binds itself first (the communication thread included), and every collective on
# model memory comes after a backend sync that covers the ops that wrote it (creation, the
# broadcast of buffers, gradient buckets with and without overlap, accumulation, sync_buffers).
# tests/libdt/ddp_order.c records both with wrappers over the MPI communicator and the CPU backend.
. "$top_srcdir/tests/common.sh"
use_mpirun
expect_status 0 timeout 300 $MPIRUN -np 2 "$top_builddir/tests/libdt/ddp_order"
cat "$DT_TMP/out"
grep -q "without a sync, is caught: yes; with one, passes: yes; a collective from an unbound thread is caught: yes" \
  "$DT_TMP/out" || fail "the recorders do not catch what they are for"
pass "the recorders catch an unsynchronised broadcast and an unbound thread"
[ "$(grep -c "each after a sync of the ops that wrote it: yes; [0-9]* from the communication thread, every thread bound first: yes; replicas identical: yes" "$DT_TMP/out")" -eq 3 ] ||
  fail "a DDP collective came before a sync or from an unbound thread"
pass "DDP: every collective after a sync of what it reads, every calling thread bound first, in all 3 settings"
