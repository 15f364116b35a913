#!/usr/bin/env bash
# The runs and evaluations of this record, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set,
# the workflow's parse of all of ELTeC-eng in resources/parses/en/pall_sall: `snakemake --cores 2 multiview` makes it).
# OUT: a scratch folder. On 2 busy CPU cores: ~40 min a CTL probe, ~25 min (sklearn) / ~60 min (pytorch) an evaluation.
set -euo pipefail
OUT=${1:?usage: measure.sh OUT}
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
T=MR,CR,SUBJ,MPQA,TREC,SICK-R,SICK-E,MRPC
probe() {  # the paper's CTL recipe on each book's first 1,250 sentences (122,274 trained), one CPU thread
    strae train-multiview --parses resources/parses/en/pall_sall --lang en --seed 0 --model ctl --vocab-size 20000 \
        --embedding-dim 300 --hidden 1000 --lr 0.005 --clip-grad-norm 5.0 --batch-size 100 --max-tokens 64 \
        --threads 1 --device cpu --sentences-per-book 1250 --quiet "$@"
}
score() {  # model, classifier, out: SentEval transfer with 3 inner folds (a stated shortcut, the same for every row)
    strae evaluate --suite senteval --model "$1" --lang en --tasks $T --inner-folds 3 --classifier "$2" --jobs 1 \
        --config config/config.yaml --device cpu --quiet --out "$3"
}
probe --out "$OUT/ctl_h1000_e300/seed0"
probe --own-view positive --out "$OUT/ctl_h1000_e300_ownview/seed0"
score "$OUT/ctl_h1000_e300/seed0" sklearn "$OUT/ctl-sklearn.senteval.json"
score "$OUT/ctl_h1000_e300/seed0" pytorch "$OUT/ctl-pytorch.senteval.json"
score "$OUT/ctl_h1000_e300_ownview/seed0" sklearn "$OUT/ctl-ownview-sklearn.senteval.json"
score random-token sklearn "$OUT/floor-sklearn.senteval.json"
