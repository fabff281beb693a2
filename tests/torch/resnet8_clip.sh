#!/bin/sh
# resnet8_clip.sh: our engine against PyTorch on resnet8 trained with its gradients' global norm
# clipped to 0.25 before each SGD step (torch.nn.utils.clip_grad_norm_, torchvision's
# --clip-grad-norm; tests/torch/run.sh): the norm is above 0.25, so both steps clip.
model=resnet8_clip
. "$top_srcdir/tests/torch/run.sh"
