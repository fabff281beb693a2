#!/bin/sh
# ra.sh: --ra-sampler (torchvision's RASampler; test_sampler checks its samples against the
# reference's code): 600 training images, -b 64, 3 repetitions keep 600 // 256 * 256 = 512 samples,
# so an epoch has 8 steps (9 without); run.json records the repetitions; with 100 images none is
# left: one line, exit 2.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
fmnist_packed "$DT_TMP/fm" 600 50
args="-a resnet8 -b 64 -j 1 -p 1 --epochs 1"
steps() { grep -c '"kind":"step"' "$(ls "$DT_TMP"/$1/*/metrics.jsonl)"; }
expect_status 0 "$DTRAIN" $args --ra-sampler --results "$DT_TMP/ra" "$DT_TMP/fm"
expect_status 0 "$DTRAIN" $args --results "$DT_TMP/plain" "$DT_TMP/fm"
[ "$(steps ra)" -eq 8 ] && [ "$(steps plain)" -eq 9 ] || fail "steps: $(steps ra) with --ra-sampler, $(steps plain) without"
grep -q '"ra_reps": *3' "$(ls "$DT_TMP"/ra/*/run.json)" || fail "run.json does not record --ra-reps 3"
pass "--ra-sampler: 8 steps of 64 from 512 samples (9 without), run.json ra_reps 3"
small_fmnist_packed "$DT_TMP/small"
refused "--ra-sampler with 100 images" "--ra-sampler: 100 images over 1 ranks leave a rank none" \
  "$DTRAIN" $args --ra-sampler --results "$DT_TMP/small-run" "$DT_TMP/small"
pass "--ra-sampler with too few images: one line, exit 2"
