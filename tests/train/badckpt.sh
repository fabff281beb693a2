#!/bin/sh
# badckpt.sh: what --resume trusts, and what two runs on one directory do.
# - A checkpoint whose progress cannot be (epoch 10^15 or -3, a step beyond the epoch (its last step,
#   5 of 5, is an epoch trained and waiting for validation: signals.sh), negative or
#   impossible sums of the epoch under way) is refused at the start in one line naming the file and
#   the value, exit 2, nothing written (they used to resume "at epoch -1530494976", or fail in the
#   loader with exit 1).
# - --resume auto passes over a newest checkpoint that is not HDF5 with a warning naming it, and
#   takes the older one.
# - While a run is going on, a second dtrain resuming the same run directory is refused in one
#   line naming the first one's pid (a lock on the run directory), exit 2.
# - A metrics.jsonl that cannot be written (here a link to /dev/full) is said once; training goes
#   on to the end, the checkpoint is written, and dtrain exits 1 (it exited 0 with the lines lost).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
small_fmnist_packed "$DT_TMP/fm"
args="-a resnet8 -b 20 -j 1 -p 0"   # 100 training images: 5 steps per epoch
expect_status 0 "$DTRAIN" $args --epochs 1 --max-steps 3 --results "$DT_TMP/a" "$DT_TMP/fm"
run=$(ls -d "$DT_TMP"/a/*)
# one error line naming the file and WHAT
one_line() {
  cat "$DT_TMP/err" | grep -E "error|warn" || true
  [ "$(grep -c "error:" "$DT_TMP/err")" -eq 1 ] || fail "$1: not one error line"
  grep -q "error: .*$2" "$DT_TMP/err" || fail "$1: the error line does not say '$2'"
}
for case in "epoch=10**15:epoch 1000000000000000" "epoch=-3:epoch -3" "step=6:step 6 of an epoch of 5 steps" \
            "progress/seen=-99:the epoch.s sums" "progress/hits1=-99:the epoch.s sums" "progress/seconds_bits=struct.unpack('<q',struct.pack('<d',-1.0))[0]:the epoch.s sums"; do
  what=${case%%:*} said=${case#*:}
  cp "$run/checkpoint.h5" "$DT_TMP/bad.h5"
  "$py" - "$DT_TMP/bad.h5" "$what" <<'PY'
import struct, sys, h5py
path, what = sys.argv[1:]
key, value = what.split("=", 1)
grp, _, attr = key.rpartition("/")
with h5py.File(path, "r+") as f:
    (f[grp] if grp else f).attrs[attr] = eval(value)
PY
  expect_status 2 "$DTRAIN" $args --epochs 2 --resume "$DT_TMP/bad.h5" --results "$DT_TMP/b" "$DT_TMP/fm"
  one_line "$what" "bad.h5: cannot resume from $said"
  [ ! -e "$DT_TMP/b" ] || [ -z "$(ls -A "$DT_TMP/b")" ] || fail "$what: something was written: $(ls -R "$DT_TMP/b")"
done
pass "checkpoints with impossible progress: one line each, exit 2, nothing written"

# --resume auto: the newest checkpoint is damaged (not HDF5): said, and the older one resumed
expect_status 0 "$DTRAIN" $args --epochs 1 --max-steps 2 --results "$DT_TMP/a" "$DT_TMP/fm"
newer=$(ls -d "$DT_TMP"/a/* | grep -v "^$run\$")
[ -n "$newer" ] || fail "no second run directory"
printf 'not an HDF5 file' > "$newer/checkpoint.h5"
touch "$newer/checkpoint.h5"
expect_status 0 "$DTRAIN" $args --epochs 1 --resume auto --results "$DT_TMP/a" "$DT_TMP/fm"
grep -q "warn: --resume: passing over $newer/checkpoint.h5: not readable as HDF5" "$DT_TMP/err" ||
  { cat "$DT_TMP/err"; fail "--resume auto passed over a damaged newest checkpoint silently"; }
grep -q "resuming from $run/checkpoint.h5 at step 3 (epoch 0 \\[3/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume the older run"; }
pass "--resume auto: a damaged newest checkpoint is named in a warning, the older one resumed"

# two dtrain on one run directory: the second is refused while the first runs
"$DTRAIN" $args --epochs 1000 --resume "$run/checkpoint.h5" --results "$DT_TMP/a" "$DT_TMP/fm" >"$DT_TMP/first.out" 2>"$DT_TMP/first.err" &
first=$!
k=0; while ! grep -q "resuming from" "$DT_TMP/first.err" && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
expect_status 2 "$DTRAIN" $args --epochs 1000 --resume "$run/checkpoint.h5" --results "$DT_TMP/a" "$DT_TMP/fm"
kill -TERM $first; wait $first || true
one_line "a second dtrain on a run" "$run is in use by another dtrain (pid and host: $first "
pass "a second dtrain resuming a run that is going on: refused in one line naming the first (pid $first)"

# metrics.jsonl that cannot be written: said once, training goes on to the end, exit 1
ln -sf /dev/full "$run/metrics.jsonl"
at=$("$py" -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r").attrs["epoch"])' "$run/checkpoint.h5")
end=$((at + 2))
expect_status 1 "$DTRAIN" $args --epochs $end --resume "$run/checkpoint.h5" --results "$DT_TMP/a" -p 1 "$DT_TMP/fm"
grep -E "error:" "$DT_TMP/err"
[ "$(grep -c "error: .*metrics.jsonl: cannot write (No space left on device)" "$DT_TMP/err")" -eq 1 ] ||
  fail "a metrics.jsonl that cannot be written: not said once"
grep -q "error: .*metrics.jsonl is incomplete" "$DT_TMP/err" || fail "no closing line about the incomplete metrics.jsonl"
"$py" -c 'import h5py, sys; a = h5py.File(sys.argv[1], "r").attrs; assert a["epoch"] == int(sys.argv[2]), a["epoch"]' \
  "$run/checkpoint.h5" $end || fail "training did not go on to the end after the metrics write failed"
pass "metrics.jsonl unwritable: one line, training finished, checkpoint written, exit 1"
