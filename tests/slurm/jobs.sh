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

# fmnist_subset N_TRAIN N_VAL OUT: the first images of Debian's Fashion-MNIST, packed by dtpack into OUT
# (idx files cut to N images: the count in the header and the bytes after it)
fmnist_subset() {
  fm_src=/usr/share/datasets/fashion-mnist
  [ -f "$fm_src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $fm_src (Debian: dataset-fashion-mnist)"
  mkdir -p "$DT_TMP/idx"
  for f in train:"$1" t10k:"$2"; do
    set -- "${f%%:*}" "${f#*:}" "$3"
    cut_idx "$fm_src/$1-images-idx3-ubyte.gz" "$2" 16 784 > "$DT_TMP/idx/$1-images-idx3-ubyte"
    cut_idx "$fm_src/$1-labels-idx1-ubyte.gz" "$2" 8 1 > "$DT_TMP/idx/$1-labels-idx1-ubyte"
  done
  expect_status 0 "$top_builddir/dtpack" fashion-mnist "$DT_TMP/idx" -o "$3"
}

# cut_idx FILE.gz N HEADER_BYTES BYTES_PER_ITEM: the idx file with its first N items
cut_idx() {
  gzip -dc "$1" | head -c "$3" > "$DT_TMP/idx/hdr"
  { head -c 4 "$DT_TMP/idx/hdr"
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)))"
    tail -c +9 "$DT_TMP/idx/hdr"
    gzip -dc "$1" | tail -c +$(($3 + 1)) | head -c $(($2 * $4)); }
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
