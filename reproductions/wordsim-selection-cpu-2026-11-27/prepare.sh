#!/usr/bin/env bash
# The two corpora of the check (make_corpora.py) and their tokenisation, once: what glove.sh and banyan.sh train on.
# Usage (repository root, after the workflow's English corpus rules): bash prepare.sh WORK_DIR
set -euo pipefail
work=${1:?WORK_DIR}
python reproductions/wordsim-selection-cpu-2026-11-27/make_corpora.py "$work"
for corpus in selected uniform; do
  [ -f "$work/$corpus/tok/train.ids.npy" ] || strae -q tokenize-corpus --lang en --corpus-dir "$work/$corpus" \
    --out-dir "$work/$corpus/tok"
done
