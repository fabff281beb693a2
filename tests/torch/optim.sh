#!/bin/sh
# optim.sh: our optimizer ops against torch.optim: SGD with Nesterov, Adam, AdamW (torch's and other
# betas) and RMSprop (torchvision's recipe, and plain) over 10 steps on the same parameters,
# gradients and learning rates (tests/torch/optim_torch.py writes torch's results, optim_check
# compares, also with loss-scaled gradients).
. "$top_srcdir/tests/common.sh"
torch_oracle optim optim_check
