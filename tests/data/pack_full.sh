#!/bin/sh
# pack_full.sh: dtpack on a full disk, a 64 kB tmpfs in a private mount namespace filled but for a
# few pages. With one page left (the manifest takes it) H5Fcreate of the first shard fails with
# ENOSPC after creating a 0-byte file, which must not stay behind, and the error is one line (it
# was HDF5's, over two lines). With four left the shard fills the disk half-way through (H5Dwrite
# fails). Either way: exit 1, no temporary left, no split listed. Skipped where mount namespaces are not available (unshare -m as root, unshare -rm
# otherwise; a container without CAP_SYS_ADMIN or user namespaces has neither).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
private_tmpfs "$DT_TMP/mnt"
small_fmnist "$DT_TMP/src"

# inside the namespace, for each case: a new tmpfs filled but for PAGES pages, then dtpack; what it
# saw goes to $DT_TMP/<case>.*
$ns sh -c '
  set -u
  mnt=$1 res=$2 src=$3 dtpack=$4
  for c in 1 4; do
    mount -t tmpfs -o size=64k tmpfs "$mnt" || exit 99
    mkdir "$mnt/o"
    dd if=/dev/zero of="$mnt/fill" bs=4096 2>/dev/null
    truncate -s -$((c * 4096)) "$mnt/fill"
    timeout 20 "$dtpack" fashion-mnist "$src" -o "$mnt/o" >"$res/$c.out" 2>"$res/$c.err"
    echo $? >"$res/$c.rc"
    ls -A "$mnt/o" >"$res/$c.ls"
    cat "$mnt/o/manifest.tsv" >"$res/$c.manifest" 2>/dev/null
    umount "$mnt"
  done
  exit 0' sh "$DT_TMP/mnt" "$DT_TMP" "$DT_TMP/src" "$DTPACK" || fail "the namespace script failed"
for c in 1 4; do
  cat "$DT_TMP/$c.err"
  echo "$c page(s) left: exit $(cat "$DT_TMP/$c.rc"), in the output: $(tr '\n' ' ' < "$DT_TMP/$c.ls")"
  [ "$(cat "$DT_TMP/$c.rc")" -eq 1 ] || fail "$c page(s) left: dtpack exited $(cat "$DT_TMP/$c.rc"), expected 1"
  ! grep -q '\.tmp' "$DT_TMP/$c.ls" || fail "$c page(s) left: a temporary stayed behind: $(cat "$DT_TMP/$c.ls")"
  ! grep -q '^train' "$DT_TMP/$c.manifest" || fail "$c page(s) left: the train split is listed"
done
grep -q "error: shard .*/o/.train-00000.h5.tmp: cannot create: No space left on device$" "$DT_TMP/1.err" ||
  fail "H5Fcreate on a full disk: not said in one line naming the shard"
! grep -qv '^[0-9][0-9][0-9][0-9]-' "$DT_TMP/1.err" || fail "H5Fcreate on a full disk: an error message spans lines"
grep -q "o/.train-00000.h5.tmp: shard not written" "$DT_TMP/4.err" || fail "a disk full mid-shard: the shard is not named"
pass "a full disk at H5Fcreate and mid-shard: exit 1, no temporary left, no split listed"
