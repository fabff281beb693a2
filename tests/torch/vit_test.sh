#!/bin/sh
# vit_test.sh: our engine against PyTorch on the vit_test fixture (tests/torch/run.sh): a small ViT
model=vit_test
. "$top_srcdir/tests/torch/run.sh"
