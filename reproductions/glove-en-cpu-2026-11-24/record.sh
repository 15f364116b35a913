#!/usr/bin/env bash
# Freeze this machine's evaluations (run.sh's GloVe runs) together with an earlier record's (their results/ is gone
# with the machine that made them: Banyan English seed 0, Banyan Afrikaans/Hindi seeds 0-3) into one record:
# `strae aggregate --carry`, every table those scores reach (`strae report tables`), `strae record --carry`.
#   bash reproductions/glove-en-cpu-2026-11-24/record.sh cpu-2core-en-glove-2026-11-24
set -euo pipefail
NAME=${1:?usage: record.sh RECORD_NAME}
CARRY=${CARRY:-reproductions/cpu-2core-en-af-hi-2026-11-23}
strae aggregate --out results/scores.csv --carry "$CARRY/scores.csv" results/eval/*/*/*/seed*.json
strae report tables --config results/config.effective.yaml --param-counts results/measure/param_counts.json
strae record --name "$NAME" --carry "$CARRY"
