#!/bin/sh
# ddp.sh: bench/ddp.sh runs (resnet18_small, batch 4 at 16x16, 2 steps) and prints its three step-time
# ratios, 2 ranks over 1, each positive.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
bench_setup
bench_run 300 ddp.sh "$top_builddir" resnet18_small 4 16 2
line=$(result_line '^step-time ratio 2 ranks / 1 rank: ')
set -- $(echo "$line" | sed -n 's/.*dtrain overlap \([^ ]*\), dtrain no overlap \([^ ]*\), PyTorch DDP (gloo) \([^ ]*\)$/\1 \2 \3/p')
[ $# -eq 3 ] || fail "the ratio line does not parse: $line"
positive "dtrain overlap" "$1"
positive "dtrain no overlap" "$2"
positive "PyTorch DDP" "$3"
pass "bench/ddp.sh: step-time ratios $1 (overlap), $2 (no overlap), $3 (PyTorch DDP)"
