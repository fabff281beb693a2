#!/bin/sh
# mpi.sh: libdt under mpirun (no Slurm): the example program of doc/ (every collective checks its
# result, fp16 and bf16 included) from the build tree and from an installed copy found through
# pkg-config; and a rank that never arrives makes the others fail within the timeout, naming the
# operation and the step, instead of hanging.
. "$top_srcdir/tests/common.sh"
use_mpirun

# install into a private prefix and build the example with pkg-config, as a user would
make -C "$top_builddir" install DESTDIR="$DT_TMP/inst" >/dev/null 2>&1 || fail "make install failed"
prefix=$(sed -n 's/^prefix=//p' "$top_builddir/dt.pc")
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/dt.pc" | sed "s#\${exec_prefix}#$prefix#; s#\${prefix}#$prefix#")
pc="$DT_TMP/inst$libdir/pkgconfig"
[ -f "$pc/dt.pc" ] || fail "dt.pc was not installed in $pc"
flags=$(PKG_CONFIG_SYSROOT_DIR="$DT_TMP/inst" PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs dt) || fail "pkg-config dt"
${CC:-cc} "$top_srcdir/doc/examples/dt_example.c" -o "$DT_TMP/dt_example" $flags -Wl,-rpath,"$DT_TMP/inst$libdir" ||
  fail "the example does not build against the installed libdt ($flags)"
pass "the example builds from the installed library: $flags"

expect_status 0 "$DT_TMP/dt_example"
grep -q "rank 0 of 1, .* single process: all collectives correct" "$DT_TMP/out" || fail "one process: $(cat "$DT_TMP/out")"
expect_status 0 timeout 120 $MPIRUN -np 4 "$DT_TMP/dt_example"
cat "$DT_TMP/out"
[ "$(grep -c "of 4, local rank . of 4, launched by MPI: all collectives correct" "$DT_TMP/out")" -eq 4 ] ||
  fail "mpirun -np 4: not every rank correct"
pass "one process and mpirun -np 4: every collective correct"

# a rank that never reaches the barrier: the others time out after 3 s and end the job
start=$(date +%s)
expect_status_nonzero() { set +e; "$@" >"$DT_TMP/out" 2>"$DT_TMP/err"; got=$?; set -e; [ "$got" -ne 0 ] || fail "'$*' succeeded"; }
expect_status_nonzero timeout 60 $MPIRUN -np 3 -x DT_TIMEOUT=3 "$top_builddir/tests/libdt/rank_probe" hang 2
took=$(( $(date +%s) - start ))
cat "$DT_TMP/err" | grep -v "^\[" | head -n 8
grep -q "barrier (operation 2, step 17) did not complete within 3 s: rank 2 did not arrive" "$DT_TMP/err" ||
  fail "no line naming the operation, its step, the timeout and the missing rank"
[ "$took" -lt 40 ] || fail "took $took s to end the job"
pass "a missing rank: the others stop after the 3 s timeout (job ended in $took s), naming the barrier, step 17 and rank 2"
