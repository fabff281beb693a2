#!/usr/bin/env python3
"""PyTorch's side of bench/fmnist.sh: the demo's recipe in plain PyTorch.

Usage: torch_fmnist.py IDX_DIR EPOCHS THREADS [RECIPE]
resnet20 (CIFAR-style, the tests' CifarResNet, 1 input channel), batch 128, random crop with 2
pixels of padding and horizontal flips, inputs normalised by the training set's mean and standard
deviation; one process with THREADS threads. RECIPE:
  sgd (default): SGD lr 0.2 (0.4 per 256 images, as dtrain's demo scales it) momentum 0.9 wd 5e-4,
    per-step cosine to 0;
  adamw: torchvision's reference train.py with --opt adamw --lr 0.002 --weight-decay 0.05
    --norm-weight-decay 0 --label-smoothing 0.1 --lr-scheduler cosineannealinglr
    --lr-warmup-epochs 1 --lr-warmup-method linear --mixup-alpha 0.2 --cutmix-alpha 1.0
    --model-ema (steps 32, decay 0.99998), as train.py builds each (its RandomMixup, RandomCutmix and
    ExponentialMovingAverage transcribed below); the model's average is validated too.
Prints each epoch's validation top-1 and
  torch fmnist resnet20: E epochs, top-1 X%, T s            (adamw: also ", EMA top-1 Y%")
"""
import gzip
import math
import os
import sys
import time

import numpy as np
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_fixtures import CifarResNet  # noqa: E402


def idx(path, header):
    with gzip.open(path) as f:
        return np.frombuffer(f.read()[header:], np.uint8)


def mix_batch(xb, yb, mixup_alpha, cutmix_alpha, classes):
    """torchvision's RandomChoice([RandomMixup(p=1), RandomCutmix(p=1)]) on a batch: targets one-hot,
    the batch rolled by one, lambda from Beta(alpha, alpha)."""
    target = F.one_hot(yb, classes).to(xb.dtype)
    use_mixup = random.random() < 0.5
    alpha = mixup_alpha if use_mixup else cutmix_alpha
    lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
    x_rolled, t_rolled = xb.roll(1, 0), target.roll(1, 0)
    if use_mixup:
        x_rolled.mul_(1.0 - lam)
        xb = xb.mul(lam).add_(x_rolled)
    else:
        h, w = xb.shape[-2:]
        r_x, r_y = int(torch.randint(w, (1,))), int(torch.randint(h, (1,)))
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * w), int(r * h)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, w), min(r_y + r_h_half, h)
        xb = xb.clone()
        xb[:, :, y1:y2, x1:x2] = x_rolled[:, :, y1:y2, x1:x2]
        lam = float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))
    t_rolled.mul_(1.0 - lam)
    return xb, target.mul_(lam).add_(t_rolled)


def param_groups(model, norm_wd, wd):
    """torchvision's set_weight_decay with --norm-weight-decay (biases of other layers keep wd)."""
    norm, other = [], []
    for m in model.modules():
        for _, p in m.named_parameters(recurse=False):
            (norm if isinstance(m, nn.modules.batchnorm._BatchNorm) else other).append(p)
    return [{"params": other, "weight_decay": wd}, {"params": norm, "weight_decay": norm_wd}]


def evaluate(model, xt, yt):
    model.eval()
    with torch.no_grad():
        correct = sum((model(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item() for i in range(0, len(xt), 500))
    return 100.0 * correct / len(xt)


def main():
    src, epochs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    recipe = sys.argv[4] if len(sys.argv) > 4 else "sgd"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.from_numpy(idx(src + "/train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).copy()).float() / 255
    y = torch.from_numpy(idx(src + "/train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    xt = torch.from_numpy(idx(src + "/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).copy()).float() / 255
    yt = torch.from_numpy(idx(src + "/t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    mean, std = x.mean(), x.std()
    x, xt = (x - mean) / std, (xt - mean) / std
    model = CifarResNet(3, in_channels=1, num_classes=10)
    b, steps = 128, epochs * (len(x) // 128)
    ema, ema_top1, smoothing = None, None, 0.0
    if recipe == "adamw":
        random.seed(0)
        smoothing = 0.1
        opt = torch.optim.AdamW(param_groups(model, 0.0, 0.05), lr=0.002, weight_decay=0.05)
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=1)
        main_s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs - 1, eta_min=0.0)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, main_s], milestones=[1])
        ema_steps = 32
        alpha = min(1.0, (1.0 - 0.99998) * b * ema_steps / epochs)
        decay = 1.0 - alpha
        ema = torch.optim.swa_utils.AveragedModel(model, avg_fn=lambda a, p, n: decay * a + (1 - decay) * p,
                                                  use_buffers=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=5e-4)
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
            target = yb
            if recipe == "adamw":
                xb, target = mix_batch(xb, yb, 0.2, 1.0, 10)
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(xb), target, label_smoothing=smoothing).backward()
            opt.step()
            if recipe != "adamw":
                sched.step()   # per step; torchvision's schedules step per epoch
            elif i % ema_steps == 0:
                ema.update_parameters(model)
                if e < 1:   # the warm-up epoch: the average keeps copying
                    ema.n_averaged.fill_(0)
        if recipe == "adamw":
            sched.step()
        top1 = evaluate(model, xt, yt)
        if ema is not None:
            ema_top1 = evaluate(ema, xt, yt)
        print("torch epoch %d: validation top-1 %.2f%%%s (%.0f s)" % (
            e, top1, "" if ema is None else ", EMA %.2f%%" % ema_top1, time.perf_counter() - t0), flush=True)
    print("torch fmnist resnet20: %d epochs, top-1 %.2f%%, %.1f s%s" % (
        epochs, top1, time.perf_counter() - t0, "" if ema is None else ", EMA top-1 %.2f%%" % ema_top1))


if __name__ == "__main__":
    main()
