#!/usr/bin/env bash
# Re-score MR/CR/SUBJ/MPQA of reproductions/multiview-cpu-2026-11-28 under SentEval's rounded-C rule, on the same
# weights (3 inner folds, as that record). Run from the repository root:
#     bash reproductions/multiview-cpu-2026-11-28-rounded-c/rescore.sh RUNS OUT
# RUNS: the directory holding multiview_{ctl,cl}/{ctl,cl}_h1000_e300/seed{0..3} with model.pt (the record's weights:
# retrain with `snakemake --cores 2 multiview --configfile config/multiview_cpu.yaml`, then RUNS=results/runs/en);
# OUT: where the nine JSONs go. Then: python reproductions/multiview-cpu-2026-11-28-rounded-c/compare.py OUT
set -euo pipefail
(($# == 2)) || { echo "usage: rescore.sh RUNS OUT" >&2; exit 2; }
RUNS=$1 OUT=$2
mkdir -p "$OUT"
export OMP_NUM_THREADS=1
jobs=()
for m in ctl cl; do for s in 0 1 2 3; do
  jobs+=("$RUNS/multiview_$m/${m}_h1000_e300/seed$s multiview_$m.seed$s")
done; done
jobs+=("random-token random-token")
printf '%s\n' "${jobs[@]}" | OUT=$OUT xargs -P 2 -L 1 bash -c 'strae evaluate --suite senteval --model "$0" \
  --lang en --tasks MR,CR,SUBJ,MPQA --inner-folds 3 --config results/config.effective.yaml --device cpu \
  --out "$OUT/$1.senteval.json" --quiet > "$OUT/$1.log" 2>&1'
