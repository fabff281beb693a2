#!/bin/sh
# diskfull.sh: a checkpoint that does not fit on the disk. dtrain trains on a small tmpfs (in a
# private mount namespace: unshare -m as root, unshare -rm otherwise; skipped where neither works)
# with a checkpoint every step; the second checkpoint finds the disk full. dtrain says so in one
# line, the reason without HDF5's call and source location (HDF5's own message spans two lines: it
# must not reach the log as two), the
# first checkpoint is intact and loads, no temporary is left, and the process exits 1 — it used to
# crash in HDF5's exit handler (SIGSEGV, exit 139) after the message.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
private_tmpfs "$DT_TMP/mnt"
small_fmnist_packed "$DT_TMP/fm"
# resnet8's checkpoint is about 640 kB: room for one of them and the run's small files, not for two
$ns sh -c '
  mnt=$1 tmp=$2 dtrain=$3
  mount -t tmpfs -o size=1000k tmpfs "$mnt" || exit 99
  "$dtrain" -a resnet8 -b 20 -j 1 -p 1 --epochs 1 --checkpoint-every 1 --results "$mnt/r" "$tmp/fm" \
    >"$tmp/out" 2>"$tmp/err"
  echo $? >"$tmp/rc"
  cp "$mnt"/r/*/checkpoint.h5 "$tmp/kept.h5" 2>/dev/null
  ls -A "$mnt"/r/* >"$tmp/ls"
  exit 0' sh "$DT_TMP/mnt" "$DT_TMP" "$DTRAIN" || fail "the namespace script failed"
grep -E "error|warn" "$DT_TMP/err" || true
rc=$(cat "$DT_TMP/rc")
[ "$rc" -eq 1 ] || fail "disk full at a checkpoint: exit $rc, expected 1"
grep -q "error: .*No space left on device" "$DT_TMP/err" || fail "the error does not say the disk is full"
grep -q "error: checkpoint .*checkpoint.h5 not written: No space left on device; the previous one (if any) is intact" "$DT_TMP/err" ||
  fail "no line saying the checkpoint was not written"
[ "$(grep -c 'error:' "$DT_TMP/err")" -eq 1 ] && ! grep -q 'HDF5 call failed\|src/' "$DT_TMP/err" ||
  fail "the full disk is not one line without HDF5's call and source location"
! grep -qv '^[0-9][0-9][0-9][0-9]-\|^[A-Za-z_ ]*: \|^$\|^Selected\|^Defaults' "$DT_TMP/err" ||
  { grep -v '^[0-9][0-9][0-9][0-9]-' "$DT_TMP/err"; fail "a message spans lines"; }
! grep -q '\.tmp' "$DT_TMP/ls" || fail "a temporary stayed behind: $(cat "$DT_TMP/ls")"
[ -s "$DT_TMP/kept.h5" ] || fail "the first checkpoint is gone"
expect_status 0 "$DTRAIN" -a resnet8 -b 20 -j 1 -e --resume "$DT_TMP/kept.h5" "$DT_TMP/fm"
pass "disk full at the second checkpoint: one line each, exit 1 (no crash), no temporary, the first checkpoint intact and loadable"
