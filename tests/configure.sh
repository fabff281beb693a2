#!/bin/sh
# configure.sh: an explicit request for an optional part that cannot be met stops configure with a
# clear message (and an unknown --enable-werror value too). Runs configure from the source tree in
# a scratch directory, sharing one cache so each run is quick.
. "$top_srcdir/tests/common.sh"
cd "$DT_TMP"
mkdir empty-prefix
run_configure() {   # run_configure EXPECTED-MESSAGE ARGS...
  msg=$1; shift
  set +e
  "$top_srcdir/configure" -C --cache-file="$DT_TMP/config.cache" CC="$CC" "$@" >configure.out 2>configure.err
  st=$?
  set -e
  [ "$st" -ne 0 ] || fail "configure $* succeeded, expected it to stop"
  grep -qF -- "$msg" configure.err || { tail -n 5 configure.err; fail "configure $*: stderr lacks '$msg'"; }
  pass "configure $*: $(grep -F -- "$msg" configure.err | head -n 1)"
}
run_configure "--with-cuda=/nonexistent: no such directory" --with-cuda=/nonexistent
run_configure "--with-cuda=$DT_TMP/empty-prefix was given but the CUDA toolkit with cuBLAS, cuDNN and NCCL is not usable: nvcc not found" \
  --with-cuda="$DT_TMP/empty-prefix" --without-mpi --without-pmi2
run_configure "--with-mpi=/nonexistent: no such directory" --with-mpi=/nonexistent
run_configure "--with-mpi=$DT_TMP/empty-prefix was given but MPI is not usable" \
  --without-cuda --with-mpi="$DT_TMP/empty-prefix" --without-pmi2
run_configure "--with-pmi2=/nonexistent: no such directory" --with-pmi2=/nonexistent
run_configure "--with-pmi2=$DT_TMP/empty-prefix was given but Slurm's PMI2 library is not usable" \
  --without-cuda --with-pmi2="$DT_TMP/empty-prefix"
run_configure "--enable-werror takes yes or no, not 'maybe'" --enable-werror=maybe
run_configure "--with-python: /nonexistent/python3 does not run" --without-cuda --with-python PYTHON_TORCH=/nonexistent/python3
