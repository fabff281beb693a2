#!/bin/sh
# efficientnet_v2_s.sh: our engine against PyTorch on the efficientnet_v2_s fixture (tests/torch/run.sh)
model=efficientnet_v2_s
. "$top_srcdir/tests/torch/run.sh"
