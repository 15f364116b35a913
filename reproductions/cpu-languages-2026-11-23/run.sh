#!/usr/bin/env bash
# Issue #11 items 4 and 3 on the 2-core CPU machine (no GPU lent): the workflow's own jobs for the runs whose corpora
# in the offline mirror are small enough to train on 2 cores in a session, four seeds each:
#   Banyan Table 5 (ce, diagonal, entangled, k128 u2; `banyan` recipe with the experiment's 8 epochs): af and hi
#   SemEval Table 3 (Self-StrAE CECO, linear, sentential, k128 u2; `selfstrae` recipe, 15 epochs): af — not run
#   yet (the 2026-11-23 session gave its last CPU hour to the diagnostic and English seed 1)
# es and am (12M and 7.7M words) are left for a GPU: est. ~3 h and ~2 h per seed on 2 cores (8 epochs at the ~12.5k pieces/s measured here).
# Resumable: rerun the same command after an interruption (checkpoint.pt every 100 steps and at every epoch end).
set -euo pipefail
export STRAE_DATA_MIRROR=${STRAE_DATA_MIRROR:-$(realpath ../shared/data)}
B=ce_diagonal_entangled_k128_u2 S=ceco_linear_sentential_k128_u2
snakemake --cores "${CORES:-2}" results/eval/{hi,af}/banyan/$B/seed{0,1,2,3}.paper.json
snakemake --cores "${CORES:-2}" results/eval/af/selfstrae/$S/seed{0,1,2,3}.paper.json
