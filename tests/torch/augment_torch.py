#!/usr/bin/env python3
"""augment_torch.py OUT.h5: torchvision's automatic augmentation as its tensor backend computes it, for
tests/torch/augment.sh (tests/torch/augment_check.c runs data/augment.c on the same inputs and compares).

/tables/<name> (attrs policy: the --auto-augment name; num_bins): the policy's _augmentation_space
  ops (strings, dict order), signed, binned (int32 [n]: 0 for the 0-d magnitude tensors), and
  mag_<h>x<w> (float64 [n, num_bins]: the magnitudes torch computes, widened; 0 for unbinned ops) for
  each image size in SIZES; AutoAugment's also _get_policies as sub_ops (strings [50], row-major
  pairs), sub_p (float64 [25, 2]) and sub_bin (int32 [25, 2], -1 for None).
/cases/<image> (attrs h, w, c, n): in (uint8 [h, w, c]) and, for n calls of
  _apply_op(img, ops[i], magnitude[i], interp[i] (0 nearest, 1 bilinear), fill=None) on the CHW
  uint8 tensor, out (uint8 [n, h, w, c]).
/erase/<image> (attrs h, w, c, n): in, boxes (int32 [n, 4]: i, j, h, w), fill (uint8 [n, 3]) and
  out (uint8 [n, h, w, c]) from F.erase(img, i, j, h, w, fill[:c] as a [c, 1, 1] tensor).
"""
import os
import sys

try:
    import h5py
    import numpy as np
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F
    from torchvision.transforms.autoaugment import (AutoAugment, AutoAugmentPolicy, RandAugment,
                                                    TrivialAugmentWide, _apply_op)
except ImportError as e:  # the caller skips
    print("augment_torch.py: %s" % e, file=sys.stderr)
    sys.exit(77)

SIZES = [(32, 32), (28, 28), (37, 45), (224, 224), (45, 37)]
INTERP = [InterpolationMode.NEAREST, InterpolationMode.BILINEAR]
GEOMETRIC = ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"]
STR = h5py.string_dtype("utf-8")


def spaces():
    """(table name, --auto-augment name, num_bins, space(h, w), AutoAugment policies or None)"""
    out = []
    for pol in (AutoAugmentPolicy.IMAGENET, AutoAugmentPolicy.CIFAR10, AutoAugmentPolicy.SVHN):
        aa = AutoAugment(pol)
        out.append((pol.value, pol.value, 10, lambda h, w, aa=aa: aa._augmentation_space(10, (h, w)), aa.policies))
    for nb in (31, 17):
        ra = RandAugment(num_magnitude_bins=nb)
        out.append(("ra" if nb == 31 else "ra_%d" % nb, "ra", nb,
                    lambda h, w, ra=ra, nb=nb: ra._augmentation_space(nb, (h, w)), None))
    for nb in (31, 17):
        ta = TrivialAugmentWide(num_magnitude_bins=nb)
        out.append(("ta_wide" if nb == 31 else "ta_wide_%d" % nb, "ta_wide", nb,
                    lambda h, w, ta=ta, nb=nb: ta._augmentation_space(nb), None))
    return out


def write_tables(f):
    g0 = f.create_group("tables")
    for name, policy, nb, space, subs in spaces():
        g = g0.create_group(name)
        g.attrs["policy"] = policy
        g.attrs["num_bins"] = nb
        first = space(*SIZES[0])
        ops = list(first.keys())
        g.create_dataset("ops", data=ops, dtype=STR)
        g.create_dataset("signed", data=np.array([int(first[o][1]) for o in ops], dtype=np.int32))
        g.create_dataset("binned", data=np.array([int(first[o][0].ndim > 0) for o in ops], dtype=np.int32))
        for h, w in SIZES:
            sp = space(h, w)
            mags = np.zeros((len(ops), nb), dtype=np.float64)
            for k, o in enumerate(ops):
                if sp[o][0].ndim > 0:
                    mags[k] = [float(v.item()) for v in sp[o][0]]
            g.create_dataset("mag_%dx%d" % (h, w), data=mags)
        if subs is not None:
            g.create_dataset("sub_ops", data=[op for pair in subs for (op, _, _) in pair], dtype=STR)
            g.create_dataset("sub_p", data=np.array([[p for (_, p, _) in pair] for pair in subs], dtype=np.float64))
            g.create_dataset("sub_bin", data=np.array([[-1 if b is None else b for (_, _, b) in pair] for pair in subs],
                                                      dtype=np.int32))


def images(rng):
    """name -> uint8 HWC: noise, smooth structures (gradients, discs, stripes), edge cases"""
    def smooth(h, w, c, seed):
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        r = np.hypot(y - h * 0.45, x - w * 0.55)
        chans = [(x / max(w - 1, 1)) * 200 + 30,                          # a horizontal gradient
                 np.where(r < min(h, w) * 0.3, 220.0, 40.0) + y,          # a disc on a vertical gradient
                 127.5 + 100 * np.sin(x * 0.7 + y * 0.3 + seed)]          # stripes
        return np.clip(np.stack(chans[:c], -1), 0, 255).round().astype(np.uint8)

    def noise(h, w, c):
        return rng.integers(0, 256, (h, w, c), dtype=np.uint8)

    low = rng.integers(90, 151, (20, 24, 3), dtype=np.uint8)
    low[..., 2] = 77  # a flat channel: autocontrast's scale is inf there, equalize's step 0
    sparse = np.zeros((16, 16, 1), dtype=np.uint8)
    sparse[3, 4], sparse[9, 9:12], sparse[12, 1] = 255, 128, 7  # equalize's step small, and 0 with one value
    return {
        "noise32": noise(32, 32, 3), "smooth32": smooth(32, 32, 3, 0.0),
        "noise28g": noise(28, 28, 1), "smooth28g": smooth(28, 28, 1, 1.0),
        "smooth37x45": smooth(37, 45, 3, 2.0), "noise37x45": noise(37, 45, 3), "smooth45x37": smooth(45, 37, 3, 3.0),
        "lowcontrast": low, "flat": np.full((8, 8, 3), 200, dtype=np.uint8), "sparse": sparse,
        "tiny2": noise(2, 2, 3), "tiny3g": noise(3, 3, 1),
        "smooth224": smooth(224, 224, 3, 4.0),
    }


def magnitudes(h, w, full):
    """op -> magnitudes to try: the tables' values (both signs where signed) and extremes"""
    ra = RandAugment()._augmentation_space(31, (h, w))
    ta = TrivialAugmentWide()._augmentation_space(31)
    aa = AutoAugment()._augmentation_space(10, (h, w))

    def tab(op, ra_bins=(9, 30), ta_bins=(7, 30), aa_bins=(3, 9)):
        v = [float(ra[op][0][b]) for b in ra_bins] + [float(ta[op][0][b]) for b in ta_bins] + \
            [float(aa[op][0][b]) for b in aa_bins]
        return v

    def both(v):
        return sorted(set(v + [-x for x in v]))
    m = {"Identity": [0.0], "AutoContrast": [0.0], "Equalize": [0.0], "Invert": [0.0]}
    for op in ("ShearX", "ShearY"):
        m[op] = both(tab(op) + [0.0, 0.1, 0.5, 0.3, 0.99])
    m["TranslateX"] = both(tab("TranslateX") + [0.0, 5.7, 0.9, w + 3.0, 40.0])
    m["TranslateY"] = both(tab("TranslateY") + [0.0, 5.7, 0.9, h + 3.0, 40.0])
    m["Rotate"] = both(tab("Rotate") + [0.0, 17.3, 45.0, 90.0, 135.0, 180.0])
    for op in ("Brightness", "Color", "Contrast", "Sharpness"):
        m[op] = both(tab(op, ta_bins=(3, 30)) + [0.0, 0.5, 0.9, 0.99])
    m["Posterize"] = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    m["Solarize"] = sorted(set(tab("Solarize", ta_bins=(5, 30)) + [255.0, 254.5, 128.0, 127.5, 100.3, 0.0]))
    if not full:  # the big image: a few each
        m = {op: (v if len(v) <= 2 else [v[0], v[len(v) // 2], v[-1]]) for op, v in m.items()}
    return m


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261207)
    tmp = out + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.attrs["torch_version"] = str(torch.__version__)
        write_tables(f)
        gc = f.create_group("cases")
        imgs = images(rng)
        for name, img in imgs.items():
            h, w, c = img.shape
            t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
            ops, mags, interps, outs = [], [], [], []
            for op, ms in magnitudes(h, w, name != "smooth224").items():
                for mag in ms:
                    for k, ip in enumerate(INTERP if op in GEOMETRIC else INTERP[:1]):
                        r = _apply_op(t.clone(), op, mag, interpolation=ip, fill=None)
                        ops.append(op)
                        mags.append(mag)
                        interps.append(k)
                        outs.append(r.permute(1, 2, 0).numpy())
            g = gc.create_group(name)
            g.attrs.update(dict(h=h, w=w, c=c, n=len(ops)))
            g.create_dataset("in", data=img)
            g.create_dataset("ops", data=ops, dtype=STR)
            g.create_dataset("magnitude", data=np.array(mags, dtype=np.float64))
            g.create_dataset("interp", data=np.array(interps, dtype=np.int32))
            g.create_dataset("out", data=np.stack(outs), compression="gzip", compression_opts=1)
        ge = f.create_group("erase")
        for name in ("smooth37x45", "noise28g"):
            img = imgs[name]
            h, w, c = img.shape
            t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
            boxes = [(0, 0, 1, 1), (3, 5, 10, 7), (h - 4, w - 6, 4, 6), (0, 0, h - 1, w - 1), (7, 2, 0, 5),
                     (2, 3, 6, 0)]
            fills = [(124, 116, 104), (0, 0, 0), (255, 1, 128), (124, 116, 104), (9, 9, 9), (3, 4, 5)]
            outs = []
            for (i, j, bh, bw), fl in zip(boxes, fills):
                v = torch.tensor(fl[:c], dtype=torch.uint8)[:, None, None]
                outs.append(F.erase(t, i, j, bh, bw, v).permute(1, 2, 0).numpy())
            g = ge.create_group(name)
            g.attrs.update(dict(h=h, w=w, c=c, n=len(boxes)))
            g.create_dataset("in", data=img)
            g.create_dataset("boxes", data=np.array(boxes, dtype=np.int32))
            g.create_dataset("fill", data=np.array(fills, dtype=np.uint8))
            g.create_dataset("out", data=np.stack(outs))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
