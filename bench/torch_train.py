#!/usr/bin/env python3
"""PyTorch's side of bench/cpu_train.sh: training throughput on synthetic input.

Usage: torch_train.py ARCH BATCH SIZE STEPS THREADS CHANNELS MEMORY_FORMAT [LEVEL]
MEMORY_FORMAT is nchw or channels_last. LEVEL is bench_train's (O0, the default, O1, O2, O3, with
the suffix bf16 or -bf16 for bf16), run the way PyTorch runs it on the CPU:
  O0      fp32
  O1, O2  torch.amp: torch.autocast(device_type="cpu") around forward and loss, the model and
          the optimiser in fp32 (what replaced Apex's O1 and O2), no loss scaling (GradScaler is
          CUDA's only in torch 1.13; bf16 needs none)
  O3      the model, its gradients and the input in the reduced type throughout (model.to(dtype))
The reduced type is bf16, or fp16 when asked and this torch runs it on the CPU; torch 1.13's CPU
autocast runs only bf16, so an fp16 level falls back to bf16 and the line says so. Prints one line:
  torch ARCH bBATCH SIZExSIZE threads T FORMAT PRECISION: X img/s, peak RSS Y MiB
(PRECISION: fp32, autocast bf16, bf16..., followed after a fallback by "(fp16 asked, unsupported on
the CPU by torch VERSION)"). Same recipe as bench_train: 1000 classes, SGD(lr 0.01, momentum 0.9, wd 1e-4),
cross-entropy, 2 warm-up steps, then STEPS timed steps of forward + backward + step.
"""
import contextlib
import os
import resource
import sys
import time
import warnings

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


def parse_level(text):
    """(level 0..3, wants bf16) from O0..O3 with an optional bf16 or -bf16 suffix"""
    if len(text) < 2 or text[0] != "O" or text[1] not in "0123" or text[2:] not in ("", "bf16", "-bf16"):
        raise SystemExit("torch_train.py: LEVEL must be O0, O1, O2 or O3, optionally followed by bf16: " + text)
    return int(text[1]), text[2:] != ""


def cpu_runs(dtype, level):
    """whether this torch trains a convolution in dtype on the CPU at this level (autocast or cast)"""
    m, x = nn.Conv2d(3, 4, 3), torch.randn(2, 3, 8, 8)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 1.13 warns, then disables autocast, for fp16
            if level == 3:
                y = m.to(dtype)(x.to(dtype))
            else:
                with torch.autocast(device_type="cpu", dtype=dtype):
                    y = m(x)
            y.float().sum().backward()
        return y.dtype == dtype
    except (RuntimeError, TypeError):
        return False


def main():
    if len(sys.argv) not in (8, 9):
        raise SystemExit("usage: torch_train.py ARCH BATCH SIZE STEPS THREADS CHANNELS MEMORY_FORMAT [LEVEL]")
    arch, batch, size, steps, threads, channels, fmt = sys.argv[1:8]
    level, bf16 = parse_level(sys.argv[8] if len(sys.argv) > 8 else "O0")
    batch, size, steps, threads, channels = int(batch), int(size), int(steps), int(threads), int(channels)
    torch.set_num_threads(threads)
    dtype, prec = torch.float32, "fp32"
    if level > 0:
        dtype, note = torch.bfloat16 if bf16 else torch.float16, ""
        if dtype == torch.float16 and not cpu_runs(dtype, level):
            dtype, note = torch.bfloat16, " (fp16 asked, unsupported on the CPU by torch %s)" % torch.__version__
        prec = ("autocast " if level < 3 else "") + ("bf16" if dtype == torch.bfloat16 else "fp16") + note
    torch.manual_seed(0)
    model = build(arch, channels)
    mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=mf).train()
    x = torch.randn(batch, channels, size, size).to(memory_format=mf)
    if level == 3:
        model, x = model.to(dtype), x.to(dtype)
    y = torch.randint(0, 1000, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss()
    t0 = 0.0
    for s in range(steps + 2):
        if s == 2:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cpu", dtype=dtype) if level in (1, 2) else contextlib.nullcontext():
            loss = crit(model(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("torch %s b%d %dx%d threads %d %s %s: %.1f img/s, peak RSS %.0f MiB" % (arch, batch, size, size, threads, fmt,
                                                                              prec, steps * batch / dt, rss))


if __name__ == "__main__":
    main()
