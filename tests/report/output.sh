#!/bin/sh
# output.sh: dtreport -o FILE and --plots DIR keep what a name is (src/report/output.h): a regular
# file is replaced atomically (its permission bits kept, no temporary file left); a symbolic link
# stays a link and its target gets the report (also a link to nothing yet); a FIFO is written
# through to its reader and stays a FIFO; /dev/full is written through, the write error is one
# line naming it ("No space left on device") and exit 1, and it is still a character device
# afterwards; /dev/fd/1 is the standard output, appended to where it is a file; a plot that is a
# link to /dev/null stays that link. Every command that could block runs under timeout.
# Only things that hold with and without root are asserted (a regression run as root would
# replace /dev/full itself; the test says how to restore it).
. "$top_srcdir/tests/common.sh"
DTREPORT="$top_builddir/dtreport"
export SOURCE_DATE_EPOCH=1793000000
unset DT_LOG_LEVEL
command -v timeout >/dev/null 2>&1 || skip "timeout not found (Debian: coreutils)"
cd "$top_srcdir/tests/report/fixtures" # fmnist-run: a complete run, no notes, nothing on stderr
T="$DT_TMP"
no_tmp_left() { # no_tmp_left DIR...: no <name>.tmp.<pid> file in them
  for d in "$@"; do
    if ls -a "$d" | grep -q '\.tmp\.'; then fail "a temporary file was left in $d: $(ls -a "$d" | tr '\n' ' ')"; fi
  done
}

expect_status 0 timeout 60 "$DTREPORT" fmnist-run
cp "$T/out" "$T/want.md"
[ -s "$T/want.md" ] || fail "no report on stdout"

# --- a regular file: replaced atomically, its mode kept ---------------------------------------------
echo old >"$T/reg.md"
chmod 640 "$T/reg.md"
ino=$(stat -c %i "$T/reg.md")
expect_status 0 timeout 60 "$DTREPORT" fmnist-run -o "$T/reg.md"
cmp -s "$T/want.md" "$T/reg.md" || fail "-o regular file: not the report"
[ "$(stat -c %a "$T/reg.md")" = 640 ] || fail "-o regular file: mode $(stat -c %a "$T/reg.md"), 640 before"
[ "$(stat -c %i "$T/reg.md")" != "$ino" ] || fail "-o regular file: written in place, not replaced by a rename"
no_tmp_left "$T"
pass "-o regular file: replaced by a rename, mode kept"

# --- a symbolic link to a regular file elsewhere: the link stays, the target is replaced ------------
mkdir "$T/real" "$T/links"
echo old >"$T/real/target.md"
ln -s ../real/target.md "$T/links/RESULTS.md"
expect_status 0 timeout 60 "$DTREPORT" fmnist-run -o "$T/links/RESULTS.md"
[ -L "$T/links/RESULTS.md" ] || fail "-o symlink: it is no longer a symbolic link"
[ "$(readlink "$T/links/RESULTS.md")" = ../real/target.md ] || fail "-o symlink: it points elsewhere now"
cmp -s "$T/want.md" "$T/real/target.md" || fail "-o symlink: the target does not hold the report"
no_tmp_left "$T/real" "$T/links"
# a link to a link to nothing yet: the final target is created, both links stay
ln -s ../real/new.md "$T/links/second"
ln -s second "$T/links/first"
expect_status 0 timeout 60 "$DTREPORT" fmnist-run -o "$T/links/first"
[ -L "$T/links/first" ] && [ -L "$T/links/second" ] || fail "-o dangling symlink chain: a link was replaced"
cmp -s "$T/want.md" "$T/real/new.md" || fail "-o dangling symlink chain: its target was not created with the report"
no_tmp_left "$T/real" "$T/links"
pass "-o symlink: still a link, its target holds the report"

# --- a FIFO with a reader: written through, still a FIFO --------------------------------------------
mkfifo "$T/fifo"
timeout 20 cat "$T/fifo" >"$T/fifo.out" &
reader=$!
expect_status 0 timeout 20 "$DTREPORT" fmnist-run -o "$T/fifo"
[ -p "$T/fifo" ] || { kill "$reader" 2>/dev/null || true; fail "-o FIFO: it is no longer a FIFO"; }
set +e
wait "$reader"
got=$?
set -e
[ "$got" -eq 0 ] || fail "-o FIFO: the reader got no end of file (exit $got)"
cmp -s "$T/want.md" "$T/fifo.out" || fail "-o FIFO: the reader did not get the report"
no_tmp_left "$T"
pass "-o FIFO: the reader got the report, still a FIFO"

# --- /dev/fd/1: the standard output (a pipe; a file opened for appending) ---------------------------
(set +e; timeout 20 "$DTREPORT" fmnist-run -o /dev/fd/1; echo $? >"$T/rc") | cat >"$T/pipe.out"
[ "$(cat "$T/rc")" -eq 0 ] || fail "-o /dev/fd/1 into a pipe: exit $(cat "$T/rc")"
cmp -s "$T/want.md" "$T/pipe.out" || fail "-o /dev/fd/1 into a pipe: not the report"
echo "first line" >"$T/append.md"
timeout 20 "$DTREPORT" fmnist-run -o /dev/fd/1 >>"$T/append.md" || fail "-o /dev/fd/1 >> file: failed"
{ echo "first line"; cat "$T/want.md"; } | cmp -s - "$T/append.md" || fail "-o /dev/fd/1 >> file: not the line and the report"
pass "-o /dev/fd/1: to a pipe, appended to a file"

# --- /dev/full: written through, the error reported, still a character device ----------------------
if [ -c /dev/full ]; then
  set +e
  timeout 20 "$DTREPORT" fmnist-run -o /dev/full >"$T/out" 2>"$T/err"
  got=$?
  set -e
  [ -c /dev/full ] || fail "-o /dev/full: /dev/full is no longer a character device (as root: rm /dev/full; mknod -m 666 /dev/full c 1 7)"
  [ "$got" -eq 1 ] || { cat "$T/err"; fail "-o /dev/full: exit $got, expected 1"; }
  [ "$(wc -l <"$T/err")" -eq 1 ] || { cat "$T/err"; fail "-o /dev/full: not one line on stderr"; }
  grep -q '/dev/full.*No space left on device' "$T/err" || { cat "$T/err"; fail "-o /dev/full: the line does not name it and ENOSPC"; }
  ls /dev | grep -q '^full\.tmp\.' && fail "-o /dev/full: a temporary file was left in /dev"
  pass "-o /dev/full: exit 1, $(cat "$T/err")"
else
  pass "-o /dev/full: not checked, /dev/full is not a character device here"
fi

# --- plots: a link to a file stays a link, a link to /dev/null is written through -------------------
mkdir "$T/plots" "$T/elsewhere"
ln -s ../elsewhere/top1.svg "$T/plots/fmnist-run-top1.svg"
ln -s /dev/null "$T/plots/fmnist-run-top5.svg"
expect_status 0 timeout 60 "$DTREPORT" fmnist-run --plots "$T/plots" -o "$T/with-plots.md"
[ -L "$T/plots/fmnist-run-top1.svg" ] && [ -L "$T/plots/fmnist-run-top5.svg" ] || fail "--plots: a symbolic link was replaced"
[ "$(readlink "$T/plots/fmnist-run-top5.svg")" = /dev/null ] && [ -c /dev/null ] || fail "--plots: the link to /dev/null changed"
head -c 300 "$T/elsewhere/top1.svg" | grep -q '<svg' || fail "--plots: the link's target is no SVG"
[ -f "$T/plots/fmnist-run-loss-scale.svg" ] || fail "--plots: the loss-scale plot is missing"
no_tmp_left "$T/plots" "$T/elsewhere"
pass "--plots: links kept, their targets written"
