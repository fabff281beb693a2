"""training.py: dtrain.torch's training helpers (Compression, DistributedOptimizer,
broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object,
SyncBatchNorm), run by tests/python/hvd_train.sh on 1 process and under mpirun -np 2 and 3.

Every check computes what it expects without the helper under test: each rank's inputs are a
function of (seed, rank), so every rank can compute every other rank's, and the expected value is
their sum, average, concatenation or root's, computed locally (or by torch's own BatchNorm on the
concatenated batch). A failed check raises; the script then exits 1 (exit 77: torch missing)."""
import sys
import warnings

try:
    import torch
except ImportError:
    print("SKIP: no torch for", sys.executable)
    sys.exit(77)
import dtrain.torch as hvd

hvd.init()
R, S = hvd.rank(), hvd.size()
torch.manual_seed(1234)


def say(msg):
    if R == 0:
        print("ok:", msg, flush=True)


def close(a, b, tol, what):
    err = (a - b).abs().max().item() if a.numel() else 0.0
    if not err <= tol:
        raise AssertionError("%s: max |difference| %.3g > %.3g (rank %d of %d)" % (what, err, tol, R, S))


def raises(exc, fn, words, what):
    try:
        fn()
    except exc as e:
        if words not in str(e):
            raise AssertionError("%s: %s raised, but without %r: %s" % (what, exc.__name__, words, e))
        return
    raise AssertionError("%s: %s not raised" % (what, exc.__name__))


def grads_of(r, n, seed):
    """rank r's gradient source: a vector of n values, a function of (seed, r)"""
    g = torch.Generator().manual_seed(seed * 100 + r)
    return torch.randn(n, generator=g, dtype=torch.float64)


class Lin(torch.nn.Module):
    """loss = sum(w * x) + sum(b * x[:2]): dloss/dw = x exactly, so gradients are chosen inputs"""

    def __init__(self, n=6):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(n, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))

    def loss(self, x):
        return (self.w * x).sum() + (self.b * x[:2]).sum()


def check_compression():
    C = hvd.Compression
    t = torch.arange(4, dtype=torch.float32)
    c, ctx = C.none.compress(t)
    assert c is t and C.none.decompress(c, ctx) is t, "Compression.none changed its tensor"
    i = torch.arange(5, dtype=torch.int32)
    c, ctx = C.fp16.compress(i)
    assert c.dtype == torch.int32 and torch.equal(C.fp16.decompress(c, ctx), i), "fp16 compression changed an int tensor"
    # k/256 in [0.5, 1) is exact in fp16; + 1e-4 is not and rounds away (half an fp16 ulp there is
    # 2.4e-4), and sums of up to 3 such values stay exact: the all-reduced result is the sum of the
    # fp16 values, visibly not the float32 sum
    ks = lambda r: torch.tensor([128 + 7 * r, 200 + r, 255 - 3 * r, 130], dtype=torch.float64)
    x = (ks(R) / 256 + 1e-4).float()
    c, ctx = C.fp16.compress(x)
    assert c.dtype == torch.float16 and ctx == torch.float32, "fp16 compress gave %s, %s" % (c.dtype, ctx)
    out = C.fp16.decompress(hvd.allreduce(c, op=hvd.Sum, name="train.fp16"), ctx)
    assert out.dtype == torch.float32, "fp16 decompress gave %s" % out.dtype
    want = sum(ks(r) for r in range(S)) / 256
    close(out.double(), want, 0.0, "fp16 compressed sum")
    if (out.double() - (want + S * 1e-4)).abs().max() < 5e-5:
        raise AssertionError("fp16 compressed sum equals the float32 sum: nothing was rounded to fp16")
    # and through DistributedOptimizer: the averaged gradient of fp16-rounded values
    m = Lin(4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.0), named_parameters=m.named_parameters(),
                                   compression=C.fp16)
    xs = lambda r: (ks(r) / 256 + 1e-4)
    m.loss(xs(R)).backward()
    opt.step()
    assert m.w.grad.dtype == torch.float64, "the gradient came back as %s" % m.w.grad.dtype
    close(m.w.grad, sum(ks(r) for r in range(S)) / 256 / S, 1e-3 / S + 1e-12, "fp16-compressed averaged gradient")
    say("Compression.none/fp16: fp16 values round-trip, an fp16 all-reduce sums the fp16 values "
        "(exact), DistributedOptimizer(compression=fp16) averages them into a float64 gradient")


def check_average_and_sum():
    for op, name in ((None, "Average"), (hvd.Sum, "Sum")):
        m = Lin()
        kw = {} if op is None else {"op": op}
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.5), named_parameters=m.named_parameters(),
                                       **kw)
        m.loss(grads_of(R, 6, 1)).backward()
        opt.step()
        total = sum(grads_of(r, 6, 1) for r in range(S))
        want = total if op is not None else total / S
        close(m.w.grad, want, 1e-12, "op=%s: w's gradient" % name)
        close(m.b.grad, want[:2], 1e-12, "op=%s: b's gradient" % name)
        close(m.w.detach(), -0.5 * want, 1e-12, "op=%s: w after one SGD step" % name)
    say("DistributedOptimizer: op=Average gives the mean of the ranks' gradients, op=Sum their sum, "
        "and step() applies it")


def check_groups():
    for groups in (2, "list"):
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).double()
        g = [[m[0].weight, m[1].bias]] if groups == "list" else groups
        opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=m.named_parameters(),
                                       groups=g)
        x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(60 + R))
        m(x).pow(2).sum().backward()
        if S > 1:
            sizes = sorted(len(k) for k in opt._handles if isinstance(k, tuple))
            if sizes != ([2, 2] if groups == 2 else [1, 1, 2]) or len(opt._handles) != len(sizes):
                raise AssertionError("groups=%s: grouped all-reduces of %s parameters" % (groups, sizes))
        opt.synchronize()
        want = []
        for r in range(S):
            ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).double()
            ref.load_state_dict(m.state_dict())
            xr = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(60 + r))
            ref(xr).pow(2).sum().backward()
            want.append([p.grad for p in ref.parameters()])
        for i, p in enumerate(m.parameters()):
            close(p.grad, sum(w[i] for w in want) / S, 1e-12, "groups=%s: gradient %d" % (groups, i))
    say("groups=2 and groups=[[...]]: grouped all-reduces (2 of 2 parameters; 1 of 2 and the 2 others alone), the gradients averaged")


def check_predivide():
    seen = []
    real = hvd.allreduce_async_

    def spy(tensor, *a, **kw):
        seen.append((kw.get("prescale_factor", 1.0), kw.get("postscale_factor", 1.0)))
        return real(tensor, *a, **kw)

    m = Lin()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=m.named_parameters(),
                                   gradient_predivide_factor=4.0)
    hvd.allreduce_async_ = spy
    try:
        m.loss(grads_of(R, 6, 2)).backward()
        opt.step()
    finally:
        hvd.allreduce_async_ = real
    close(m.w.grad, sum(grads_of(r, 6, 2) for r in range(S)) / S, 1e-12, "gradient_predivide_factor=4: average")
    if S > 1 and (len(seen) != 2 or any(abs(a - 0.25) > 1e-15 or abs(b - 4.0) > 1e-15 for a, b in seen)):
        raise AssertionError("gradient_predivide_factor=4: all-reduces called with (prescale, postscale) %s, "
                             "expected (0.25, 4.0) for each of 2 parameters" % seen)
    raises(ValueError, lambda: hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), op=hvd.Sum,
                                                        gradient_predivide_factor=2.0),
           "gradient_predivide_factor not supported with op != Average", "predivide with op=Sum")
    say("gradient_predivide_factor=4: prescale 1/4 and postscale 4 around the sum, the result the average; "
        "refused with op=Sum")


def check_backward_passes():
    m = Lin()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0), named_parameters=m.named_parameters(),
                                   backward_passes_per_step=2, op=hvd.Sum)
    for rnd in range(2):
        opt.zero_grad()
        m.loss(grads_of(R, 6, 10 + rnd)).backward()
        if S > 1 and not all(h is None for h, _ in opt._handles.values()):
            raise AssertionError("backward_passes_per_step=2: an all-reduce started after the first pass")
        m.loss(grads_of(R, 6, 20 + rnd)).backward()
        opt.synchronize()
        # one all-reduce of the local sum of both passes: sum_r (a_r + b_r). An all-reduce per pass
        # would give S * sum(a) + sum(b) with op=Sum.
        want = sum(grads_of(r, 6, 10 + rnd) + grads_of(r, 6, 20 + rnd) for r in range(S))
        close(m.w.grad, want, 1e-12, "backward_passes_per_step=2, round %d: w's gradient" % rnd)
        with opt.skip_synchronize():
            opt.step()
    if S > 1:
        # a third pass before step() is an error (the second one started the all-reduce)
        opt.zero_grad()
        m.loss(grads_of(R, 6, 30)).backward()
        m.loss(grads_of(R, 6, 31)).backward()
        raises(AssertionError, lambda: m.loss(grads_of(R, 6, 32)).backward(),
               "more than backward_passes_per_step times", "a third backward pass")
        raises(AssertionError, opt.zero_grad, "before optimizer.step() or optimizer.synchronize()",
               "zero_grad with all-reduces pending")
        opt.synchronize()
        opt.zero_grad()
    say("backward_passes_per_step=2: two passes summed locally, then one all-reduce (op=Sum shows it), "
        "twice; a third pass before step() and zero_grad() while all-reduces are pending refused")


def check_synchronize_and_skip():
    m = Lin()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=1.0), named_parameters=m.named_parameters())
    m.loss(grads_of(R, 6, 40)).backward()
    opt.synchronize()
    avg = sum(grads_of(r, 6, 40) for r in range(S)) / S
    close(m.w.grad, avg, 1e-12, "synchronize(): w's gradient")
    m.w.grad.mul_(0.5)  # what clipping would do, after the reduction
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    close(m.w.detach(), -0.5 * avg, 1e-12, "step() inside skip_synchronize() uses the modified gradient")
    m.loss(grads_of(R, 6, 41)).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt.step()
    if not any("skip_synchronize" in str(x.message) for x in w):
        raise AssertionError("step() after synchronize() outside skip_synchronize() did not warn")
    say("synchronize() then step() in skip_synchronize(): the modified reduced gradient applied, no warning; "
        "without it, Horovod's warning")


def check_names():
    m = Lin()
    sgd = torch.optim.SGD(m.parameters(), lr=0.1)
    raises(ValueError, lambda: hvd.DistributedOptimizer(sgd, named_parameters=[("x", m.w), ("x", m.b)]),
           "Found duplicates: x", "duplicate names")
    raises(ValueError, lambda: hvd.DistributedOptimizer(sgd, named_parameters=[("w", m.w)]),
           "were not named", "an unnamed parameter")
    raises(ValueError, lambda: hvd.DistributedOptimizer(sgd, named_parameters=[m.w, m.b]),
           "should be a sequence of tuples", "names not in tuples")
    raises(NotImplementedError, lambda: hvd.DistributedOptimizer(sgd, op=hvd.Adasum), "Adasum", "op=Adasum")
    opt = hvd.DistributedOptimizer(sgd)
    assert type(opt).__name__ == "SGD" and isinstance(opt, torch.optim.SGD), "not an SGD subclass: %r" % type(opt)
    assert opt.param_groups[0] is sgd.param_groups[0], "param_groups not shared with the wrapped optimizer"
    if S > 1:
        names = sorted(opt._parameter_names.values())
        assert names == ["allreduce.noname.0", "allreduce.noname.1"], "unnamed parameters named %s" % names
    say("named_parameters: duplicates, an unnamed parameter, names not in tuples and op=Adasum refused; "
        "the wrapper is an SGD on the same param groups")


def rank_params(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()


def check_broadcast_parameters():
    root = S - 1
    for form in ("state_dict", "named_parameters", "pairs"):
        model = rank_params(100 + R)
        if form == "state_dict":
            model[1].running_mean.add_(R)  # buffers travel with a state_dict
            hvd.broadcast_parameters(model.state_dict(), root_rank=root)
        elif form == "named_parameters":
            hvd.broadcast_parameters(model.named_parameters(), root_rank=root)
        else:
            hvd.broadcast_parameters([(n, p) for n, p in model.named_parameters()], root_rank=root)
        want = rank_params(100 + root)
        if form == "state_dict":
            want[1].running_mean.add_(root)
        for (n, a), b in zip(model.state_dict().items(), want.state_dict().values()):
            if form != "state_dict" and n.endswith(("running_mean", "running_var", "num_batches_tracked")):
                continue
            close(a.double(), b.double(), 0.0, "broadcast_parameters(%s): %s" % (form, n))
    say("broadcast_parameters from root rank %d: a state_dict (buffers too), named_parameters() and a list "
        "of pairs end as root's" % root)


def check_objects():
    def obj(r):
        return {"rank": r, "items": list(range(r + 1)), "text": "x" * (1000 * r + 1), "t": (r, 2.5)}

    root = S - 1
    got = hvd.broadcast_object(obj(R), root_rank=root)
    assert got == obj(root), "broadcast_object: %r" % (got,)
    got = hvd.broadcast_object(obj(R))
    assert got == obj(0), "broadcast_object, root 0 by default"
    got = hvd.broadcast_object(obj(R) if R == root else None, root_rank=root)  # the usual: None elsewhere
    assert got == obj(root), "broadcast_object of None on the ranks but root: %r" % (got,)
    got = hvd.allgather_object(obj(R), name="train.gather")
    assert got == [obj(r) for r in range(S)], "allgather_object: %r" % (got,)
    say("broadcast_object (root %d, the default 0, None on the ranks but root) and allgather_object of objects of "
        "uneven sizes" % root)


def opt_state_equal(opt, want, what):
    for g, w in zip(opt.param_groups, want.param_groups):
        for k in w:
            if k != "params" and g[k] != w[k]:
                raise AssertionError("%s: param group option %s is %r, root's %r" % (what, k, g[k], w[k]))
    for p, q in zip([p for g in opt.param_groups for p in g["params"]],
                    [p for g in want.param_groups for p in g["params"]]):
        a, b = opt.state.get(p, {}), want.state.get(q, {})
        if sorted(a) != sorted(b):
            raise AssertionError("%s: state keys %s, root's %s" % (what, sorted(a), sorted(b)))
        for k in a:
            if torch.is_tensor(b[k]):
                close(a[k].double(), b[k].double(), 0.0, "%s: state %s" % (what, k))
            elif a[k] != b[k]:
                raise AssertionError("%s: state %s is %r, root's %r" % (what, k, a[k], b[k]))


def make_opt(kind, model, r):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.5 + 0.1 * r)
    return torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1), betas=(0.9, 0.99 - 0.001 * r),
                            weight_decay=0.001 * r)


def train_steps(kind, r, steps):
    """rank r's optimizer after `steps` steps of its own gradients, on the same start weights"""
    model = rank_params(7)
    opt = make_opt(kind, model, r)
    for s in range(steps):
        opt.zero_grad()
        x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1000 * r + s))
        model(x).pow(2).sum().backward()
        opt.step()
    return model, opt


def check_optimizer_state():
    root = S - 1
    for kind in ("sgd", "adam"):
        # rank-dependent state: rank r has taken r + 1 steps with its own data, its own options
        model, opt = train_steps(kind, R, R + 1)
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        _, want = train_steps(kind, root, root + 1)
        opt_state_equal(opt, want, "broadcast_optimizer_state(%s)" % kind)
        # only root has state; the others' is created (and their weights left alone)
        model, opt = train_steps(kind, R, 2 if R == root else 0)
        before = [p.detach().clone() for p in model.parameters()]
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        _, want = train_steps(kind, root, 2)
        opt_state_equal(opt, want, "broadcast_optimizer_state(%s), root alone with state" % kind)
        if R != root:
            for p, b in zip(model.parameters(), before):
                close(p.detach(), b, 0.0, "broadcast_optimizer_state(%s) moved the weights" % kind)
    # no state anywhere, through a DistributedOptimizer: state created without an all-reduce
    model = rank_params(7)
    opt = hvd.DistributedOptimizer(make_opt("adam", model, R), named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert all(len(opt.state[p]) == 3 for p in model.parameters()), "Adam's state not created"
    assert opt.param_groups[0]["lr"] == 0.01, "lr %r, root's 0.01" % opt.param_groups[0]["lr"]
    raises(ValueError, lambda: hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), 0), "LBFGS",
           "LBFGS")
    if S > 1:
        # different optimizers on different ranks: an error on every rank, not a broadcast left waiting
        _, opt = train_steps("adam" if R == 0 else "sgd", R, 1)
        raises(ValueError, lambda: hvd.broadcast_optimizer_state(opt, root_rank=0), "differs from root rank 0's",
               "Adam on rank 0, SGD on the others")
    say("broadcast_optimizer_state from root %d: SGD with momentum and Adam after rank-dependent steps and "
        "options (momentum buffers, Adam's moments and step, lr, momentum, betas, weight decay), and when only "
        "root has state; a new DistributedOptimizer's state created; different optimizers refused on every "
        "rank" % root)


def bn_inputs(r, c=3):
    n = 2 + r  # uneven batches under -np 3
    g = torch.Generator().manual_seed(500 + r)
    return (torch.randn(n, c, 4, 5, generator=g, dtype=torch.float64) * (1 + r) + r,
            torch.randn(n, c, 4, 5, generator=g, dtype=torch.float64))


def check_sync_bn():
    c = 3
    sbn = hvd.SyncBatchNorm(c).double()
    ref = torch.nn.BatchNorm2d(c).double()
    with torch.no_grad():
        for m in (sbn, ref):
            m.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
            m.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
    xs = [bn_inputs(r, c) for r in range(S)]
    for it in range(2):  # the running statistics of two steps
        x = xs[R][0].clone().requires_grad_(True)
        y = sbn(x)
        (y * xs[R][1]).sum().backward()
        xall = torch.cat([a for a, _ in xs]).requires_grad_(True)
        yall = ref(xall)
        (yall * torch.cat([b for _, b in xs])).sum().backward()
        lo = sum(xs[r][0].shape[0] for r in range(R))
        hi = lo + xs[R][0].shape[0]
        close(y.detach(), yall.detach()[lo:hi], 1e-12, "SyncBatchNorm output, step %d" % it)
        close(x.grad, xall.grad[lo:hi], 1e-12, "SyncBatchNorm input gradient, step %d" % it)
        gw = hvd.allreduce(sbn.weight.grad, op=hvd.Sum, name="train.bn.gw.%d" % it)
        gb = hvd.allreduce(sbn.bias.grad, op=hvd.Sum, name="train.bn.gb.%d" % it)
        close(gw, ref.weight.grad, 1e-10, "SyncBatchNorm weight gradient (summed over ranks), step %d" % it)
        close(gb, ref.bias.grad, 1e-10, "SyncBatchNorm bias gradient (summed over ranks), step %d" % it)
        close(sbn.running_mean, ref.running_mean, 1e-12, "SyncBatchNorm running mean, step %d" % it)
        close(sbn.running_var, ref.running_var, 1e-12, "SyncBatchNorm running var, step %d" % it)
        sbn.zero_grad()
        ref.zero_grad()
    assert int(sbn.num_batches_tracked) == 2, "num_batches_tracked %d" % int(sbn.num_batches_tracked)
    sbn.eval()
    ref.eval()
    close(sbn(xs[R][0]), ref(xs[R][0]), 1e-12, "SyncBatchNorm in eval mode")
    raises(ValueError, lambda: sbn(torch.zeros(3)), "expected at least 2D input", "a 1-D input")
    assert isinstance(sbn, torch.nn.modules.batchnorm._BatchNorm), "SyncBatchNorm is not a _BatchNorm"
    say("SyncBatchNorm (float64, batches of %s over %d ranks): output, input gradient, summed weight and bias "
        "gradients and running statistics of two steps equal BatchNorm2d's on the concatenated batch; eval mode "
        "equal too" % ([xs[r][0].shape[0] for r in range(S)], S))


CHECKS = [check_compression, check_average_and_sum, check_groups, check_predivide, check_backward_passes,
          check_synchronize_and_skip, check_names, check_broadcast_parameters, check_objects,
          check_optimizer_state, check_sync_bn]

if __name__ == "__main__":
    only = sys.argv[1:]
    for check in CHECKS:
        if only and check.__name__ not in only:
            continue
        try:
            check()
        except Exception as e:
            print("FAIL: rank %d of %d: %s: %s: %s" % (R, S, check.__name__, type(e).__name__, e), flush=True)
            sys.stdout.flush()
            sys.exit(1)
    hvd.shutdown() if hasattr(hvd, "shutdown") else None
    if R == 0:
        print("training.py: every check passed on %d rank%s" % (S, "" if S == 1 else "s"), flush=True)
