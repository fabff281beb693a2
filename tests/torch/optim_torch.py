#!/usr/bin/env python3
"""optim_torch.py OUT.h5: torch.optim's SGD (Nesterov), Adam, AdamW and RMSprop, and LARS and LAMB as
the papers define them (written here: torch.optim has neither), over 10 steps on fixed
parameters and gradients, for tests/torch/optim.sh (tests/torch/optim_check.c runs our ops on the same
inputs and compares).

One group per case, attributes: kind ("sgd", "adam", "adamw", "rmsprop", "lars", "lamb"), the
hyperparameters as torch takes them (lr0, momentum, nesterov, weight_decay, beta1, beta2, eps,
alpha, trust), steps.
Datasets (float32): p0 [n]; lr [steps] (each step's lr, fp32-representable: ours is an fp32);
grads [steps, n]; p [steps, n] (the parameters after each step); state1, state2 [n] (after the
last step: SGD's momentum_buffer / Adam's exp_avg / RMSprop's momentum_buffer (zeros without
momentum), and Adam's exp_avg_sq / RMSprop's square_avg (zeros for SGD)).
"""
import sys

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:  # the caller skips
    print("optim_torch.py: %s" % e, file=sys.stderr)
    sys.exit(77)

N, STEPS = 10000, 10
CASES = {  # name -> (torch.optim class name, its keyword arguments besides lr, lr0)
    "sgd_nesterov": ("SGD", dict(momentum=0.9, nesterov=True, weight_decay=1e-4), 0.1),
    "adam": ("Adam", dict(weight_decay=1e-2), 1e-3),
    "adamw": ("AdamW", dict(weight_decay=0.05), 1e-3),
    "adamw_betas": ("AdamW", dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05), 3e-3),
    "rmsprop_torchvision": ("RMSprop", dict(momentum=0.9, weight_decay=1e-5, eps=0.0316, alpha=0.9), 0.016),
    "rmsprop_plain": ("RMSprop", dict(alpha=0.99, eps=1e-8), 1e-2),
    # not in torch.optim: references below, written from the papers' formulas
    "lars": ("LARS", dict(momentum=0.9, weight_decay=5e-3, trust=0.001), 2.0),
    "lamb": ("LAMB", dict(betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01), 0.01),
}


class LARS(torch.optim.Optimizer):
    """You et al. 2017 (MLPerf's ResNet-50): trust = eta * |w| / (|g| + wd * |w|) (1 when a norm is
    0), v = momentum * v + lr * trust * (g + wd * w), w -= v; v starts at 0."""
    def __init__(self, params, lr, momentum, weight_decay, trust):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust=trust))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                g, wd = p.grad, group["weight_decay"]
                wn, gn = float(p.double().norm()), float(g.double().norm())
                trust = group["trust"] * wn / (gn + wd * wn) if wn > 0 and gn > 0 else 1.0
                v = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                v.mul_(group["momentum"]).add_(g.add(p, alpha=wd), alpha=group["lr"] * trust)
                p.sub_(v)


class LAMB(torch.optim.Optimizer):
    """You et al. 2019: Adam's moments with bias correction, r = m^ / (sqrt(v^) + eps) + wd * w,
    trust = |w| / |r| (1 when a norm is 0), w -= lr * trust * r."""
    def __init__(self, params, lr, betas, eps, weight_decay):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["step"], st["exp_avg"], st["exp_avg_sq"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["step"] += 1
                t, m, v, g = st["step"], st["exp_avg"], st["exp_avg_sq"], p.grad
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                r = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + group["eps"]) + group["weight_decay"] * p
                wn, rn = float(p.double().norm()), float(r.double().norm())
                trust = wn / rn if wn > 0 and rn > 0 else 1.0
                p.sub_(r, alpha=group["lr"] * trust)


def f32(x):
    return float(np.float32(x))


def run(name, cls, kw, lr0, rng):
    p0 = (rng.standard_normal(N) * 0.05).astype(np.float32)
    # gradients of several sizes per element (small ones test eps), a few exact zeros
    mag = np.where(np.arange(N) % 3 == 0, 1e-4, 1e-2)
    grads = (rng.standard_normal((STEPS, N)) * mag).astype(np.float32)
    grads[:, 7::97] = 0
    lrs = np.array([f32(lr0 * (1 - k / (2 * STEPS))) for k in range(STEPS)], dtype=np.float32)
    p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = (globals()[cls] if cls in ("LARS", "LAMB") else getattr(torch.optim, cls))([p], lr=float(lrs[0]), **kw)
    after = np.zeros((STEPS, N), dtype=np.float32)
    for k in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = float(lrs[k])
        p.grad = torch.from_numpy(grads[k].copy())
        opt.step()
        after[k] = p.detach().numpy()
    st = opt.state[p]
    zeros = np.zeros(N, dtype=np.float32)
    state1 = st.get("exp_avg", st.get("momentum_buffer"))
    state2 = st.get("exp_avg_sq", st.get("square_avg"))
    betas = kw.get("betas", (0.9, 0.999))
    attrs = dict(kind=cls.lower(), lr0=lr0, momentum=kw.get("momentum", 0.0), nesterov=int(kw.get("nesterov", False)),
                 weight_decay=kw.get("weight_decay", 0.0), beta1=betas[0], beta2=betas[1],
                 eps=kw.get("eps", 1e-8), alpha=kw.get("alpha", 0.99), trust=kw.get("trust", 0.0), steps=STEPS)
    arrays = dict(p0=p0, lr=lrs, grads=grads, p=after,
                  state1=zeros if state1 is None else state1.numpy().astype(np.float32),
                  state2=zeros if state2 is None else state2.numpy().astype(np.float32))
    return attrs, arrays


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261203)
    tmp = out + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.attrs["torch_version"] = str(torch.__version__)
        for name, (cls, kw, lr0) in CASES.items():
            attrs, arrays = run(name, cls, kw, lr0, rng)
            g = f.create_group(name)
            for k, v in attrs.items():
                g.attrs[k] = v
            for k, v in arrays.items():
                g.create_dataset(k, data=v)
    import os
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
