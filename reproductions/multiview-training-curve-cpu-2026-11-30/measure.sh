#!/usr/bin/env bash
# This record's run and its curve, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set; ~16 min
# for the parse on one core, then ~1.3 s a training step on one thread beside the evaluation on the other).
# The workflow's CTL seed 0 with its training curve (config/multiview_curve.yaml: a point every 50,000 sentences),
# scored on SICK-E and SICK-R while it trains (the same command after it has finished scores the last point and
# writes the curve JSON; `snakemake --cores 2 multiview --configfile config/multiview_curve.yaml` does all of it).
# This record's run began at 0862c57, when config/config.yaml itself kept the curve (every 50,000 sentences, seed 0);
# the overlay asks for the same. It was stopped by SIGTERM at step 4,651 and resumed to the end (596a3ca).
set -euo pipefail
export HF_HUB_OFFLINE=1
RUN=results/runs/en/multiview_ctl/ctl_h1000_e300/seed0
OUT=results/curves/en/multiview_ctl/ctl_h1000_e300/seed0.json
snakemake --cores 1 "$RUN/train.json" --configfile config/multiview_curve.yaml &
TRAIN=$!
mkdir -p "$(dirname "$OUT")"
sleep 60  # the workflow writes results/config.effective.yaml as it starts
while kill -0 $TRAIN 2>/dev/null; do
    OMP_NUM_THREADS=1 strae evaluate --suite senteval --curve --while-training --model "$RUN" --lang en \
        --tasks SICK-E,SICK-R --config results/config.effective.yaml --device auto --out "$OUT" --quiet
    sleep 60
done
# the figure from the curve
strae figure multiview_fig2_training_curve --tables config/tables.yaml --config results/config.effective.yaml \
    --curves "$OUT" --paper-dir paper_tables --out-png figure2.png --out-pdf figure2.pdf
