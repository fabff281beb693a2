#!/bin/sh
# vgg13_bn.sh: our engine against PyTorch on the vgg13_bn fixture (tests/torch/run.sh)
model=vgg13_bn
. "$top_srcdir/tests/torch/run.sh"
