#!/usr/bin/env python3
"""Builds the small trees of tests/data/pack_ilsvrc.sh: ILSVRC2012's layout and its sorted twin.

  ilsvrc.py make DIR   DIR/flat/src: train/<wnid>/<files> and a flat val/ILSVRC2012_val_<8 digits>.JPEG;
                       DIR/sorted/src: the same train/ and val/<wnid>/<the same files>;
                       DIR/gt: LOC_val_solution.csv, ILSVRC2012_validation_ground_truth.txt,
                       meta.mat (MATLAB v5, compressed as MATLAB saves it), meta_plain.mat (not
                       compressed), synsets.txt ("ID WNID" lines), LOC_synset_mapping.txt
The devkit's IDs are given out of WNID order on purpose (as the real devkit's are): a mapping read
by position labels the images wrongly. Images are small noise JPEGs, different for each file.
"""
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

CLASSES = ["n01440764", "n01443537", "n01484850"]  # the train folders (sorted)
# the devkit's IDs: 1 is a synset with no train folder, the rest not in WNID order
META = [(1, "n02119789", "kit fox"), (2, "n01484850", "great white shark"), (3, "n01440764", "tench"),
        (4, "n01443537", "goldfish"), (5, "n00000005", "an inner node")]
ID_OF = {w: i for i, w, _ in META}
VAL = ["n01443537", "n01440764", "n01484850", "n01443537", "n01440764", "n01484850", "n01484850"]


def jpeg(path, seed):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (24 + seed % 5, 32, 3), dtype=np.uint8)).save(path, quality=85)


def el(t, data, pad=True):
    if len(data) <= 4 and t != 14:  # a small element: the size in the tag's upper half
        return struct.pack("<I", (len(data) << 16) | t) + data.ljust(4, b"\0")
    out = struct.pack("<II", t, len(data)) + data
    return out + b"\0" * ((-len(out)) % 8 if pad else 0)


def matrix(cls, dims, name, *body):
    head = el(6, struct.pack("<II", cls, 0)) + el(5, struct.pack("<%di" % len(dims), *dims)) + el(1, name)
    return el(14, head + b"".join(body))


def number(v, small):  # MATLAB stores a double in the smallest type that holds it
    return matrix(6, [1, 1], b"", el(4, struct.pack("<H", v)) if small else el(9, struct.pack("<d", v)))


def text(s):
    return matrix(4, [1, len(s)], b"", el(4, s.encode("utf-16-le")))


def meta_mat(compressed):
    fields = [b"ILSVRC2012_ID", b"WNID", b"words", b"num_children", b"children"]
    body = [el(5, struct.pack("<i", 32)), el(1, b"".join(f.ljust(32, b"\0") for f in fields))]
    for k, (i, w, words) in enumerate(META):
        body += [number(i, k % 2 == 0), text(w), text(words.replace(" ", "_")), number(0, True),
                 el(14, b"") if k % 2 else matrix(6, [0, 0], b"")]
    syn = matrix(2, [len(META), 1], b"synsets", *body)
    decoy = matrix(6, [1, 1], b"version", el(9, struct.pack("<d", 2012.0)))
    head = b"MATLAB 5.0 MAT-file, Platform: GLNXA64, written by ilsvrc.py".ljust(116) + b"\0" * 8 + b"\0\x01IM"
    if compressed:
        return head + el(15, zlib.compress(decoy), False) + el(15, zlib.compress(syn), False)
    return head + decoy + syn


def make(d):
    for layout in ("flat", "sorted"):
        for c, w in enumerate(CLASSES):
            os.makedirs(os.path.join(d, layout, "src", "train", w))
            for k in range(3):
                jpeg(os.path.join(d, layout, "src", "train", w, "%s_%d.JPEG" % (w, k + 1)), 10 * c + k)
        os.makedirs(os.path.join(d, layout, "src", "val"))
        for k, w in enumerate(VAL):
            sub = os.path.join(d, layout, "src", "val", w if layout == "sorted" else "")
            os.makedirs(sub, exist_ok=True)
            jpeg(os.path.join(sub, "ILSVRC2012_val_%08d.JPEG" % (k + 1)), 100 + k)
    gt = os.path.join(d, "gt")
    os.makedirs(gt)
    with open(os.path.join(gt, "LOC_val_solution.csv"), "w") as f:  # Kaggle's: rows not in file order
        f.write("ImageId,PredictionString\n")
        for k in reversed(range(len(VAL))):
            f.write("ILSVRC2012_val_%08d,%s 10 12 30 20 %s 1 2 3 4 \n" % (k + 1, VAL[k], VAL[k]))
    with open(os.path.join(gt, "ILSVRC2012_validation_ground_truth.txt"), "w") as f:
        f.writelines("%d\n" % ID_OF[w] for w in VAL)
    open(os.path.join(gt, "meta.mat"), "wb").write(meta_mat(True))
    open(os.path.join(gt, "meta_plain.mat"), "wb").write(meta_mat(False))
    with open(os.path.join(gt, "synsets.txt"), "w") as f:
        f.writelines("%d %s %s\n" % m for m in META)
    with open(os.path.join(gt, "LOC_synset_mapping.txt"), "w") as f:
        f.writelines("%s %s\n" % (w, words) for _, w, words in sorted(META, key=lambda m: m[1]))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "make":
        sys.exit(__doc__)
    make(sys.argv[2])
