#!/bin/sh
# fmnist.sh: the quick start's demo against the same recipe in PyTorch, in one invocation: resnet20
# on Fashion-MNIST (Debian's dataset-fashion-mnist), batch 128, SGD 0.1 momentum 0.9 wd 5e-4,
# per-step cosine, pad-2 crop and flips, EPOCHS epochs. dtrain runs as 2 MPI ranks with one thread
# each; PyTorch as one process with 2 threads (its best setup on 2 cores, measured). Prints both
# validation accuracies and wall times, and the ratio of the times.
#   bench/fmnist.sh [BUILD_DIR] [EPOCHS]   (default: build 5)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
epochs=${2:-5}
py=${PYTHON_TORCH:-/usr/bin/python3}
src=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$build/dtpack" fashion-mnist "$src" -o "$tmp/fm" --no-progress >/dev/null
root=; [ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
t0=$(date +%s.%N)
mpirun $root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 "$build/dtrain" -a resnet20 -b 64 -j 1 \
  --epochs "$epochs" --lr 0.4 --lr-schedule cosine --wd 5e-4 --crop-padding 2 -p 0 --results "$tmp/res" "$tmp/fm" \
  2>&1 | grep "validation top-1"
t1=$(date +%s.%N)
d=$(tail -n 1 "$tmp"/res/*/metrics.jsonl | sed -n 's/.*"val_top1":\([0-9.]*\).*/\1/p')
"$py" "$here/torch_fmnist.py" "$src" "$epochs" 2 >"$tmp/torch.out"   # (tee /dev/stderr would truncate a log file)
cat "$tmp/torch.out"
t=$(tail -n 1 "$tmp/torch.out")
awk -v a="$t0" -v b="$t1" -v d="$d" -v t="$t" 'BEGIN {
  split(t, f, " "); tt = f[8]; ta = f[7]; sub("%,", "", ta)
  printf "dtrain: top-1 %.2f%% in %.1f s; PyTorch: top-1 %s%% in %.1f s; time ratio PyTorch/dtrain %.2f\n",
         d, b - a, ta, tt, tt / (b - a) }'
