#!/usr/bin/env bash
# Issue #11 item 1 on CPU (no GPU lent to this session): Banyan English (ce, diagonal, entangled, k128 u2), seed 0,
# the `banyan` reference recipe at paper scale (15 epochs, batch 512, fp32 losses), trained by the workflow's exact
# command (run.sh). This watcher evaluates the run at every epoch boundary: when the training log shows epoch N+1
# starting it copies checkpoint.pt (the epoch-end checkpoint, or the first one after it), exports it as a loadable run
# directory (`strae train --export-checkpoint`: train.json says status "running" + a snapshot block with the step) and
# evaluates it zero-shot (paper variant). Runs until the run's train.json says it finished. Epochs already evaluated
# ($OUT/epochN.paper.json present, e.g. before a resume in a later session) are skipped.
#   bash reproductions/banyan-en-cpu-2026-11-23/watch.sh            (seed 0)
#   SEED=1 bash reproductions/banyan-en-cpu-2026-11-23/watch.sh     (seed 1: results/banyan-en-cpu-seed1/)
set -euo pipefail
SEED=${SEED:-0}
RUN=${RUN:-results/runs/en/banyan/ce_diagonal_entangled_k128_u2/seed$SEED}
LOG=${LOG:-logs/train/en/banyan/ce_diagonal_entangled_k128_u2/seed$SEED.log}
OUT=${OUT:-results/banyan-en-cpu$([ "$SEED" = 0 ] || echo "-seed$SEED")}
flags=(--model banyan --recipe banyan --structure entangled --functions diagonal --objective ce --k 128 --u 2
       --lang en --seed "$SEED" --setting ce_diagonal_entangled_k128_u2 --data-dir resources/tokenized/en
       --tokenizer resources/tokenizers/en.model)
mkdir -p "$OUT"
done_epochs=0
while [ -f "$OUT/epoch$((done_epochs + 1)).paper.json" ]; do done_epochs=$((done_epochs + 1)); done
while true; do
  current=$(grep -o 'epoch [0-9]*/15' "$LOG" | tail -1 | sed 's/epoch \([0-9]*\)\/15/\1/' || echo 1)
  finished=$([ -f "$RUN/train.json" ] && grep -q '"status": "completed"' "$RUN/train.json" && echo 1 || echo 0)
  if [ "$finished" = 1 ]; then target=15; else target=$((current - 1)); fi
  while [ "$done_epochs" -lt "$target" ]; do
    e=$((done_epochs + 1)); snap="$OUT/checkpoints/epoch$e"; dest="$OUT/epoch$e"
    if [ "$finished" = 1 ] && [ "$e" = 15 ]; then dest="$RUN"; else
      mkdir -p "$snap" && cp "$RUN/checkpoint.pt" "$snap/checkpoint.pt.tmp" && mv "$snap/checkpoint.pt.tmp" "$snap/checkpoint.pt"
      nice -n 19 env OMP_NUM_THREADS=1 strae train "${flags[@]}" --out "$snap" --export-checkpoint "$dest" --device cpu \
        > "$OUT/epoch$e.export.log" 2>&1
      rm -f "$snap/checkpoint.pt"
    fi
    nice -n 19 env OMP_NUM_THREADS=1 strae evaluate --model "$dest" --lang en --variant paper --device cpu \
      --out "$OUT/epoch$e.paper.json" > "$OUT/epoch$e.paper.log" 2>&1
    echo "$(date -u +%FT%TZ) epoch $e evaluated" >&2
    done_epochs=$e
  done
  [ "$finished" = 1 ] && break
  sleep 30
done
