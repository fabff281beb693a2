# train_eval.py DIR ARCH: PyTorch's side of the weights tests (tests/train/pretrained.sh,
# tests/torch/interop.sh). torchvision's ARCH with 10 classes and its first conv taking 1 channel,
# trained for 120 SGD steps of 64 images (seed 7, 2 threads) on the Fashion-MNIST that dtpack packed
# into DIR/fm, normalised as dtrain normalises raw shards (per-channel mean and deviation of up to
# 10000 training images, every count/n-th one), then its BN statistics recomputed for the final
# weights. Writes DIR/ARCH.pth (its state_dict) and DIR/ARCH.acc ("top1 top5 images": its own counts
# on the validation split, in eval mode); fails when the model gets under a quarter of them right
# (one that predicts one class compares nothing).
import sys

import h5py
import numpy as np
import torch
import torchvision

d, arch = sys.argv[1:]
torch.manual_seed(7)
torch.set_num_threads(2)
m = getattr(torchvision.models, arch)(num_classes=10)
for name, mod in m.named_modules():  # the first conv takes 1 channel
    if isinstance(mod, torch.nn.Conv2d):
        parent = m.get_submodule(name.rsplit(".", 1)[0]) if "." in name else m
        setattr(parent, name.rsplit(".", 1)[-1], torch.nn.Conv2d(1, mod.out_channels, mod.kernel_size, mod.stride,
                                                                 mod.padding, bias=mod.bias is not None))
        break


def split(name):
    rows = [l.rstrip("\n").split("\t") for l in open(d + "/fm/manifest.tsv") if not l.startswith("#")]
    px, lab = [], []
    for r in rows:
        if r[0] == name:
            with h5py.File(d + "/fm/" + r[1], "r") as f:
                px.append(f["pixels"][:])
                lab.append(f["labels"][:])
    return np.concatenate(px), np.concatenate(lab)


tx, ty = split("train")
n = min(len(tx), 10000)
sample = tx[np.arange(n) * (len(tx) // n)].astype(np.float64) / 255.0
mean = np.float32(sample.mean())
std = np.float32(np.sqrt(max((sample ** 2).mean() - sample.mean() ** 2, 1e-8)))
# a model worth comparing: 120 SGD steps on the training images (a random one predicts one class)
xt = torch.from_numpy((tx[:120 * 64].astype(np.float32) * np.float32(1 / 255.0) - mean) / std).permute(0, 3, 1, 2)
yt = torch.from_numpy(ty[:120 * 64].astype(np.int64))
opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
m.train()
for i in range(120):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(xt[i * 64:(i + 1) * 64].contiguous()), yt[i * 64:(i + 1) * 64]).backward()
    opt.step()
# BN's running statistics recomputed for the final weights (a cumulative average over 20 batches):
# with MobileNetV3's momentum of 0.01 the ones training left would still be near their start, and the
# model would predict one class, which compares nothing
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None
    for i in range(20):
        m(xt[i * 64:(i + 1) * 64].contiguous())
torch.save(m.state_dict(), "%s/%s.pth" % (d, arch))
vx, vy = split("val")
x = (vx.astype(np.float32) * np.float32(1 / 255.0) - mean) / std
m.eval()
with torch.no_grad():
    z = torch.cat([m(torch.from_numpy(x[i:i + 500]).permute(0, 3, 1, 2).contiguous()) for i in range(0, len(x), 500)])
y = torch.from_numpy(vy.astype(np.int64))
top5 = z.topk(5, 1).indices
t1 = (top5[:, 0] == y).sum().item()
t5 = (top5 == y[:, None]).any(1).sum().item()
open("%s/%s.acc" % (d, arch), "w").write("%d %d %d\n" % (t1, t5, len(y)))
print("PyTorch %s: top-1 %d, top-5 %d of %d" % (arch, t1, t5, len(y)))
if t1 < 0.25 * len(y):
    sys.exit("train_eval.py: %s reaches only %d of %d: too weak a model to compare accuracies with" % (arch, t1, len(y)))
