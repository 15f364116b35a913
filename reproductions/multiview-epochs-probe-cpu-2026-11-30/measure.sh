#!/usr/bin/env bash
# This record's run and evaluation, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set, the
# workflow's parse of all of ELTeC-eng in resources/parses/en/pall_sall: `snakemake --cores 2 multiview` makes it).
# OUT: a scratch folder. On 2 CPU cores (the other busy): ~75 min the probe, ~25 min its evaluation.
set -euo pipefail
OUT=${1:?usage: measure.sh OUT}
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
# the paper's CTL recipe on each book's first 1,250 sentences (122,274), two passes over them, one CPU thread:
# the probe of reproductions/multiview-classifier-objective-cpu-2026-11-30/ with --epochs 2
strae train-multiview --parses resources/parses/en/pall_sall --lang en --seed 0 --model ctl --vocab-size 20000 \
    --embedding-dim 300 --hidden 1000 --lr 0.005 --clip-grad-norm 5.0 --batch-size 100 --max-tokens 64 \
    --threads 1 --device cpu --sentences-per-book 1250 --epochs 2 --quiet --record-failure \
    --out "$OUT/ctl_h1000_e300_ep2/seed0"
# SentEval transfer with 3 inner folds (the same shortcut as the one-epoch probe's row it is compared with)
strae evaluate --suite senteval --model "$OUT/ctl_h1000_e300_ep2/seed0" --lang en \
    --tasks MR,CR,SUBJ,MPQA,TREC,SICK-R,SICK-E,MRPC --inner-folds 3 --classifier sklearn --jobs 1 \
    --config config/config.yaml --device cpu --quiet --out "$OUT/ctl-ep2-sklearn.senteval.json"
