# same_run.py DIR A B: the runs DIR/A/* and DIR/B/* ended alike, bit for bit: their final
# checkpoints (counters, every tensor, the optimizer's state, master weights, scaler) and the epoch lines of their
# metrics.jsonl (losses, accuracies, lr, loss scale). Prints one line when they are; exits non-zero
# naming the first difference otherwise. Used by tests/train/resume.sh and graph.sh.
import glob, json, sys, h5py, numpy as np
d, na, nb = sys.argv[1:]
a = h5py.File(glob.glob("%s/%s/*/checkpoint.h5" % (d, na))[0], "r")
b = h5py.File(glob.glob("%s/%s/*/checkpoint.h5" % (d, nb))[0], "r")
for k in ("epoch", "step", "global_step", "model_step"):
    assert a.attrs[k] == b.attrs[k], "%s: %s vs %s" % (k, a.attrs[k], b.attrs[k])
bad = [k for k in a["model"] if not np.array_equal(a["model"][k][()], b["model"][k][()])]
assert not bad, "tensors differ: %s" % bad[:5]
oa, ob = a["optimizer"], b["optimizer"]   # SGD's momentum, Adam's or RMSprop's two buffers
assert sorted(oa) == sorted(ob) and dict(oa.attrs) == dict(ob.attrs), "optimizers: %s vs %s" % (list(oa), list(ob))
bad = [k for k in oa if not np.array_equal(oa[k][()], ob[k][()])]
assert not bad, "optimizer state differs: %s" % bad
assert ("model_ema" in a) == ("model_ema" in b)
if "model_ema" in a:   # --model-ema's average
    ea_, eb_ = a["model_ema"], b["model_ema"]
    assert dict(ea_.attrs) == dict(eb_.attrs), "model_ema: %s vs %s" % (dict(ea_.attrs), dict(eb_.attrs))
    bad = [k for k in ea_ if not np.array_equal(ea_[k][()], eb_[k][()])]
    assert not bad, "the model's averages differ: %s" % bad[:5]
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
print("%s = %s: %d tensors, optimizer state (%s)%s, scaler and %d epoch lines bit for bit, step %d" % (
    na, nb, len(a["model"]), ", ".join(sorted(oa)) or "none", ", master weights" if "amp" in a else "", len(ea),
    a.attrs["global_step"]))
