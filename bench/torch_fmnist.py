#!/usr/bin/env python3
"""PyTorch's side of bench/fmnist.sh: the demo's recipe in plain PyTorch.

Usage: torch_fmnist.py IDX_DIR EPOCHS THREADS
resnet20 (CIFAR-style, the tests' CifarResNet, 1 input channel), batch 128, SGD lr 0.2 (0.4 per
256 images, as dtrain's demo scales it) momentum 0.9 wd 5e-4, per-step cosine to 0, random crop
with 2 pixels of padding and horizontal flips, inputs normalised by the training set's mean and
standard deviation; one process with THREADS threads. Prints each epoch's validation top-1 and
  torch fmnist resnet20: E epochs, top-1 X%, T s
"""
import gzip
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_fixtures import CifarResNet  # noqa: E402


def idx(path, header):
    with gzip.open(path) as f:
        return np.frombuffer(f.read()[header:], np.uint8)


def main():
    src, epochs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.from_numpy(idx(src + "/train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).copy()).float() / 255
    y = torch.from_numpy(idx(src + "/train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    xt = torch.from_numpy(idx(src + "/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).copy()).float() / 255
    yt = torch.from_numpy(idx(src + "/t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    mean, std = x.mean(), x.std()
    x, xt = (x - mean) / std, (xt - mean) / std
    model = CifarResNet(3, in_channels=1, num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=5e-4)
    b, steps = 128, epochs * (len(x) // 128)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    t0 = time.perf_counter()
    top1 = 0.0
    for e in range(epochs):
        model.train()
        perm = torch.randperm(len(x))
        for i in range(len(x) // b):
            xb, yb = x[perm[i * b:(i + 1) * b]], y[perm[i * b:(i + 1) * b]]
            xb = F.pad(xb, (2, 2, 2, 2))
            dy, dx = np.random.randint(0, 5, 2)
            xb = xb[:, :, dy:dy + 28, dx:dx + 28]
            if np.random.rand() < 0.5:
                xb = xb.flip(3)
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            sched.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item() for i in range(0, len(xt), 500))
        top1 = 100.0 * correct / len(xt)
        print("torch epoch %d: validation top-1 %.2f%% (%.0f s)" % (e, top1, time.perf_counter() - t0), flush=True)
    print("torch fmnist resnet20: %d epochs, top-1 %.2f%%, %.1f s" % (epochs, top1, time.perf_counter() - t0))


if __name__ == "__main__":
    main()
