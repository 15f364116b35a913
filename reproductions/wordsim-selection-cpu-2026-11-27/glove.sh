#!/usr/bin/env bash
# A small causal check of the corpus finding (reproductions/corpus-coverage-en-2026-11-27) with GloVe (strae's baseline
# trainer, subword mode on the tokenised corpora: a word lacks a vector only when a piece of it never occurs), its
# CLI defaults, 1 thread.
# Two corpora of 150,673 and 150,675 words cut from strae's English corpus (make_corpora.py): "selected" = every line
# with >= 5 distinct WordSim-353 words (the authors' corpus's apparent rule), "uniform" = a seeded uniform sample.
# Usage (repository root, after the workflow's English corpus rules): bash glove.sh WORK_DIR [SEEDS...]
set -euo pipefail
work=${1:?WORK_DIR}; shift; seeds=${*:-0 1 2 3}
bash reproductions/wordsim-selection-cpu-2026-11-27/prepare.sh "$work"
for seed in $seeds; do
  for corpus in selected uniform; do
    run="$work/glove/$corpus/seed$seed"
    [ -f "$run/encoder.json" ] || OMP_NUM_THREADS=1 strae -q train-glove --lang en --seed "$seed" --out "$run" \
      --tokenization subword --data-dir "$work/$corpus/tok" --corpus "$work/$corpus/train.txt" \
      --corpus-label "$corpus" --threads 1 > "$work/glove-$corpus-$seed.log" 2>&1
    [ -f "$work/glove-eval-$corpus-$seed.json" ] || OMP_NUM_THREADS=1 strae -q evaluate --model "$run" --lang en \
      --variant paper --out "$work/glove-eval-$corpus-$seed.json"
  done
done
