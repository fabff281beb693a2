#!/bin/sh
# fmnist.sh: bench/fmnist.sh runs (1 epoch on the first 512 training and 500 validation images of
# Fashion-MNIST) and prints its result line: both validation top-1 in (0, 100], both times and the
# ratio positive. dtrain's top-1 is the epoch line's of metrics.jsonl, which an end line follows: a
# script that reads the last line prints 0.00% and fails here. Then its recipe adamw (AdamW, cosine
# with warm-up, mixup, cutmix, EMA) for 2 epochs: both sides' EMA top-1 in (0, 100].
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  skip "Fashion-MNIST not found in /usr/share/datasets/fashion-mnist (Debian: dataset-fashion-mnist)"
bench_setup
bench_run 300 fmnist.sh "$top_builddir" 1 512 500
line=$(result_line '^dtrain: top-1 ')
n='\([^ ]*\)'
set -- $(echo "$line" | sed -n "s/^dtrain: top-1 $n% in $n s; PyTorch: top-1 $n% in $n s; time ratio PyTorch\/dtrain $n\$/\1 \2 \3 \4 \5/p")
[ $# -eq 5 ] || fail "the result line does not parse: $line"
positive "dtrain's top-1 (%)" "$1" 100
positive "dtrain's time (s)" "$2"
positive "PyTorch's top-1 (%)" "$3" 100
positive "PyTorch's time (s)" "$4"
positive "time ratio" "$5"
logged=$(result_line '^torch fmnist resnet20: ' | sed -n 's/.*top-1 \([0-9.]*\)%.*/\1/p')
awk -v a="$3" -v b="$logged" 'BEGIN { exit !(a == b) }' || fail "PyTorch's top-1 $3 is not its summary line's $logged"
pass "bench/fmnist.sh: dtrain $1% in $2 s, PyTorch $3% in $4 s, ratio $5"
# the recipe of AdamW, cosine, mixup, cutmix and EMA: both sides run it and print their EMA's top-1
bench_run 300 fmnist.sh "$top_builddir" 2 512 500 adamw
line=$(result_line "^the model's EMA: ")
set -- $(echo "$line" | sed -n "s/^the model's EMA: dtrain top-1 $n%; PyTorch top-1 $n% (recipe adamw)\$/\1 \2/p")
[ $# -eq 2 ] || fail "the EMA line does not parse: $line"
positive "dtrain's EMA top-1 (%)" "$1" 100
positive "PyTorch's EMA top-1 (%)" "$2" 100
pass "bench/fmnist.sh adamw: the EMA's top-1, dtrain $1%, PyTorch $2%"
