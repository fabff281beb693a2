#!/bin/sh
# regnet_y_400mf.sh: our engine against PyTorch on the regnet_y_400mf fixture (tests/torch/run.sh)
model=regnet_y_400mf
. "$top_srcdir/tests/torch/run.sh"
