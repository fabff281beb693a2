#!/bin/sh
# mobilenet_v2.sh: our engine against PyTorch on the mobilenet_v2 fixture (tests/torch/run.sh)
model=mobilenet_v2
. "$top_srcdir/tests/torch/run.sh"
