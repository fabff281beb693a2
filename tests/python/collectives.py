# collectives.py: every collective of dtrain.torch (Horovod's PyTorch API in C, src/python/torch.c)
# on CPU tensors, run by tests/python/hvd_mpi.sh on 1, 2 and 3 ranks. Each rank makes the tensors of
# every rank from a formula (rank_tensor), so it computes each expected result alone (the sum of the
# known per-rank tensors, their concatenation in rank order, ...), in float64, and compares.
# Prints one line per rank: "rank R of S: all N checks passed", or "rank R of S: FAIL ..." lines and
# exit status 1.
import os
import sys
import time
import warnings

import torch

import dtrain.torch as hvd

checks = 0
failures = []

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8,
          torch.int8]
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
TOL = {torch.float32: 1e-6, torch.float64: 1e-12, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def same(got, want, what):
    """got equals want (a float64 tensor) after rounding want to got's dtype, within the dtype's
    relative tolerance for floats; shapes and dtypes must match exactly."""
    if not isinstance(got, torch.Tensor):
        check(False, "%s: got %r, not a tensor" % (what, type(got)))
        return
    if tuple(got.shape) != tuple(want.shape):
        check(False, "%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape)))
        return
    if got.dtype.is_floating_point:
        tol = TOL[got.dtype]
        ok = torch.allclose(got.double(), want.to(got.dtype).double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want.to(got.dtype))
    check(ok, "%s: got %s, expected %s" % (what, got.tolist(), want.tolist()))


def expect_error(exc, needle, what, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        check(needle in str(e), "%s: message %r does not name %r" % (what, str(e), needle))
        return str(e)
    except Exception as e:  # the wrong kind
        check(False, "%s: raised %s (%s), expected %s" % (what, type(e).__name__, e, exc.__name__))
        return None
    check(False, "%s: did not raise %s" % (what, exc.__name__))
    return None


def rank_tensor(r, shape=(2, 3), dtype=torch.float64):
    """rank r's tensor: small whole numbers 1..5 (exact in every dtype, products of 3 ranks fit int8)"""
    n = 1
    for d in shape:
        n *= d
    v = (torch.arange(n, dtype=torch.float64) * 7 + r * 3) % 5 + 1
    return v.reshape(shape).to(dtype)


def reduce_ranks(ts, op, size):
    s = torch.stack([t.double() for t in ts])
    if op == hvd.Sum:
        return s.sum(0)
    if op == hvd.Average:
        return s.sum(0) / size
    if op == hvd.Min:
        return s.min(0).values
    if op == hvd.Max:
        return s.max(0).values
    if op == hvd.Product:
        return s.prod(0)
    raise ValueError(op)


def even_rows(rows, size, r):
    """libdt's split of rows when none is given (dt.h): the first rows % size ranks one more"""
    return rows // size + (1 if r < rows % size else 0)


def main():
    # before init: the basics refuse, as Horovod's
    check(not hvd.is_initialized(), "is_initialized() before init")
    expect_error(ValueError, "init", "size() before init", hvd.size)
    hvd.init()
    size, rank = hvd.size(), hvd.rank()
    print_prefix = "rank %d of %d" % (rank, size)

    # ---- basics
    import dtrain.torch.horovod as hvd2
    check(hvd2 is hvd and hvd.horovod is hvd, "dtrain.torch.horovod is not dtrain.torch")
    check(hvd.is_initialized(), "is_initialized() after init")
    want_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    want_rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    check((size, rank) == (want_size, want_rank), "size, rank %s, mpirun says %s" % ((size, rank), (want_size, want_rank)))
    # every rank on this one machine
    check((hvd.local_size(), hvd.local_rank()) == (size, rank), "local_size, local_rank")
    check((hvd.cross_size(), hvd.cross_rank()) == (1, 0), "cross_size, cross_rank")
    check(hvd.mpi_built() == (os.environ.get("DT_HAVE_MPI") == "yes"), "mpi_built() against the build")
    check(hvd.gloo_built() is False and hvd.mpi_threads_supported() is True, "gloo_built, mpi_threads_supported")
    check(len({hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product}) == 6, "op constants distinct")
    check(issubclass(hvd.HorovodInternalError, RuntimeError), "HorovodInternalError is a RuntimeError")

    ranks = range(size)

    # ---- allreduce: every op and dtype, out of place and in place
    for dt in DTYPES:
        ops = [hvd.Sum, hvd.Min, hvd.Max, hvd.Product] + ([hvd.Average] if dt in FLOATS else [])
        for op in ops:
            what = "allreduce %s op %d" % (dt, op)
            mine = rank_tensor(rank, dtype=dt)
            want = reduce_ranks([rank_tensor(r, dtype=dt) for r in ranks], op, size)
            before = mine.clone()
            got = hvd.allreduce(mine, name="ar.%s.%d" % (dt, op), op=op)
            same(got, want, what)
            check(got is not mine and torch.equal(mine, before), what + ": the input changed")
            t = rank_tensor(rank, dtype=dt)
            got = hvd.allreduce_(t, op=op)  # unnamed: libdt numbers it, the same on every rank
            check(got is t, what + ": allreduce_ did not return its tensor")
            same(t, want, what + " in place")
    # the default op is Average, and average=False (deprecated) means Sum
    same(hvd.allreduce(rank_tensor(rank)), reduce_ranks([rank_tensor(r) for r in ranks], hvd.Average, size),
         "allreduce default op")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        same(hvd.allreduce(rank_tensor(rank), average=False),
             reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce average=False")
    # prescale and postscale
    for dt in (torch.float32, torch.float64):
        got = hvd.allreduce(rank_tensor(rank, dtype=dt), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
        same(got, reduce_ranks([rank_tensor(r) * 0.5 for r in ranks], hvd.Sum, size) * 3.0, "allreduce scaled %s" % dt)
        got = hvd.allreduce(rank_tensor(rank, dtype=dt), op=hvd.Average, prescale_factor=2.0, postscale_factor=0.25)
        same(got, reduce_ranks([rank_tensor(r) * 2 for r in ranks], hvd.Average, size) * 0.25,
             "allreduce Average scaled %s" % dt)
    # a non-contiguous tensor, in place and out of place
    want = reduce_ranks([rank_tensor(r, (3, 4)) for r in ranks], hvd.Sum, size).t()
    t = rank_tensor(rank, (3, 4)).t()
    check(not t.is_contiguous(), "the transposed tensor is contiguous")
    same(hvd.allreduce(t, op=hvd.Sum), want, "allreduce of a transposed tensor")
    hvd.allreduce_(t, op=hvd.Sum)
    same(t, want, "allreduce_ of a transposed tensor")
    # a scalar
    same(hvd.allreduce(torch.tensor(float(rank + 1)), op=hvd.Sum), torch.tensor(float(size * (size + 1) // 2)),
         "allreduce of a scalar")
    # a compression: compress and decompress are called, the reduction runs on the compressed tensor
    class Cast:
        calls = []

        @staticmethod
        def compress(t):
            Cast.calls.append("c")
            return t.double(), t.dtype

        @staticmethod
        def decompress(t, ctx):
            Cast.calls.append("d:%s" % t.dtype)
            return t.to(ctx)

    got = hvd.allreduce(rank_tensor(rank, dtype=torch.float32), op=hvd.Sum, compression=Cast)
    same(got, reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce with compression")
    check(Cast.calls == ["c", "d:torch.float64"] and got.dtype == torch.float32,
          "compression calls %s, result %s" % (Cast.calls, got.dtype))

    # train.c's compressions through allreduce (fp16: small whole numbers stay exact)
    if hasattr(hvd, "Compression"):
        for c in (hvd.Compression.none, hvd.Compression.fp16):
            got = hvd.allreduce(rank_tensor(rank, dtype=torch.float32), op=hvd.Sum, compression=c)
            same(got, reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce with %s" % c)
            check(got.dtype == torch.float32, "allreduce with %s gave %s" % (c, got.dtype))

    # ---- async, poll, synchronize
    h = hvd.allreduce_async(rank_tensor(rank), name="async.a", op=hvd.Sum)
    check(isinstance(h, int), "allreduce_async's handle is an int")
    deadline = time.time() + 30
    while not hvd.poll(h) and time.time() < deadline:
        time.sleep(0.001)
    check(hvd.poll(h) is True, "poll never became True")
    same(hvd.synchronize(h), reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce_async")
    check(hvd.synchronize(h) is None, "a second synchronize of a handle gives None")
    expect_error(ValueError, "handle", "poll of a synchronized handle", hvd.poll, h)
    t = rank_tensor(rank, (4,))
    h = hvd.allreduce_async_(t, name="async.b", op=hvd.Max)
    got = hvd.synchronize(h)
    check(got is t, "allreduce_async_ + synchronize returns the tensor")
    same(t, reduce_ranks([rank_tensor(r, (4,)) for r in ranks], hvd.Max, size), "allreduce_async_")
    # several in flight at once, synchronized in reverse order
    hs = [hvd.allreduce_async(rank_tensor(rank, (i + 1,)) * (i + 1), name="many.%d" % i, op=hvd.Sum) for i in range(5)]
    for i in reversed(range(5)):
        same(hvd.synchronize(hs[i]), reduce_ranks([rank_tensor(r, (i + 1,)) * (i + 1) for r in ranks], hvd.Sum, size),
             "allreduce many.%d" % i)

    # ---- grouped allreduce
    shapes = [(2,), (3, 2), (1,)]
    group = [rank_tensor(rank, s) for s in shapes]
    wants = [reduce_ranks([rank_tensor(r, s) for r in ranks], hvd.Sum, size) for s in shapes]
    got = hvd.grouped_allreduce(group, name="grp.a", op=hvd.Sum)
    check(isinstance(got, list) and len(got) == 3, "grouped_allreduce returns a list of 3")
    for i in range(3):
        same(got[i], wants[i], "grouped_allreduce[%d]" % i)
    got = hvd.grouped_allreduce_(group, op=hvd.Sum)
    for i in range(3):
        check(got[i] is group[i], "grouped_allreduce_[%d] is its tensor" % i)
        same(group[i], wants[i], "grouped_allreduce_[%d]" % i)
    h = hvd.grouped_allreduce_async(tensors=[rank_tensor(rank, s) for s in shapes], name="grp.b")
    got = hvd.synchronize(h)
    for i in range(3):
        same(got[i], reduce_ranks([rank_tensor(r, shapes[i]) for r in ranks], hvd.Average, size),
             "grouped_allreduce_async[%d]" % i)
    group = [rank_tensor(rank, s) for s in shapes]
    hvd.synchronize(hvd.grouped_allreduce_async_(group, name="grp.c", op=hvd.Min))
    for i in range(3):
        same(group[i], reduce_ranks([rank_tensor(r, shapes[i]) for r in ranks], hvd.Min, size),
             "grouped_allreduce_async_[%d]" % i)

    # ---- allgather: a first dimension that differs between ranks, every dtype
    for dt in DTYPES:
        mine = rank_tensor(rank, (rank + 1, 2), dt)
        want = torch.cat([rank_tensor(r, (r + 1, 2)).double() for r in ranks])
        same(hvd.allgather(mine, name="ag.%s" % dt), want, "allgather %s" % dt)
    h = hvd.allgather_async(rank_tensor(rank, (2, 2)) + rank, name="ag.async")
    same(hvd.synchronize(h), torch.cat([rank_tensor(r, (2, 2)) + r for r in ranks]), "allgather_async")
    # a rank with no rows
    mine = rank_tensor(rank, (rank % 2, 3))
    same(hvd.allgather(mine, name="ag.empty"), torch.cat([rank_tensor(r, (r % 2, 3)) for r in ranks]),
         "allgather with empty ranks")

    # ---- broadcast from the last rank (a non-zero root when there are several)
    root = size - 1
    for dt in DTYPES:
        mine = rank_tensor(rank, (3,), dt) * 0 + rank
        before = mine.clone()
        got = hvd.broadcast(mine, root, name="bc.%s" % dt)
        same(got, torch.full((3,), float(root)), "broadcast %s" % dt)
        check(torch.equal(mine, before), "broadcast changed its input")
        got = hvd.broadcast_(mine, root_rank=root)
        check(got is mine, "broadcast_ returns its tensor")
        same(mine, torch.full((3,), float(root)), "broadcast_ %s" % dt)
    h = hvd.broadcast_async(rank_tensor(rank, (2, 2)), root, name="bc.async")
    same(hvd.synchronize(h), rank_tensor(root, (2, 2)), "broadcast_async")
    t = rank_tensor(rank, (2, 3)).t()
    h = hvd.broadcast_async_(t, root, name="bc.async_")
    check(hvd.synchronize(h) is t, "broadcast_async_ returns its tensor")
    same(t, rank_tensor(root, (2, 3)).t(), "broadcast_async_ of a transposed tensor")
    expect_error(ValueError, "root_rank", "broadcast from a rank that is not", hvd.broadcast, t, size)

    # ---- alltoall: rows tagged (source, destination, index)
    def rows_for(src, splits_of):
        parts = []
        for d in ranks:
            n = splits_of(src, d)
            parts += [[src, d, k] for k in range(n)]
        return torch.tensor(parts, dtype=torch.float32).reshape(-1, 3)

    def received(splits_of):
        return torch.cat([rows_for(s, splits_of)[sum(splits_of(s, d) for d in range(rank)):][:splits_of(s, rank)]
                          for s in ranks])

    even = lambda s, d: 2
    got = hvd.alltoall(rows_for(rank, even), name="a2a.even")
    same(got, received(even), "alltoall without splits")
    uneven = lambda s, d: even_rows(2 * size + 1, size, d)  # no splits, rows not a multiple of size
    same(hvd.alltoall(rows_for(rank, uneven)), received(uneven), "alltoall without splits, uneven rows")
    given = lambda s, d: (s + d) % 3 + 1
    splits = [given(rank, d) for d in ranks]
    got = hvd.alltoall(rows_for(rank, given), splits=splits, name="a2a.splits")
    check(isinstance(got, tuple) and len(got) == 2, "alltoall with splits returns (tensor, received splits)")
    same(got[0], received(given), "alltoall with splits")
    check(got[1].dtype == torch.int32 and got[1].tolist() == [given(s, rank) for s in ranks],
          "alltoall received splits %s" % got[1])
    h = hvd.alltoall_async(rows_for(rank, given), splits=torch.tensor(splits, dtype=torch.int32), name="a2a.async")
    got = hvd.synchronize(h)
    same(got[0], received(given), "alltoall_async with splits")
    check(got[1].tolist() == [given(s, rank) for s in ranks], "alltoall_async received splits")
    expect_error(ValueError, "splits", "alltoall with too few splits", hvd.alltoall, rows_for(rank, given),
                 splits=splits + [0])

    # ---- reducescatter: rows not a multiple of the ranks; this rank keeps its rows
    rows = 2 * size + 1
    start = sum(even_rows(rows, size, r) for r in range(rank))
    mine_rows = slice(start, start + even_rows(rows, size, rank))
    per_rank = [rank_tensor(r, (rows, 2)) for r in ranks]
    same(hvd.reducescatter(rank_tensor(rank, (rows, 2), torch.float32), name="rs.avg"),
         reduce_ranks(per_rank, hvd.Average, size)[mine_rows], "reducescatter (default Average)")
    for op in (hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
        same(hvd.reducescatter(rank_tensor(rank, (rows, 2), torch.int32), op=op),
             reduce_ranks(per_rank, op, size)[mine_rows], "reducescatter int32 op %d" % op)
    same(hvd.reducescatter(rank_tensor(rank, (rows, 2)), op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0),
         reduce_ranks([t * 0.5 for t in per_rank], hvd.Sum, size)[mine_rows] * 4.0, "reducescatter scaled")
    h = hvd.reducescatter_async(rank_tensor(rank, (rows, 2), torch.float16), name="rs.async", op=hvd.Sum)
    same(hvd.synchronize(h), reduce_ranks(per_rank, hvd.Sum, size)[mine_rows], "reducescatter_async fp16")

    # ---- barrier
    check(hvd.barrier() is None, "barrier returns None")

    # ---- refused locally, with one clear error (no rank communicates)
    expect_error(NotImplementedError, "Adasum", "Adasum", hvd.allreduce, rank_tensor(rank), op=hvd.Adasum)
    expect_error(TypeError, "complex64", "a complex tensor", hvd.allreduce, torch.zeros(2, dtype=torch.complex64))
    expect_error(TypeError, "bool", "a bool tensor", hvd.allgather, torch.zeros(2, dtype=torch.bool))
    expect_error(ValueError, "int32", "Average of integers", hvd.allreduce, torch.zeros(2, dtype=torch.int32))
    expect_error(TypeError, "Tensor", "a list", hvd.allreduce, [1.0, 2.0])

    class OtherSet:
        process_set_id = 1

    expect_error(NotImplementedError, "process set", "another process set", hvd.allreduce, rank_tensor(rank),
                 process_set=OtherSet())
    same(hvd.allreduce(rank_tensor(rank), op=hvd.Sum, process_set=hvd.global_process_set),
         reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce on global_process_set")

    # ---- mismatches across ranks: the operation fails on every rank, naming the tensor
    if size > 1:
        shape = (3,) if rank == 1 else (2,)
        msg = expect_error(hvd.HorovodInternalError, "'x'", "shape mismatch", hvd.allreduce, torch.ones(shape),
                           name="x")
        check(msg is not None and "shape" in msg, "shape mismatch message %r does not say shape" % msg)
        dt = torch.float64 if rank == 1 else torch.float32
        msg = expect_error(hvd.HorovodInternalError, "'y'", "type mismatch", hvd.allreduce, torch.ones(2, dtype=dt),
                           name="y")
        check(msg is not None and "float" in msg, "type mismatch message %r does not name the types" % msg)
        msg = expect_error(hvd.HorovodInternalError, "'z'", "op mismatch", hvd.allreduce, torch.ones(2),
                           name="z", op=hvd.Sum if rank == 0 else hvd.Max)
        # the ranks go on
        same(hvd.allreduce(rank_tensor(rank), name="after", op=hvd.Sum),
             reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce after the mismatches")

    # ---- join with uneven data: rank 0 has one more batch than the others, whose part is zeros
    same(hvd.allreduce(rank_tensor(rank), name="join.a", op=hvd.Sum),
         reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce before join")
    if rank == 0:
        same(hvd.allreduce(rank_tensor(0, (5,)), name="join.b", op=hvd.Sum), rank_tensor(0, (5,)),
             "rank 0's extra allreduce (the joined ranks give zeros)")
    last = hvd.join()
    check(last == 0, "join returned %r, expected 0 (rank 0 joined last)" % last)
    same(hvd.allreduce(rank_tensor(rank), name="join.after", op=hvd.Sum),
         reduce_ranks([rank_tensor(r) for r in ranks], hvd.Sum, size), "allreduce after join")

    hvd.shutdown()
    check(not hvd.is_initialized(), "is_initialized() after shutdown")

    # one write per rank: mpirun interleaves what the ranks print
    if failures:
        say("".join("%s: FAIL %s\n" % (print_prefix, f) for f in failures) +
            "%s: %d of %d checks failed\n" % (print_prefix, len(failures), checks))
        return 1
    say("%s: all %d checks passed\n" % (print_prefix, checks))
    return 0


def say(text):
    sys.stdout.flush()
    os.write(1, text.encode())


if __name__ == "__main__":
    sys.exit(main())
