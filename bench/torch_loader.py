#!/usr/bin/env python3
"""PyTorch's side of bench/loader.sh: torchvision ImageFolder + DataLoader throughput.

Usage: torch_loader.py TREE WORKERS BATCH EPOCHS [CROP]
The same augmentation as dtrain's training loader: RandomResizedCrop(CROP) + RandomHorizontalFlip,
output uint8 tensors (PILToTensor: normalisation belongs on the device, as in dtrain). Prints:
  torch loader: N images, W workers: X img/s (Y img/s per worker)
"""
import sys
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as T


def main():
    tree, workers, batch, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    crop = int(sys.argv[5]) if len(sys.argv) > 5 else 224
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(crop), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = datasets.ImageFolder(tree, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     persistent_workers=True, prefetch_factor=2)
    it = iter(dl)  # warm-up: workers started, first batches made
    for _ in range(2):
        next(it)
    del it
    n, t0 = 0, time.perf_counter()
    for _ in range(epochs):
        for x, y in dl:
            n += x.shape[0]
    dt = time.perf_counter() - t0
    print("torch loader: %d images, %d workers: %.1f img/s (%.1f img/s per worker)" % (n, workers, n / dt,
                                                                                      n / dt / workers))


if __name__ == "__main__":
    main()
