#!/bin/sh
# cpu_train.sh: training throughput of dtrain's CPU engine against PyTorch, side by side, same
# machine, same thread count, synthetic input (not a test: numbers vary with the machine's load).
#   bench/cpu_train.sh [BUILD_DIR] [THREADS] [REPEAT] [MODELS]
# (default: build, all cores, 2, "resnet20:128:32:20 resnet18:32:224:5 resnet50:32:224:3"). MODELS
# lists ARCH:BATCH:SIZE:STEPS, space-separated; tests/bench/cpu_train.sh runs one tiny model.
# PyTorch runs at its best here: Debian's python3-torch, tcmalloc preloaded when installed
# (libtcmalloc-minimal4), NCHW and channels_last both tried and the faster one kept. Each side runs
# REPEAT times, interleaved, and keeps its best run: shared machines are noisy (+-30%).
# Prints, per model, both rates, the ratio dtrain/PyTorch and both peak resident sizes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
threads=${2:-$(nproc)}
repeat=${3:-2}
models=${4:-resnet20:128:32:20 resnet18:32:224:5 resnet50:32:224:3}
py=${PYTHON_TORCH:-/usr/bin/python3}
make -C "$build" bench >/dev/null
tc=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -n 1 || true)
rate() { sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p'; }
rss() { sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p'; }
run() {   # run ARCH BATCH SIZE STEPS CHANNELS
  d=; drate=0; best=; bestrate=0
  for rep in $(seq "$repeat"); do
    t=$("$build/bench/bench_train" "$1" "$2" "$3" "$4" "$threads" "$5")
    r=$(echo "$t" | rate)
    [ -n "$r" ] || { echo "cpu_train.sh: no img/s from bench_train: $t" >&2; exit 1; }
    if awk "BEGIN{exit !($r > $drate)}"; then d=$t; drate=$r; fi
    for fmt in nchw channels_last; do
      t=$(LD_PRELOAD=${tc:-} "$py" "$here/torch_train.py" "$1" "$2" "$3" "$4" "$threads" "$5" "$fmt")
      r=$(echo "$t" | rate)
      [ -n "$r" ] || { echo "cpu_train.sh: no img/s from torch_train.py: $t" >&2; exit 1; }
      if awk "BEGIN{exit !($r > $bestrate)}"; then best=$t; bestrate=$r; fi
    done
  done
  echo "$d"
  echo "$best"
  awk -v a="$drate" -v b="$bestrate" -v ra="$(echo "$d" | rss)" -v rb="$(echo "$best" | rss)" -v m="$1" \
    'BEGIN{printf "%-10s ratio dtrain/PyTorch %.2f   peak RSS dtrain %d MiB, PyTorch %d MiB\n\n", m, a/b, ra, rb}'
}
echo "threads: $threads; best of $repeat runs each; tcmalloc for PyTorch: ${tc:-not installed}"
for m in $models; do
  case $m in
    *:*:*:*) ;;
    *) echo "cpu_train.sh: '$m' is not ARCH:BATCH:SIZE:STEPS" >&2; exit 2 ;;
  esac
  IFS=:; set -- $m; unset IFS
  run "$1" "$2" "$3" "$4" 3
done
