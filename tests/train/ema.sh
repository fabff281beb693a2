#!/bin/sh
# ema.sh: --model-ema against torchvision's (its ExponentialMovingAverage: torch's AveragedModel over
# parameters and buffers, updated every --model-ema-steps steps, copying during the warm-up epochs,
# its decay adjusted to the global batch). A resnet8 trained for 2 epochs of 5 steps, one step per
# dtrain invocation (each resuming the last: the average crosses 9 resumes), the checkpoint kept
# after each: tests/train/ema_torch.py feeds those states to torch's AveragedModel as train.py does
# and compares with the last checkpoint's /model_ema. Then: a run of 2 epochs straight under O2 (the
# average taken from the fp32 master weights) equals the same run stopped and resumed, bit for bit,
# the average included; with a decay of 0 the average is the model, and its validation line equals
# the model's.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
"$py" -c 'import torch' 2>/dev/null || skip "no Python with torch (Debian: python3-torch)"
small_fmnist_packed "$DT_TMP/fm"
# 100 images, -b 20: 5 steps an epoch; decay 1 - (1 - 0.99) * 20 * 2 / 2 = 0.8
args="-a resnet8 -b 20 -j 1 -p 0 --deterministic --epochs 2 --lr-scheduler cosineannealinglr --lr-warmup-epochs 1
  --model-ema --model-ema-steps 2 --model-ema-decay 0.99"
mkdir -p "$DT_TMP/states"
for k in 1 2 3 4 5 6 7 8 9 10; do
  resume=; [ "$k" -gt 1 ] && resume="--resume auto"
  expect_status 0 "$DTRAIN" $args --max-steps 1 $resume --results "$DT_TMP/s" "$DT_TMP/fm"
  cp "$(ls "$DT_TMP"/s/*/checkpoint.h5)" "$DT_TMP/states/$k.h5"
done
decay=$("$py" -c 'print(repr(1.0 - min(1.0, (1.0 - 0.99) * 1 * 20 * 2 / 2)))')
"$py" "$top_srcdir/tests/train/ema_torch.py" "$DT_TMP/states" "$decay" 5 2 1 10 ||
  fail "the average differs from torch's AveragedModel driven as train.py drives it"
pass "--model-ema over 10 steps and 9 resumes = torch's AveragedModel (decay $decay)"

o2="$args --opt-level O2"
expect_status 0 "$DTRAIN" $o2 --results "$DT_TMP/a" "$DT_TMP/fm"
expect_status 0 "$DTRAIN" $o2 --max-steps 7 --results "$DT_TMP/b" "$DT_TMP/fm"
expect_status 0 "$DTRAIN" $o2 --resume auto --results "$DT_TMP/b" "$DT_TMP/fm"
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" a b || fail "O2: the resumed run differs from the straight one"
pass "O2: 2 epochs straight = 7 steps + stop + resume, bit for bit, with the model's average"

# a decay of 0 (--model-ema-decay 0.9: 1 - min(1, 0.1 * 20 * 1 / 2) = 0): the average is the model
expect_status 0 "$DTRAIN" -a resnet8 -b 20 -j 1 -p 0 --epochs 2 --model-ema --model-ema-steps 1 \
  --model-ema-decay 0.9 --results "$DT_TMP/c" "$DT_TMP/fm"
"$py" - "$DT_TMP" <<'PY' || fail "the validation of an average equal to the model is not the model's"
import glob, json, sys
run = glob.glob(sys.argv[1] + "/c/*/")[0]
lines = [json.loads(l) for l in open(run + "metrics.jsonl")]
ep = [l for l in lines if l["kind"] == "epoch"]
assert len(ep) == 2, ep
for l in ep:
    assert (l["val_ema_top1"], l["val_ema_top5"], l["val_ema_loss"]) == (l["val_top1"], l["val_top5"], l["val_loss"]), l
assert json.load(open(run + "run.json"))["model_ema"]["steps"] == 1
print("epochs %s: the average's validation = the model's" % [(l["val_top1"], l["val_ema_top1"]) for l in ep])
PY
pass "--model-ema at decay 0: its validation = the model's, in metrics.jsonl"
