#!/bin/sh
# vgg11_bn.sh: our engine against PyTorch on the vgg11_bn fixture (tests/torch/run.sh)
model=vgg11_bn
. "$top_srcdir/tests/torch/run.sh"
