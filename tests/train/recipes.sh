#!/bin/sh
# recipes.sh: dtrain --recipe (train/recipe.c): every recipe parses and gives a learning-rate
# schedule (--print-lr), doc/recipes.md shows each recipe's flags exactly as dtrain has them, flags on
# the command line win over the recipe's wherever they stand, the resnet50 recipe's first lr is
# torchvision's (0.5 for 1024 images = 0.125 per 256, scaled to one rank of 128, times the warm-up's
# 0.01), and an unknown or missing name is one line and exit 2.
. "$top_srcdir/tests/common.sh"
doc="$top_srcdir/doc/recipes.md"
expect_status 0 "$DTRAIN" --recipe list
cp "$DT_TMP/out" "$DT_TMP/list"
n=$(grep -c '^[a-z0-9_]*: -a ' "$DT_TMP/list")
[ "$n" -ge 10 ] || { cat "$DT_TMP/list"; fail "--recipe list: $n recipes"; }
while IFS= read -r line; do
  name=${line%%: *}
  flags=${line#*: }
  expect_status 0 "$DTRAIN" --recipe "$name" --print-lr 1
  [ "$(grep -vc '^#' "$DT_TMP/out")" -ge 1 ] || fail "--recipe $name --print-lr 1 printed no schedule"
  grep -qF -- "    $flags" "$doc" || fail "doc/recipes.md does not show recipe $name as dtrain has it: $flags"
  grep -qF -- "--recipe $name\`" "$doc" || fail "doc/recipes.md does not name recipe $name"
done <"$DT_TMP/list"
pass "$n recipes parse, have a schedule, and doc/recipes.md shows each as dtrain has it"

# the command line wins, before or after --recipe (600 epochs in the recipe; 3 asked for)
for order in before after; do
  if [ $order = before ]; then set -- --epochs 3 --recipe resnet50; else set -- --recipe=resnet50 --epochs 3; fi
  expect_status 0 "$DTRAIN" "$@" --print-lr 1
  [ "$(grep -vc '^#' "$DT_TMP/out")" -eq 3 ] || { cat "$DT_TMP/out"; fail "--epochs 3 $order --recipe: not 3 epochs"; }
done
pass "--epochs 3 given before or after --recipe resnet50 wins over its 600"

# resnet50's first step: 0.125 x 128 / 256 x 0.01 (linear warm-up from torchvision's 0.01)
expect_status 0 "$DTRAIN" --recipe resnet50 --print-lr 1
first=$(awk '!/^#/ && $1 == 0 && $2 == 0 { print $3 }' "$DT_TMP/out")
awk -v a="$first" 'BEGIN { exit !(a > 0.000624999 && a < 0.000625001) }' || fail "resnet50's first lr $first, want 0.000625"
last=$(awk '!/^#/ { v = $3 } END { print v }' "$DT_TMP/out")
awk -v a="$last" 'BEGIN { exit !(a > 0 && a < 1e-5) }' || fail "resnet50's last lr $last: the cosine should end near 0"
pass "--recipe resnet50: first lr $first (torchvision's 0.5 x 0.01 at 1024 images, scaled to 128), last $last"

refused() { # WHAT WANT ARGS...: exit 2 and the one line wanted
  what=$1 want=$2; shift 2
  expect_status 2 "$DTRAIN" "$@"
  [ "$(grep -c . "$DT_TMP/err")" -eq 1 ] && grep -qF -- "$want" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "$what: not one line with '$want'"; }
}
refused "an unknown recipe" "--recipe resnet9000: no such recipe" --recipe resnet9000 --synthetic
refused "--recipe without a name" "--recipe: needs a name" --synthetic --recipe
pass "an unknown recipe or none: one line, exit 2"
