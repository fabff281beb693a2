# lr_torch.py FLAGS...: the oracle of dtrain's learning-rate schedules (train/schedule.c). Reads the
# schedule flags dtrain takes (the subset below, with --no-lr-scaling: --lr is the lr), builds the
# same schedule from torch.optim.lr_scheduler as torchvision's reference train.py chains them (a
# warm-up, LinearLR or ConstantLR, then the main schedule under SequentialLR), steps it per epoch
# (or per iteration with --lr-per-step, its periods then in iterations) and prints the lr of every
# step as dtrain --print-lr N does: "epoch step lr" lines after a comment line.
import argparse, sys, warnings, torch

warnings.filterwarnings("ignore")  # torch's about stepping a scheduler with no optimiser step

ap = argparse.ArgumentParser()
ap.add_argument("--print-lr", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--no-lr-scaling", action="store_true")
ap.add_argument("--lr-scheduler", required=True)
ap.add_argument("--lr-warmup-epochs", type=int, default=0)
ap.add_argument("--lr-warmup-method", default="constant")
ap.add_argument("--lr-warmup-decay", type=float, default=0.01)
ap.add_argument("--lr-gamma", type=float, default=0.1)
ap.add_argument("--lr-step-size", type=int, default=30)
ap.add_argument("--lr-steps", default="30,60,80")
ap.add_argument("--lr-min", type=float, default=0.0)
ap.add_argument("--lr-power", type=float, default=1.0)
ap.add_argument("--lr-per-step", action="store_true")
ap.add_argument("--synthetic", action="store_true")
a = ap.parse_args()
assert a.no_lr_scaling, "the oracle takes --lr as it is: give --no-lr-scaling"

n = a.print_lr
unit = n if a.lr_per_step else 1  # scheduler steps per epoch
warm = a.lr_warmup_epochs * unit
rest = (a.epochs - a.lr_warmup_epochs) * unit
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=a.lr)
S = torch.optim.lr_scheduler
main = {
    "steplr": lambda: S.StepLR(opt, step_size=a.lr_step_size * unit, gamma=a.lr_gamma),
    "multisteplr": lambda: S.MultiStepLR(opt, milestones=[int(m) * unit for m in a.lr_steps.split(",")],
                                         gamma=a.lr_gamma),
    "cosineannealinglr": lambda: S.CosineAnnealingLR(opt, T_max=rest, eta_min=a.lr_min),
    "exponentiallr": lambda: S.ExponentialLR(opt, gamma=a.lr_gamma ** (1.0 / unit)),
    "polynomiallr": lambda: S.PolynomialLR(opt, total_iters=rest, power=a.lr_power),
}[a.lr_scheduler]()
if warm > 0:
    if a.lr_warmup_method == "linear":
        first = S.LinearLR(opt, start_factor=a.lr_warmup_decay, total_iters=warm)
    else:
        first = S.ConstantLR(opt, factor=a.lr_warmup_decay, total_iters=warm)
    sched = S.SequentialLR(opt, schedulers=[first, main], milestones=[warm])
else:
    sched = main
print("# torch %s: %s" % (torch.__version__, " ".join(sys.argv[1:])))
for e in range(a.epochs):
    for s in range(n):
        print("%d %d %.17g" % (e, s, opt.param_groups[0]["lr"]))
        if a.lr_per_step:
            sched.step()
    if not a.lr_per_step:
        sched.step()
