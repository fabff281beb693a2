#!/bin/sh
# scaling.sh: a scaling study. Submits the same training (slurm/resnet50_2x4.sbatch, with its
# variables) on 1, 2, 4 and 8 GPUs, then a small job that waits for them and runs dtreport, which
# writes the throughput, speed-up and scaling efficiency per GPU count into $DT_RESULTS/RESULTS.md
# (with a throughput-against-GPUs plot in $DT_RESULTS/plots/). The jobs' output files go there too.
#
#   sh slurm/scaling.sh                              # on the login node, from the repository
#   SCALING_GPUS="1 2 4 8 16" GPUS_PER_NODE=8 sh slurm/scaling.sh
#
# Each run trains DT_EPOCHS epochs (default 1: the steady-state img/s needs no more, and dtreport
# tables complete epochs) at 256 images per GPU, so the global batch grows with the GPUs, as in the
# seed tutorial's study. Runs of up to GPUS_PER_NODE GPUs use one
# node; larger ones whole nodes. Any sbatch option (partition, account, time) can follow:
#   sh slurm/scaling.sh --partition=gpu --time=1:00:00
set -eu
here=$(cd "$(dirname "$0")" && pwd)
SCALING_GPUS=${SCALING_GPUS:-1 2 4 8}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
SCRIPT=${SCRIPT:-$here/resnet50_2x4.sbatch}
export DT_RESULTS=${DT_RESULTS:-$PWD/results/scaling}
export DT_EPOCHS=${DT_EPOCHS:-1}
mkdir -p "$DT_RESULTS"
ids=
for g in $SCALING_GPUS; do
  if [ "$g" -le "$GPUS_PER_NODE" ]; then nodes=1; per=$g; else nodes=$(( (g + GPUS_PER_NODE - 1) / GPUS_PER_NODE )); per=$GPUS_PER_NODE; fi
  if [ $((nodes * per)) -ne "$g" ]; then
    echo "scaling.sh: $g GPUs is not a whole number of $GPUS_PER_NODE-GPU nodes" >&2
    exit 2
  fi
  id=$(sbatch --parsable --job-name="scaling-${g}gpu" --nodes=$nodes --ntasks-per-node=$per \
    --gpus-per-node=$per --no-requeue --output="$DT_RESULTS/%x-%j.out" "$@" "$SCRIPT")
  id=${id%%;*}
  echo "submitted $g GPUs ($nodes x $per): job $id"
  ids="$ids:$id"
done
report=$(sbatch --parsable --job-name=scaling-report --dependency="afterany$ids" --nodes=1 --ntasks=1 \
  --output="$DT_RESULTS/report-%j.out" "$@" \
  --wrap="${DTREPORT:-dtreport} '$DT_RESULTS' --plots '$DT_RESULTS/plots' -o '$DT_RESULTS/RESULTS.md'")
echo "submitted the report: job ${report%%;*}, after jobs $(echo ${ids#:} | tr : " "); it writes $DT_RESULTS/RESULTS.md"
