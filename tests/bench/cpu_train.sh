#!/bin/sh
# cpu_train.sh: bench/cpu_train.sh runs (resnet8, batch 8 at 32x32, 3 steps, 2 threads, once) and prints
# both rates and its ratio line with a positive ratio and both peak resident sizes.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
bench_setup
bench_run 300 cpu_train.sh "$top_builddir" 2 1 resnet8:8:32:3
for who in dtrain torch; do
  r=$(result_line "^$who resnet8 b8 32x32 threads 2.*: [0-9.]+ img/s" | sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p')
  positive "$who img/s" "$r"
done
line=$(result_line '^resnet8 +ratio dtrain/PyTorch ')
set -- $(echo "$line" | sed -n 's/^resnet8 *ratio dtrain\/PyTorch \([^ ]*\) *peak RSS dtrain \([^ ]*\) MiB, PyTorch \([^ ]*\) MiB$/\1 \2 \3/p')
[ $# -eq 3 ] || fail "the ratio line does not parse: $line"
positive "ratio dtrain/PyTorch" "$1"
positive "dtrain's peak RSS (MiB)" "$2"
positive "PyTorch's peak RSS (MiB)" "$3"
pass "bench/cpu_train.sh: ratio dtrain/PyTorch $1, peak RSS $2 and $3 MiB"
