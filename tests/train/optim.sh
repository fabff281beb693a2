#!/bin/sh
# optim.sh: dtrain with --opt adamw, adam, rmsprop, lars and lamb (tests/torch/optim.sh checks the
# updates against torch.optim and the papers' LARS and LAMB): a run of 2 epochs straight equals the
# same run stopped inside the first epoch and resumed, bit for bit (weights, the optimizer's state,
# metrics), with O2's master weights for adamw and lamb, and the same as graphs (--graph); run.json names the optimizer. Refused in one line, exit 2: --nesterov with adamw, and a
# checkpoint written with another optimizer (its state would not carry over).
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/data/common.sh"
need_h5py
small_fmnist_packed "$DT_TMP/fm"
args="-a resnet8 -b 20 -j 1 -p 0 --deterministic --wd 0.05 --lr-scheduler cosineannealinglr"  # 5 steps an epoch
for opt in "adamw --opt-level O2" "adam --lr 0.002" "rmsprop --lr 0.01" "lars --lr 0.5" "lamb --lr 0.01 --opt-level O2"; do
  name=${opt%% *}
  expect_status 0 "$DTRAIN" $args --opt $opt --epochs 2 --results "$DT_TMP/$name-a" "$DT_TMP/fm"
  expect_status 0 "$DTRAIN" $args --opt $opt --epochs 2 --max-steps 3 --results "$DT_TMP/$name-b" "$DT_TMP/fm"
  expect_status 0 "$DTRAIN" $args --opt $opt --epochs 2 --resume auto --results "$DT_TMP/$name-b" "$DT_TMP/fm"
  grep -q "resuming from .*checkpoint.h5 at step 3 (epoch 0 \\[3/" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "$name: did not resume at step 3"; }
  "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" "$name-a" "$name-b" || fail "--opt $name: the resumed run differs"
  "$py" - "$DT_TMP" "$name" <<'PY' || fail "--opt $name: run.json or the checkpoint does not name it"
import glob, json, sys, h5py
d, name = sys.argv[1:]
run = glob.glob("%s/%s-a/*/" % (d, name))[0]
o = json.load(open(run + "run.json"))["optimizer"]
assert o["name"] == name, o
ck = h5py.File(run + "checkpoint.h5", "r")["optimizer"]
nm = ck.attrs["name"]
assert (nm.decode() if isinstance(nm, bytes) else nm) == name, nm
want = ["momentum"] if name == "lars" else ["momentum", "second_moment"]
assert sorted(ck) == want, sorted(ck)
PY
  pass "--opt $opt: 2 epochs straight = 3 steps + stop + resume, bit for bit, with its state"
done
# the step as graphs (captured, then launched: the ops read the step count and lr from the scalars)
expect_status 0 "$DTRAIN" $args --opt adamw --opt-level O2 --epochs 2 --graph --results "$DT_TMP/adamw-g" "$DT_TMP/fm"
grep -q "captured" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "--graph: no capture line"; }
"$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" adamw-a adamw-g || fail "--opt adamw --graph differs from the run without"
pass "--opt adamw as graphs = issued, bit for bit"
refused "--nesterov with adamw" "nesterov" "$DTRAIN" $args --opt adamw --nesterov --epochs 1 --results "$DT_TMP/n" "$DT_TMP/fm"
refused "an SGD checkpoint resumed with adamw" "trained with --opt adamw (this command: sgd)" \
  "$DTRAIN" $args --opt sgd --epochs 2 --resume "$(ls "$DT_TMP"/adamw-a/*/checkpoint.h5)" --results "$DT_TMP/s" "$DT_TMP/fm"
pass "--nesterov with adamw, and a checkpoint of another optimizer: one line, exit 2"
