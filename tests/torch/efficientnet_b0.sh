#!/bin/sh
# efficientnet_b0.sh: our engine against PyTorch on the efficientnet_b0 fixture (tests/torch/run.sh)
model=efficientnet_b0
. "$top_srcdir/tests/torch/run.sh"
