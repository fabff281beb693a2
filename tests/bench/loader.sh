#!/bin/sh
# loader.sh: bench/loader.sh runs (128 JPEGs, 1 worker, 1 epoch) and prints both loaders' rates over all
# 128 images and a positive ratio.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || skip "no $photo (Debian: python-matplotlib-data)"
bench_setup
"$DT_PYTHON_TORCH" -c 'import PIL, torchvision' 2>/dev/null || skip "no PIL or torchvision for $DT_PYTHON_TORCH"
bench_run 300 loader.sh "$top_builddir" 1 128 1
for who in "dtrain loader" "torch loader"; do
  line=$(result_line "^$who: ")
  n=$(echo "$line" | sed -n 's/^[a-z ]*: \([0-9]*\) images, 1 workers: .*/\1/p')
  [ "$n" = 128 ] || fail "$who: $n images, expected 128: $line"
  positive "$who img/s" "$(echo "$line" | sed -n 's/.*workers: \([0-9.]*\) img\/s.*/\1/p')"
done
r=$(result_line '^ratio dtrain/torchvision: ' | sed 's/^ratio dtrain\/torchvision: //')
positive "ratio dtrain/torchvision" "$r"
pass "bench/loader.sh: 128 images each, ratio dtrain/torchvision $r"
