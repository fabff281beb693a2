#!/bin/sh
# alexnet.sh: our engine against PyTorch on the alexnet fixture (tests/torch/run.sh)
model=alexnet
. "$top_srcdir/tests/torch/run.sh"
