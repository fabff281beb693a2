#!/bin/sh
# resnet8_wdgroups.sh: our engine against PyTorch on resnet8 trained with torchvision's parameter
# groups (--norm-weight-decay 0.02, --bias-weight-decay 0.05; tests/torch/run.sh). The decays are
# large enough that a bias or BN parameter given the plain --wd fails the comparison after step 1.
model=resnet8_wdgroups
. "$top_srcdir/tests/torch/run.sh"
