#!/bin/sh
# ddp_mpi.sh: data-parallel training over MPI equals single-process training: 4 ranks x 4 images
# against 1 process x 16 images, resnet8, 3 SGD steps with momentum and weight decay, BN in eval
# mode; with overlap on and off, buckets from 4 KiB to one bucket, and 2 accumulation steps; and
# SyncBN with BN in training mode, whose batch statistics are then the whole batch's (weights and
# running statistics compared). tests/libdt/ddp_check.c says how.
. "$top_srcdir/tests/common.sh"
use_mpirun
expect_status 0 timeout 300 $MPIRUN -np 4 "$top_builddir/tests/libdt/ddp_check" resnet8 4
cat "$DT_TMP/out"
[ "$(grep -c "replicas identical yes" "$DT_TMP/out")" -eq 7 ] || fail "not every setting gave identical replicas"
pass "4 ranks x 4 images = 1 process x 16 images within fp32 rounding, in every DDP setting, SyncBN included"
grep -q "amp: an inf on rank 3 skipped the step on every rank, weights and momentum untouched, scale halved: yes" \
  "$DT_TMP/out" || fail "AMP overflow on one rank"
[ "$(grep -c "Gradient overflow" "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "the overflow should be logged once, by rank 0"; }
pass "an inf gradient on rank 3 skips the step on all 4 ranks; rank 0 logs it once"
grep -q "amp O2: fp16 gradients on the wire (BN.s in fp32) equal the fp32 average rounded to fp16: yes" "$DT_TMP/out" ||
  fail "fp16 all-reduce"
pass "AMP O2: gradients all-reduced in fp16 (half the bytes) equal the fp32 average rounded"
