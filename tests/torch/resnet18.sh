#!/bin/sh
# resnet18.sh: our engine against PyTorch on the resnet18 fixture (tests/torch/run.sh)
model=resnet18
. "$top_srcdir/tests/torch/run.sh"
