#!/usr/bin/env bash
# GloVe (words, window 10, dim 256, 15 epochs) on the mirror's English corpus, seeds 0-3, each evaluated plain and
# with stop-word removal (Banyan Tables 3-4's two GloVe rows), by the workflow's own jobs. The baselines are off in
# config/config.yaml; asking for their evaluation files runs them anyway. Two runs at a time, one thread each (GloVe's
# row-wise updates use one core). From the repository root, resumable (Snakemake reruns only what is missing):
#   bash reproductions/glove-en-cpu-2026-11-24/run.sh
set -euo pipefail
EVALS=results/eval/en/glove
snakemake --cores "${CORES:-2}" --set-threads train_glove=1 --keep-going \
  "$EVALS"/words_w10_d256/seed{0,1,2,3}.paper.json \
  "$EVALS"/words_w10_d256@stopword_rm/seed{0,1,2,3}.paper.json \
  results/measure/param_counts.json
