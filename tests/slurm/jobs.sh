# jobs.sh: sourced by the Slurm tests after cluster.sh: the cluster with the batch scripts' environment,
# a small packed dataset, and waiting for jobs.

# jobs_start: the cluster (cluster.sh) for the batch scripts' CPU ranks, which need MPI; the scripts in
# slurm/ run this build's programs (their variables, as a user sets them), one thread per rank
jobs_start() {
  [ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin): CPU ranks need it"
  cluster_start
  export DTRAIN="$top_builddir/dtrain" DTRAIN_SRUN="$top_srcdir/tools/dtrain-srun" DTREPORT="$top_builddir/dtreport"
  export OMP_NUM_THREADS=1 DT_WORKERS=1 DT_RESULTS="$DT_TMP/results"
}

# job_wait ID SECONDS: until the job has left the queue (fails after SECONDS)
job_wait() {
  k=0
  while [ -n "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]; do
    [ $k -lt $(($2 * 2)) ] || { squeue; fail "job $1 still in the queue after $2 s"; }
    sleep 0.5; k=$((k + 1))
  done
}

# job_field ID FIELD: a field of scontrol show job (JobState, ExitCode, Restarts, ...)
job_field() {
  scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# job_debug ID: what Slurm knows of a job, for a failure's log: scontrol show job, and the daemons' log
# lines that name it
job_debug() {
  echo "--- scontrol show job $1"
  scontrol show job "$1" 2>&1
  for f in "$CL"/log/*.log; do
    echo "--- $f, lines naming job $1"
    grep -e "$1" "$f" | tail -n 40
  done
}
