#!/bin/sh
# hvd_busbw.sh: all-reduce bus bandwidth against message size on CPU ranks, libdt (dtrain.torch's
# hvd.allreduce_, Horovod's API) against torch.distributed's gloo, both started by mpirun in this one
# invocation on the same ranks (bench/hvd_busbw.py is each rank's side). nccl-tests' definitions:
# algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (GB/s, 1e9 bytes). One thread per rank; gloo's
# rendezvous on 127.0.0.1 and a port free when the script starts.
#   bench/hvd_busbw.sh [BUILD_DIR] [RANKS] [MAX_BYTES] [MAX_ITERS]   (default: build 2 67108864 1000)
# Prints per size: the bytes, each side's time and busbw, and busbw libdt / gloo (above 1: libdt faster).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
ranks=${2:-2}
max_bytes=${3:-67108864}
max_iters=${4:-1000}
py=${PYTHON_TORCH:-/usr/bin/python3}
make -C "$build" python-build-tree >/dev/null
[ -e "$build/python/dtrain/torch.so" ] || { echo "hvd_busbw.sh: $build/python/dtrain/torch.so was not built (configure: Python.h?)" >&2; exit 1; }
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MPIRUN="mpirun --oversubscribe --bind-to none -np $ranks -x OMP_NUM_THREADS=1"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
out=$(mktemp -d "${TMPDIR:-/tmp}/hvd_busbw.XXXXXX")
trap 'rm -rf "$out"' EXIT
$MPIRUN -x PYTHONPATH "$py" "$here/hvd_busbw.py" libdt "$max_bytes" "$max_iters" > "$out/libdt"
$MPIRUN -x MASTER_ADDR -x MASTER_PORT "$py" "$here/hvd_busbw.py" gloo "$max_bytes" "$max_iters" > "$out/gloo"
[ -s "$out/libdt" ] && [ -s "$out/gloo" ] || { echo "hvd_busbw.sh: a side printed nothing" >&2; exit 1; }
echo "all-reduce (sum) of float32 on $ranks CPU ranks, 1 thread each: libdt (dtrain.torch) against gloo (torch.distributed)"
printf '%12s  %12s %14s  %12s %14s  %s\n' bytes "libdt us" "libdt busbw" "gloo us" "gloo busbw" "busbw libdt/gloo"
# the same sizes in the same order on both sides: line by line. busbw libdt / gloo is the time of
# gloo over the time of libdt (the same bytes), exact where busbw rounds to 0.
paste -d ' ' "$out/libdt" "$out/gloo" | awk '
$1 != $5 { print "hvd_busbw.sh: the sides measured different sizes: " $1 " and " $5 > "/dev/stderr"; bad = 1; exit 1 }
{ printf "%12d  %12.1f %9.3g GB/s  %12.1f %9.3g GB/s  %.2f\n", $1, $2, $4, $6, $8, $6 / $2
  if (NR == 1) { small = $2 / $6; smallsize = $1 }
  big = $6 / $2; bigsize = $1 }
END { if (!bad) printf "busbw libdt / gloo: %.2f at %d bytes; time libdt / gloo at %d bytes: %.2f\n", big, bigsize, smallsize, small }'
