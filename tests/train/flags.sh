#!/bin/sh
# flags.sh: dtrain's rule for flags without effect (doc/dtrain.1, OPTIONS), the off switches of the
# on/off flags a recipe can set, the schedule's warnings and --print-lr's checks.
#   - --no-model-ema, --no-ra-sampler, --no-amp undo --recipe vit_b_16's; --no-nesterov,
#     --no-sync-bn, --no-lr-per-step, --lr-scaling undo the flags before them (run.json says so);
#   - a flag the command line gives where it would do nothing (its parent off, another optimizer or
#     schedule, O0, --graph with --accum-steps, the data's flags with --synthetic, --amp with
#     --opt-level) is one line naming it, exit 2, nothing written; so is one for the other kind of
#     shards, found once DATA is open (--interpolation on raw shards, --crop-padding on JPEG ones,
#     from a --recipe too);
#   - a --recipe's flag left without its parent by the command line is dropped silently;
#   - --lr-min above the lr, a warm-up as long as the run, a constant warm-up from 0: one warning
#     each, under --print-lr and at a run's start;
#   - --print-lr refuses what a run refuses (--pretrained with --resume, the rule above), no DATA.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
py=${DT_PYTHON_TORCH:-python3}
tiny="-a resnet8 --crop 32 -b 8 -j 1 --epochs 1 --max-steps 1 -p 0"

# refuse WHAT PATTERN ARGS...: exit 2, one line on stderr, an error matching PATTERN, no results
refuse() {
  what=$1 pat=$2; shift 2
  rm -rf "$DT_TMP/res"
  refused "$what" "$pat" "$DTRAIN" --results "$DT_TMP/res" "$@"
  [ ! -e "$DT_TMP/res" ] || [ -z "$(ls "$DT_TMP/res")" ] || fail "$what: something was written"
}
# json RUN EXPR: run.json of results/RUN as j; EXPR must hold
json() {
  "$py" -c 'import json, sys, glob
j = json.load(open(glob.glob(sys.argv[1] + "/*/run.json")[0]))
assert eval(sys.argv[2]), (sys.argv[2], j)' "$DT_TMP/$1" "$2" || fail "$1: run.json does not have $2"
}

# 1. the off switches
expect_status 0 "$DTRAIN" --recipe vit_b_16 $tiny --synthetic --no-model-ema --no-ra-sampler --no-amp --results "$DT_TMP/off1"
json off1 'j["model_ema"] is None and j["ra_reps"] is None and j["amp"]["opt_level"] == 0'
expect_status 0 "$DTRAIN" $tiny --synthetic --lr-scheduler steplr --nesterov --no-nesterov --sync-bn --no-sync-bn \
  --lr-per-step --no-lr-per-step --no-lr-scaling --lr-scaling --results "$DT_TMP/off2"
json off2 'not j["optimizer"]["nesterov"] and not j["ddp"]["sync_bn"] and not j["lr_schedule_args"]["per_step"]'
json off2 'abs(j["lr_scaled"] - 0.1 * 8 / 256) < 1e-12'
pass "--no-model-ema, --no-ra-sampler, --no-amp undo a recipe's; --no-nesterov, --no-sync-bn, --no-lr-per-step, --lr-scaling"

# 2. flags without effect, given on the command line: refused
refuse "--model-ema-steps alone" "--model-ema-steps has no effect without --model-ema" --synthetic --model-ema-steps 4
refuse "--model-ema-decay after --no-model-ema" "--model-ema-decay has no effect without --model-ema" \
  --synthetic --recipe fmnist_adamw --no-model-ema --model-ema-decay 0.9
refuse "--ra-reps alone" "--ra-reps has no effect without --ra-sampler" --synthetic --ra-reps 2
refuse "--ra-magnitude with ta_wide" "--ra-magnitude has no effect without --auto-augment ra" \
  --print-lr 1 --auto-augment ta_wide --ra-magnitude 5
refuse "--lars-eta with sgd" "--lars-eta has no effect without --opt lars" --synthetic --lars-eta 0.01
refuse "--adam-beta2 with sgd" "--adam-beta2 has no effect without --opt adam" --synthetic --adam-beta2 0.99
refuse "--rmsprop-alpha with adamw" "--rmsprop-alpha has no effect without --opt rmsprop" --synthetic --opt adamw \
  --rmsprop-alpha 0.8
refuse "--opt-eps with sgd" "--opt-eps has no effect without --opt adam" --synthetic --opt-eps 1e-6
refuse "--momentum with adamw" "--momentum has no effect with --opt adam" --synthetic --opt adamw --momentum 0.8
refuse "--lr-step-size with step" "--lr-step-size has no effect without --lr-schedule steplr" --synthetic --lr-step-size 3
refuse "--lr-min with step" "--lr-min has no effect without --lr-schedule cosine" --synthetic --lr-min 0.001
refuse "--lr-power with cosine" "--lr-power has no effect without --lr-schedule polynomiallr" --synthetic \
  --lr-schedule cosine --lr-power 2
refuse "--lr-gamma with cosineannealinglr" "--lr-gamma has no effect" --synthetic --lr-scheduler cosineannealinglr \
  --lr-gamma 0.5
refuse "--lr-steps with steplr" "--lr-steps has no effect" --synthetic --lr-scheduler steplr --lr-steps 2,4
refuse "--lr-per-step with cosine" "--lr-per-step has no effect with --lr-schedule step or cosine" --synthetic \
  --lr-schedule cosine --lr-per-step
refuse "--lr-warmup-method without a warm-up" "--lr-warmup-method has no effect without --warmup-epochs" \
  --synthetic --lr-warmup-method linear
refuse "--precision bf16 at O0" "--precision has no effect at --opt-level O0" --synthetic --precision bf16
refuse "--allreduce-fp32 at O1" "--allreduce-fp32 has no effect below --opt-level O2" --synthetic --opt-level O1 \
  --allreduce-fp32
refuse "--master-weights false at O0" "--master-weights has no effect below --opt-level O2" --synthetic \
  --master-weights false
refuse "--loss-scale-window with bf16" "--loss-scale-window has no effect without a dynamic loss scale" --synthetic \
  --opt-level O2 --precision bf16 --loss-scale-window 100
refuse "--graph with --accum-steps" "--graph has no effect with --accum-steps above 1 or --sync-bn" --synthetic \
  --graph --accum-steps 2
refuse "--graph with --sync-bn" "--graph has no effect with" --synthetic --sync-bn --graph
refuse "--amp with --opt-level" "--amp (or --no-amp) and --opt-level: give one" --synthetic --amp --opt-level O2
refuse "--opt-level then --amp" "--amp (or --no-amp) and --opt-level: give one" --synthetic --opt-level O2 --amp
refuse "--auto-augment with --synthetic" "--auto-augment has no effect with --synthetic" --synthetic --auto-augment ra
refuse "--interpolation with --synthetic" "--interpolation has no effect with --synthetic" --synthetic \
  --interpolation bicubic
refuse "--desired-acc with --synthetic" "--desired-acc has no effect with --synthetic" --synthetic --desired-acc 0.5
pass "a flag without effect given on the command line: one line naming it and its parent, exit 2, nothing written"

# ... and from a recipe whose parent the command line turned off: dropped without a word
for extra in "--recipe fmnist_adamw --no-model-ema" "--recipe mobilenet_v3_large --opt adamw" \
  "--recipe resnet50_v1 --lr-scheduler cosineannealinglr" "--recipe vit_b_16 --opt-level O2" \
  "--recipe resnet50 --lr-warmup-epochs 0"; do
  expect_status 0 "$DTRAIN" $extra --print-lr 1
  [ ! -s "$DT_TMP/err" ] || { cat "$DT_TMP/err"; fail "$extra: said something"; }
done
pass "a recipe's flags left without their parent by the command line: accepted, silent"

# the data's own: raw shards are never resized, JPEG ones never padded (a recipe's flag too)
small_fmnist_packed "$DT_TMP/fm"
refuse "--interpolation on raw shards" "--interpolation bicubic has no effect on raw shards" \
  -a resnet8 -b 8 --interpolation bicubic "$DT_TMP/fm"
refuse "--interpolation bicubic with --auto-augment on raw shards" "only nearest or bilinear" \
  -a resnet8 -b 8 --auto-augment ta_wide --interpolation bicubic "$DT_TMP/fm"
expect_status 0 "$DTRAIN" -a resnet8 -b 8 -j 1 --epochs 1 --max-steps 1 -p 0 --auto-augment ta_wide \
  --interpolation nearest --results "$DT_TMP/near" "$DT_TMP/fm"
json near 'j["augmentation"]["interpolation"] == "nearest"'
if "$py" -c 'import PIL' 2>/dev/null; then
  "$py" -c 'import os, sys
from PIL import Image
for split in ("train", "val"):
    for c, wnid in enumerate(("n01440764", "n01443537")):
        os.makedirs("%s/%s/%s" % (sys.argv[1], split, wnid))
        for k in range(4):
            Image.new("RGB", (48, 40), (60 * c, 30 * k, 90)).save("%s/%s/%s/%d.JPEG" % (sys.argv[1], split, wnid, k))' \
    "$DT_TMP/src"
  expect_status 0 "$top_builddir/dtpack" imagenet "$DT_TMP/src" -o "$DT_TMP/jpeg"
  refuse "--crop-padding on JPEG shards" "--crop-padding has no effect on encoded images" \
    -a resnet8 --crop 32 -b 4 --crop-padding 2 "$DT_TMP/jpeg"
  refuse "--recipe fmnist's --crop-padding on JPEG shards" "--crop-padding has no effect on encoded images" \
    --recipe fmnist -a resnet8 --crop 32 -b 4 "$DT_TMP/jpeg"
  pass "--interpolation on raw shards (but nearest with --auto-augment), --crop-padding on JPEG ones: refused"
else
  pass "--interpolation on raw shards (but nearest with --auto-augment): refused (no PIL here for JPEG shards)"
fi

# 3. the schedule's warnings: one line each, under --print-lr and at a run's start
warns() { # WHAT PATTERN ARGS...: --print-lr exits 0 with exactly one warning, matching PATTERN
  what=$1 pat=$2; shift 2
  expect_status 0 "$DTRAIN" --print-lr 1 "$@"
  [ "$(grep -c . "$DT_TMP/err")" -eq 1 ] && grep -q "warn: $pat" "$DT_TMP/err" ||
    { cat "$DT_TMP/err"; fail "$what: not one warning saying '$pat'"; }
}
warns "--lr-min above the lr" "--lr-min 1 is above the learning rate 0.025" --lr-schedule cosine --lr-min 1 --epochs 2
warns "a warm-up as long as the run" "--warmup-epochs 3 is not below --epochs 3" --warmup-epochs 3 --epochs 3
warns "a constant warm-up from 0" "--lr-warmup-method constant with a warm-up factor of 0" --warmup-epochs 1 \
  --epochs 3 --lr-warmup-method constant
expect_status 0 "$DTRAIN" --print-lr 1 --warmup-epochs 1 --epochs 3 --lr-schedule cosine --lr-min 0.001
[ ! -s "$DT_TMP/err" ] || { cat "$DT_TMP/err"; fail "a sound schedule got a warning"; }
grep -q "warn: --warmup-epochs 30 is not below --epochs 1" "$DT_TMP/off1/"*/logs/rank-0.log ||
  { cat "$DT_TMP/off1/"*/logs/rank-0.log; fail "the run with a warm-up of 30 epochs in 1 was not warned"; }
pass "--lr-min above the lr, a warm-up as long as the run, a constant warm-up at 0: one warning each"

# 4. --print-lr checks the command line as a run does (no DATA needed)
refuse "--print-lr with --pretrained and --resume" "--pretrained and --resume: give one" --print-lr 1 \
  --pretrained "$DT_TMP/x.h5" --resume "$DT_TMP/y.h5"
refuse "--print-lr with --precision at O0" "--precision has no effect" --print-lr 1 --precision bf16
refuse "--print-lr with two operands" "unexpected argument" --print-lr 1 a b
pass "--print-lr refuses what a run refuses"
