#!/bin/sh
# resnet18_small.sh: our engine against PyTorch on the resnet18_small fixture (tests/torch/run.sh)
model=resnet18_small
. "$top_srcdir/tests/torch/run.sh"
