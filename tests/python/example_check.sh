# example_check.sh: sourced by tests/python/hvd_example.sh and tests/slurm/hvd_example.sh, which run
# doc/examples/hvd_fmnist.py for one epoch on 2 ranks with its output in $DT_TMP/out.

# example_check WHAT CHECKPOINT: in $DT_TMP/out, one line from each of ranks 0 and 1 of 2; one epoch
# line from rank 0 (2 ranks) with a finite positive loss and a test accuracy in (0.3, 1] (chance is
# 0.1: a model that did not learn fails); one checkpoint line, rank 0's, and CHECKPOINT loading in
# torch with epoch 1, resnet18's weights (1 input channel, 10 classes) and the optimizer's state.
example_check() {
  # counted as occurrences, not lines: mpirun forwards each rank's output as it comes, and two ranks'
  # lines written at the same moment can reach its standard output glued together
  for r in 0 1; do
    [ "$(grep -o "rank $r of 2 (local rank " "$DT_TMP/out" | wc -l)" -eq 1 ] ||
      { cat "$DT_TMP/err"; fail "$1: not one line from rank $r of 2"; }
  done
  line=$(grep '^epoch ' "$DT_TMP/out" || true)
  [ "$(echo "$line" | grep -c .)" -eq 1 ] || { cat "$DT_TMP/err"; fail "$1: expected one epoch line, got: $line"; }
  echo "$line" | awk '$1 == "epoch" && $2 == "1/1:" && $3 == "train" && $4 == "loss" && $7 == "accuracy" &&
      $5 + 0 > 0 && $5 + 0 < 100 && $8 + 0 > 0.3 && $8 + 0 <= 1 && $9 == "(2" { ok = 1 } END { exit !ok }' ||
    fail "$1: the epoch line does not give a positive loss, an accuracy above chance and 2 ranks: $line"
  [ "$(grep -c ': checkpoint of epoch ' "$DT_TMP/out")" -eq 1 ] &&
    grep -q "^rank 0: checkpoint of epoch 1 written to $2\$" "$DT_TMP/out" ||
    fail "$1: not one checkpoint line, from rank 0"
  [ ! -e "$2.tmp" ] || fail "$1: $2.tmp left behind"
  "$DT_PYTHON_TORCH" - "$2" <<'EOF' || fail "$1: the checkpoint $2 does not hold epoch 1, resnet18's weights and the optimizer's state"
import sys, torch
ck = torch.load(sys.argv[1])
m, o = ck["model"], ck["optimizer"]
assert ck["epoch"] == 1, ck["epoch"]
assert tuple(m["conv1.weight"].shape) == (64, 1, 7, 7) and tuple(m["fc.weight"].shape) == (10, 512), "shapes"
assert all(torch.isfinite(v).all() for v in m.values() if v.is_floating_point()), "weights not finite"
assert len(o["state"]) == len([k for k in m if k.endswith("weight") or k.endswith("bias")]), "optimizer state"
EOF
}
