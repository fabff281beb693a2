#!/bin/sh
# fuzz.sh: the metrics reader's fuzz target (tests/fuzz/fuzz_metrics.c) for a few seconds on the
# report fixtures: no crash, no sanitizer finding, no plot the report would link but cannot write.
# make check-long runs it for $(FUZZ_SECONDS); DT_FUZZ_SECONDS sets the time here.
. "$top_srcdir/tests/common.sh"
fz="$top_builddir/tests/fuzz/fuzz_metrics"
[ -x "$fz" ] || skip "$fz is not built (make check builds it)"
cd "$DT_TMP"
# shellcheck disable=SC2046
if ! "$fz" -t "${DT_FUZZ_SECONDS:-3}" -s "${DT_FUZZ_SEED:-1}" $(find "$top_srcdir/tests/report/fixtures" -name metrics.jsonl | LC_ALL=C sort); then
  [ -f fuzz_metrics-crash.jsonl ] && cp fuzz_metrics-crash.jsonl "$top_builddir/" &&
    echo "the failing input: $top_builddir/fuzz_metrics-crash.jsonl"
  fail "fuzz_metrics found a failure"
fi
pass "fuzz_metrics"
