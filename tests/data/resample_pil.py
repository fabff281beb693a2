#!/usr/bin/env python3
"""resample_pil.py CHECK DIR [PHOTO]: PIL (Pillow) as the oracle of our resampling, for every filter of
torchvision's --interpolation (data/image.h's enum dt_filter).

The same input, box and output size go to CHECK (tests/data/resample_check) and to PIL, and the pixels
must be the same, exactly:
  raw   the resampler on a box in fractional source pixels = Image.resize(size, filter, box=box), over
        shrinking, enlarging, one axis, identity, tiny and odd sizes, fractional boxes (some not
        representable in float32: PIL takes the box as float32), on noise (overshoot and clipping of
        the filters with negative lobes), a pattern with sharp edges and a photo;
  full  dt_image_resize = Image.resize(size, filter);
  jpeg  dt_jpeg_decode_box of an RGB and a gray JPEG = what torchvision does to a PIL image:
        Image.open(f).convert("RGB").crop(box).resize(size, filter), where the box decode runs at
        full scale; where it uses libjpeg's DCT scaling (1/d), = PIL's own DCT-scaled decode
        (Image.draft at 1/d) cropped to the scaled pixels covering the box, resized from the box's
        exact edges (box=...). How far that fast path lies from the full-scale pixels torchvision
        computes is printed per filter and scale and bounded (mean |diff| < 4 levels, as
        tests/unit/test_image.c bounds it for bilinear).
PHOTO (optional) is a JPEG photo to cut inputs from (Debian's python-matplotlib-data has one).
Prints one line per filter: cases, values compared, the worst difference and how many values differ.
Exit 0 when all agree, 1 otherwise, 77 when numpy or PIL is missing."""
import os
import subprocess
import sys

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

R = getattr(Image, "Resampling", Image)
FILTERS = {"nearest": R.NEAREST, "bilinear": R.BILINEAR, "bicubic": R.BICUBIC, "box": R.BOX,
           "hamming": R.HAMMING, "lanczos": R.LANCZOS}
# the DCT scaling dt_jpeg_decode_box picks (image.h's rule): the box after scaling must stay at least
# MARGIN times the output; nearest never scales
MARGIN = {"nearest": None, "bilinear": 1, "bicubic": 2, "lanczos": 2, "hamming": 2, "box": 4}


def dct_denom(bw, bh, ow, oh, name):
    m = MARGIN[name]
    if m is None:
        return 1
    for d in (8, 4, 2):
        if (bw + d - 1) // d >= m * ow and (bh + d - 1) // d >= m * oh:
            return d
    return 1


def sources(rng, photo):
    """named uint8 H x W x 3 arrays"""
    src = {"noise": rng.integers(0, 256, (61, 97, 3), dtype=np.uint8)}
    h, w = 384, 512
    y, x = np.mgrid[0:h, 0:w]
    pat = np.stack([255.0 * x / (w - 1), 255.0 * y / (h - 1), 128 + 90 * np.sin(x / 37.0) * np.cos(y / 23.0)], -1)
    pat[h // 4:h // 4 + 40, w // 5:w // 5 + 40] = (250, 20, 30)
    pat[h // 8:h // 8 + 25, 3 * w // 4:3 * w // 4 + 25] = 0
    pat[200:260, 300:380] = np.where(((x[200:260, 300:380] + y[200:260, 300:380]) % 4 < 2)[..., None], 255, 0)
    src["pattern"] = np.clip(pat + 0.5, 0, 255).astype(np.uint8)
    if photo and os.path.exists(photo):
        src["photo"] = np.asarray(Image.open(photo).convert("RGB"))[:384, :512].copy()
    return src


def raw_cases(rng, src):
    """(source, box or None for the whole image, ow, oh)"""
    big = "photo" if "photo" in src else "pattern"
    c = [
        ("noise", None, 31, 20), ("noise", None, 48, 30), ("noise", None, 96, 60), ("noise", None, 200, 150),
        ("noise", None, 97, 30), ("noise", None, 150, 61), ("noise", None, 97, 61), ("noise", None, 1, 1),
        ("noise", None, 5, 3), (big, None, 37, 29), (big, None, 224, 224), (big, None, 256, 171),
        (big, None, 511, 383), ("pattern", None, 300, 384), ("pattern", None, 64, 48),
        # fractional boxes: eighths (the DCT path's), and values float32 cannot hold
        ("noise", (3.25, 1.5, 60.125, 40.75), 31, 20), ("noise", (3.25, 1.5, 60.125, 40.75), 120, 90),
        ("noise", (0.5, 0.5, 96.5, 60.5), 96, 60), ("noise", (0.1, 0.2, 96.7, 60.3), 33, 77),
        (big, (85.0, 23.0, 413.0, 352.0), 224, 224), (big, (10.625, 20.375, 211.875, 161.5), 224, 224),
        (big, (1.0 / 3, 2.0 / 7, 101.0 / 3, 99.0 / 7), 50, 50),
    ]
    # enlarging small images (ties: 2 -> 3 and 3 -> 5 put an output centre on an input edge)
    for (w, h, ow, oh) in ((20, 15, 97, 83), (7, 5, 64, 40), (33, 17, 66, 34), (3, 2, 5, 7), (2, 3, 3, 5),
                           (1, 1, 5, 3), (36, 30, 30, 36), (8, 8, 38, 38)):
        name = "noise%dx%d" % (w, h)
        src[name] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        c.append((name, None, ow, oh))
    # random ones: sizes 1..120 each way, boxes whole, integer or fractional
    for t in range(60):
        w, h = int(rng.integers(1, 121)), int(rng.integers(1, 121))
        name = "rand%d" % t
        src[name] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        ow, oh = int(rng.integers(1, 151)), int(rng.integers(1, 151))
        k = t % 3
        if k == 0:
            box = None
        else:
            xs = sorted(rng.uniform(0, w, 2)) if k == 2 else sorted(rng.integers(0, w + 1, 2) * 1.0)
            ys = sorted(rng.uniform(0, h, 2)) if k == 2 else sorted(rng.integers(0, h + 1, 2) * 1.0)
            if xs[1] - xs[0] < 0.5 or ys[1] - ys[0] < 0.5:
                box = None
            else:
                box = (float(xs[0]), float(ys[0]), float(xs[1]), float(ys[1]))
        c.append((name, box, ow, oh))
    return c


def jpeg_cases(src, tmp):
    """(file, PIL mode, box x y w h, ow, oh): an RGB and a gray JPEG, boxes and sizes that make every
    DCT scale (for bilinear) come up, odd boxes, a box at the far corner"""
    img = Image.fromarray(src["photo"] if "photo" in src else src["pattern"])
    files = []
    for mode in ("RGB", "L"):
        path = os.path.join(tmp, "in_%s.jpg" % mode)
        img.convert(mode).save(path, quality=90)
        files.append((path, mode))
    W, H = img.size
    boxes = [((37, 21, 400, 300), [(224, 224), (150, 120), (90, 70), (40, 30), (400, 300), (199, 149), (100, 75)]),
             ((85, 23, 328, 329), [(224, 224), (150, 150), (41, 40)]),
             ((0, 0, W, H), [(56, 48), (256, 192), (60, 45), (700, 500)]),
             ((W - 101, H - 77, 101, 77), [(56, 48), (23, 17), (224, 224)]),
             ((5, 200, 61, 183), [(15, 45), (7, 22), (3, 3), (40, 120)]),
             ((16, 16, 61, 183), [(50, 150), (61, 183), (17, 40)]),  # starts on an iMCU boundary
             ((255, 1, 3, 2), [(56, 48)])]
    return [(f, m, b, ow, oh) for (f, m) in files for (b, outs) in boxes for (ow, oh) in outs]


def pil_resize(a, size, f, box=None):
    im = Image.fromarray(a)
    return np.asarray(im.resize(size, f) if box is None else im.resize(size, f, box=box))


def pil_jpeg_exact(path, mode, b, ow, oh, f, d):
    """PIL's pixels for what the box decode computes at DCT scale 1/d"""
    x, y, w, h = b
    im = Image.open(path)
    assert im.mode == mode
    if d == 1:
        return np.asarray(im.convert("RGB").crop((x, y, x + w, y + h)).resize((ow, oh), f))
    W, H = im.size
    im.draft(None, (W // d, H // d))
    assert im.size == ((W + d - 1) // d, (H + d - 1) // d), (im.size, d)
    sx0, sy0 = x // d, y // d
    sx1, sy1 = min((x + w + d - 1) // d, im.size[0]), min((y + h + d - 1) // d, im.size[1])
    region = im.convert("RGB").crop((sx0, sy0, sx1, sy1))
    rbox = (x / d - sx0, y / d - sy0, (x + w) / d - sx0, (y + h) / d - sy0)
    return np.asarray(region.resize((ow, oh), f, box=rbox))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    check, tmp = sys.argv[1], sys.argv[2]
    photo = sys.argv[3] if len(sys.argv) > 3 else None
    rng = np.random.default_rng(20240611)
    src = sources(rng, photo)
    raws = raw_cases(rng, src)
    jpegs = jpeg_cases(src, tmp)
    for name, a in src.items():
        a.tofile(os.path.join(tmp, name + ".rgb"))

    jobs, expect = [], []  # a job line for CHECK, and (filter, kind, what, output file, PIL's pixels, extra)
    n = 0
    for fname, f in FILTERS.items():
        for (name, box, ow, oh) in raws:
            a = src[name]
            h, w = a.shape[:2]
            out = os.path.join(tmp, "o%d.rgb" % n)
            n += 1
            if box is None:
                jobs.append("full %s %d %d %s %d %d %s" % (fname, w, h, os.path.join(tmp, name + ".rgb"), ow, oh, out))
                what = "%s %dx%d -> %dx%d" % (name, w, h, ow, oh)
            else:
                jobs.append("raw %s %d %d %s %r %r %r %r %d %d %s" % (fname, w, h, os.path.join(tmp, name + ".rgb"),
                                                                    *box, ow, oh, out))
                what = "%s %dx%d box %s -> %dx%d" % (name, w, h, box, ow, oh)
            expect.append((fname, "raw" if box else "full", what, out, pil_resize(a, (ow, oh), f, box), None))
        for (path, mode, b, ow, oh) in jpegs:
            out = os.path.join(tmp, "o%d.rgb" % n)
            n += 1
            d = dct_denom(b[2], b[3], ow, oh, fname)
            jobs.append("jpeg %s %s %d %d %d %d %d %d %s" % (fname, path, *b, ow, oh, out))
            what = "%s JPEG box %s -> %dx%d (DCT 1/%d)" % (mode, b, ow, oh, d)
            full = np.asarray(Image.open(path).convert("RGB").crop((b[0], b[1], b[0] + b[2], b[1] + b[3]))
                              .resize((ow, oh), f))
            expect.append((fname, "jpeg", what, out, pil_jpeg_exact(path, mode, b, ow, oh, f, d), (d, full)))

    r = subprocess.run([check], input="\n".join(jobs) + "\n", text=True, capture_output=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        print("FAIL: %s exited %d" % (check, r.returncode))
        return 1

    bad = 0
    stats = {}
    fast = {}
    for (fname, kind, what, out, want, extra) in expect:
        got = np.fromfile(out, dtype=np.uint8).reshape(want.shape)
        diff = np.abs(got.astype(int) - want.astype(int))
        s = stats.setdefault(fname, {"raw": 0, "full": 0, "jpeg": 0, "values": 0, "worst": 0, "differ": 0})
        s[kind] += 1
        s["values"] += diff.size
        s["worst"] = max(s["worst"], int(diff.max()))
        s["differ"] += int((diff != 0).sum())
        if diff.any():
            bad += 1
            if bad <= 12:
                print("DIFF %s %s: max %d, %d of %d values differ" % (fname, what, diff.max(), (diff != 0).sum(),
                                                                      diff.size))
        if extra and extra[0] > 1:
            d, full = extra
            e = np.abs(got.astype(int) - full.astype(int))
            fs = fast.setdefault(fname, {})
            fd = fs.setdefault(d, [0, 0.0, 0])
            fd[0] += 1
            fd[1] = max(fd[1], float(e.mean()))
            fd[2] = max(fd[2], int(e.max()))
    for fname in FILTERS:
        s = stats[fname]
        print("%-8s %3d cases (%d boxes, %d whole images, %d JPEG boxes), %d values: worst |ours - PIL| %d, "
              "%d values differ" % (fname, s["raw"] + s["full"] + s["jpeg"], s["raw"], s["full"], s["jpeg"],
                                    s["values"], s["worst"], s["differ"]))
    # the fast path: no filter may stray further from the full-size pixels than bilinear does
    bar = max(v[1] for v in fast["bilinear"].values())
    over = 0
    for fname in FILTERS:
        scales = fast.get(fname, {})
        worst = max([v[1] for v in scales.values()] + [0.0])
        flag = ""
        if worst > bar:
            over += 1
            flag = "  FURTHER THAN BILINEAR (%.3f)" % bar
        print("fast path %-8s against full-size PIL: %s%s" % (fname, ", ".join(
            "DCT 1/%d (%d boxes) worst mean |diff| %.3f, max %d" % (d, v[0], v[1], v[2])
            for d, v in sorted(scales.items())) or "never scaled", flag))
    if bad or over:
        print("FAIL: %d of %d cases differ from PIL; %d filters' fast path strays further than bilinear's" %
              (bad, len(expect), over))
        return 1
    print("ok: %d cases, every filter pixel for pixel as PIL %s" % (len(expect), Image.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
