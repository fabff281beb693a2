#!/bin/sh
# resnet8_adamw.sh: our engine against PyTorch on resnet8 trained with torch.optim.AdamW (--opt
# adamw) and BN's weights and every bias undecayed (tests/torch/run.sh; the update itself is checked
# over 10 steps by tests/torch/optim.sh).
model=resnet8_adamw
. "$top_srcdir/tests/torch/run.sh"
