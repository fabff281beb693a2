#!/bin/sh
# tbevents.sh: dtrain's TensorBoard event files, read back by real parsers. test_tbevents --write
# writes a known set of scalars; tests/tools/tfevents_dump.py checks the framing and CRCs itself, then
# parses the events with TensorBoard or protobuf, and must print exactly the expected lines (values are
# float32: 0.1 reads back as 0.10000000149011612). Debian's /usr/bin/python3 (python3-protobuf, or
# tensorboard if installed there) is tried, and python3 on PATH too when it is another environment
# that has tensorboard (a virtualenv). Skipped, with the reasons, when no interpreter can parse.
. "$top_srcdir/tests/common.sh"
DUMP="$top_srcdir/tests/tools/tfevents_dump.py"

"$top_builddir/tests/unit/test_tbevents" --write "$DT_TMP/tb" >"$DT_TMP/path" || fail "test_tbevents --write failed"
set -- "$DT_TMP"/tb/events.out.tfevents.*
[ $# -eq 1 ] && [ -f "$1" ] || fail "not exactly one events file in $DT_TMP/tb: $*"
ev=$1
[ "$(cat "$DT_TMP/path")" = "$ev" ] || fail "test_tbevents printed $(cat "$DT_TMP/path"), the file is $ev"
printf 'Loss/train\t1\t2.5\nLr\t1\t0.10000000149011612\nLossScale\t1\t65536.0\nLoss/train\t2\t1.25\nLossScale\t2\t65536.0\nLoss/train\t3\t0.625\nLossScale\t3\t65536.0\n' >"$DT_TMP/want"

parsed=0
why=
# dump NAME PYTHON ARGS...: the scalars through PYTHON; 77 adds to why, anything else but 0 fails
dump() {
  name=$1 py=$2
  shift 2
  set +e
  "$py" "$DUMP" "$@" "$ev" >"$DT_TMP/got.$name" 2>"$DT_TMP/err.$name"
  rc=$?
  set -e
  case $rc in
  0)
    diff "$DT_TMP/want" "$DT_TMP/got.$name" || fail "$name ($py): the scalars read back differ from those written"
    parsed=$((parsed + 1))
    pass "$name ($py): $(sed -n 's/^tfevents_dump: parser: //p' "$DT_TMP/err.$name")"
    ;;
  77) why="$why; $name: $(tail -n 1 "$DT_TMP/err.$name")" ;;
  *)
    cat "$DT_TMP/err.$name"
    fail "$name ($py): tfevents_dump exited $rc"
    ;;
  esac
}

if [ -x /usr/bin/python3 ]; then dump system /usr/bin/python3; else why="; no /usr/bin/python3"; fi
py=$(command -v python3 || true)
if [ -n "$py" ] && "$py" -c 'import tensorboard' 2>/dev/null; then
  here=$("$py" -c 'import sys; print(sys.prefix)')
  system=$(/usr/bin/python3 -c 'import sys; print(sys.prefix)' 2>/dev/null || true)
  [ "$here" = "$system" ] || dump path-tensorboard "$py" --require-tensorboard
fi
[ "$parsed" -gt 0 ] || skip "no Python could parse the events file${why}"
pass "the events file reads back the same through $parsed parser(s)"
