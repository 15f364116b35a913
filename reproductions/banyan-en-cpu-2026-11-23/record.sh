#!/usr/bin/env bash
# Evaluate every finished seed of the English Banyan run (both variants, by the workflow's own evaluate jobs:
# Snakemake sees each finished run's train.json and retrains nothing), then freeze everything evaluated under
# results/ (the Table 5 runs included) into one `strae record`: scores.csv, every table those scores reach
# (`strae report tables`; cells without runs read "not run"), the README's generated results block. From the
# repository root, with the run's code on PYTHONPATH as for run.sh:
#   bash reproductions/banyan-en-cpu-2026-11-23/record.sh cpu-2core-banyan-en-2seeds-2026-11-24
set -euo pipefail
NAME=${1:?usage: record.sh RECORD_NAME}
RUNS=results/runs/en/banyan/ce_diagonal_entangled_k128_u2
EVALS=results/eval/en/banyan/ce_diagonal_entangled_k128_u2
targets=()
for train_json in "$RUNS"/seed*/train.json; do
  seed=$(basename "$(dirname "$train_json")")
  if grep -q '"status": "completed"' "$train_json"; then
    targets+=("$EVALS/$seed.paper.json" "$EVALS/$seed.official.json")
  else
    echo "$train_json: not completed; its train.json goes into the record as it stands" >&2
  fi
done
snakemake --cores "${CORES:-2}" "${targets[@]}" results/measure/param_counts.json
strae aggregate --out results/scores.csv results/eval/*/*/*/seed*.json
strae report tables --config results/config.effective.yaml --param-counts results/measure/param_counts.json
strae record --name "$NAME"
