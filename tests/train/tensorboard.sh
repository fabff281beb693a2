#!/bin/sh
# tensorboard.sh: a dtrain run writes a TensorBoard events file in its run directory with the seed
# tutorial's 11 scalar tags plus LossScale, one point per epoch at step epoch + 1, read back by a real
# parser (tests/tools/tfevents_dump.py: TensorBoard's own loader where installed, else Debian's
# python3-protobuf), with the values metrics.jsonl logged for that epoch (as float32); each rank
# writes logs/rank-<r>.log there. resnet8, one epoch at batch 256 of Fashion-MNIST's first 5120
# training and 1000 validation images (make check-long: all of it).
. "$top_srcdir/tests/common.sh"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
if long; then fmnist_packed "$DT_TMP/fm"; else fmnist_packed "$DT_TMP/fm" 5120 1000; fi
expect_status 0 "$top_builddir/dtrain" -a resnet8 -b 256 -j 2 --epochs 1 -p 5 \
  --results "$DT_TMP/res" "$DT_TMP/fm"
run=$(ls -d "$DT_TMP"/res/*)
set -- "$run"/events.out.tfevents.*
[ $# -eq 1 ] && [ -f "$1" ] || fail "not exactly one events file in $run: $(ls "$run")"
set +e
/usr/bin/python3 "$top_srcdir/tests/tools/tfevents_dump.py" "$1" >"$DT_TMP/scalars" 2>"$DT_TMP/err"
rc=$?
set -e
[ $rc -eq 77 ] && skip "no parser for the events file: $(tail -n 1 "$DT_TMP/err")"
[ $rc -eq 0 ] || { cat "$DT_TMP/err"; fail "tfevents_dump exited $rc"; }
cat "$DT_TMP/scalars"
/usr/bin/python3 - "$DT_TMP/scalars" "$run/metrics.jsonl" <<'PY' || fail "the events are not what metrics.jsonl logged"
import json, struct, sys
got = {}
for line in open(sys.argv[1]):
    tag, step, value = line.rstrip("\n").split("\t")
    assert (tag, int(step)) not in got, "two points for %s at %s" % (tag, step)
    got[(tag, int(step))] = float(value)
want_tags = {"Throughput/train", "Throughput/val", "Time/train", "Time/val", "Loss/train", "Loss/val",
             "Top1/train", "Top1/val", "Top5/train", "Top5/val", "Lr", "LossScale"}
assert {t for t, _ in got} == want_tags, "tags: %s" % sorted({t for t, _ in got} ^ want_tags)
assert {s for _, s in got} == {1}, "steps: %s" % sorted({s for _, s in got})
ep = [json.loads(l) for l in open(sys.argv[2]) if json.loads(l).get("kind") == "epoch"]
assert len(ep) == 1, "epoch lines: %d" % len(ep)
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
for tag, key in [("Loss/train", "train_loss"), ("Top1/train", "train_top1"), ("Top5/train", "train_top5"),
                 ("Loss/val", "val_loss"), ("Top1/val", "val_top1"), ("Top5/val", "val_top5"),
                 ("Throughput/train", "img_per_s"), ("Throughput/val", "val_img_per_s"), ("Lr", "lr"),
                 ("LossScale", "loss_scale")]:
    assert got[(tag, 1)] == f32(ep[0][key]), "%s %r, metrics.jsonl %s %r" % (tag, got[(tag, 1)], key, ep[0][key])
assert 0 < got[("Loss/val", 1)] < 5 and 10 < got[("Top1/val", 1)] <= 100, "implausible validation values"
assert got[("Time/train", 1)] > 0 and got[("Time/val", 1)] > 0
print("12 tags at step 1, equal to metrics.jsonl's epoch line")
PY
pass "TensorBoard events: the 12 tags, read back by $(sed -n 's/^tfevents_dump: parser: //p' "$DT_TMP/err")"
[ -s "$run/logs/rank-0.log" ] && grep -q "validation top-1" "$run/logs/rank-0.log" || fail "no logs/rank-0.log with the run's lines"
pass "logs/rank-0.log has the run's log"
