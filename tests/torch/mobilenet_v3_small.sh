#!/bin/sh
# mobilenet_v3_small.sh: our engine against PyTorch on the mobilenet_v3_small fixture (tests/torch/run.sh)
model=mobilenet_v3_small
. "$top_srcdir/tests/torch/run.sh"
