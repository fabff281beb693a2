# common.sh: sourced by tests/bench/*.sh after tests/common.sh. Each test runs one script of bench/ once
# on a tiny setting and checks its result line: numbers that parse, positive and finite.

# bench_setup: skip without python3-torch; the bench programs built (make bench), one test at a time
bench_setup() {
  [ -n "${DT_PYTHON_TORCH:-}" ] || skip "no python3 with torch, torchvision and h5py (Debian: python3-torch python3-torchvision python3-h5py)"
  export PYTHON_TORCH="$DT_PYTHON_TORCH"
  unset MAKEFLAGS MFLAGS MAKELEVEL   # make check's jobserver is not ours to use
  if command -v flock >/dev/null; then
    flock "$top_builddir/Makefile" make -C "$top_builddir" bench >"$DT_TMP/make.out" 2>&1 || { cat "$DT_TMP/make.out"; fail "make bench"; }
  else
    make -C "$top_builddir" bench >"$DT_TMP/make.out" 2>&1 || { cat "$DT_TMP/make.out"; fail "make bench"; }
  fi
}

# bench_run SECONDS SCRIPT ARGS...: bench/SCRIPT with ARGS, its output in $DT_TMP/out (shown in the log)
bench_run() {
  secs=$1; script=$2; shift 2
  echo "bench/$script $*"
  set +e; timeout "$secs" "$top_srcdir/bench/$script" "$@" >"$DT_TMP/out" 2>&1; st=$?; set -e
  cat "$DT_TMP/out"
  [ "$st" -ne 124 ] || fail "bench/$script did not finish in $secs s"
  [ "$st" -eq 0 ] || fail "bench/$script exited $st"
}

# result_line ERE: the one line of $DT_TMP/out matching ERE (fails unless exactly one)
result_line() {
  n=$(grep -cE "$1" "$DT_TMP/out" || true)
  [ "$n" -eq 1 ] || fail "expected one line matching '$1' in the output, got $n"
  grep -E "$1" "$DT_TMP/out"
}

# positive WHAT VALUE [MAX]: fail unless VALUE is a decimal number > 0 (and <= MAX when given)
positive() {
  echo "$2" | grep -qE '^[0-9]+(\.[0-9]+)?$' || fail "$1: '$2' is not a number"
  awk -v v="$2" -v m="${3:-}" 'BEGIN { exit !(v > 0 && (m == "" || v <= m + 0)) }' ||
    fail "$1: $2 is not in (0, ${3:-inf}]"
}
