#!/usr/bin/env bash
# Freeze every finished CPU run under results/ into one `strae record` (reproductions/NAME/ + the README's generated
# results block): Banyan English seed 0 (Banyan Tables 1-4, both evaluation variants) and this folder's runs on the
# mirror's smaller corpora, Banyan Afrikaans and Hindi seeds 0-3 (Banyan Table 5), each evaluated by the workflow's
# own evaluate jobs (run.sh). Every table's cells without runs read "not run". From the repository root, once
# run.sh's Banyan runs have finished:
#   bash reproductions/cpu-languages-2026-11-23/make_record.sh cpu-2core-en-af-hi-2026-11-23
set -euo pipefail
NAME=${1:?usage: make_record.sh RECORD_NAME}
strae aggregate --out results/scores.csv results/eval/*/*/*/seed*.json
table() {  # the rule `table`'s command (workflow/rules/report.smk), on the scores of the runs that exist
  local key=$1 out=$2
  strae report table --table "$key" --tables config/tables.yaml --scores results/scores.csv \
    --config results/config.effective.yaml --param-counts results/measure/param_counts.json \
    --paper-dir paper_tables --out-csv "$out.csv" --out-md "$out.md"
}
for n in 1 2 3 4 5; do table "banyan_table$n" "results/banyan/table$n"; done
# SemEval Table 3 (Self-StrAE Afrikaans, run.sh's second command) once its four seeds have finished:
#   table selfstrae_table3 results/table3
strae record --name "$NAME"
