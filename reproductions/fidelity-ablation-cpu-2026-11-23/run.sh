#!/usr/bin/env bash
# Fidelity ablation (issue #9): Banyan (ce, diagonal, entangled, k128 u2), seed 0, the same step budget for every
# variant; each change of the fidelity round alone on top of the pre-fidelity recipe (strae_0_1), and all together
# (the `banyan` reference recipe on the PTB-tokenised corpus). CPU only (2 cores), two runs at a time, 1 thread each.
#   STEPS=300 bash reproductions/fidelity-ablation-cpu-2026-11-23/run.sh
# Needs: resources/tokenized/en (strae tokenize-corpus --lang en --pretokenize none --out-dir resources/tokenized/en)
#        resources/tokenized/en_treebank (… --pretokenize treebank --out-dir resources/tokenized/en_treebank)
set -euo pipefail
STEPS=${STEPS:-300}
OUT=${OUT:-results/ablation}
HERE=$(cd "$(dirname "$0")" && pwd)
common=(--model banyan --lang en --seed 0 --tokenizer resources/tokenizers/en.model --device cpu
        --max-steps "$STEPS" --checkpoint-every-steps 50 --dev-max-sentences 2000 --collapse-cosine 2)
declare -A variant=(
  [a0_strae_0_1]="--recipe strae_0_1 --data-dir resources/tokenized/en"
  [a1_ptb_corpus]="--recipe strae_0_1 --data-dir resources/tokenized/en_treebank"
  [a2_gate_init]="--recipe strae_0_1 --set gate_init=[0.6,0.9] --data-dir resources/tokenized/en"
  [a3_leaf_dropout]="--recipe strae_0_1 --set embedding_dropout=0.1 --data-dir resources/tokenized/en"
  [a4_bias]="--recipe strae_0_1 --set dembedding_bias=true --data-dir resources/tokenized/en"
  [a5_fp32]="--recipe strae_0_1 --set loss_precision=fp32 --data-dir resources/tokenized/en"
  [a6_induction_dropout]="--recipe strae_0_1 --set induction_dropout=true --data-dir resources/tokenized/en"
  [a7_all]="--recipe banyan --data-dir resources/tokenized/en_treebank"
)
# VARIANTS="a6_induction_dropout a7_all" runs a subset in that order (default: all, sorted)
if [ -n "${VARIANTS:-}" ]; then read -r -a names <<<"$VARIANTS"
else names=(${!variant[@]}); IFS=$'\n' names=($(sort <<<"${names[*]}")); unset IFS; fi
run() {  # train then evaluate one variant (both evaluation variants)
  local name=$1
  OMP_NUM_THREADS=1 strae train "${common[@]}" ${variant[$name]} --out "$OUT/$name" > "$OUT/$name.train.log" 2>&1
  for v in paper official; do
    OMP_NUM_THREADS=1 strae evaluate --model "$OUT/$name" --lang en --variant $v --device cpu \
      --out "$OUT/$name.$v.json" > "$OUT/$name.$v.log" 2>&1
  done
}
mkdir -p "$OUT"
for ((i = 0; i < ${#names[@]}; i += 2)); do
  run "${names[i]}" & [ $((i + 1)) -lt ${#names[@]} ] && run "${names[i+1]}" &
  wait
done
python3 "$HERE/summarise.py" "$OUT"   # the Markdown table (README.md holds the recorded ones)
