#!/bin/sh
# fmnist.sh: the quick start's demo against the same recipe in PyTorch, in one invocation: resnet20
# on Fashion-MNIST (Debian's dataset-fashion-mnist), batch 128, SGD 0.1 momentum 0.9 wd 5e-4,
# per-step cosine, pad-2 crop and flips, EPOCHS epochs. dtrain runs as 2 MPI ranks with one thread
# each; PyTorch as one process with 2 threads (its best setup on 2 cores, measured). Prints both
# validation accuracies and wall times, and the ratio of the times.
#   bench/fmnist.sh [BUILD_DIR] [EPOCHS] [TRAIN_IMAGES] [VAL_IMAGES] [RECIPE] (default: build 5 60000 10000 sgd)
# RECIPE adamw: torchvision's recipe of AdamW, cosine with a linear warm-up epoch, label smoothing,
# mixup and cutmix, and the model's EMA (bench/torch_fmnist.py's docstring has its flags) on both
# sides, global batch 128, lr 0.002 unscaled; both print their EMA's accuracy too.
# TRAIN_IMAGES and VAL_IMAGES train and validate both sides on the first images of each split only
# (a quick check, as tests/bench/fmnist.sh does; the numbers then mean little).
# dtrain's accuracy is the last epoch line of its metrics.jsonl (lines are read by their "kind").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
epochs=${2:-5}
ntrain=${3:-}
nval=${4:-}
recipe=${5:-sgd}
case $recipe in
  sgd) flags="--lr 0.4 --lr-schedule cosine --wd 5e-4" ;;
  adamw) flags="--opt adamw --lr 0.002 --no-lr-scaling --wd 0.05 --norm-weight-decay 0 --label-smoothing 0.1
    --lr-scheduler cosineannealinglr --lr-warmup-epochs 1 --lr-warmup-method linear --mixup-alpha 0.2
    --cutmix-alpha 1.0 --model-ema --model-ema-steps 32 --model-ema-decay 0.99998" ;;
  *) echo "fmnist.sh: RECIPE is sgd or adamw, not $recipe" >&2; exit 2 ;;
esac
py=${PYTHON_TORCH:-/usr/bin/python3}
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "fmnist.sh: needs $src (Debian: dataset-fashion-mnist)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -n "$ntrain$nval" ]; then   # the first images of each split, for both sides: idx files cut to them
  "$py" - "$src" "$tmp/idx" "${ntrain:-60000}" "${nval:-10000}" <<'PY'
import gzip, os, struct, sys
src, out, count = sys.argv[1], sys.argv[2], {"train": int(sys.argv[3]), "t10k": int(sys.argv[4])}
os.makedirs(out)
for split in ("train", "t10k"):
    for name, header, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        f = "%s-%s-ubyte.gz" % (split, name)
        b = gzip.open(os.path.join(src, f)).read()
        n = min(count[split], struct.unpack(">I", b[4:8])[0])
        with gzip.open(os.path.join(out, f), "wb", compresslevel=1) as o:
            o.write(b[:4] + struct.pack(">I", n) + b[8:header] + b[header:header + n * size])
PY
  src=$tmp/idx
fi
"$build/dtpack" fashion-mnist "$src" -o "$tmp/fm" --no-progress >/dev/null
root=; [ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
t0=$(date +%s.%N)
{ rc=0; mpirun $root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 "$build/dtrain" -a resnet20 -b 64 -j 1 \
    --epochs "$epochs" $flags --crop-padding 2 -p 0 --results "$tmp/res" "$tmp/fm" 2>&1 ||
    rc=$?; echo $rc >"$tmp/dtrain.rc"; } | tee "$tmp/dtrain.log" | grep "validation top-1" || true
t1=$(date +%s.%N)
[ "$(cat "$tmp/dtrain.rc")" -eq 0 ] || { tail -n 20 "$tmp/dtrain.log"; echo "fmnist.sh: dtrain failed" >&2; exit 1; }
# the validation top-1 of dtrain's last epoch line (metrics.jsonl ends with an end line, not an epoch)
d=$("$py" - "$tmp"/res/*/metrics.jsonl <<'PY'
import json, sys
epochs = [l for l in map(json.loads, open(sys.argv[1])) if l.get("kind") == "epoch" and l.get("val_top1") is not None]
if not epochs:
    sys.exit("fmnist.sh: no epoch line with val_top1 in " + sys.argv[1])
ema = epochs[-1].get("val_ema_top1")
print(epochs[-1]["val_top1"], "" if ema is None else ema)
PY
)
d_ema=${d#* }; d=${d%% *}
"$py" "$here/torch_fmnist.py" "$src" "$epochs" 2 "$recipe" >"$tmp/torch.out"   # (tee /dev/stderr would truncate a log file)
cat "$tmp/torch.out"
# its summary line: "torch fmnist resnet20: E epochs, top-1 X%, T s"
t=$(sed -n 's/^torch fmnist resnet20: [0-9]* epochs, top-1 \([0-9.]*\)%, \([0-9.]*\) s.*$/\1 \2/p' "$tmp/torch.out")
t_ema=$(sed -n 's/^torch fmnist resnet20: .*, EMA top-1 \([0-9.]*\)%$/\1/p' "$tmp/torch.out")
[ -n "$t" ] || { echo "fmnist.sh: no summary line from torch_fmnist.py" >&2; exit 1; }
awk -v a="$t0" -v b="$t1" -v d="$d" -v t="$t" 'BEGIN {
  split(t, f, " "); ta = f[1]; tt = f[2]
  printf "dtrain: top-1 %.2f%% in %.1f s; PyTorch: top-1 %.2f%% in %.1f s; time ratio PyTorch/dtrain %.2f\n",
         d, b - a, ta, tt, tt / (b - a) }'
[ "$recipe" = sgd ] || echo "the model's EMA: dtrain top-1 ${d_ema:-none}%; PyTorch top-1 ${t_ema:-none}% (recipe $recipe)"
