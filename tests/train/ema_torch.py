# ema_torch.py DIR DECAY STEPS_PER_EPOCH EVERY WARMUP_EPOCHS N: torchvision's model EMA (its
# ExponentialMovingAverage: torch.optim.swa_utils.AveragedModel with avg_fn decay*avg + (1-decay)*p
# over the parameters and buffers), driven as its train.py drives it, over the model states
# DIR/1.h5 .. DIR/N.h5 (dtrain's checkpoints after each step), against DIR/N.h5's /model_ema.
# Prints one line; exits non-zero naming the first tensor that differs. Used by tests/train/ema.sh.
import sys
import h5py
import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel

d, decay, per_epoch, every, warmup, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), int(sys.argv[6])


def state(k):
    with h5py.File("%s/%d.h5" % (d, k), "r") as f:
        return {name: f["model"][name][()] for name in f["model"]}


BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


class Holder(torch.nn.Module):
    """The checkpoint's tensors as a module: parameters, and buffers as BN has them."""
    def __init__(self, s):
        super().__init__()
        for name, v in s.items():
            t = torch.from_numpy(np.array(v))
            key = name.replace(".", "__")
            if name.endswith(BUFFERS):
                self.register_buffer(key, t)
            else:
                self.register_parameter(key, torch.nn.Parameter(t))

    def load(self, s):
        with torch.no_grad():
            for name, v in s.items():
                getattr(self, name.replace(".", "__")).copy_(torch.from_numpy(np.array(v)))


model = Holder(state(1))
ema = AveragedModel(model, avg_fn=lambda avg, p, num: decay * avg + (1 - decay) * p, use_buffers=True)
updates = 0
for k in range(1, n + 1):   # the model after global step k: epoch (k-1) // per_epoch, batch index i
    model.load(state(k))
    epoch, i = (k - 1) // per_epoch, (k - 1) % per_epoch
    if i % every == 0:
        ema.update_parameters(model)
        updates += 1
        if epoch < warmup:
            ema.n_averaged.fill_(0)
with h5py.File("%s/%d.h5" % (d, n), "r") as f:
    ours = f["model_ema"]
    assert int(ours.attrs["n_averaged"]) == int(ema.n_averaged), "n_averaged: %d vs torch's %d" % (
        ours.attrs["n_averaged"], ema.n_averaged)
    worst, at, count = 0.0, None, len(ours)
    for name in ours:
        want = getattr(ema.module, name.replace(".", "__")).detach().numpy()
        got = ours[name][()]
        assert got.shape == want.shape, "%s: shape %s vs %s" % (name, got.shape, want.shape)
        if name.endswith("num_batches_tracked"):
            assert got == want, "%s: %s vs torch's %s" % (name, got, want)
            continue
        diff = float(np.max(np.abs(got.astype(np.float64) - want))) / max(float(np.max(np.abs(want))), 1e-30)
        if diff > worst:
            worst, at = diff, name
    assert worst <= 1e-6, "%s differs from torch's average by %.3g of its largest value" % (at, worst)
print("the average after %d steps (%d updates, n_averaged %d, decay %.17g) = torch's AveragedModel: %d tensors, "
      "worst %s %.3g of its largest value" % (n, updates, int(ema.n_averaged), decay, count, at, worst))
