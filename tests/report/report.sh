#!/bin/sh
# report.sh: dtreport on the committed fixtures (tests/report/fixtures, written by make_fixtures.py,
# which says what each run is for) gives exactly tests/report/expected.md; the speed-ups and
# efficiencies are the designed ones and agree with a recomputation here from the rates; the ranks
# column says GPUs only for CUDA runs and does not invent a per-node count for an uneven layout
# (3 ranks over 2 nodes); CSV and JSON parse and carry the same runs; the corrupt run is named with its file and line on stderr;
# the plots the report links exist; bad command lines give one line and exit 2; and two real
# dtrain runs make a table.
. "$top_srcdir/tests/common.sh"
DTREPORT="$top_builddir/dtreport"
fx="$top_srcdir/tests/report/fixtures"
export SOURCE_DATE_EPOCH=1793000000 # 2026-10-26
unset DT_LOG_LEVEL
cd "$fx" # the sources as the header names them: results, fmnist-run

# --- the golden report ------------------------------------------------------------------------
expect_status 0 "$DTREPORT" results fmnist-run -o "$DT_TMP/RESULTS.md" --plots "$DT_TMP/plots"
[ ! -s "$DT_TMP/out" ] || fail "-o FILE: something went to stdout: $(head -c 200 "$DT_TMP/out")"
diff -u "$top_srcdir/tests/report/expected.md" "$DT_TMP/RESULTS.md" || fail "RESULTS.md differs from expected.md"
pass "golden Markdown"
ls "$DT_TMP" | grep -q '\.tmp\.' && fail "a temporary file was left: $(ls "$DT_TMP")"
grep -q 'job1007: metrics\.jsonl:9: not valid JSON: run skipped' "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "stderr does not name the corrupt file and line"; }
grep -q 'job1006: metrics\.jsonl:9: the last line is incomplete' "$DT_TMP/err" || fail "stderr: no truncated line"
grep -q 'orphan-metrics: metrics\.jsonl but no run\.json' "$DT_TMP/err" || fail "stderr: no missing run.json"
pass "stderr names the damaged runs"

# every plot linked exists and is SVG, and no other was written
grep -o '](plots/[^)]*)' "$DT_TMP/RESULTS.md" | sed 's/^](plots\///; s/)$//' | sort >"$DT_TMP/linked"
(cd "$DT_TMP/plots" && ls) | sort >"$DT_TMP/written"
diff -u "$DT_TMP/linked" "$DT_TMP/written" || fail "the plots linked and written differ"
[ "$(wc -l <"$DT_TMP/linked")" -eq 25 ] || fail "expected 25 plots, got $(wc -l <"$DT_TMP/linked")"
while read -r f; do
  head -c 300 "$DT_TMP/plots/$f" | grep -q '<svg' || fail "plots/$f is not SVG"
done <"$DT_TMP/linked"
grep -q 'fmnist-run-loss-scale.svg' "$DT_TMP/linked" || fail "no loss-scale plot for the dynamic-scale run"
pass "plots: 25 SVG files, exactly those linked"

# the same report again, to stdout, without plots: the same tables
expect_status 0 "$DTREPORT" results fmnist-run
grep -v '](plots/' "$DT_TMP/RESULTS.md" | grep -v '^$' >"$DT_TMP/a"
grep -v '^$' "$DT_TMP/out" >"$DT_TMP/b"
diff -u "$DT_TMP/a" "$DT_TMP/b" || fail "stdout without --plots differs from -o with plots (less the links)"
# written to stdout, links are relative to the current folder
expect_status 0 "$DTREPORT" fmnist-run --plots "$DT_TMP/p2"
link=$(grep -o '](\([^)]*top1\.svg\))' "$DT_TMP/out" | sed 's/^](//; s/)$//')
[ -f "$link" ] || fail "link $link (stdout, from $(pwd)) does not lead to the plot"
pass "stdout report; relative links"

# --- scaling arithmetic: designed numbers, and recomputed from the rates ---------------------------
for want in '| 1 GPU (1 x 1) | cuda | 256 | 256 | O0 | 3/3 | 1000.0 | — | — |' \
  '| 2 GPUs (1 x 2) | cuda | 256 | 512 | O0 | 3/3 | 1900.0 | 1.90x | 95.0% |' \
  '| 4 GPUs (1 x 4) | cuda | 256 | 1024 | O0 | 3/3 | 3600.0 | 3.60x | 90.0% |' \
  '| 8 GPUs (2 x 4) | cuda | 256 | 2048 | O0 | 3/3 | 6800.0 | 6.80x | 85.0% |' \
  '(in progress) | 16 GPUs (4 x 4) | cuda | 256 | 4096 | O0 | 1/3 | 12800.0 | 12.80x | 80.0% |' \
  '-stopped (stopped) | 4 GPUs (1 x 4) | cuda | 256 | 1024 | O0 | 1/3 | 3600.0 | 3.60x | 90.0% |' \
  '| 8 GPUs (2 x 4) | cuda | 256 | 2048 | O2 bf16 | 3/3 | 11200.0 | — | — |' \
  '-b128 | 6 GPUs (2 nodes, uneven) | cuda | 128 | 768 | O0 | 3/3 | 4800.0 | — | — |' \
  '| fmnist-run | 1 rank (1 x 1) | cpu | 128 | 128 |' \
  '-w2-job1009 | 2 ranks (1 x 2) | cpu | 64 | 128 | O0 | 2/2 | 400.0 | — | — |' \
  '-w3-job1010 | 3 ranks (2 nodes, uneven) | cpu | 64 | 192 | O0 | 2/2 | 576.0 | 1.44x | 96.0% |'; do
  grep -qF -- "$want" "$DT_TMP/RESULTS.md" || fail "no row with: $want"
done
# the ranks column: GPUs only on CUDA rows, no "N x M" that is not the world size
grep '^| ' "$DT_TMP/RESULTS.md" | grep -v '^| run |' >"$DT_TMP/rows"
grep -E '\| cpu \|' "$DT_TMP/rows" | grep -q 'GPU' && fail "a CPU run's row names GPUs: $(grep -E '\| cpu \|' "$DT_TMP/rows" | grep GPU)"
grep -E '\| cuda \|' "$DT_TMP/rows" | grep -q ' ranks\{0,1\} (' && fail "a CUDA run's row says ranks"
sed -n 's/^| [^|]* | \([0-9]*\) [A-Za-z]* (\([0-9]*\) x \([0-9]*\)) |.*/\1 \2 \3/p' "$DT_TMP/rows" >"$DT_TMP/layouts"
[ "$(wc -l <"$DT_TMP/layouts")" -eq 9 ] || fail "expected 9 rows with an even layout, got $(wc -l <"$DT_TMP/layouts")"
awk '$1 != $2 * $3 { print "ranks " $1 " shown as " $2 " x " $3; bad = 1 } END { exit bad }' "$DT_TMP/layouts" ||
  fail "a layout that is not the world size"
pass "ranks column: GPUs for CUDA runs, ranks for CPU runs, uneven layouts not multiplied out"
expect_status 0 "$DTREPORT" --format csv results fmnist-run
cp "$DT_TMP/out" "$DT_TMP/runs.csv"
# columns: 3 arch, 5 device, 8 ranks, 9 batch_per_rank, 11 opt_level, 17 img_per_s, 18 speedup, 19 efficiency_pct
awk -F, 'NR > 1 && $3 == "resnet50" && $5 == "cuda" && $9 == 256 && $11 == 0 && $17 != "" {
    n++; ranks[n] = $8; rate[n] = $17; sp[n] = $18; eff[n] = $19 }
  END {
    if (n != 6) { print "expected 6 rated O0 resnet50 runs, got " n; exit 1 }
    b = 1; for (i = 2; i <= n; i++) if (ranks[i] < ranks[b]) b = i
    for (i = 1; i <= n; i++) {
      s = rate[i] / rate[b]; e = 100 * s / (ranks[i] / ranks[b])
      if (i == b) { if (sp[i] != "" || eff[i] != "") { print "the baseline has a speed-up"; exit 1 } continue }
      d1 = s - sp[i]; d2 = e - eff[i]
      if (d1 * d1 > 1e-12 || d2 * d2 > 1e-8) { print "ranks " ranks[i] ": speed-up " sp[i] " efficiency " eff[i] ", recomputed " s " " e; exit 1 }
      printf "ranks %d: %.0f img/s, speed-up %.2fx, efficiency %.1f%%\n", ranks[i], rate[i], s, e
    }
  }' "$DT_TMP/runs.csv" || fail "efficiency arithmetic"
pass "speed-up and efficiency: designed and recomputed"

# --- CSV and JSON -----------------------------------------------------------------------------
if [ -x /usr/bin/python3 ]; then
  expect_status 0 "$DTREPORT" --format json -o "$DT_TMP/runs.json" results fmnist-run
  /usr/bin/python3 - "$DT_TMP/runs.csv" "$DT_TMP/runs.json" <<'PY' || fail "CSV/JSON"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
runs = json.load(open(sys.argv[2]))
assert len(rows) == 13 and len(runs) == 13, (len(rows), len(runs))
assert [r["run"] for r in rows] == [r["run"] for r in runs]
by = {r["run"]: r for r in runs}
for r in rows:
    j = by[r["run"]]
    for k in ("img_per_s", "speedup", "efficiency_pct", "train_time_s", "best_top1", "time_to_acc_s"):
        assert (r[k] == "") == (j[k] is None), (r["run"], k)
        if j[k] is not None:
            assert abs(float(r[k]) - j[k]) < 1e-6 * max(1, abs(j[k])), (r["run"], k, r[k], j[k])
    assert r["state"] == j["state"]
states = sorted(j["state"] for j in runs)
assert states == ["ok"] * 9 + ["partial"] * 2 + ["skipped"] * 2, states
# an uneven layout: nodes and ranks, no ranks_per_node (run.json's is rank 0's node's only)
for suffix in ("-w3-job1010", "-w6-job1011-b128"):
    j = [j for j in runs if j["dir"].endswith(suffix)][0]
    c = [r for r in rows if r["dir"] == j["dir"]][0]
    assert j["nodes"] == 2 and j["ranks_per_node"] is None and c["ranks_per_node"] == "", (j, c)
j = [j for j in runs if j["dir"].endswith("-w8-job1004")][0]
assert j["nodes"] == 2 and j["ranks_per_node"] == 4 and j["ranks"] == 8, j
fm = by["fmnist-run"]
assert fm["acc_epoch"] == 3 and abs(fm["time_to_acc_s"] - 237.8) < 1e-9 and fm["desired_acc"] == 90, fm
bad = [j for j in runs if j["dir"].endswith("job1007")][0]
assert bad["img_per_s"] is None and bad["state"] == "skipped" and "metrics.jsonl:9" in bad["notes"][0], bad
w16 = [j for j in runs if j["ranks"] == 16][0]
assert w16["in_progress"] is True and w16["epochs_done"] == 1 and abs(w16["efficiency_pct"] - 80) < 1e-9, w16
assert w16["stopped"] is False and w16["end"] is None, w16
st = [j for j in runs if j["dir"].endswith("-stopped")][0]
assert st["stopped"] is True and st["in_progress"] is False and st["end"] == "signal" and st["epochs_done"] == 1, st
assert "stopped by signal 10 at epoch 1, step 612 (resumable)" in st["notes"][0], st
assert by["fmnist-run"]["end"] is None and [j for j in runs if j["dir"].endswith("job1001")][0]["end"] == "done"
print("csv and json: %d runs, the same numbers" % len(runs))
PY
  pass "CSV and JSON parse and agree"
fi

# --- bad command lines: one line, exit 2 --------------------------------------------------------
for args in "--bogus results" "" "--format xml results" "/nonexistent-dtreport-path" "-o" "--plots" \
  "results/orphan-metrics/metrics.jsonl"; do
  # shellcheck disable=SC2086
  expect_status 2 "$DTREPORT" $args
  [ "$(wc -l <"$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "dtreport $args: not one line"; }
  [ ! -s "$DT_TMP/out" ] || fail "dtreport $args: wrote to stdout"
done
expect_status 1 "$DTREPORT" results -o "$DT_TMP/no-such-dir/R.md"
expect_status 2 env SOURCE_DATE_EPOCH=soon "$DTREPORT" results
expect_status 0 "$DTREPORT" --help
expect_status 0 "$DTREPORT" --version
pass "bad usage: exit 2 with one line; unwritable -o: exit 1"

# --- two real runs ------------------------------------------------------------------------------
mkdir "$DT_TMP/res"
expect_status 0 "$DTRAIN" --synthetic -a resnet8 --crop 32 -b 8 --max-steps 4 --epochs 2 -p 2 --results "$DT_TMP/res" --run-name first
expect_status 0 "$DTRAIN" --synthetic -a resnet8 --crop 32 -b 8 --max-steps 4 --epochs 1 -p 2 --results "$DT_TMP/res" --run-name second
cd "$DT_TMP"
expect_status 0 "$DTREPORT" res
grep -q '^## resnet8 on synthetic$' "$DT_TMP/out" || { cat "$DT_TMP/out"; fail "no resnet8 table"; }
rows=$(grep -c '^| [^ ]*-resnet8-w1-\(first\|second\)' "$DT_TMP/out")
[ "$rows" -eq 2 ] || { cat "$DT_TMP/out"; fail "expected 2 rows, got $rows"; }
grep -q -- '-w1-first (stopped) | 1 rank (1 x 1) | cpu | 8 | 8 | O0 | 1/2 | [0-9]*\.[0-9] |' "$DT_TMP/out" ||
  { cat "$DT_TMP/out"; fail "the stopped run's row"; }
grep -q -- '-w1-second | 1 rank (1 x 1) | cpu | 8 | 8 | O0 | 1/1 | [0-9]*\.[0-9] |' "$DT_TMP/out" ||
  { cat "$DT_TMP/out"; fail "the complete run's row"; }
pass "two dtrain runs, one table"
