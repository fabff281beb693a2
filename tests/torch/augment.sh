#!/bin/sh
# augment.sh: data/augment.c against torchvision 0.14's tensor backend: the policies' tables
# (AutoAugment's three, RandAugment, TrivialAugmentWide), every op of _apply_op on noise, smooth,
# flat and tiny images (1 and 3 channels, both signs, extreme magnitudes, nearest and bilinear) and
# F.erase (tests/torch/augment_torch.py writes torchvision's results, augment_check compares).
. "$top_srcdir/tests/common.sh"
torch_oracle augment augment_check
