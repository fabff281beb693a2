#!/bin/sh
# wide_resnet50_2.sh: our engine against PyTorch on the wide_resnet50_2 fixture (tests/torch/run.sh)
model=wide_resnet50_2
. "$top_srcdir/tests/torch/run.sh"
