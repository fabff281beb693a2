#!/bin/sh
# hvd_mpi.sh: the Python package dtrain.torch (Horovod's PyTorch API in C, src/python/) from the build
# tree: tests/python/collectives.py, which checks every collective against values each rank computes
# alone (mismatches across ranks and join with uneven data included), on one process and under
# mpirun -np 2 and -np 3 (uneven splits and rows). Every rank must print its "all N checks passed".
. "$top_srcdir/tests/common.sh"
use_dtrain_torch
# a collective that cannot complete fails in 30 s instead of hanging the suite
DT_COMM_TIMEOUT=30
export DT_COMM_TIMEOUT DT_HAVE_MPI
py="$top_srcdir/tests/python/collectives.py"

. "$top_srcdir/tests/python/on_ranks.sh"
on_ranks "$py" 120 240
