#!/usr/bin/env bash
# A small causal check of the corpus finding (reproductions/corpus-coverage-en-2026-11-27): Banyan (the `banyan`
# recipe, Table 1's ce/diagonal/entangled k128 u2) trained on two equal-sized corpora cut from strae's English corpus
# — every line with >= 5 distinct WordSim-353 words ("selected", the authors' corpus's apparent rule) vs a uniform
# sample of the same number of words ("uniform") — for the same number of epochs with about the same pieces per step
# (~2k: selected's sentences are ~2.1x as long, so its batch is 30 sentences against 64; small batches, not the
# recipe's 512, so that a CPU makes ~2,500 updates in ~15 min: at 512, 360 updates left the loss at the unigram
# plateau), then the English evaluation (paper variant).
# NOT completed (2026-11-27): on 2 CPU cores the first run stayed on the unigram plateau (dev CE 8.86 after 10 of 15
# epochs, ~950 updates) and the session's time went to the GloVe check instead (glove.sh, README.md).
# Usage (repository root, after the workflow's English corpus rules): bash banyan.sh WORK_DIR [SEEDS...]
set -euo pipefail
work=${1:?WORK_DIR}; shift; seeds=${*:-0 1}
bash reproductions/wordsim-selection-cpu-2026-11-27/prepare.sh "$work"
for seed in $seeds; do
  for corpus in selected uniform; do
    batch=64; [ "$corpus" = selected ] && batch=30
    run="$work/runs/$corpus/seed$seed"
    [ -f "$run/encoder.json" ] || OMP_NUM_THREADS=2 strae train --model banyan --recipe banyan --structure entangled \
      --functions diagonal --objective ce --k 128 --u 2 --device cpu --lang en --seed "$seed" \
      --setting ce_diagonal_entangled_k128_u2 --data-dir "$work/$corpus/tok" --tokenizer resources/tokenizers/en.model \
      --epochs "${EPOCHS:-25}" --batch-size "$batch" --out "$run" > "$work/train-$corpus-$seed.log" 2>&1
    [ -f "$work/eval-$corpus-$seed.json" ] || OMP_NUM_THREADS=2 strae -q evaluate --model "$run" --lang en \
      --variant paper --out "$work/eval-$corpus-$seed.json"
  done
done
