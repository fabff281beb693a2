#!/bin/sh
# resnext50_32x4d.sh: our engine against PyTorch on the resnext50_32x4d fixture (tests/torch/run.sh)
model=resnext50_32x4d
. "$top_srcdir/tests/torch/run.sh"
