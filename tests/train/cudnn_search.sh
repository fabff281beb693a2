#!/bin/sh
# cudnn_search.sh: dtrain --cudnn-search MODE (doc/dtrain.1), the command line only (the search runs
# on a GPU: tests/gpu/check.sh).
#   - without --device cuda the flag has no effect, so it is refused (the rule for flags without
#     effect): one line "--cudnn-search has no effect without --device cuda", exit 2, nothing
#     written, --print-lr included;
#   - a mode that is not heuristic, bounded, bounded:SECONDS or exhaustive, a time cap on another
#     mode, and a cap that is not a number in 0.001..3600 are one line each naming the flag, exit 2;
#   - in a CUDA build, every mode is accepted with --device cuda (checked with --print-lr, which
#     checks the command line as a run does and touches no device).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"

# refuse WHAT PATTERN ARGS...: exit 2, one error line matching PATTERN, no results
refuse() {
  what=$1 pat=$2; shift 2
  rm -rf "$DT_TMP/res"
  refused "$what" "$pat" "$DTRAIN" --results "$DT_TMP/res" "$@"
  [ ! -e "$DT_TMP/res" ] || [ -z "$(ls "$DT_TMP/res")" ] || fail "$what: something was written"
}

# 1. no effect on the CPU
for mode in heuristic bounded bounded:0.5 exhaustive; do
  refuse "--cudnn-search $mode on the CPU" "--cudnn-search has no effect without --device cuda" \
    -a resnet8 --crop 32 -b 8 --synthetic --max-steps 1 --cudnn-search "$mode"
done
refuse "--cudnn-search with --device cpu, --print-lr" "--cudnn-search has no effect without --device cuda" \
  --print-lr 1 --device cpu --cudnn-search heuristic
pass "--cudnn-search without --device cuda: one line, exit 2, nothing written"

# 2. bad values (refused while parsing, before any other check)
refuse "an unknown mode" "--cudnn-search: 'fast' is not one of heuristic, bounded, exhaustive" \
  --synthetic --cudnn-search fast
refuse "an unknown mode with a cap" "--cudnn-search: 'fastest' is not one of heuristic, bounded, exhaustive" \
  --synthetic --cudnn-search fastest:2
refuse "a cap on heuristic" "--cudnn-search heuristic:2: only bounded takes a time cap" \
  --synthetic --cudnn-search heuristic:2
refuse "a cap of 0" "--cudnn-search bounded:SECONDS: 0 is out of range (expected 0.001..3600)" \
  --synthetic --cudnn-search bounded:0
refuse "a cap that is not a number" "--cudnn-search bounded:SECONDS: '1s' is not a number" \
  --synthetic --cudnn-search bounded:1s
refuse "an empty cap" "--cudnn-search bounded:SECONDS" --synthetic --cudnn-search bounded:
refuse "no mode" "--cudnn-search" --synthetic --cudnn-search ""
pass "bad --cudnn-search values: one line naming the flag, exit 2"

# 3. a CUDA build takes every mode with --device cuda
if "$DTRAIN" --version | grep -q '^ *CUDA  *yes'; then
  for mode in heuristic bounded bounded:0.5 bounded:3600 exhaustive; do
    expect_status 0 "$DTRAIN" --synthetic --device cuda --print-lr 1 --epochs 1 --cudnn-search "$mode"
  done
  pass "--device cuda takes --cudnn-search heuristic, bounded[:S], exhaustive"
else
  refuse "--device cuda without CUDA" "--device cuda: this dtrain was built without CUDA" \
    --synthetic --device cuda --cudnn-search heuristic
  pass "(a build without CUDA: --device cuda is refused first)"
fi
