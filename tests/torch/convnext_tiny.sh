#!/bin/sh
# convnext_tiny.sh: our engine against PyTorch on the convnext_tiny fixture (tests/torch/run.sh)
model=convnext_tiny
. "$top_srcdir/tests/torch/run.sh"
