#!/usr/bin/env bash
# GloVe's --pretokenize treebank setting, English, seed 0, on 2 CPU cores (2026-11-29). From the checkout root,
# with the English corpus prepared (`snakemake --cores 2 resources/corpora/en/train.txt`).
set -euo pipefail
RUN=results/runs/en/glove/words_w10_d256_treebank/seed0
strae train-glove --lang en --seed 0 --out "$RUN" --pretokenize treebank --threads 2
strae evaluate --model "$RUN" --lang en --variant paper \
    --out results/eval/en/glove/words_w10_d256_treebank/seed0.paper.json
strae evaluate --model "$RUN" --lang en --variant paper \
    --encoder-option stopwords=remove --encoder-option stopword_list=sklearn \
    --out results/eval/en/glove/words_w10_d256_treebank@stopword_rm/seed0.paper.json
strae aggregate --out reproductions/glove-treebank-cpu-2026-11-29/scores.csv \
    results/eval/en/glove/words_w10_d256_treebank/seed0.paper.json \
    results/eval/en/glove/words_w10_d256_treebank@stopword_rm/seed0.paper.json
python reproductions/glove-treebank-cpu-2026-11-29/compare.py > reproductions/glove-treebank-cpu-2026-11-29/compare.md
