#!/bin/sh
# mpi_fmnist.sh: dtrain on 2 MPI ranks trains a resnet8 on real Fashion-MNIST (packed by dtpack)
# for one epoch of steps of 2 x 64 images, cosine: the validation set is counted once over the ranks
# (all 10000 images) and top-1 passes a floor. make check: the first 25600 training images (200
# steps), floor 70% (measured here: 77.5%); make check-long: all 60000 (468 steps), floor 75%
# (measured here: 82.8%).
. "$top_srcdir/tests/common.sh"
use_mpirun --bind-to none
if long; then fmnist_packed "$DT_TMP/fm"; floor=75; else fmnist_packed "$DT_TMP/fm" 25600 10000; floor=70; fi
expect_status 0 timeout 600 $MPIRUN -np 2 "$top_builddir/dtrain" -a resnet8 -b 64 -j 1 --epochs 1 \
  --lr 0.4 --lr-schedule cosine --wd 5e-4 -p 100 --results "$DT_TMP/res" "$DT_TMP/fm"
grep -E "info: (epoch|done|resnet8)" "$DT_TMP/err"
grep -q "resnet8 on 2 ranks (MPI)" "$DT_TMP/err" || fail "not 2 MPI ranks"
grep -q "validation top-1 .* on 10000 images" "$DT_TMP/err" || fail "validation did not count 10000 images once"
[ "$(grep -c '"kind":"epoch"' "$DT_TMP"/res/*/metrics.jsonl)" -eq 1 ] || fail "metrics.jsonl: not one epoch line"
top1=$(grep '"kind":"epoch"' "$DT_TMP"/res/*/metrics.jsonl | sed -n 's/.*"val_top1":\([0-9.]*\).*/\1/p')
[ -n "$top1" ] || fail "metrics.jsonl: the epoch line has no val_top1"
awk -v a="$top1" -v f="$floor" 'BEGIN { exit !(a > f) }' || fail "validation top-1 $top1 <= $floor"
pass "2 ranks, one epoch: validation top-1 $top1% over all 10000 images"
