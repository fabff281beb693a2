#!/bin/sh
# optim.sh: our optimizer ops against torch.optim: SGD with Nesterov, Adam, AdamW (torch's and other
# betas) and RMSprop (torchvision's recipe, and plain) over 10 steps on the same parameters,
# gradients and learning rates (tests/torch/optim_torch.py writes torch's results, optim_check
# compares, also with loss-scaled gradients).
. "$top_srcdir/tests/common.sh"
[ "$DT_TORCH_TESTS" = yes ] || skip "PyTorch tests disabled (configure --disable-torch-tests)"
[ -n "$DT_PYTHON_TORCH" ] || skip "no python3 with torch and h5py (Debian: python3-torch python3-h5py)"
set +e
"$DT_PYTHON_TORCH" "$top_srcdir/tests/torch/optim_torch.py" "$DT_TMP/optim.h5"
st=$?
set -e
[ "$st" -eq 77 ] && skip "optim_torch.py could not import torch, numpy or h5py"
[ "$st" -eq 0 ] || fail "optim_torch.py exited $st"
exec "$top_builddir/tests/torch/optim_check" "$DT_TMP/optim.h5"
