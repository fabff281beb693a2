#!/usr/bin/env python3
"""PyTorch's side of an op-by-op comparison with DT_PROFILE=1 bench/bench_train (bench/README.md).

Usage: torch_profile.py ARCH BATCH SIZE STEPS THREADS MEMORY_FORMAT [ROWS]
Trains ARCH as torch_train.py does at O0 (same model, recipe and synthetic input; 2 warm-up
steps), profiles STEPS steps with torch.profiler on the CPU, and prints ms per step of the ROWS
(default 16) aten ops with the most self time, with their calls per step, then the total. Self
time: an op's own time without the ops it calls (convolution_backward's oneDNN call counts there,
not in a reorder it runs). Instruction set and threads as torch_train.py (ATEN_CPU_CAPABILITY,
ONEDNN_MAX_CPU_ISA, THREADS). Not a test: numbers vary with the machine's load.
"""
import os
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import build  # noqa: E402  (the same models as the throughput benchmark)


def main():
    if len(sys.argv) not in (7, 8):
        raise SystemExit("usage: torch_profile.py ARCH BATCH SIZE STEPS THREADS MEMORY_FORMAT [ROWS]")
    arch, batch, size, steps, threads, fmt = sys.argv[1:7]
    rows = int(sys.argv[7]) if len(sys.argv) > 7 else 16
    batch, size, steps, threads = int(batch), int(size), int(steps), int(threads)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    model = build(arch, 3).to(memory_format=mf).train()
    x = torch.randn(batch, 3, size, size).to(memory_format=mf)
    y = torch.randint(0, 1000, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    crit = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        crit(model(x), y).backward()
        opt.step()

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - t0) / steps * 1e3
    events = prof.key_averages()
    table = sorted(((e.self_cpu_time_total / steps / 1e3, e.count / steps, e.key) for e in events), reverse=True)
    total = sum(t for t, _, _ in table)
    print("torch %s b%d %dx%d threads %d %s: ms per step by aten op (self time), %d steps" %
          (arch, batch, size, size, threads, fmt, steps))
    for t, calls, key in table[:rows]:
        print("%-44s %9.1f ms %6.1f calls %5.1f%%" % (key, t, calls, 100 * t / total if total else 0))
    print("%-44s %9.1f ms (wall %.1f ms per step under the profiler)" % ("total", total, wall))


if __name__ == "__main__":
    main()
