#!/usr/bin/env python3
"""One side of bench/hvd_ddp.sh: the training step time of a torchvision model on CPU ranks under mpirun.

Usage: hvd_ddp.py libdt|ddp ARCH GLOBAL_BATCH SIZE STEPS
  libdt: dtrain.torch's DistributedOptimizer (Horovod's API on libdt: gradients all-reduced as
         backward produces them, step() waits), after broadcast_parameters
  ddp:   torch's DistributedDataParallel over gloo (MASTER_ADDR and MASTER_PORT from the caller,
         rank and size from mpirun's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE)
The model is torchvision's ARCH with 10 classes; each rank trains on its own fixed synthetic batch of
GLOBAL_BATCH / ranks images of SIZE x SIZE (the global batch is the same for any number of ranks),
SGD with momentum. 3 warm-up steps, then STEPS timed between barriers. Threads per rank: torch's
default, OMP_NUM_THREADS (the caller's cores / ranks). Rank 0 prints
  SIDE ARCH ranks N: X ms/step
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torchvision


def main():
    side, arch, global_batch, size, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    if side == "libdt":
        import dtrain.torch as hvd
        hvd.init()
        rank, world = hvd.rank(), hvd.size()
        barrier = hvd.barrier
    elif side == "ddp":
        import torch.distributed as dist
        rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=world)
        barrier = dist.barrier
    else:
        sys.exit("hvd_ddp.py: side '%s': expected libdt or ddp" % side)
    if global_batch % world != 0:
        sys.exit("hvd_ddp.py: global batch %d does not split over %d ranks" % (global_batch, world))

    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    if side == "libdt":
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    else:
        model = nn.parallel.DistributedDataParallel(model)   # broadcasts rank 0's weights itself
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(global_batch // world, 3, size, size, generator=g)
    y = torch.randint(0, 10, (global_batch // world,), generator=g)
    crit = nn.CrossEntropyLoss()
    for s in range(steps + 3):
        if s == 3:
            barrier()
            start = time.perf_counter()
        opt.zero_grad()
        crit(model(x), y).backward()
        opt.step()
    barrier()
    if rank == 0:
        print("%s %s ranks %d: %.1f ms/step" % (side, arch, world, (time.perf_counter() - start) / steps * 1e3), flush=True)
    if side == "ddp":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
