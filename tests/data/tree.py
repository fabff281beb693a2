#!/usr/bin/env python3
"""Builds and checks the small ImageNet-style tree of tests/data/pack_tree.sh.

  tree.py make PHOTO SRC      SRC/{train,val}/<wnid>/<files> from crops of a real photo, plus the
                              quirks ImageNet has: a PNG named .JPEG, CMYK, grayscale and
                              progressive JPEGs, one with extraneous bytes before its end marker,
                              a truncated one and an empty one
  tree.py check SRC OUT       reads dtpack's shards in OUT with h5py and checks them against SRC
Exits non-zero with a message on the first mismatch.
"""
import io
import os
import sys
import zlib

import h5py
import numpy as np
from PIL import Image

CLASSES = ["n01440764", "n01443537", "n01484850"]  # written unsorted below on purpose
BAD = {"empty.JPEG": "empty file", "truncated.JPEG": "truncated"}


def make(photo, src):
    img = Image.open(photo).convert("RGB")
    W, H = img.size
    for split, per in (("train", 4), ("val", 2)):
        for c, wnid in enumerate(reversed(CLASSES)):  # creation order must not matter
            d = os.path.join(src, split, wnid)
            os.makedirs(d, exist_ok=True)
            for k in range(per):
                x0, y0 = (37 * (c + 1) * (k + 1)) % (W // 3), (53 * (c + 2) * (k + 1)) % (H // 3)
                crop = img.crop((x0, y0, x0 + W // 2 + 10 * k, y0 + H // 2 + 7 * c))
                crop.save(os.path.join(d, "%s_%d.JPEG" % (wnid, k)), quality=90)
    q = os.path.join(src, "train", CLASSES[1])
    base = img.crop((0, 0, 300, 260))
    base.save(os.path.join(q, "png_named.JPEG"), format="PNG")
    base.convert("CMYK").save(os.path.join(q, "cmyk.JPEG"), quality=95)
    base.convert("L").save(os.path.join(q, "gray.JPEG"), quality=95)
    base.save(os.path.join(q, "progressive.JPEG"), quality=90, progressive=True)
    buf = io.BytesIO()
    base.save(buf, format="JPEG", quality=90)
    open(os.path.join(q, "truncated.JPEG"), "wb").write(buf.getvalue()[: len(buf.getvalue()) // 2])
    open(os.path.join(q, "empty.JPEG"), "wb").close()
    jpg = buf.getvalue()  # bytes between the data and the end marker: libjpeg warns, the pixels are intact
    open(os.path.join(q, "extraneous.JPEG"), "wb").write(jpg[:-2] + b"\x00\x01\x02" + jpg[-2:])
    open(os.path.join(q, ".hidden.JPEG"), "wb").write(buf.getvalue())  # hidden: ignored


def fail(msg):
    sys.exit("tree.py check: " + msg)


def check(src, out):
    lines = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "manifest.tsv")) if not l.startswith("#")]
    for split, fname, count, size, crc in lines:
        data = open(os.path.join(out, fname), "rb").read()
        if len(data) != int(size) or "%08x" % zlib.crc32(data) != crc:
            fail("%s: size or CRC-32 differs from the manifest" % fname)
    for split in ("train", "val"):
        want = []  # ImageFolder's order: sorted classes, sorted files
        for c, wnid in enumerate(sorted(CLASSES)):
            d = os.path.join(src, split, wnid)
            for f in sorted(os.listdir(d)):
                if not f.startswith(".") and f not in BAD:
                    want.append((wnid + "/" + f, c, os.path.join(d, f)))
        got = []
        for split_, fname, count, size, crc in lines:
            if split_ != split:
                continue
            with h5py.File(os.path.join(out, fname), "r") as h:
                if h.attrs["schema"] != "dtrain-shard" or h.attrs["version"] != 1 or h.attrs["kind"] != "encoded":
                    fail("%s: schema attributes %r" % (fname, dict(h.attrs)))
                classes = [s.decode() for s in h["classes"][:]]
                if classes != sorted(CLASSES):
                    fail("%s: classes %r, expected the sorted wnids" % (fname, classes))
                off, lab, names = h["offsets"][:], h["labels"][:], h["names"][:]
                if len(lab) != int(count) or h.attrs["count"] != int(count):
                    fail("%s: %d labels, manifest count %s" % (fname, len(lab), count))
                for i in range(len(lab)):
                    got.append((names[i].decode(), int(lab[i]), h["images"][off[i]:off[i + 1]].tobytes()))
        if [(n, l) for n, l, _ in got] != [(n, l) for n, l, _ in want]:
            fail("%s: stored (name, label) pairs %r, expected %r" % (split, [(n, l) for n, l, _ in got],
                                                                     [(n, l) for n, l, _ in want]))
        for (name, label, data), (_, _, path) in zip(got, want):
            im = Image.open(io.BytesIO(data))
            im.load()
            if im.format != "JPEG" or im.mode != "RGB":
                fail("%s: stored as %s %s, expected an RGB JPEG" % (name, im.format, im.mode))
            orig = Image.open(path)
            if os.path.basename(name) in ("png_named.JPEG", "cmyk.JPEG", "gray.JPEG"):
                ref = np.asarray(orig.convert("RGB"), dtype=np.float64)
                diff = np.abs(np.asarray(im, dtype=np.float64) - ref).mean()
                if im.size != orig.size or diff > 6:
                    fail("%s: converted image is %s, mean error %.2f against PIL's RGB of the source" %
                         (name, im.size, diff))
                if name.endswith("gray.JPEG"):
                    a = np.asarray(im, dtype=np.int16)
                    if np.abs(a[..., 0] - a[..., 1]).max() > 3 or np.abs(a[..., 0] - a[..., 2]).max() > 3:
                        fail("%s: a grayscale source should give R = G = B" % name)
            elif data != open(path, "rb").read():
                fail("%s: an RGB JPEG must be stored byte for byte" % name)
        print("%s: %d images, names, labels, class order and pixels as expected" % (split, len(got)))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        check(sys.argv[2], sys.argv[3])
