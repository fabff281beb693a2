#!/bin/sh
# cpu_train.sh: training throughput of dtrain's CPU engine against PyTorch, side by side, same
# machine, same thread count, synthetic input (not a test: numbers vary with the machine's load).
#   bench/cpu_train.sh [--isa avx2] [BUILD_DIR] [THREADS] [REPEAT] [MODELS] [LEVELS]
# (default: build, all cores, 2, "resnet20:128:32:20 resnet18:32:224:5 resnet50:32:224:3
# mobilenet_v2:32:224:3 mobilenet_v3_large:32:224:3 efficientnet_b0:32:224:3 regnet_y_800mf:32:224:3
# vit_b_16:16:224:3", O0). --isa avx2: an AVX2-only processor (AMD Milan, Intel before Skylake-SP)
# emulated on an AVX-512 one, both sides held to AVX2: oneDNN (ONEDNN_MAX_CPU_ISA=AVX2), OpenBLAS
# (OPENBLAS_CORETYPE=Haswell), PyTorch's own kernels (ATEN_CPU_CAPABILITY=avx2), and dtrain's loops
# from a build of their own, BUILD_DIR-avx2 (configured once, here: -march=x86-64-v3 and no AVX-512
# target clones, which would otherwise be picked at load time). MODELS
# lists ARCH:BATCH:SIZE:STEPS, space-separated ("" for the default); tests/bench/cpu_train.sh runs one
# tiny model. LEVELS lists Apex opt levels, space-separated, each model running at each: O0 (fp32),
# O1, O2, O3 (fp16), or with the suffix bf16 (O2bf16): dtrain runs the level as dtrain --opt-level
# does; PyTorch runs O1 and O2 as torch.amp does, torch.autocast(device_type="cpu") around forward
# and loss with the model in fp32, and O3 as the whole model cast; in bf16 for fp16 too where its CPU
# autocast has no fp16 (torch 1.13: its line says so). E.g. bench/cpu_train.sh build 2 2 "" "O0 O2".
# PyTorch runs at its best here: Debian's python3-torch, tcmalloc preloaded when installed
# (libtcmalloc-minimal4), NCHW and channels_last both tried and the faster one kept. Each side runs
# REPEAT times, interleaved, and keeps its best run: shared machines are noisy (+-30%).
# Prints, per model and level, both rates, the ratio dtrain/PyTorch and both peak resident sizes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
isa=
if [ "${1:-}" = --isa ]; then isa=${2:-}; shift 2 || shift; fi
case $isa in
  "" | avx2) ;;
  *) echo "cpu_train.sh: --isa '$isa': only avx2 can be emulated" >&2; exit 2 ;;
esac
build=${1:-$here/../build}
threads=${2:-$(nproc)}
repeat=${3:-2}
models=${4:-resnet20:128:32:20 resnet18:32:224:5 resnet50:32:224:3 mobilenet_v2:32:224:3 mobilenet_v3_large:32:224:3 efficientnet_b0:32:224:3 regnet_y_800mf:32:224:3 vit_b_16:16:224:3}
levels=${5:-O0}
for l in $levels; do
  case $l in
    O[0-3] | O[0-3]bf16 | O[0-3]-bf16) ;;
    *) echo "cpu_train.sh: level '$l' is not O0, O1, O2 or O3 (optionally followed by bf16)" >&2; exit 2 ;;
  esac
done
py=${PYTHON_TORCH:-/usr/bin/python3}
if [ "$isa" = avx2 ]; then
  if ! grep -qw avx512f /proc/cpuinfo; then
    echo "cpu_train.sh: --isa avx2: this processor has no AVX-512; running as it is"
  else
    src=$(cd "$here/.." && pwd)
    b2="${build%/}-avx2"
    if [ ! -f "$b2/Makefile" ]; then
      echo "cpu_train.sh: --isa avx2: configuring $b2 (-march=x86-64-v3, no AVX-512 clones)"
      mkdir -p "$b2"
      (cd "$b2" && "$src/configure" --without-cuda --disable-torch-tests dt_cv_target_clones=no \
        CFLAGS="-O2 -g -march=x86-64-v3" >/dev/null) || { echo "cpu_train.sh: configuring $b2 failed" >&2; exit 1; }
    fi
    grep -q '^CFLAGS = .*-march=x86-64-v3' "$b2/Makefile" && ! grep -q 'define HAVE_TARGET_CLONES 1' "$b2/config.h" ||
      { echo "cpu_train.sh: $b2 is not an AVX2 build (x86-64-v3, no clones): remove it to have it remade" >&2; exit 1; }
    build=$b2
  fi
  export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2
fi
make -C "$build" bench >/dev/null
tc=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -n 1 || true)
rate() { sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p'; }
rss() { sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p'; }
run() {   # run ARCH BATCH SIZE STEPS CHANNELS LEVEL
  d=; drate=0; best=; bestrate=0
  for rep in $(seq "$repeat"); do
    t=$("$build/bench/bench_train" "$1" "$2" "$3" "$4" "$threads" "$5" "$6")
    r=$(echo "$t" | rate)
    [ -n "$r" ] || { echo "cpu_train.sh: no img/s from bench_train: $t" >&2; exit 1; }
    if awk "BEGIN{exit !($r > $drate)}"; then d=$t; drate=$r; fi
    for fmt in nchw channels_last; do
      t=$(LD_PRELOAD=${tc:-} "$py" "$here/torch_train.py" "$1" "$2" "$3" "$4" "$threads" "$5" "$fmt" "$6")
      r=$(echo "$t" | rate)
      [ -n "$r" ] || { echo "cpu_train.sh: no img/s from torch_train.py: $t" >&2; exit 1; }
      if awk "BEGIN{exit !($r > $bestrate)}"; then best=$t; bestrate=$r; fi
    done
  done
  echo "$d"
  echo "$best"
  awk -v a="$drate" -v b="$bestrate" -v ra="$(echo "$d" | rss)" -v rb="$(echo "$best" | rss)" -v m="$1" -v l="$6" \
    'BEGIN{printf "%-10s %-6s ratio dtrain/PyTorch %.2f   peak RSS dtrain %d MiB, PyTorch %d MiB\n\n", m, l, a/b, ra, rb}'
}
echo "threads: $threads; best of $repeat runs each; levels: $levels; tcmalloc for PyTorch: ${tc:-not installed}${isa:+; both sides held to $isa ($build)}"
for m in $models; do
  case $m in
    *:*:*:*) ;;
    *) echo "cpu_train.sh: '$m' is not ARCH:BATCH:SIZE:STEPS" >&2; exit 2 ;;
  esac
  IFS=:; set -- $m; unset IFS
  for l in $levels; do
    run "$1" "$2" "$3" "$4" 3 "$l"
  done
done
