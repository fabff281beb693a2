#!/bin/sh
# resnet20.sh: our engine against PyTorch on the resnet20 fixture (tests/torch/run.sh)
model=resnet20
. "$top_srcdir/tests/torch/run.sh"
