#!/bin/sh
# resume.sh: checkpoints resume exactly. On 2 MPI ranks with --deterministic, resnet8 on Fashion-MNIST
# for 2 epochs straight, against the same run stopped after 300 steps (inside the first epoch) and
# continued with --resume auto: the final checkpoints hold the same weights, BN statistics, momentum
# and scaler state, and metrics.jsonl the same epoch lines (losses, accuracies, lr), bit for bit. The
# same under O2 with a loss scale that changes after the stop. Also: a checkpoint of another
# architecture is refused in one line (exit 2), and a stale temporary file from a killed writer does
# not stop --resume auto from finding the real one.
. "$top_srcdir/tests/common.sh"
[ "${DT_HAVE_MPI:-no}" = yes ] || skip "built without MPI (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || skip "no mpirun (Debian: openmpi-bin)"
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || skip "no Python with h5py (Debian: python3-h5py)"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found in $src (Debian: dataset-fashion-mnist)"
MPIRUN="mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
expect_status 0 "$top_builddir/dtpack" fashion-mnist "$src" -o "$DT_TMP/fm"
# scale_of NAME: the loss scale in NAME's checkpoint (stored as the double's bits)
scale_of() {
  "$py" -c 'import glob, struct, sys, h5py
a = h5py.File(glob.glob(sys.argv[1] + "/" + sys.argv[2] + "/*/checkpoint.h5")[0], "r")["scaler"].attrs
print(struct.unpack("<d", struct.pack("<q", int(a["scale_bits"])))[0])' "$DT_TMP" "$1"
}
run() { expect_status 0 timeout 600 $MPIRUN -np 2 "$top_builddir/dtrain" -a resnet8 -b 64 -j 1 --lr 0.4 \
  --lr-schedule cosine --wd 5e-4 -p 0 --deterministic "$@" "$DT_TMP/fm"; }
# same NAME_A NAME_B: the final checkpoints and the epoch lines of metrics.jsonl are equal
same() {
  "$py" - "$DT_TMP" "$1" "$2" <<'PY' || fail "the resumed run ($2) differs from the straight one ($1)"
import glob, json, sys, h5py, numpy as np
d, na, nb = sys.argv[1:]
a = h5py.File(glob.glob("%s/%s/*/checkpoint.h5" % (d, na))[0], "r")
b = h5py.File(glob.glob("%s/%s/*/checkpoint.h5" % (d, nb))[0], "r")
for k in ("epoch", "step", "global_step", "model_step"):
    assert a.attrs[k] == b.attrs[k], "%s: %s vs %s" % (k, a.attrs[k], b.attrs[k])
bad = [k for k in a["model"] if not np.array_equal(a["model"][k][()], b["model"][k][()])]
assert not bad, "tensors differ: %s" % bad[:5]
assert np.array_equal(a["optimizer/momentum"][()], b["optimizer/momentum"][()]), "momentum differs"
assert ("amp" in a) == ("amp" in b)
if "amp" in a:
    assert np.array_equal(a["amp/master"][()], b["amp/master"][()]), "master weights differ"
sa, sb = dict(a["scaler"].attrs), dict(b["scaler"].attrs)
assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa), "scaler: %s vs %s" % (sa, sb)
def epochs(n):
    lines = [json.loads(l) for f in glob.glob("%s/%s/*/metrics.jsonl" % (d, n)) for l in open(f)]
    return [l for l in lines if l["kind"] == "epoch"]
ea, eb = epochs(na), epochs(nb)
assert [l["epoch"] for l in ea] == [l["epoch"] for l in eb], "epochs logged: %s vs %s" % (ea, eb)
keys = ("step", "lr", "train_loss", "train_top1", "train_top5", "val_loss", "val_top1", "val_top5", "loss_scale", "overflows")
for la, lb in zip(ea, eb):
    diff = [k for k in keys if la[k] != lb[k]]
    assert not diff, "epoch %d: %s" % (la["epoch"], ["%s %r vs %r" % (k, la[k], lb[k]) for k in diff])
print("%s = %s: %d tensors, momentum%s, scaler and %d epoch lines bit for bit, step %d" % (
    na, nb, len(a["model"]), ", master weights" if "amp" in a else "", len(ea), a.attrs["global_step"]))
PY
}
run --epochs 2 --results "$DT_TMP/a"
run --epochs 2 --results "$DT_TMP/b" --max-steps 300
grep -q "stopped after --max-steps 300 at epoch 0, step 300" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "no stop line"; }
touch "$(ls -d "$DT_TMP"/b/*)/checkpoint.h5.tmp.999999999"   # what a writer killed mid-way leaves
run --epochs 2 --results "$DT_TMP/b" --resume auto
grep -q "resuming from .*checkpoint.h5 at epoch 0, step 300" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "did not resume at step 300"; }
same a b
pass "2 epochs straight = 300 steps + stop + resume: weights, momentum and metrics bit for bit, under 2 MPI ranks"

# O2 (fp16 weights, fp32 master weights, dynamic loss scale that doubles after 20 clean steps): the
# scale changes between the stop and the end, and the resumed run still ends bit for bit the same
o2="--epochs 1 --opt-level O2 --loss-scale-window 20"
run $o2 --results "$DT_TMP/c"
run $o2 --results "$DT_TMP/d" --max-steps 150
s150=$(scale_of d)
run $o2 --results "$DT_TMP/d" --resume auto
same c d
s_end=$(scale_of d)
[ "$s150" != "$s_end" ] || fail "O2: the loss scale did not change after the resume ($s150), so this tested nothing about it"
pass "O2: 1 epoch straight = 150 steps + stop + resume, bit for bit; the loss scale went from $s150 to $s_end after the stop"

expect_status 2 "$top_builddir/dtrain" -a resnet20 --results "$DT_TMP/e" --resume "$(ls "$DT_TMP"/a/*/checkpoint.h5)" \
  "$DT_TMP/fm"
grep -q "a checkpoint of resnet8, not of resnet20" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "another arch's checkpoint"; }
[ ! -e "$DT_TMP/e" ] || fail "a refused --resume wrote into --results"
pass "a checkpoint of another architecture: one line, exit 2, nothing written"
