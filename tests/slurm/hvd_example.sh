#!/bin/sh
# hvd_example.sh: the PyTorch example doc/examples/hvd_fmnist.py (Horovod's API through dtrain.torch)
# on a real 2-node Slurm cluster (cluster.sh), as issue 40 asks: the batch script slurm/hvd_fmnist.sbatch,
# submitted with sbatch as a user would, runs srun --mpi=pmix python3 ... on both nodes for one short
# epoch on the first 2048 training and 512 test images. The job completes, ranks 0 and 1 of 2 report
# in from nodes n1 and n2, rank 0 prints one epoch line (loss, accuracy above chance) and writes the
# checkpoint once (tests/python/example_check.sh).
. "$top_srcdir/tests/common.sh"
use_dtrain_torch torch,torchvision   # on PYTHONPATH, which srun passes to the tasks
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin): CPU ranks need it"
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $FMNIST (Debian: dataset-fashion-mnist)"
. "$top_srcdir/tests/slurm/cluster.sh"
. "$top_srcdir/tests/slurm/jobs.sh"
. "$top_srcdir/tests/python/example_check.sh"
for v in $(env | sed -n 's/^\(DT_[A-Z0-9_]*\)=.*/\1/p'); do   # the caller's defaults stay out
  case $v in DT_TMP|DT_HAVE_*|DT_PYTHON_TORCH|DT_PYTHONPATH|DT_TORCH_TESTS|DT_LONG) ;; *) unset "$v" ;; esac
done
unset MASTER_ADDR MASTER_PORT
# srun passes the environment to the tasks: a collective that cannot complete failing in 60 s, one
# thread per rank (both "nodes" are this machine's cores)
export DT_COMM_TIMEOUT=60 OMP_NUM_THREADS=1
cluster_start

# the batch script, as a user submits it from the repository's top directory
id=$(cd "$top_srcdir" && HVD_PYTHON="$DT_PYTHON_TORCH" HVD_EPOCHS=1 HVD_CHECKPOINT="$DT_TMP/job.pt" \
  HVD_ARGS="--limit 2048 --test-limit 512 --batch-size 32" \
  sbatch --parsable --cpus-per-task=1 --time=5 --output="$DT_TMP/job-%j.out" slurm/hvd_fmnist.sbatch)
job_wait "$id" 180
cp "$DT_TMP/job-$id.out" "$DT_TMP/out"
cat "$DT_TMP/out"
[ "$(job_field "$id" JobState)" = COMPLETED ] && [ "$(job_field "$id" ExitCode)" = 0:0 ] ||
  { job_debug "$id"; fail "job $id: $(job_field "$id" JobState), exit $(job_field "$id" ExitCode)"; }
grep -q "^hvd_fmnist.sbatch: job $id: srun --mpi=pmix $DT_PYTHON_TORCH .*/doc/examples/hvd_fmnist.py on 2 nodes" "$DT_TMP/out" ||
  fail "the batch script did not say how it ran"
: > "$DT_TMP/err"
example_check "sbatch slurm/hvd_fmnist.sbatch" "$DT_TMP/job.pt"
# one rank on each node (counted as occurrences: two tasks' lines can reach the output glued)
[ "$(grep -o "rank [01] of 2 (local rank 0 of 1) on n[12], CPU" "$DT_TMP/out" | sed 's/.* on \(n[12]\),.*/\1/' | sort -u | tr -d '\n')" = n1n2 ] ||
  fail "the ranks are not one per node on n1 and n2"
pass "sbatch slurm/hvd_fmnist.sbatch: job $id COMPLETED, exit 0:0, ranks 0 and 1 of 2 on n1 and n2 under srun --mpi=pmix, $(grep -o 'epoch 1/1.*' "$DT_TMP/out"), the checkpoint written once by rank 0"
