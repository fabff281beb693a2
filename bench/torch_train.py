#!/usr/bin/env python3
"""PyTorch's side of bench/cpu_train.sh: training throughput on synthetic input.

Usage: torch_train.py ARCH BATCH SIZE STEPS THREADS CHANNELS MEMORY_FORMAT
MEMORY_FORMAT is nchw or channels_last. Prints one line:
  torch ARCH bBATCH SIZExSIZE threads T FORMAT: X img/s, peak RSS Y MiB
Same recipe as bench_train: 1000 classes, SGD(lr 0.01, momentum 0.9, wd 1e-4), cross-entropy,
2 warm-up steps, then STEPS timed steps of forward + backward + step.
"""
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_fixtures import CifarResNet, resnet18_small  # noqa: E402  (the same architectures as the fixtures)


def build(arch, channels):
    cifar = {"resnet8": 1, "resnet20": 3, "resnet56": 9}
    if arch in cifar:
        return CifarResNet(cifar[arch], in_channels=channels, num_classes=1000)
    if arch == "resnet18_small":
        m = resnet18_small()
        m.fc = nn.Linear(512, 1000)
    else:
        m = getattr(torchvision.models, arch)(num_classes=1000)
    if channels != 3:
        raise SystemExit("torch_train.py: only 3 channels for torchvision models")
    return m


def main():
    arch, batch, size, steps, threads, channels, fmt = sys.argv[1:8]
    batch, size, steps, threads, channels = int(batch), int(size), int(steps), int(threads), int(channels)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build(arch, channels)
    mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=mf).train()
    x = torch.randn(batch, channels, size, size).to(memory_format=mf)
    y = torch.randint(0, 1000, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss()
    t0 = 0.0
    for s in range(steps + 2):
        if s == 2:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        crit(model(x), y).backward()
        opt.step()
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("torch %s b%d %dx%d threads %d %s: %.1f img/s, peak RSS %.0f MiB" % (arch, batch, size, size, threads, fmt,
                                                                           steps * batch / dt, rss))


if __name__ == "__main__":
    main()
