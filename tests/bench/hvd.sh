#!/bin/sh
# hvd.sh: bench/hvd_busbw.sh (all-reduce up to 2 KiB, 20 iterations) and, in make check-long,
# bench/hvd_ddp.sh (resnet18, global batch 4 at 32x32, 2 steps, once) run, libdt (dtrain.torch)
# against PyTorch's gloo, and print their ratios, each positive.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
[ "${DT_HAVE_PYTHON_EXT:-no}" = yes ] || skip "dtrain.torch was not built (Debian: python3-dev)"
[ -n "${DT_PYTHON_TORCH:-}" ] || skip "no python3 with torch and torchvision (Debian: python3-torch python3-torchvision)"
export PYTHON_TORCH="$DT_PYTHON_TORCH" DT_COMM_TIMEOUT=60
unset MAKEFLAGS MFLAGS MAKELEVEL   # make check's jobserver is not ours to use

bench_run 120 hvd_busbw.sh "$top_builddir" 2 2048 20
[ "$(grep -cE '^ +(8|32|128|512|2048)  ' "$DT_TMP/out")" -eq 5 ] || fail "not one row for each size 8 ... 2048 bytes"
line=$(result_line '^busbw libdt / gloo: ')
set -- $(echo "$line" | sed -n 's/^busbw libdt \/ gloo: \([^ ]*\) at 2048 bytes; time libdt \/ gloo at 8 bytes: \([^ ]*\)$/\1 \2/p')
[ $# -eq 2 ] || fail "the ratio line does not parse: $line"
positive "busbw libdt / gloo" "$1"
positive "time libdt / gloo" "$2"
pass "bench/hvd_busbw.sh: busbw libdt / gloo $1 at 2 KiB, time at 8 bytes $2"

# the step-time benchmark starts 4 runs of torch (20 s of the suite): make check-long's
long || { echo "bench/hvd_ddp.sh: not run here (make check-long runs it)"; exit 0; }
bench_run 240 hvd_ddp.sh "$top_builddir" resnet18 4 32 2 1
line=$(result_line '^step-time ratio 2 ranks / 1 rank: ')
set -- $(echo "$line" | sed -n 's/.*: libdt \([^ ]*\), DDP (gloo) \([^;]*\); 2-rank step time libdt \/ DDP: \([^ ]*\)$/\1 \2 \3/p')
[ $# -eq 3 ] || fail "the ratio line does not parse: $line"
positive "libdt 2/1" "$1"
positive "DDP 2/1" "$2"
positive "libdt / DDP" "$3"
pass "bench/hvd_ddp.sh: step-time ratios 2/1 libdt $1, DDP $2; libdt / DDP $3"
