#!/usr/bin/env bash
# Diagnostic, not a paper setting: does Banyan on the mirror's small Table 5 corpora (Afrikaans; RUN_LANG=hi Hindi) go on
# improving past the recipe's 8 epochs? A copy of a finished Table 5 run (its checkpoint.pt included) is resumed with more epochs
# (`--set epochs=E`: epochs may grow on resume, the checkpoint's fingerprint leaves them out), evaluated after
# each extension. Usage, from the repository root after run.sh:  [RUN_LANG=hi] bash longer.sh SEED OUT_DIR E1 E2 ...
set -euo pipefail
SEED=${1:?seed}; OUT=${2:?out dir}; shift 2
LANG_KEY=${RUN_LANG:-af}
case "$LANG_KEY" in  # the language's paper-variant task list (config.yaml languages.<lang>.eval.paper)
  af) TASKS=semrel_afr_test,semrel_afr_dev,stsb_nl_dev,stsb_nl ;;
  hi) TASKS=semrel_hin_test ;;
  *) echo "longer.sh: RUN_LANG=$LANG_KEY: add its task list here" >&2; exit 2 ;;
esac
SRC=results/runs/$LANG_KEY/banyan/ce_diagonal_entangled_k128_u2/seed$SEED
[ -d "$OUT/run" ] || { mkdir -p "$OUT"; cp -r "$SRC" "$OUT/run"; rm -f "$OUT/run/.train.lock"; }
for E in "$@"; do
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} strae train --model banyan --recipe banyan --structure entangled \
    --functions diagonal --objective ce --k 128 --u 2 --device auto --set epochs="$E" --lang "$LANG_KEY" \
    --seed "$SEED" --setting ce_diagonal_entangled_k128_u2 --data-dir "resources/tokenized/$LANG_KEY" \
    --tokenizer "resources/tokenizers/$LANG_KEY.model" \
    --out "$OUT/run" --record-failure >> "$OUT/train.log" 2>&1
  cp "$OUT/run/train.json" "$OUT/epochs$E.train.json"
  OMP_NUM_THREADS=1 strae evaluate --model "$OUT/run" --lang "$LANG_KEY" --variant paper \
    --tasks "$TASKS" --config results/config.effective.yaml \
    --out "$OUT/epochs$E.paper.json" >> "$OUT/eval.log" 2>&1
done
