#!/bin/sh
# ddp.sh: the cost of data parallelism on the CPU, dtrain against PyTorch in the same invocation.
# Step time of 2 ranks x 1 thread over the step time of 1 rank x 1 thread at the same per-rank
# batch: 1.00 would be free communication. dtrain with its all-reduce overlapped with backward and
# without; PyTorch DistributedDataParallel over gloo.
#   bench/ddp.sh [BUILD_DIR] [ARCH] [BATCH] [SIZE] [STEPS]   (default: build resnet18_small 64 32 10)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
arch=${2:-resnet18_small}
batch=${3:-64}
size=${4:-32}
steps=${5:-10}
py=${PYTHON_TORCH:-/usr/bin/python3}
make -C "$build" bench >/dev/null
MPIRUN="mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
ms() { sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p'; }
echo "$arch, batch $batch per rank, ${size}x$size, $steps steps, 1 thread per rank"
one=$($MPIRUN -np 1 "$build/bench/bench_ddp" "$arch" "$batch" "$size" "$steps" 1)
on=$($MPIRUN -np 2 "$build/bench/bench_ddp" "$arch" "$batch" "$size" "$steps" 1)
off=$($MPIRUN -np 2 "$build/bench/bench_ddp" "$arch" "$batch" "$size" "$steps" 0)
t1=$("$py" "$here/torch_ddp.py" "$arch" "$batch" "$size" "$steps" 1 2>/dev/null)
t2=$("$py" "$here/torch_ddp.py" "$arch" "$batch" "$size" "$steps" 2 2>/dev/null)
printf '%s\n%s\n%s\n%s\n%s\n' "$one" "$on" "$off" "$t1" "$t2"
for t in "$one" "$on" "$off" "$t1" "$t2"; do
  [ -n "$(echo "$t" | ms)" ] || { echo "ddp.sh: a run printed no ms/step (run torch_ddp.py alone for its errors)" >&2; exit 1; }
done
awk -v a="$(echo "$one" | ms)" -v b="$(echo "$on" | ms)" -v c="$(echo "$off" | ms)" \
    -v d="$(echo "$t1" | ms)" -v e="$(echo "$t2" | ms)" 'BEGIN {
  printf "step-time ratio 2 ranks / 1 rank: dtrain overlap %.2f, dtrain no overlap %.2f, PyTorch DDP (gloo) %.2f\n", b/a, c/a, e/d }'
