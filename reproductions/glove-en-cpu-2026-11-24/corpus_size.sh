#!/usr/bin/env bash
# Diagnostic for the GloVe lexical gap (not a paper setting): seed 0 of the same recipe trained on the first quarter
# and the first half of the English corpus lines (`strae train-glove --max-lines`), evaluated like the workflow's
# runs. The full-corpus point is seed 0 of run.sh. One thread each, one after the other (~15 and ~25 min on a free
# core). From the repository root:
#   bash reproductions/glove-en-cpu-2026-11-24/corpus_size.sh
set -euo pipefail
OUT=${OUT:-results/diagnostics}
TASKS=simlex,wordsim_sim,wordsim_rel,sts12,sts13,sts14,sts15,sts16,stsb,sickr,semrel
mkdir -p "$OUT"
for n in 110460 220919; do   # resources/corpora/en/train.txt has 441,838 lines
  run=$OUT/glove-lines$n/seed0
  [ -f "$run/encoder.json" ] || OMP_NUM_THREADS=1 strae train-glove --lang en --seed 0 --setting words_w10_d256 \
    --corpus resources/corpora/en/train.txt --max-lines $n --epochs 15 --device cpu --threads 1 --out "$run" \
    > "$OUT/glove-lines$n.log" 2>&1
  strae evaluate --model "$run" --lang en --variant paper --tasks $TASKS --config results/config.effective.yaml \
    --device cpu --out "$OUT/glove-lines$n.paper.json" --quiet
done
