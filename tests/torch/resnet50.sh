#!/bin/sh
# resnet50.sh: our engine against PyTorch on the resnet50 fixture (tests/torch/run.sh)
model=resnet50
. "$top_srcdir/tests/torch/run.sh"
