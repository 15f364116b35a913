#!/usr/bin/env bash
# The random-token floor over the multi-view model's own parse and vocabulary, beside the plain floor, for
# reproductions/multiview-cpu-full-4seeds-2026-11-29. Run from the repository root (about 45 min on one core):
#     bash reproductions/multiview-vocabulary-floor-cpu-2026-11-29/measure.sh OUT
# It parses all of ELTeC-eng once (the multi-view workflow's parse: ~13-20 min), trains one step of the paper's CTL
# recipe for its vocab.json and parser.json (the vocabulary depends on the parse alone, never on the seed or the
# weights, which vectors=random-token does not use), then scores: the floor over that vocabulary at 256 and 2000
# dimensions (SentEval transfer; 256 also zero-shot), and the plain floor with today's SentEval row order.
# Then: python reproductions/multiview-vocabulary-floor-cpu-2026-11-29/compare.py OUT
set -euo pipefail
(($# == 1)) || { echo "usage: measure.sh OUT" >&2; exit 2; }
OUT=$1
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
snakemake --cores 1 resources/parses/en/pall_sall/meta.json  # also writes results/config.effective.yaml
RUN=$OUT/ctl_h1000_e300/seed0
strae train-multiview --parses resources/parses/en/pall_sall --lang en --seed 0 --model ctl --setting ctl_h1000_e300 \
  --vocab-size 20000 --embedding-dim 300 --hidden 1000 --lr 0.005 --clip-grad-norm 5.0 --batch-size 100 \
  --max-tokens 64 --threads 1 --device cpu --max-steps 1 --out "$RUN" --quiet
TASKS=MR,CR,SUBJ,MPQA,TREC,SICK-R,SICK-E,MRPC
common=(--lang en --config results/config.effective.yaml --device cpu --quiet)
strae evaluate --suite senteval --model "$RUN" --encoder-option vectors=random-token --tasks $TASKS "${common[@]}" \
  --out "$OUT/vocab-floor.senteval.json"
strae evaluate --model "$RUN" --encoder-option vectors=random-token --variant paper \
  --tasks simlex,wordsim_sim,wordsim_rel,sts12,sts13,sts14,sts15,sts16,stsb,sickr,semrel "${common[@]}" \
  --out "$OUT/vocab-floor.paper.json"
strae evaluate --suite senteval --model random-token --tasks $TASKS "${common[@]}" --out "$OUT/plain-floor.senteval.json"
strae evaluate --suite senteval --model "$RUN" --encoder-option vectors=random-token --encoder-option dim=2000 \
  --tasks $TASKS "${common[@]}" --out "$OUT/vocab-floor-dim2000.senteval.json"
