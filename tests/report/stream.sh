#!/bin/sh
# stream.sh: dtreport reads metrics.jsonl a line at a time, never the whole file:
#   - a run whose metrics.jsonl is fmnist-run's lines with 64 MiB of blank lines between them gives
#     the same row as fmnist-run, and dtreport's peak resident memory on it stays within 16 MiB of
#     its peak on fmnist-run itself (a whole-file buffer would add 64 MiB or more); measured with
#     GNU time, or python3 where that is missing (else that part is left out, and the log says so);
#   - a line longer than 1 MiB is not parsed: the run is skipped with a note naming the file and
#     line and saying why;
#   - a metrics.jsonl over 1 GiB (sparse here) is skipped unread, with a note.
. "$top_srcdir/tests/common.sh"
DTREPORT="$top_builddir/dtreport"
export SOURCE_DATE_EPOCH=1793000000
unset DT_LOG_LEVEL
fm="$top_srcdir/tests/report/fixtures/fmnist-run"

# --- 64 MiB of blank lines between the lines: the same row, bounded memory -------------------------
mkdir -p "$DT_TMP/big/fmnist-run"
cp "$fm/run.json" "$DT_TMP/big/fmnist-run/"
# after each of the 20 lines, 3300 lines of 1023 spaces: 20 x 3300 x 1 KiB = 64.5 MiB
awk 'BEGIN { pad = sprintf("%1023s", "") } { print; for (i = 0; i < 3300; i++) print pad }' "$fm/metrics.jsonl" \
  >"$DT_TMP/big/fmnist-run/metrics.jsonl"
size=$(wc -c <"$DT_TMP/big/fmnist-run/metrics.jsonl")
[ "$size" -gt 67108864 ] || fail "the padded metrics.jsonl has $size bytes, not over 64 MiB"
cd "$top_srcdir/tests/report/fixtures"
expect_status 0 "$DTREPORT" fmnist-run
grep '^| fmnist-run ' "$DT_TMP/out" >"$DT_TMP/row.small"
cd "$DT_TMP/big"
expect_status 0 "$DTREPORT" fmnist-run
grep '^| fmnist-run ' "$DT_TMP/out" >"$DT_TMP/row.big"
[ -s "$DT_TMP/row.small" ] || fail "no fmnist-run row"
diff -u "$DT_TMP/row.small" "$DT_TMP/row.big" || fail "the padded file gives another row"
[ ! -s "$DT_TMP/err" ] || { cat "$DT_TMP/err"; fail "notes for the padded file"; }
pass "64 MiB of blank lines between the lines: the same row"

# peak_kib DIR: dtreport's peak resident set (KiB) reporting DIR's fmnist-run
peak_kib() {
  if [ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1; then
    (cd "$1" && /usr/bin/time -o "$DT_TMP/time" -f %M "$DTREPORT" fmnist-run >/dev/null 2>&1) || return 1
    tail -n 1 "$DT_TMP/time"
  else
    (cd "$1" && python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$DTREPORT" fmnist-run)
  fi
}
if [ -x /usr/bin/time ] || command -v python3 >/dev/null 2>&1; then
  small=$(peak_kib "$top_srcdir/tests/report/fixtures") || fail "cannot measure dtreport's memory"
  big=$(peak_kib "$DT_TMP/big") || fail "cannot measure dtreport's memory"
  echo "peak resident memory: $small KiB on fmnist-run, $big KiB with 64 MiB of blank lines"
  [ "$big" -lt $((small + 16384)) ] || fail "dtreport's peak memory grows with the file: $small KiB, then $big KiB"
  pass "bounded memory: $small KiB, then $big KiB for a 64 MiB file"
else
  pass "memory not measured: neither GNU time (/usr/bin/time) nor python3 here"
fi
rm -rf "$DT_TMP/big"

# --- a line over 1 MiB: the run is skipped, with the line named ------------------------------------
mkdir -p "$DT_TMP/long/long-line"
cp "$fm/run.json" "$DT_TMP/long/long-line/"
{
  head -n 4 "$fm/metrics.jsonl"
  # a step line whose loss is written with 1.5 million digits: valid JSON, but no line is that long
  awk 'BEGIN { s = "0."; for (i = 0; i < 1500000; i += 100) s = s sprintf("%0100d", 7); printf "{\"kind\":\"step\",\"epoch\":0,\"epoch_step\":480,\"step\":480,\"img_per_s\":1000.0,\"train_loss\":%s}\n", s }'
  tail -n +5 "$fm/metrics.jsonl"
} >"$DT_TMP/long/long-line/metrics.jsonl"
expect_status 0 "$DTREPORT" "$DT_TMP/long"
grep -q 'long-line: metrics\.jsonl:5: longer than 1 MiB: run skipped' "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no note naming the long line"; }
[ "$(wc -l <"$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "not one line on stderr"; }
grep -q '^| long-line' "$DT_TMP/out" && fail "the run with the long line has a row"
pass "a line over 1 MiB: run skipped, the line named"

# --- over 1 GiB: skipped unread ---------------------------------------------------------------------
mkdir -p "$DT_TMP/huge/huge"
cp "$fm/run.json" "$fm/metrics.jsonl" "$DT_TMP/huge/huge/"
if truncate -s 1100M "$DT_TMP/huge/huge/metrics.jsonl" 2>/dev/null; then
  expect_status 0 timeout 20 "$DTREPORT" "$DT_TMP/huge"
  grep -q 'huge: metrics\.jsonl: over 1 GiB: run skipped' "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no note for the 1.1 GiB file"; }
  [ "$(wc -l <"$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "not one line on stderr"; }
  pass "over 1 GiB: run skipped unread"
else
  pass "over 1 GiB: not checked, truncate cannot make a sparse file here"
fi
