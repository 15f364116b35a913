#!/usr/bin/env bash
# This record's CL run and its curve, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set; the
# parse ~16 min on one core if resources/parses/en/pall_sall is not there, then ~1.2 s a training step on one
# thread beside the evaluations on the other). The CTL curve (curve-ctl.json) is the one of
# ../multiview-training-curve-cpu-2026-11-30 (its measure.sh); `snakemake --cores 2 multiview --configfile
# config/multiview_curve.yaml` makes both, and the figure, in one command.
set -euo pipefail
export HF_HUB_OFFLINE=1
RUN=results/runs/en/multiview_cl/cl_h1000_e300/seed0
OUT=results/curves/en/multiview_cl/cl_h1000_e300/seed0.json
snakemake --cores 1 "$RUN/train.json" --configfile config/multiview_curve.yaml &
TRAIN=$!
mkdir -p "$(dirname "$OUT")"
sleep 90  # the workflow writes results/config.effective.yaml as it starts
while kill -0 $TRAIN 2>/dev/null; do
    OMP_NUM_THREADS=1 strae evaluate --suite senteval --curve --while-training --model "$RUN" --lang en \
        --tasks SICK-E,SICK-R --config results/config.effective.yaml --device auto --out "$OUT" --quiet
    sleep 60
done
wait $TRAIN
# the last point (the finished run) and the curve JSON
OMP_NUM_THREADS=2 strae evaluate --suite senteval --curve --model "$RUN" --lang en --tasks SICK-E,SICK-R \
    --config results/config.effective.yaml --device auto --out "$OUT" --quiet
# the figure from both curves
strae figure multiview_fig2_training_curve --tables config/tables.yaml --config results/config.effective.yaml \
    --curves results/curves/en/multiview_ctl/ctl_h1000_e300/seed0.json "$OUT" --paper-dir paper_tables \
    --out-png figure2.png --out-pdf figure2.pdf
