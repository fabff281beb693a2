#!/bin/sh
# launch_slurm.sh: rank, size and local rank under a real Slurm cluster (2 nodes, started here):
# srun with PMI2 (and a 128-byte id through its key-value store), srun without PMI (the Slurm
# environment, with a warning), srun --mpi=pmix (MPI), and uneven and cyclic task layouts, each
# checked against what Slurm itself says (SLURM_LOCALID).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/slurm/cluster.sh"
[ "${DT_HAVE_PMI2:-no}" = yes ] || skip "built without PMI2 (Debian: libpmi2-0-dev)"
probe="$top_builddir/tests/libdt/rank_probe"
cluster_start
pass "a 2-node Slurm cluster is up"

# check_layout NAME WANT_KIND WANT_TASKS SRUN_ARGS...: every rank once, its local rank equal to
# SLURM_LOCALID, local sizes adding up per node, the id received where there is one
check_layout() {
  name=$1; kind=$2; n=$3; shift 3
  expect_status 0 timeout 60 srun "$@" "$probe"
  sort -n -k2 "$DT_TMP/out" > "$DT_TMP/lines"
  cat "$DT_TMP/lines"
  [ "$(grep -c "kind $kind\$" "$DT_TMP/lines")" -eq "$n" ] || fail "$name: expected $n ranks started by '$kind'"
  [ "$(awk '{print $2}' "$DT_TMP/lines" | sort -n | uniq | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ] ||
    fail "$name: ranks are not 0..$((n - 1)) once each"
  awk -v n="$n" '{ split($6, a, "/"); if ($4 != n || a[1] != $10) bad = 1 }
                 END { exit bad }' "$DT_TMP/lines" || fail "$name: a size or local rank differs from Slurm's"
  awk '{ split($6, a, "/"); size[$8] = a[2]; cnt[$8]++ } END { for (k in cnt) if (cnt[k] != size[k]) exit 1 }' \
    "$DT_TMP/lines" || fail "$name: local sizes do not match the ranks per node"
  if grep -q " id BAD" "$DT_TMP/lines"; then fail "$name: the id did not arrive intact"; fi
  pass "$name"
}
check_layout "srun --mpi=pmi2 -N2 --ntasks-per-node=2 (id through the PMI2 KVS)" "Slurm PMI2" 4 \
  --mpi=pmi2 -N2 --ntasks-per-node=2
[ "$(grep -c ' id OK' "$DT_TMP/lines")" -eq 4 ] || fail "PMI2: the 128-byte id did not reach every rank"
check_layout "srun -N2 -n3 (uneven)" "Slurm PMI2" 3 --mpi=pmi2 -N2 -n3
check_layout "srun -N2 -n4 -m cyclic" "Slurm PMI2" 4 --mpi=pmi2 -N2 -n4 -m cyclic
check_layout "srun --mpi=none: the Slurm environment" "Slurm environment (no PMI)" 4 --mpi=none -N2 --ntasks-per-node=2
grep -q "without a PMI server.*--mpi=pmi2" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "--mpi=none: no warning"; }
[ "$(grep -c "without a PMI server" "$DT_TMP/err")" -eq 1 ] || fail "--mpi=none: the warning should come from rank 0 only"
pass "--mpi=none warns once, recommending --mpi=pmi2"
if [ "${DT_HAVE_MPI:-no}" = yes ]; then
  check_layout "srun --mpi=pmix: MPI (id by MPI_Bcast)" "MPI" 4 --mpi=pmix -N2 --ntasks-per-node=2
  [ "$(grep -c ' id OK' "$DT_TMP/lines")" -eq 4 ] || fail "MPI: the id did not reach every rank"
else
  echo "built without MPI: srun --mpi=pmix not tested"
fi

[ "${DT_HAVE_MPI:-no}" = yes ] || { echo "built without MPI: the kill -9, SIGTERM and libdt checks need it"; exit 0; }
# kill -9 of one rank: the others stop at their timeout, naming it; the step fails
start=$(date +%s)
set +e; timeout 60 srun --mpi=pmix -N2 -n4 env DT_TIMEOUT=3 "$probe" die 3 >"$DT_TMP/out" 2>"$DT_TMP/err"; rc=$?; set -e
took=$(( $(date +%s) - start ))
grep "error" "$DT_TMP/err" | head -n 5
[ "$rc" -ne 0 ] || fail "kill -9 of rank 3: the step exited 0"
[ "$rc" -ne 124 ] || fail "kill -9 of rank 3: the step hung for 60 s"
grep -q "did not complete within 3 s: rank 3 did not arrive" "$DT_TMP/err" || fail "kill -9 of rank 3: rank 3 not named"
pass "kill -9 of rank 3: the others name it after the 3 s timeout, step exit $rc after $took s"

# SIGTERM to the job: every task ends, none is left behind (the probe under a name of its own:
# other tests may run rank_probe on this machine at the same time)
cp "$probe" "$DT_TMP/lsprobe_term"
srun --mpi=pmix -N2 -n4 "$DT_TMP/lsprobe_term" sleep >/dev/null 2>&1 &
spid=$!
k=0; while [ "$(pgrep -c -x lsprobe_term || true)" -lt 4 ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
[ "$(pgrep -c -x lsprobe_term || true)" -ge 4 ] || fail "the 4 sleeping tasks did not start"
scancel --signal=TERM "$(squeue -h -o %i | head -n 1)"
k=0; while [ "$(pgrep -c -x lsprobe_term || true)" -gt 0 ] && [ $k -lt 150 ]; do sleep 0.1; k=$((k + 1)); done
left=$(pgrep -c -x lsprobe_term || true)
wait $spid 2>/dev/null || true
[ "$left" -eq 0 ] || fail "SIGTERM: $left tasks still running after 15 s"
pass "SIGTERM to the job: all 4 tasks gone within $((k / 10)) s"

# libdt's host collectives under PMI2 (no MPI): dt_init refuses in one line, saying how to start
${CC:-cc} -I"$top_srcdir/src/libdt" "$top_srcdir/doc/examples/dt_example.c" -o "$DT_TMP/dt_example" \
  -L"$top_builddir/src/.libs" -ldt -Wl,-rpath,"$top_builddir/src/.libs" || fail "the example does not build"
set +e; timeout 60 srun --mpi=pmi2 -N2 -n2 "$DT_TMP/dt_example" >"$DT_TMP/out" 2>"$DT_TMP/err"; rc=$?; set -e
[ "$rc" -ne 0 ] || fail "host collectives under PMI2 should be refused"
grep -q "for CPU training start under MPI (srun --mpi=pmix, or mpirun)" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "the refusal does not say how to start"; }
expect_status 0 timeout 60 srun --mpi=pmix -N2 -n2 "$DT_TMP/dt_example"
[ "$(grep -c "all collectives correct" "$DT_TMP/out")" -eq 2 ] || fail "libdt example under srun --mpi=pmix"
pass "libdt under srun: --mpi=pmi2 refused for host buffers (saying to use --mpi=pmix), --mpi=pmix correct"
