#!/bin/sh
# graph.sh: training steps run as graphs (--graph) end where the same steps issued op by op end, bit
# for bit. On the CPU, --graph captures each step on dt_cpu_graph_backend (its ops kept, not run, then
# launched: nn/cpu/capture.c, whose capture fails on a host wait or an allocation inside it, as CUDA's
# does, and the run goes on without graphs: graph_fallback.sh) in the segments the CUDA backend captures (train/step.c, "the step, issued or as graphs"), with the
# collectives between them. resnet8 on Fashion-MNIST (make check: its first 12000 training and 1000
# validation images; make check-long: all of it):
#   - 2 MPI ranks at batch 256: at O2 one epoch, 23 full batches per rank (117 in make check-long;
#     issued at the first, captured at the second, launched at the others), then the epoch's short
#     batch issued op by op (fp16 storage,
#     fp32 master weights, the gradients' wire, the dynamic loss scaler); at O0 20 steps;
#   - 1 rank, 3 epochs of 250 images at batch 64 (3 full batches and a short one each): one graph
#     per step, the next batch staged while the device runs the step (train/step.c, stage_ahead)
#     across epoch ends and validations;
# each against the same run without --graph: the final checkpoints (every tensor, momentum, master
# weights, scaler) and the epoch lines equal. run.json must say the steps ran as graphs (and not
# without --graph), so that a run that quietly fell back cannot pass.
. "$top_srcdir/tests/common.sh"
use_mpirun --bind-to none
py=${DT_PYTHON_TORCH:-}
[ -n "$py" ] && "$py" -c 'import h5py, numpy' 2>/dev/null || skip "no Python with h5py (Debian: python3-h5py)"
if long; then fmnist_packed "$DT_TMP/fm"; else fmnist_packed "$DT_TMP/fm" 12000 1000; fi
# run RANKS NAME OPTIONS...: resnet8 on RANKS ranks into $DT_TMP/NAME
run() {
  ranks=$1 name=$2
  shift 2
  expect_status 0 timeout 900 $MPIRUN -np "$ranks" "$top_builddir/dtrain" -a resnet8 -b 256 -j 1 --lr 0.4 -p 0 \
    --results "$DT_TMP/$name" "$@" "${data:-$DT_TMP/fm}"
}
# graphs NAME: true or false, as the run's run.json says
graphs() {
  "$py" -c 'import glob, json, sys; print(str(json.load(open(glob.glob(sys.argv[1] + "/*/run.json")[0]))["graphs"]).lower())' \
    "$DT_TMP/$1"
}
# pair RANKS LABEL OPTIONS...: the run with and without --graph, compared
pair() {
  ranks=$1 label=$2
  shift 2
  run "$ranks" "$label-issued" "$@"
  run "$ranks" "$label-graph" --graph "$@"
  grep -q "step 2: the training step captured as graphs" "$DT_TMP/err" ||
    { cat "$DT_TMP/err"; fail "$label: the --graph run did not capture its second step"; }
  [ "$(graphs "$label-graph")" = true ] || fail "$label: run.json does not say the --graph run's steps were graphs"
  [ "$(graphs "$label-issued")" = false ] || fail "$label: run.json says graphs without --graph"
  "$py" "$top_srcdir/tests/train/same_run.py" "$DT_TMP" "$label-issued" "$label-graph" ||
    fail "$label: the run with --graph differs from the run without"
  pass "$label: steps as graphs = steps issued op by op, bit for bit ($*)"
}
pair 2 o0 --epochs 1 --max-steps 20
pair 2 o2 --epochs 1 --opt-level O2
# 250 images at batch 64: 3 full batches and a short one per epoch, so that a batch staged ahead
# meets epoch ends, validations and short batches
fmnist_packed "$DT_TMP/fm250" 250 50
data=$DT_TMP/fm250 pair 1 alone --epochs 3 -b 64
