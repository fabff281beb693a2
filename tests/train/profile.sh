#!/bin/sh
# profile.sh: DT_PROFILE (doc/dtrain.1, ENVIRONMENT). A tiny CPU run with DT_PROFILE=1 prints the
# report in its format: the header, one "kind ms/step share" row per kind (every ms a number, the
# most first, the step's main kinds among them), and a total that is the rows' sum. DT_PROFILE=last
# profiles the last step only, after --graph's captured steps, and changes no result (the metrics and
# the checkpoint equal a run without it); DT_PROFILE=1 issues every step (no capture). A bad
# DT_PROFILE=last:K is one line naming it, exit 2. The same report, from the CUDA backend's events,
# is what tests/gpu/summary.py reads in the GPU check's dtrain-O2 stage.
. "$top_srcdir/tests/common.sh"
cd "$DT_TMP"
run() { # run NAME ENV... : resnet8 at 32x32, 4 steps of batch 8, O2, --graph, into res.NAME
  name=$1
  shift
  expect_status 0 env OMP_NUM_THREADS=1 "$@" "$DTRAIN" -a resnet8 --crop 32 -b 8 --synthetic --max-steps 4 -p 1 \
    --epochs 1 --opt-level O2 --graph --results "$DT_TMP/res.$name" --run-name p
  cp "$DT_TMP/err" "$DT_TMP/err.$name"
}

# check_report FILE STEPS: FILE's report is in the format, for STEPS steps
check_report() {
  awk -v steps="$2" '
    /^profile: / { head = $0; inside = 1; next }
    inside && /^kind +ms\/step +share$/ { header = 1; next }
    inside && /^total / { if (NF != 3 || $2 !~ /^[0-9]+\.[0-9]+$/ || $3 != "100.0%") bad = bad " total:" $0
                          total = $2; done = 1; inside = 0; next }
    inside { if (NF != 3 || $2 !~ /^[0-9]+\.[0-9]+$/ || $3 !~ /^[0-9]+\.[0-9]%$/) bad = bad " row:" $0
             if (rows && $2 + 0 > last + 0) bad = bad " order:" $1
             last = $2; sum += $2; share += $3; rows++; kinds = kinds " " $1 }
    END {
      want = "profile: " steps " step" (steps == 1 ? "" : "s") ", ms per step by kind (cpu timers)"
      if (head != want) { print "header line: \"" head "\", expected \"" want "\""; exit 1 }
      if (!header || !done || rows < 5 || bad != "") { print "rows:" rows " header:" header " total:" done bad; exit 1 }
      # the total is the rows sum (each row rounded to 0.001 ms), the shares 100% (each to 0.1%)
      d = sum - total; if (d < 0) d = -d
      s = share - 100; if (s < 0) s = -s
      if (d > 0.001 * rows || s > 0.1 * rows) { print "sum " sum " vs total " total ", shares " share; exit 1 }
      print kinds
    }' "$1"
}

run every DT_PROFILE=1
kinds=$(check_report "$DT_TMP/err.every" 4) || { cat "$DT_TMP/err.every"; fail "DT_PROFILE=1: the report's format: $kinds"; }
for k in conv_fwd conv_wgrad conv_dgrad batchnorm_fwd batchnorm_bwd linear_fwd linear_bwd loss optimizer \
  amp_scaler input_upload input_normalize; do
  case " $kinds " in *" $k "*) ;; *) cat "$DT_TMP/err.every"; fail "DT_PROFILE=1: no row $k (rows:$kinds)" ;; esac
done
! grep -q "captured as graphs" "$DT_TMP/out" "$DT_TMP/err.every" || fail "DT_PROFILE=1 with --graph captured a graph"
pass "DT_PROFILE=1: the report (4 steps, $(echo $kinds | wc -w) kinds), the total the rows' sum; every step issued"

run none
run last DT_PROFILE=last
grep -q "profile" "$DT_TMP/err.none" && fail "a run without DT_PROFILE printed a profile"
grep -q "step 2: the training step captured as graphs" "$DT_TMP/err.last" ||
  { cat "$DT_TMP/err.last"; fail "DT_PROFILE=last: the steps before the last were not captured as graphs"; }
kinds=$(check_report "$DT_TMP/err.last" 1) || { cat "$DT_TMP/err.last"; fail "DT_PROFILE=last: the report: $kinds"; }
# the same run: every number but the clock's
strip() { sed -E 's/"[a-z_]*(per_s|_ms|time|seconds)[a-z_]*":[^,}]*,?//g' "$1"/*/metrics.jsonl; }
strip res.none > m.none
strip res.last > m.last
cmp -s m.none m.last || { diff m.none m.last; fail "DT_PROFILE=last changed metrics.jsonl"; }
if command -v h5dump > /dev/null; then
  h5dump res.none/*/checkpoint.h5 | grep -v "res\.none" > c.none
  h5dump res.last/*/checkpoint.h5 | grep -v "res\.last" > c.last
  cmp -s c.none c.last || { diff c.none c.last | head; fail "DT_PROFILE=last changed the checkpoint"; }
fi
pass "DT_PROFILE=last: the last step profiled after the graphs' steps, the same metrics and checkpoint"

expect_status 2 env DT_PROFILE=last:x "$DTRAIN" -a resnet8 --crop 32 -b 8 --synthetic --max-steps 1 --results "$DT_TMP/bad"
[ "$(grep -c "error:" "$DT_TMP/err")" -eq 1 ] && grep -q "DT_PROFILE=last:K" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "DT_PROFILE=last:x: not one line naming it"; }
pass "DT_PROFILE=last:x: one line naming it, exit 2"
