#!/bin/sh
# schedule.sh: dtrain's learning-rate schedules against torch.optim.lr_scheduler. For each setting,
# dtrain --print-lr N (the lr of every step, N steps per epoch, without data) against
# tests/train/lr_torch.py, which builds the schedule from torch's schedulers as torchvision's
# reference train.py chains them (warm-up, then the main schedule under SequentialLR), stepped per
# epoch or, with --lr-per-step, per iteration: every step's lr equal within 1e-12 relative (torch
# multiplies its chained factors one step at a time, dtrain computes each lr in closed form). The
# settings cover every schedule, both warm-up methods, warm-up decay, per-epoch and per-step
# stepping. A warm-up from 0 with torchvision's schedules (torch refuses a factor of 0) is one
# line and exit 2.
. "$top_srcdir/tests/common.sh"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null || skip "no Python with torch (Debian: python3-torch)"
"$py" -c 'import torch.optim.lr_scheduler as s; s.PolynomialLR' 2>/dev/null || skip "torch without PolynomialLR (1.13 or later)"
# check NAME FLAGS...: dtrain's table against torch's
check() {
  name=$1
  shift
  expect_status 0 "$DTRAIN" --synthetic --no-lr-scaling --lr 0.4 "$@"
  grep -v '^#' "$DT_TMP/out" > "$DT_TMP/dt.txt"
  "$py" "$top_srcdir/tests/train/lr_torch.py" --no-lr-scaling --lr 0.4 "$@" > "$DT_TMP/torch.out" ||
    fail "$name: lr_torch.py failed"
  grep -v '^#' "$DT_TMP/torch.out" > "$DT_TMP/torch.txt"
  [ -s "$DT_TMP/dt.txt" ] && [ "$(wc -l < "$DT_TMP/dt.txt")" -eq "$(wc -l < "$DT_TMP/torch.txt")" ] ||
    fail "$name: $(wc -l < "$DT_TMP/dt.txt") lines from dtrain, $(wc -l < "$DT_TMP/torch.txt") from torch"
  bad=$(paste -d ' ' "$DT_TMP/dt.txt" "$DT_TMP/torch.txt" | awk '
    $1 != $4 || $2 != $5 { print "line " NR ": epoch/step " $1 "/" $2 " vs " $4 "/" $5; exit }
    { d = $3 - $6; if (d < 0) d = -d; m = $6 < 0 ? -$6 : $6
      if (d > 1e-12 * m + 1e-18) { print "epoch " $1 " step " $2 ": dtrain " $3 ", torch " $6; exit } }')
  [ -z "$bad" ] || fail "$name: $bad ($*)"
  n=$(wc -l < "$DT_TMP/dt.txt")
  pass "$name: $n steps equal torch's within 1e-12 ($*)"
}
check steplr --print-lr 3 --epochs 12 --lr-scheduler steplr --lr-step-size 4 --lr-gamma 0.5 \
  --lr-warmup-epochs 2 --lr-warmup-method linear --lr-warmup-decay 0.01
check "steplr per step" --print-lr 5 --epochs 7 --lr-scheduler steplr --lr-step-size 2 --lr-per-step \
  --lr-warmup-epochs 1 --lr-warmup-method linear --lr-warmup-decay 0.1
check multisteplr --print-lr 2 --epochs 10 --lr-scheduler multisteplr --lr-steps 2,5,6 --lr-gamma 0.2 \
  --lr-warmup-epochs 1
check cosineannealinglr --print-lr 3 --epochs 9 --lr-scheduler cosineannealinglr --lr-min 0.001 \
  --lr-warmup-epochs 2 --lr-warmup-method linear
check "cosineannealinglr per step" --print-lr 6 --epochs 5 --lr-scheduler cosineannealinglr --lr-per-step \
  --lr-warmup-epochs 1 --lr-warmup-method linear --lr-warmup-decay 0.25
check exponentiallr --print-lr 2 --epochs 8 --lr-scheduler exponentiallr --lr-gamma 0.8
check "exponentiallr per step" --print-lr 4 --epochs 5 --lr-scheduler exponentiallr --lr-gamma 0.7 --lr-per-step \
  --lr-warmup-epochs 1 --lr-warmup-method constant --lr-warmup-decay 0.3
check polynomiallr --print-lr 2 --epochs 9 --lr-scheduler polynomiallr --lr-power 2 --lr-warmup-epochs 2
check "polynomiallr per step" --print-lr 5 --epochs 4 --lr-scheduler polynomiallr --lr-power 0.5 --lr-per-step

expect_status 2 "$DTRAIN" --synthetic --print-lr 2 --lr-scheduler steplr --lr-warmup-epochs 1 --lr-warmup-decay 0
[ "$(wc -l < "$DT_TMP/err")" -eq 1 ] && grep -q -- "--lr-warmup-decay 0 with --lr-schedule steplr" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "a warm-up from 0 with steplr: not one line naming the options"; }
pass "--lr-warmup-decay 0 with steplr: one line, exit 2"
