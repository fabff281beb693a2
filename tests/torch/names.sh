#!/bin/sh
# names.sh: every architecture of the model table that torchvision has (resnet18..152, the ResNeXts,
# the wide ResNets, alexnet, the VGGs, the MobileNets, the EfficientNets, the RegNetYs,
# the ConvNeXts, DenseNet-121, ViT-B/16) against torchvision's own
# model at 3 channels and 1000 classes:
# the same state_dict names, in the same order, with the same shapes (tests/torch/list_params prints
# ours). The fixtures (tests/torch/<model>.sh) check the numbers of one model per builder; this checks
# the deeper and wider variants of it, which differ only in their tables. dtrain's own models
# (resnet8/20/56, resnet18_small, vit_test) are not torchvision's and are left to their fixtures.
. "$top_srcdir/tests/common.sh"
[ "$DT_TORCH_TESTS" = yes ] || skip "PyTorch tests disabled (configure --disable-torch-tests)"
[ -n "$DT_PYTHON_TORCH" ] || skip "no python3 with torch and torchvision (Debian: python3-torch python3-torchvision)"
"$top_builddir/tests/torch/list_params" > "$DT_TMP/ours" || fail "list_params: a model does not build"

# torchvision's side, for each model of ours it has; the initialisation is skipped (only names and
# shapes are read), which makes the 130M-parameter models cheap to build
"$DT_PYTHON_TORCH" - "$DT_TMP/ours" "$DT_TMP/theirs" "$DT_TMP/compared" <<'PY' || fail "the torchvision side failed"
import sys, torch, torchvision
for f in ("kaiming_normal_", "kaiming_uniform_", "normal_", "uniform_", "constant_", "zeros_", "ones_",
          "trunc_normal_", "xavier_uniform_"):
    setattr(torch.nn.init, f, lambda t, *a, **k: t)
archs = [l.split()[1] for l in open(sys.argv[1]) if l.startswith("model ")]
with open(sys.argv[2], "w") as out, open(sys.argv[3], "w") as done:
    for arch in archs:
        ctor = getattr(torchvision.models, arch, None)
        if not callable(ctor):
            continue
        out.write("model %s\n" % arch)
        for k, v in ctor(num_classes=1000).state_dict().items():
            out.write("%s %s\n" % (k, "x".join(str(d) for d in v.shape) or "-"))
        done.write(arch + "\n")
PY
# ours, for the models torchvision has
awk 'NR == FNR { keep[$1] = 1; next } /^model / { on = ($2 in keep) } on' "$DT_TMP/compared" "$DT_TMP/ours" \
  > "$DT_TMP/ours_tv"
if ! cmp -s "$DT_TMP/ours_tv" "$DT_TMP/theirs"; then
  diff "$DT_TMP/ours_tv" "$DT_TMP/theirs" | head -40
  fail "state_dict names or shapes differ from torchvision's (< ours, > torchvision's)"
fi
n=$(wc -l < "$DT_TMP/compared")
# every model added with the zoo must be among them (a table row renamed away from torchvision's name
# would otherwise drop out of the check unnoticed)
for a in resnet50 resnext50_32x4d resnext101_32x8d resnext101_64x4d wide_resnet50_2 wide_resnet101_2 \
         vgg13 vgg13_bn vgg19 vgg19_bn mobilenet_v2 mobilenet_v3_large mobilenet_v3_small efficientnet_b0 \
         efficientnet_b1 efficientnet_b2 efficientnet_b3 efficientnet_b4 efficientnet_v2_s regnet_y_400mf \
         regnet_y_800mf regnet_y_1_6gf regnet_y_3_2gf regnet_y_8gf regnet_y_16gf convnext_tiny convnext_small \
         densenet121 vit_b_16; do
  grep -qx "$a" "$DT_TMP/compared" || fail "$a was not compared"
done
entries=$(grep -vc "^model " "$DT_TMP/theirs")
list=$(paste -sd ' ' "$DT_TMP/compared")
pass "$n models, $entries state_dict entries: names, order and shapes as torchvision's ($list)"
