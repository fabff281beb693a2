#!/bin/sh
# once.sh: what a run writes or reads once, seen in its system calls (strace; skipped without).
# - run.json is written once, whole: one file written (under a temporary name) and renamed over
#   run.json, never run.json itself (it was written, then written again with the options).
# - A resume opens its checkpoint once: one open in the probe's child (util/h5probe.c, which reads
#   all of the file's metadata in a fork) and one in dtrain, with --resume PATH and with --resume
#   auto (the record was read, then the state, each probing and opening the file: twice each, and
#   auto's search a third time).
# resnet8 on synthetic data, a few steps of 8 images.
. "$top_srcdir/tests/common.sh"
command -v strace >/dev/null && strace -qq -o /dev/null -e trace=openat true 2>/dev/null ||
  skip "no strace that can trace here"
args="-a resnet8 --synthetic --crop 32 -b 8 -j 1 -p 1"
# traced LOG ARGS...: dtrain ARGS under strace (every process, its opens and renames) into LOG, exit 0
traced() {
  log=$1
  shift
  expect_status 0 env OMP_NUM_THREADS=1 strace -f -qq -o "$log" -e trace=openat,rename,renameat,renameat2 \
    "$DTRAIN" $args "$@"
}

traced "$DT_TMP/new.st" --max-steps 2 --results "$DT_TMP/res"
run=$(ls -d "$DT_TMP"/res/*)
[ "$(grep -c "openat(.*\"$run/run.json.*O_WRONLY" "$DT_TMP/new.st")" = 1 ] &&
  grep -q "openat(.*\"$run/run.json.tmp.[0-9]*\".*O_WRONLY" "$DT_TMP/new.st" &&
  [ "$(grep -c "rename.*\"$run/run.json.tmp.[0-9]*\", .*\"$run/run.json\"" "$DT_TMP/new.st")" = 1 ] ||
  { grep run.json "$DT_TMP/new.st"; fail "run.json was not written once, under a temporary name, and renamed"; }
pass "run.json is written once, whole (a temporary file renamed over it)"

# opens LOG: how many times LOG's processes opened the checkpoint
opens() {
  grep -c "openat(.*\"$run/checkpoint.h5\"" "$1" || true
}
for how in "$run/checkpoint.h5" auto; do
  traced "$DT_TMP/resume.st" --max-steps 1 --resume "$how" --results "$DT_TMP/res"
  grep -q "resuming from $run/checkpoint.h5" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "--resume $how did not resume"; }
  [ "$(opens "$DT_TMP/resume.st")" = 2 ] ||
    { grep checkpoint.h5 "$DT_TMP/resume.st"; fail "--resume $how: the checkpoint was opened $(opens "$DT_TMP/resume.st") times, not twice (its probe and dtrain)"; }
done
pass "a resume opens its checkpoint once (and its probe once), with PATH and with auto"
