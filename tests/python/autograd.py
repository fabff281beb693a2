# autograd.py: gradients through dtrain.torch's out-of-place collectives (src/python/autograd.c,
# Horovod's HorovodAllreduce, HorovodAllgather, HorovodBroadcast, HorovodAlltoall,
# HorovodReducescatter), run by tests/python/hvd_autograd.sh on 1, 2 and 3 ranks.
# Each check: x a per-rank tensor that requires grad, y = hvd.op(x), loss = (y * w).sum() with a
# per-rank weight w known to every rank (weight(r, shape)), loss.backward(); x.grad is compared with
# the value computed here from the weights alone (float64, small integers: exact):
#   allreduce      op's gradient: sum over ranks of w (Sum), times prescale * postscale / size (Average)
#   allgather      the average over ranks of w's rows that hold this rank's x
#   broadcast      on the root, the average over ranks of w; zeros elsewhere
#   alltoall       the rows of each receiver's w that hold what this rank sent it
#   reducescatter  the ranks' w concatenated, times size for Sum (Horovod's scaling)
# Prints "rank R of S: all N checks passed", or FAIL lines and exit status 1.
import sys

import torch

import dtrain.torch as hvd

checks = 0
failures = []


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def same(got, want, what):
    ok = got is not None and got.shape == want.shape and torch.equal(got.double(), want.double())
    check(ok, "%s: got %s, want %s" % (what, got, want))


def weight(r, shape):
    """rank r's weight: small distinct integers (exact in float64 sums)"""
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=torch.float64) % 7 + 1 + 10 * r).reshape(shape)


def grad_of(fn, x, shape_of_y=None):
    """x.grad after loss = (fn(x) * w_rank).sum(); also fn(x)"""
    y = fn(x)
    out = y[0] if isinstance(y, tuple) else y
    w = weight(hvd.rank(), out.shape).to(out.dtype)
    (out * w).sum().backward()
    return x.grad, y


hvd.init()
size, rank = hvd.size(), hvd.rank()
f64 = torch.float64

# ---- allreduce ----
x = torch.arange(4, dtype=f64).add(rank).requires_grad_()
g, y = grad_of(lambda t: hvd.allreduce(t, op=hvd.Sum, name="ag.allreduce.sum"), x)
check(y.requires_grad, "allreduce: the output does not require grad")
same(y.detach(), sum(torch.arange(4, dtype=f64) + r for r in range(size)), "allreduce Sum: value")
same(g, sum(weight(r, (4,)) for r in range(size)), "allreduce Sum: x.grad")

x = torch.arange(6, dtype=f64).reshape(2, 3).requires_grad_()
g, y = grad_of(lambda t: hvd.allreduce(t, name="ag.allreduce.avg", prescale_factor=2.0, postscale_factor=0.5), x)
same(g, sum(weight(r, (2, 3)) for r in range(size)) * (2.0 * 0.5) / size, "allreduce Average with scales: x.grad")

# unnamed, positional arguments (average=False: Sum), fp16 compression around the Function
x = torch.ones(3, dtype=torch.float32).requires_grad_()
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    g, y = grad_of(lambda t: hvd.allreduce(t, False, None, hvd.Compression.fp16), x)
check(y.dtype == torch.float32, "allreduce fp16: output dtype %s" % y.dtype)
same(g, sum(weight(r, (3,)) for r in range(size)), "allreduce unnamed Sum fp16: x.grad")
check(g is not None and g.dtype == torch.float32, "allreduce fp16: x.grad dtype")

# ---- allgather: rank r has r + 1 rows ----
rows = [r + 1 for r in range(size)]
off = sum(rows[:rank])
x = torch.full((rows[rank], 2), float(rank), dtype=f64).requires_grad_()
g, y = grad_of(lambda t: hvd.allgather(t, name="ag.allgather"), x)
check(tuple(y.shape) == (sum(rows), 2), "allgather: shape %s" % (tuple(y.shape),))
want = sum(weight(r, (sum(rows), 2)) for r in range(size))[off:off + rows[rank]] / size
same(g, want, "allgather: x.grad")

# ---- broadcast ----
root = size - 1
x = (torch.arange(5, dtype=f64) * (rank + 1)).requires_grad_()
g, y = grad_of(lambda t: hvd.broadcast(t, root, name="ag.broadcast"), x)
same(y.detach(), torch.arange(5, dtype=f64) * (root + 1), "broadcast: value")
want = sum(weight(r, (5,)) for r in range(size)) / size if rank == root else torch.zeros(5, dtype=f64)
same(g, want, "broadcast: x.grad")

# ---- alltoall with splits: rank s sends splits(s)[d] rows to rank d ----
def splits(s):
    return [(s + d) % 2 + 1 for d in range(size)]


x = (torch.arange(sum(splits(rank)) * 2, dtype=f64).reshape(-1, 2) + 100 * rank).requires_grad_()
g, y = grad_of(lambda t: hvd.alltoall(t, splits=torch.tensor(splits(rank), dtype=torch.int32), name="ag.alltoall"), x)
check(isinstance(y, tuple) and len(y) == 2 and not y[1].requires_grad, "alltoall: (tensor, splits) expected")
want = []
for d in range(size):
    recv = [splits(s)[d] for s in range(size)]  # what rank d receives from each rank
    wd = weight(d, (sum(recv), 2))
    start = sum(recv[:rank])
    want.append(wd[start:start + splits(rank)[d]])
same(g, torch.cat(want), "alltoall: x.grad")

# alltoall without splits: 2 rows to each rank, the tensor alone
x = torch.ones(2 * size, 3, dtype=f64).requires_grad_()
g, y = grad_of(lambda t: hvd.alltoall(t, name="ag.alltoall.even"), x)
check(isinstance(y, torch.Tensor), "alltoall without splits: a tensor expected")
same(g, torch.cat([weight(d, (2 * size, 3))[2 * rank:2 * rank + 2] for d in range(size)]), "alltoall even: x.grad")

# ---- reducescatter: 2 rows to each rank ----
x = torch.ones(2 * size, 3, dtype=f64).requires_grad_()
g, y = grad_of(lambda t: hvd.reducescatter(t, name="ag.reducescatter.sum", op=hvd.Sum), x)
check(tuple(y.shape) == (2, 3), "reducescatter: shape %s" % (tuple(y.shape),))
same(g, torch.cat([weight(r, (2, 3)) for r in range(size)]) * size, "reducescatter Sum: x.grad")

x = torch.ones(2 * size, 3, dtype=f64).requires_grad_()
g, y = grad_of(lambda t: hvd.reducescatter(t, name="ag.reducescatter.avg", postscale_factor=3.0), x)
same(g, torch.cat([weight(r, (2, 3)) for r in range(size)]) * 3.0, "reducescatter Average, postscale 3: x.grad")

# ---- the direct path: no grad wanted, no autograd ----
y = hvd.allreduce(torch.ones(2), name="ag.nograd")
check(not y.requires_grad and y.grad_fn is None, "allreduce of a tensor without grad: output requires grad")
with torch.no_grad():
    y = hvd.allgather(torch.ones(2, requires_grad=True), name="ag.nograd.mode")
check(not y.requires_grad, "allgather under no_grad: output requires grad")

if failures:
    for f in failures:
        print("rank %d of %d: FAIL %s" % (rank, size, f))
    sys.exit(1)
print("rank %d of %d: all %d checks passed" % (rank, size, checks))
