#!/bin/sh
# loader.sh: dtrain's loader against torchvision's ImageFolder + DataLoader, side by side on the same
# ImageNet-like JPEGs (about 400x350, quality 90, cut from a real photo: Debian's
# python-matplotlib-data), same worker count, RandomResizedCrop(224) + flip, uint8 output.
#   bench/loader.sh [BUILD_DIR] [WORKERS] [IMAGES] [EPOCHS]   (default: build, all cores, 2000, 2)
# Prints both rates, per worker, and the ratio dtrain/torchvision. Not a test: numbers vary with load.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
workers=${2:-$(nproc)}
images=${3:-2000}
epochs=${4:-2}
py=${PYTHON_TORCH:-/usr/bin/python3}
photo=/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg
[ -f "$photo" ] || { echo "loader.sh: needs $photo (Debian: python-matplotlib-data)"; exit 1; }
make -C "$build" dtpack bench >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" - "$photo" "$tmp/tree" "$images" <<'PY'
import os, random, sys
from PIL import Image
photo, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
img = Image.open(photo).convert("RGB")
rnd = random.Random(0)
for i in range(n):
    d = os.path.join(out, "train", "n%08d" % (i % 10))
    os.makedirs(d, exist_ok=True)
    w, h = rnd.randint(330, 470), rnd.randint(290, 410)          # about ImageNet's mean 400x350
    x0, y0 = rnd.randint(0, 200), rnd.randint(0, 250)
    crop = img.crop((x0, y0, x0 + rnd.randint(220, 312), y0 + rnd.randint(220, 350))).resize((w, h))
    if rnd.random() < 0.5:
        crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
    crop.save(os.path.join(d, "img%06d.JPEG" % i), quality=90)
PY
"$build/dtpack" imagenet "$tmp/tree" -o "$tmp/shards" --split train --no-progress >/dev/null
echo "images: $images ImageNet-like JPEGs ($(du -sh "$tmp/tree" | cut -f1)), workers: $workers, $epochs epochs, batch 64"
d=$("$build/bench/bench_loader" "$tmp/shards" train "$workers" 64 "$epochs")
t=$("$py" "$here/torch_loader.py" "$tmp/tree/train" "$workers" 64 "$epochs")
echo "$d"
echo "$t"
rate() { sed -n 's/.*workers: \([0-9.]*\) img\/s.*/\1/p'; }
[ -n "$(echo "$d" | rate)" ] && [ -n "$(echo "$t" | rate)" ] || { echo "loader.sh: a side printed no img/s" >&2; exit 1; }
awk -v a="$(echo "$d" | rate)" -v b="$(echo "$t" | rate)" 'BEGIN{printf "ratio dtrain/torchvision: %.2f\n", a/b}'
