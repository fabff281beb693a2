# fm32.py SRC OUT: Fashion-MNIST (the idx files in SRC, Debian's dataset-fashion-mnist) as CIFAR-10's
# binary format in OUT, for the zoo's models that need 32x32 inputs (tests/torch/interop.sh): each
# 28x28 image centred in 32x32 with a black border of 2 and its grey copied into R, G and B; the
# first 50000 training images as data_batch_1..5.bin (10000 records each), the 10000 test images as
# test_batch.bin, Fashion-MNIST's class names in batches.meta.txt. dtpack cifar10 packs OUT.
import gzip
import os
import sys

import numpy as np

src, out = sys.argv[1:]
NAMES = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot")


def idx(name, header):
    with gzip.open(os.path.join(src, name), "rb") as f:
        return np.frombuffer(f.read()[header:], dtype=np.uint8)


def records(images, labels):
    """CIFAR-10 records: a label byte, then 1024 bytes of each of R, G and B (rows of 32)"""
    n = len(labels)
    padded = np.zeros((n, 32, 32), dtype=np.uint8)
    padded[:, 2:30, 2:30] = images.reshape(n, 28, 28)
    rec = np.empty((n, 1 + 3 * 1024), dtype=np.uint8)
    rec[:, 0] = labels
    for c in range(3):
        rec[:, 1 + c * 1024:1 + (c + 1) * 1024] = padded.reshape(n, 1024)
    return rec.tobytes()


os.makedirs(out, exist_ok=True)
tx, ty = idx("train-images-idx3-ubyte.gz", 16), idx("train-labels-idx1-ubyte.gz", 8)
vx, vy = idx("t10k-images-idx3-ubyte.gz", 16), idx("t10k-labels-idx1-ubyte.gz", 8)
for b in range(5):
    part = slice(b * 10000, (b + 1) * 10000)
    with open(os.path.join(out, "data_batch_%d.bin" % (b + 1)), "wb") as f:
        f.write(records(tx.reshape(-1, 784)[part], ty[part]))
with open(os.path.join(out, "test_batch.bin"), "wb") as f:
    f.write(records(vx.reshape(-1, 784), vy))
with open(os.path.join(out, "batches.meta.txt"), "w") as f:
    f.write("\n".join(NAMES) + "\n")
