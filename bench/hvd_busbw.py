#!/usr/bin/env python3
"""One side of bench/hvd_busbw.sh: all-reduce time against message size on CPU ranks under mpirun.

Usage: hvd_busbw.py libdt|gloo MAX_BYTES MAX_ITERS
  libdt: dtrain.torch's hvd.allreduce_ (Horovod's API on libdt), op Sum
  gloo:  torch.distributed's all_reduce over gloo, op SUM (MASTER_ADDR and MASTER_PORT from the
         caller, rank and size from mpirun's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE)
A float32 CPU tensor of 8 bytes, then 4 times as many up to MAX_BYTES (MAX_BYTES itself last when it
is not such a size). Each size: one all-reduce checked against the sum of the ranks' known values,
warm-up, then the ranks time ITERS all-reduces in a row after a barrier (ITERS: 512 MiB worth of
messages, between 5 and MAX_ITERS); the time of a size is the slowest rank's mean. Rank 0 prints
  SIZE_BYTES TIME_US ALGBW_GBS BUSBW_GBS
per size, with nccl-tests' definitions: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n, the
bytes each rank sends and receives in a ring all-reduce over the time (GB = 1e9 bytes).
"""
import os
import sys
import time

import torch


def sizes(max_bytes):
    s, out = 8, []
    while s <= max_bytes:
        out.append(s)
        s *= 4
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def main():
    backend, max_bytes, max_iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    if backend == "libdt":
        import dtrain.torch as hvd
        hvd.init()
        rank, world = hvd.rank(), hvd.size()

        def allreduce(t):
            hvd.allreduce_(t, op=hvd.Sum, name="busbw")

        def slowest(seconds):
            return hvd.allreduce(torch.tensor([seconds], dtype=torch.float64), op=hvd.Max, name="time").item()

        barrier = hvd.barrier
    elif backend == "gloo":
        import torch.distributed as dist
        rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=world)

        def allreduce(t):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)

        def slowest(seconds):
            t = torch.tensor([seconds], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.item()

        barrier = dist.barrier
    else:
        sys.exit("hvd_busbw.py: backend '%s': expected libdt or gloo" % backend)

    for nbytes in sizes(max_bytes):
        n = nbytes // 4
        # rank r gives r + 1 everywhere: the sum is world (world + 1) / 2, exact in float32
        t = torch.full((n,), float(rank + 1))
        allreduce(t)
        want = world * (world + 1) / 2
        if not bool((t == want).all()):
            sys.exit("hvd_busbw.py: %s all-reduce of %d bytes: got %s, expected %g everywhere" %
                     (backend, nbytes, t[:4].tolist(), want))
        t.zero_()   # zeros stay zeros however often they are summed
        iters = max(5, min(max_iters, (512 << 20) // nbytes))
        for _ in range(max(2, iters // 10)):
            allreduce(t)
        barrier()
        start = time.perf_counter()
        for _ in range(iters):
            allreduce(t)
        seconds = slowest((time.perf_counter() - start) / iters)
        if rank == 0:
            algbw = nbytes / seconds / 1e9
            print("%d %.1f %.6g %.6g" % (nbytes, seconds * 1e6, algbw, algbw * 2 * (world - 1) / world), flush=True)
    if backend == "gloo":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
