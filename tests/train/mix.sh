#!/bin/sh
# mix.sh: dtrain with --mixup-alpha 0.2 --cutmix-alpha 1.0 (the loader's mixing is checked against
# torchvision's in test_loader, xent's mixed targets in test_ops): 2 epochs straight equal the same
# run stopped inside the first epoch and resumed, bit for bit (each batch's draws follow from seed,
# epoch and step); the step as graphs equals it issued (the targets' mixing uploaded with each
# batch's labels); and the mixing changes training (the run without it ends elsewhere).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
small_fmnist_packed "$DT_TMP/fm"
args="-a resnet8 -b 20 -j 1 -p 0 --deterministic --epochs 2"
mix="--mixup-alpha 0.2 --cutmix-alpha 1.0"
expect_status 0 "$DTRAIN" $args $mix --results "$DT_TMP/a" "$DT_TMP/fm"
expect_status 0 "$DTRAIN" $args $mix --max-steps 3 --results "$DT_TMP/b" "$DT_TMP/fm"
expect_status 0 "$DTRAIN" $args $mix --resume auto --results "$DT_TMP/b" "$DT_TMP/fm"
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a b || fail "mixed: the resumed run differs"
pass "mixup and cutmix: 2 epochs straight = 3 steps + stop + resume, bit for bit"
expect_status 0 "$DTRAIN" $args $mix --graph --results "$DT_TMP/g" "$DT_TMP/fm"
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a g || fail "mixed: the run as graphs differs"
pass "mixup and cutmix as graphs = issued, bit for bit"
expect_status 0 "$DTRAIN" $args --results "$DT_TMP/plain" "$DT_TMP/fm"
if "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a plain >/dev/null 2>&1; then
  fail "the run with mixing ended where the run without it did: no mixing happened"
fi
pass "mixing changes the run (it differs from the one without)"
