#!/bin/sh
# densenet121.sh: our engine against PyTorch on the densenet121 fixture (tests/torch/run.sh)
model=densenet121
. "$top_srcdir/tests/torch/run.sh"
