#!/usr/bin/env python3
"""PyTorch's side of bench/ddp.sh: DistributedDataParallel (gloo) step time on the CPU.

Usage: torch_ddp.py ARCH BATCH SIZE STEPS WORLD
Spawns WORLD processes with one thread each; every rank trains on its own synthetic batch
(forward, backward with DDP's all-reduce, SGD); rank 0 prints
  torch ddp ARCH ranks W: X ms/step
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_fixtures import resnet18_small  # noqa: E402


def run(rank, world, arch, batch, size, steps, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    m = resnet18_small() if arch == "resnet18_small" else getattr(__import__("torchvision").models, arch)()
    m.fc = nn.Linear(m.fc.in_features, 1000)
    model = nn.parallel.DistributedDataParallel(m)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, 1000, (batch,))
    crit = nn.CrossEntropyLoss()
    for s in range(steps + 2):
        if s == 2:
            dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        crit(model(x), y).backward()
        opt.step()
    dist.barrier()
    if rank == 0:
        print("torch ddp %s ranks %d: %.1f ms/step" % (arch, world, (time.perf_counter() - t0) / steps * 1e3))
    dist.destroy_process_group()


def main():
    arch, batch, size, steps, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    with socket.socket() as s:  # a port free now: one taken from the pid can be another run's
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(world, arch, batch, size, steps, port), nprocs=world, join=True)


if __name__ == "__main__":
    main()
