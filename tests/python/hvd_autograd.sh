#!/bin/sh
# hvd_autograd.sh: gradients through dtrain.torch's out-of-place collectives (src/python/autograd.c,
# Horovod's autograd Functions): tests/python/autograd.py, which checks x.grad after
# (hvd.op(x) * w).sum().backward() for allreduce, allgather, broadcast, alltoall and reducescatter
# against values each rank computes from the known per-rank weights, on one process and under
# mpirun -np 2 and -np 3 (uneven rows and splits). Every rank must print its "all N checks passed".
. "$top_srcdir/tests/common.sh"
use_dtrain_torch
# a collective that cannot complete (a gradient's collective left unmatched) fails in 30 s, no hang
DT_COMM_TIMEOUT=30
export DT_COMM_TIMEOUT DT_HAVE_MPI
py="$top_srcdir/tests/python/autograd.py"

. "$top_srcdir/tests/python/on_ranks.sh"
on_ranks "$py" 60 120
