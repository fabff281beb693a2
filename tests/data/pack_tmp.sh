#!/bin/sh
# pack_tmp.sh: a shard or manifest that cannot be written leaves no temporary file behind and no
# split listed: H5Fcreate failing on a name too long for the system (ENAMETOOLONG), a shard cut
# by the file size limit (ulimit -f: EFBIG; its failed H5Fclose used to end in a SIGSEGV in
# HDF5's exit handler), and a manifest.tsv that is a directory (the rename over it used to fail,
# leaving .manifest.tsv.tmp). These work as root and not; a full disk is pack_full.sh.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
small_fmnist "$DT_TMP/src"
no_tmp() { # no_tmp DIR WHAT: no temporary (.*.tmp) in DIR, no split listed
  left=$(cd "$1" && ls -A | grep '\.tmp' || true)
  [ -z "$left" ] || fail "$2: left $left in $1"
  ! grep -q '^train' "$1/manifest.tsv" 2>/dev/null || fail "$2: the train split is listed"
}

# an output path of 4077 characters: <out>/.manifest.tsv.tmp is 4095, the longest path Linux
# takes; the shard's <out>/.train-00000.h5.tmp (4097) is not: H5Fcreate fails
comp=$(printf '%0150d' 0)
long="$DT_TMP/l"
while [ ${#long} -lt 3900 ]; do long="$long/$comp"; done
long="$long/$(printf '%0*d' $((4076 - ${#long})) 0)"
[ ${#long} -eq 4077 ] || fail "the long path is ${#long} characters"
expect_status 1 timeout 20 "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$long"
# (the log cuts lines at 4096 bytes: the path fills this one, so only its start is checked)
grep -q "error: shard $DT_TMP/l/0" "$DT_TMP/err" || { cut -c 1-300 "$DT_TMP/err"; fail "name too long: no shard named"; }
no_tmp "$long" "H5Fcreate failing (name too long)"
pass "H5Fcreate failing (name too long): one line, no temporary left, no split listed"

# the file size limit cuts the shard (88 kB) after the manifest (under 1 kB) was written
set +e
(trap '' XFSZ; ulimit -f 40 && exec timeout 20 "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/fs") \
  >"$DT_TMP/out" 2>"$DT_TMP/err"
got=$?
set -e
[ "$got" -eq 1 ] || { cat "$DT_TMP/err"; fail "ulimit -f: dtpack exited $got, expected 1"; }
grep -q "/fs/.train-00000.h5.tmp: shard not written" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "ulimit -f: no shard named"; }
no_tmp "$DT_TMP/fs" "a shard cut by ulimit -f"
[ ! -e "$DT_TMP/fs/train-00000.h5" ] || fail "ulimit -f: a cut shard took the final name"
pass "a shard cut by the file size limit: no temporary left, no split listed"

# a directory where the manifest goes
mkdir -p "$DT_TMP/md/manifest.tsv"
refused "a directory manifest.tsv in the output" "md/manifest.tsv: the manifest is a directory" \
  "$DTPACK" fashion-mnist "$DT_TMP/src" -o "$DT_TMP/md"
no_tmp "$DT_TMP/md" "a directory manifest.tsv"
pass "a directory where the manifest goes: refused in one line, no temporary left"
