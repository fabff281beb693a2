"""equivalence.py: data parallelism through dtrain.torch is the same training as one process on
the whole batch (run by tests/python/hvd_train.sh on 1 process and under mpirun -np 2 and 3).

A small conv + linear model, float64, SGD with momentum, a mean-reduced loss: the whole batch's
gradient is then the average of the equal shares' gradients, so S ranks with DistributedOptimizer
(op Average), each on its 1/S of every batch, must end with the weights of one process trained on
the whole batches: each rank computes that one-process run itself (no collectives in it) and
compares. The control: the same S-rank training with the plain optimizer (nothing all-reduced)
must end far from it (for S > 1), so the comparison can fail. Rank 0 starts the weights
(broadcast_parameters) and the optimizer state (broadcast_optimizer_state), as a Horovod script
does; the ranks' own initial weights differ. Exit 1 on failure, 77 without torch."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: no torch for", sys.executable)
    sys.exit(77)
import dtrain.torch as hvd

STEPS, BATCH, TOL = 5, 12, 1e-10  # BATCH divides evenly by 1, 2 and 3 ranks

hvd.init()
R, S = hvd.rank(), hvd.size()


def model_for(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 3)).double()


def batch(step):
    g = torch.Generator().manual_seed(9000 + step)
    return torch.randn(BATCH, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 3, (BATCH,), generator=g)


def train(distributed, share):
    """the weights after STEPS steps on rows `share` of each batch"""
    model = model_for(0 if distributed is None or R == 0 else 100 + R)  # the others start apart: rank 0's win
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if distributed is not None:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[share]), y[share]).backward()  # mean over the rows
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


mine = slice(R * BATCH // S, (R + 1) * BATCH // S)
whole = train(None, slice(0, BATCH))  # one process, the whole batch: no collective
dist = train(True, mine)
plain = train(False, mine)
err = (dist - whole).abs().max().item()
off = (plain - whole).abs().max().item()
print("rank %d of %d: |DistributedOptimizer - one process| %.3g, |plain optimizer - one process| %.3g"
      % (R, S, err, off), flush=True)
if not err <= TOL:
    print("FAIL: rank %d: %d ranks with DistributedOptimizer differ from one process on the whole batch by %.3g "
          "(tolerance %.0e)" % (R, S, err, TOL), flush=True)
    sys.exit(1)
if S > 1 and not off > 1e4 * TOL:
    print("FAIL: rank %d: without the all-reduce the weights differ from one process by only %.3g: the "
          "comparison could not fail" % (R, off), flush=True)
    sys.exit(1)
if R == 0:
    print("ok: %d rank%s x %d rows, %d steps of SGD with momentum: the weights of one process on %d rows within %.0e "
          "(%.3g); without the all-reduce %.3g apart" % (S, "" if S == 1 else "s", BATCH // S, STEPS, BATCH, TOL, err,
                                                        off), flush=True)
