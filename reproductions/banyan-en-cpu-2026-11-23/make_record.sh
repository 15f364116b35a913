#!/usr/bin/env bash
# Freeze the finished CPU run into a `strae record` (reproductions/NAME/ + the README's generated results block):
# the workflow's own evaluate jobs for both variants (Snakemake: the run's train.json exists, so nothing retrains),
# results/scores.csv, the Banyan tables that read this run (Tables 1-4; their other cells read "not run"), then
# `strae record`. Run from the repository root once run.sh has finished (train.json status "completed"):
#   bash reproductions/banyan-en-cpu-2026-11-23/make_record.sh cpu-2core-banyan-en-seed0-2026-11-23
set -euo pipefail
NAME=${1:?usage: make_record.sh RECORD_NAME}
RUN=results/runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0
EVAL=results/eval/en/banyan/ce_diagonal_entangled_k128_u2/seed0
grep -q '"status": "completed"' "$RUN/train.json" || { echo "$RUN/train.json: the run has not completed" >&2; exit 1; }
snakemake --cores "${CORES:-2}" "$EVAL.paper.json" "$EVAL.official.json" results/measure/param_counts.json
strae aggregate --out results/scores.csv results/eval/*/*/*/seed*.json
for n in 1 2 3 4; do  # the rule `table`'s command (workflow/rules/report.smk), on this one run's scores
  strae report table --table "banyan_table$n" --tables config/tables.yaml --scores results/scores.csv \
    --config results/config.effective.yaml --param-counts results/measure/param_counts.json \
    --paper-dir paper_tables --out-csv "results/banyan/table$n.csv" --out-md "results/banyan/table$n.md"
done
strae record --name "$NAME"
