#!/usr/bin/env bash
# Issue #11 item 1, seed 0, on the 2-core CPU machine (this session had no GPU): the workflow's own command for
# results/runs/en/banyan/ce_diagonal_entangled_k128_u2/seed$SEED (`snakemake -n -p` prints it), with 2 threads.
# The `banyan` recipe unchanged (15 epochs, batch 512, lr 1e-3, fp32 losses, induction dropout) on the
# PTB-pretokenised English corpus (config: languages.en.pretokenize treebank). Resumable: rerun the same command
# (the log is appended to, so a resumed session keeps the earlier epochs' lines).
# OMP_NUM_THREADS=1 bash run.sh when the machine is shared: two threads beside other jobs spin-wait (3x slower).
# Code: commit a82c331 for seed 0 (the run was started from it; watch.sh evaluates with the same code via PYTHONPATH);
# commit 04929c2 for seed 1 (SEED=1 bash run.sh; started 2026-11-23 in the fourth CPU session).
set -euo pipefail
SEED=${SEED:-0}
mkdir -p logs/train/en/banyan/ce_diagonal_entangled_k128_u2
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} strae train --model banyan --recipe banyan --structure entangled --functions diagonal --objective ce \
  --k 128 --u 2 --device auto --lang en --seed $SEED --setting ce_diagonal_entangled_k128_u2 \
  --data-dir resources/tokenized/en --tokenizer resources/tokenizers/en.model \
  --out results/runs/en/banyan/ce_diagonal_entangled_k128_u2/seed$SEED --record-failure --progress-interval 60 \
  >> logs/train/en/banyan/ce_diagonal_entangled_k128_u2/seed$SEED.log 2>&1
