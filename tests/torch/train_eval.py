# train_eval.py DIR ARCH [DATA]: PyTorch's side of the weights tests (tests/train/pretrained.sh,
# tests/torch/interop.sh). torchvision's ARCH with 10 classes (vit_test: dtrain's small ViT, the
# fixture's VisionTransformer(32, 8, 2, 4, 64, 128)), its first conv taking 1 channel when the data
# has one, trained for 120 SGD steps of 64 images (seed 7, 2 threads) on what dtpack packed into
# DIR/DATA (default fm: Fashion-MNIST; tests/torch/fm32.py's 32x32 RGB copy of it for the models that
# need 32x32), normalised as dtrain normalises raw shards (per-channel mean and deviation of up to
# 10000 training images, every count/n-th one: here one value, the channels being equal copies), then
# its BN statistics recomputed for the final weights. Writes DIR/ARCH.pth (its state_dict) and
# DIR/ARCH.acc ("top1 top5 images": its own counts on the validation split, in eval mode); fails when
# the model gets under a quarter of them right (one that predicts one class compares nothing).
import sys

import h5py
import numpy as np
import torch
import torchvision

d, arch = sys.argv[1:3]
data = sys.argv[3] if len(sys.argv) > 3 else "fm"
torch.manual_seed(7)
torch.set_num_threads(2)


def split(name):
    rows = [l.rstrip("\n").split("\t") for l in open("%s/%s/manifest.tsv" % (d, data)) if not l.startswith("#")]
    px, lab = [], []
    for r in rows:
        if r[0] == name:
            with h5py.File("%s/%s/%s" % (d, data, r[1]), "r") as f:
                px.append(f["pixels"][:])
                lab.append(f["labels"][:])
    return np.concatenate(px), np.concatenate(lab)


tx, ty = split("train")
if arch == "vit_test":
    m = torchvision.models.VisionTransformer(32, 8, 2, 4, 64, 128, num_classes=10)
else:
    m = getattr(torchvision.models, arch)(num_classes=10)
if arch.startswith("convnext"):  # layer scales of 0.1, not 1e-6: the blocks' branches then count in the logits
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("layer_scale"):
                p.fill_(0.1)
for name, mod in m.named_modules():  # the first conv takes the data's channels
    if isinstance(mod, torch.nn.Conv2d):
        if mod.in_channels != tx.shape[3]:
            parent = m.get_submodule(name.rsplit(".", 1)[0]) if "." in name else m
            setattr(parent, name.rsplit(".", 1)[-1],
                    torch.nn.Conv2d(tx.shape[3], mod.out_channels, mod.kernel_size, mod.stride, mod.padding,
                                    bias=mod.bias is not None))
        break
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
