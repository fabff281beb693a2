#!/bin/sh
# nonregular.sh: a run's run.json or metrics.jsonl that is not a regular file (a FIFO, which would
# block an open for reading forever; a link to /dev/zero, which never ends; a directory) is not
# read: the run is skipped with one note naming the file and what it is, on stderr and in the
# report, and the other runs are reported as usual. Every dtreport runs under timeout, so a
# regression fails instead of hanging.
. "$top_srcdir/tests/common.sh"
DTREPORT="$top_builddir/dtreport"
export SOURCE_DATE_EPOCH=1793000000
unset DT_LOG_LEVEL
command -v timeout >/dev/null 2>&1 || skip "timeout not found (Debian: coreutils)"
fm="$top_srcdir/tests/report/fixtures/fmnist-run"
R="$DT_TMP/res"
mkdir -p "$R/good" "$R/fifo-metrics" "$R/fifo-config" "$R/zero-metrics" "$R/dir-metrics"
cp "$fm/run.json" "$fm/metrics.jsonl" "$R/good/"
cp "$fm/run.json" "$R/fifo-metrics/"
mkfifo "$R/fifo-metrics/metrics.jsonl"
mkfifo "$R/fifo-config/run.json"
cp "$fm/metrics.jsonl" "$R/fifo-config/"
cp "$fm/run.json" "$R/zero-metrics/"
ln -s /dev/zero "$R/zero-metrics/metrics.jsonl"
cp "$fm/run.json" "$R/dir-metrics/"
mkdir "$R/dir-metrics/metrics.jsonl"

expect_status 0 timeout 20 "$DTREPORT" "$R"
for want in 'fifo-metrics: metrics\.jsonl: not a regular file (a FIFO): run skipped' \
  'fifo-config: run\.json: not a regular file (a FIFO): run skipped' \
  'zero-metrics: metrics\.jsonl: not a regular file (a character device): run skipped' \
  'dir-metrics: metrics\.jsonl: not a regular file (a directory): run skipped'; do
  [ "$(grep -c "$want" "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "stderr: not one line with: $want"; }
  grep -q "^- .*$want" "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "the report's notes: no line with: $want"; }
done
[ "$(wc -l <"$DT_TMP/err")" -eq 4 ] || { cat "$DT_TMP/err"; fail "stderr: not exactly the four notes"; }
grep -q '^| good | ' "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "the good run has no row"; }
[ "$(grep '^| ' "$DT_TMP/out" | grep -vc '^| run |')" -eq 1 ] || { cat "$DT_TMP/out"; fail "rows other than the good run's"; }
[ -p "$R/fifo-metrics/metrics.jsonl" ] && [ -p "$R/fifo-config/run.json" ] || fail "a FIFO was replaced"
pass "a results folder: FIFOs, /dev/zero and a directory skipped with one note each, the good run reported"

# the same, given as run directories themselves
expect_status 0 timeout 20 "$DTREPORT" "$R/fifo-config" "$R/fifo-metrics" "$R/good"
grep -q 'fifo-config: run\.json: not a regular file (a FIFO): run skipped' "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "PATH with a FIFO run.json"; }
grep -q 'fifo-metrics: metrics\.jsonl: not a regular file (a FIFO): run skipped' "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "PATH with a FIFO metrics.jsonl"; }
grep -q '^| good | ' "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "the good run has no row"; }
pass "run directories as PATHs: the same notes"

# CSV and JSON carry the notes, and no number for the skipped runs
expect_status 0 timeout 20 "$DTREPORT" --format csv "$R"
[ "$(grep -c ',skipped,0,,,,' "$DT_TMP/out")" -eq 4 ] || { cat "$DT_TMP/out"; fail "CSV: not four skipped runs without numbers"; }
pass "CSV: four skipped runs, no numbers"
