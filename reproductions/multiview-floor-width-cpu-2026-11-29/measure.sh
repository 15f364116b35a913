#!/usr/bin/env bash
# The plain random-token floor at the multi-view models' width (2,000 = [target; context], 2 x hidden 1000), the
# floor the workflow now scores beside the 256-d one (multiview.senteval.random_token: [256, model]). Run from the
# repository root (about 35 min on one idle core; SentEval's protocol, 10 inner folds, lbfgs max_iter 100):
#     bash reproductions/multiview-floor-width-cpu-2026-11-29/measure.sh OUT
# Then: python reproductions/multiview-floor-width-cpu-2026-11-29/compare.py OUT
set -euo pipefail
(($# == 1)) || { echo "usage: measure.sh OUT" >&2; exit 2; }
OUT=$1
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
strae evaluate --suite senteval --variant senteval --model random-token --encoder-option dim=2000 --lang en \
  --tasks MR,CR,SUBJ,MPQA,TREC,SICK-R,SICK-E,MRPC --config config/config.yaml --quiet \
  --out "$OUT/random-token.dim2000.senteval.json"
