#!/bin/sh
# hvd_example.sh: the user-facing example doc/examples/hvd_fmnist.py (resnet18 on Fashion-MNIST
# through dtrain.torch, Horovod's API) under mpirun -np 2, one short epoch on the first 2048
# training and 512 test images: both ranks report in, rank 0 prints one epoch line whose loss and
# accuracy parse (the accuracy above chance: it trained), writes the checkpoint once, and it loads
# in torch with the epoch and resnet18's weights. tests/slurm/hvd_example.sh runs it under srun.
. "$top_srcdir/tests/common.sh"
# make check runs the example once, on the Slurm testbed (tests/slurm/hvd_example.sh: sbatch, srun
# --mpi=pmix on 2 nodes), and mpirun -np 2 python3 carries every other Python test: this second
# run of the same epoch is make check-long's, to keep the suite within its budget
long || skip "the example runs in tests/slurm/hvd_example.sh; under mpirun in make check-long"
use_dtrain_torch torch,torchvision
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $FMNIST (Debian: dataset-fashion-mnist)"
use_mpirun -x PYTHONPATH -x DT_COMM_TIMEOUT
DT_COMM_TIMEOUT=60   # a collective that cannot complete fails in 60 s instead of hanging the suite
export DT_COMM_TIMEOUT
. "$top_srcdir/tests/python/example_check.sh"

expect_status 0 timeout 180 $MPIRUN -np 2 "$DT_PYTHON_TORCH" "$top_srcdir/doc/examples/hvd_fmnist.py" \
  --epochs 1 --limit 2048 --test-limit 512 --batch-size 32 --checkpoint "$DT_TMP/ck.pt"
cat "$DT_TMP/out"
example_check "mpirun -np 2" "$DT_TMP/ck.pt"
pass "mpirun -np 2 hvd_fmnist.py: ranks 0 and 1 of 2, $(grep -o 'epoch 1/1.*' "$DT_TMP/out"), the checkpoint written once by rank 0"
