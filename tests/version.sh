#!/bin/sh
# version.sh: dtrain --version names the version and each optional part as this build has it;
# --help works; a bad command line gets one clear line and exit 2.
. "$top_srcdir/tests/common.sh"

expect_status 0 "$DTRAIN" --version
head -n 1 "$DT_TMP/out" | grep -qx "dtrain $DT_VERSION" || fail "first line is not 'dtrain $DT_VERSION'"
for part in HDF5 libjpeg-turbo libpng BLAS; do
  grep -qE "^  $part +yes " "$DT_TMP/out" || fail "--version lacks a line for required part $part"
done
state() { if [ "$1" = yes ]; then echo yes; else echo no; fi; }
for pv in "oneDNN:$DT_HAVE_DNNL" "CUDA:$DT_HAVE_CUDA" "cuDNN:$DT_HAVE_CUDA" "NCCL:$DT_HAVE_CUDA" "PMI2:$DT_HAVE_PMI2" "MPI:$DT_HAVE_MPI"; do
  part=${pv%%:*}; want=$(state "${pv#*:}")
  grep -qE "^  $part +$want( |\$)" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "--version: $part should say $want"; }
done
if [ "$DT_HAVE_MPI" = yes ]; then
  grep -qE "^  MPI +yes .*\(MPI [0-9]+\.[0-9]+\)" "$DT_TMP/out" || fail "--version: MPI line lacks the library version"
fi
if [ "$DT_HAVE_CUDA" = yes ]; then
  grep -qE "^  cuDNN +yes +[0-9]+\.[0-9]+\.[0-9]+ \(built with" "$DT_TMP/out" || fail "--version: cuDNN line lacks versions"
fi
[ -s "$DT_TMP/err" ] && fail "--version wrote to stderr: $(cat "$DT_TMP/err")"
pass "--version: $(tr '\n' ';' < "$DT_TMP/out")"

expect_status 0 "$DTRAIN" --help
grep -q -- "--version" "$DT_TMP/out" || fail "--help does not mention --version"
pass "--help"

one_line_error() {   # one_line_error FRAGMENT: stderr is exactly one error line containing FRAGMENT
  [ "$(wc -l < "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "expected one line on stderr"; }
  grep -qF -- "$1" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "stderr does not name '$1'"; }
  grep -q "error: " "$DT_TMP/err" || fail "stderr line is not an error line"
}
expect_status 2 "$DTRAIN" --no-such-flag
one_line_error "--no-such-flag: unknown option"
expect_status 2 "$DTRAIN" -Z
one_line_error "-Z: unknown option"
expect_status 2 "$DTRAIN" --log-level=loud
one_line_error "--log-level: 'loud' is not one of error, warn, info, debug"
expect_status 2 "$DTRAIN" --log-level
one_line_error "--log-level: missing value"
expect_status 2 "$DTRAIN" /data/imagenet /data/more
one_line_error "/data/more: unexpected argument"
expect_status 2 "$DTRAIN" /data/imagenet
one_line_error "/data/imagenet/manifest.tsv: cannot open the manifest"
pass "bad command lines: exit 2 with one line each"
