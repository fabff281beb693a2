#!/bin/sh
# hvd_ddp.sh: the cost of data parallelism for a PyTorch script on CPU ranks, libdt (dtrain.torch's
# DistributedOptimizer, Horovod's API) against torch's DistributedDataParallel over gloo, in this one
# invocation on the same ranks (bench/hvd_ddp.py is each rank's side). The global batch stays the
# same and every run uses all the cores (threads per rank = cores / ranks), so the step-time ratio
# 2 ranks / 1 rank is 1.00 when communication is free and the ranks compute as fast as one process
# of as many threads; below 1, data parallelism pays here. libdt / DDP compares the 2-rank step times.
# The four runs go in turn REPEAT times, each keeping its best (a shared machine's load comes and goes).
#   bench/hvd_ddp.sh [BUILD_DIR] [ARCH] [GLOBAL_BATCH] [SIZE] [STEPS] [REPEAT] [CORES]
#   (default: build resnet18 32 64 20 2 and the cores this process may run on)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
arch=${2:-resnet18}
batch=${3:-32}
size=${4:-64}
steps=${5:-20}
py=${PYTHON_TORCH:-/usr/bin/python3}
repeat=${6:-2}
cores=${7:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}   # nproc alone would give OMP_NUM_THREADS
make -C "$build" python-build-tree >/dev/null
[ -e "$build/python/dtrain/torch.so" ] || { echo "hvd_ddp.sh: $build/python/dtrain/torch.so was not built (configure: Python.h?)" >&2; exit 1; }
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
MPIRUN="mpirun --oversubscribe --bind-to none -x PYTHONPATH -x MASTER_ADDR -x MASTER_PORT"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
run() {   # run SIDE RANKS: one line "SIDE ARCH ranks N: X ms/step"
  t=$(( cores / $2 )); [ "$t" -ge 1 ] || t=1
  $MPIRUN -np "$2" -x OMP_NUM_THREADS=$t "$py" "$here/hvd_ddp.py" "$1" "$arch" "$batch" "$size" "$steps"
}
echo "$arch, global batch $batch of ${size}x$size, $steps steps, $cores cores shared by the ranks, best of $repeat"
ms() { echo "$1" | sed -n 's/.*: \([0-9.]*\) ms\/step$/\1/p'; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }'; }
l1=; l2=; d1=; d2=; i=0
while [ $i -lt "$repeat" ]; do
  for r in "libdt 1" "libdt 2" "ddp 1" "ddp 2"; do
    line=$(run $r); echo "$line"
    t=$(ms "$line")
    [ -n "$t" ] || { echo "hvd_ddp.sh: run '$r' printed no ms/step" >&2; exit 1; }
    case $r in "libdt 1") l1=$(best "$l1" "$t");; "libdt 2") l2=$(best "$l2" "$t");;
      "ddp 1") d1=$(best "$d1" "$t");; "ddp 2") d2=$(best "$d2" "$t");; esac
  done
  i=$((i + 1))
done
echo "best step time (ms): libdt 1 rank $l1, 2 ranks $l2; DDP (gloo) 1 rank $d1, 2 ranks $d2"
awk -v a="$l1" -v b="$l2" -v c="$d1" -v d="$d2" 'BEGIN {
  printf "step-time ratio 2 ranks / 1 rank: libdt %.2f, DDP (gloo) %.2f; 2-rank step time libdt / DDP: %.2f\n", b / a, d / c, b / d }'
