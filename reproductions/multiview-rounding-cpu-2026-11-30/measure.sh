#!/usr/bin/env bash
# This record's runs and evaluations, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set, the
# workflow's parse of all of ELTeC-eng in resources/parses/en/pall_sall: `snakemake --cores 2 multiview` makes it),
# on 2 CPU cores, one thread each. OUT: a scratch folder. Older commits run from git worktrees (WT_* below).
set -euo pipefail
OUT=${1:?usage: measure.sh OUT}
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
REPO=$PWD
WT_PRE=$OUT/wt-5137af0 WT_EVAL=$OUT/wt-ea098a9   # before the 2026-11-28 CPU speed-up; the 4-seed record's evaluations
git worktree add -f "$WT_PRE" 5137af0 && git worktree add -f "$WT_EVAL" ea098a9
RECIPE=(--lang en --vocab-size 20000 --embedding-dim 300 --hidden 1000 --lr 0.005 --clip-grad-norm 5.0
        --batch-size 100 --max-tokens 64 --threads 1)   # the 4-seed record's command (multiview.train in config.yaml)
train_at() {  # train_at WORKTREE OUT ARGS...: strae train-multiview as that commit's code
    local tree=$1 out=$2; shift 2
    (cd "$tree" && PYTHONPATH=$tree/src:$tree python -c \
        "import sys; from baselines.multiview import train; sys.exit(train.main(sys.argv[1:]))" \
        --parses "$REPO/resources/parses/en/pall_sall" "${RECIPE[@]}" "$@" --out "$out" --quiet)
}
senteval_at() {  # senteval_at WORKTREE RUN OUT: SICK-E and SICK-R as that commit's code scores them
    local tree=$1 run=$2 out=$3
    (cd "$tree" && PYTHONPATH=$tree/src:$tree python -c \
        "import sys; from strae.evaluate import senteval; sys.exit(senteval.main(sys.argv[1:]))" \
        --suite senteval --model "$run" --lang en --tasks SICK-E,SICK-R --config config/config.yaml \
        --resources-dir "$REPO/resources" --out "$out" --quiet)
}
# 1. CTL seed 1, the first 300 steps, before the speed-up and at this record's commit (~11 and ~8 min)
train_at "$WT_PRE" "$OUT/ctl-pre" --model ctl --seed 1 --max-steps 300
train_at "$REPO" "$OUT/ctl-head" --model ctl --seed 1 --max-steps 300
python - "$OUT" <<'PY'
import json, sys, torch
out = sys.argv[1]
runs = {}
for name, path in (("5137af0", f"{out}/ctl-pre"), ("head", f"{out}/ctl-head")):
    history = torch.load(f"{path}/checkpoint.pt", weights_only=False, map_location="cpu")["history"]
    sha = json.load(open(f"{path}/train.json"))["provenance"]["git_sha"]
    runs[name] = {"git_sha": sha, "loss": [h["loss"] for h in history], "grad_norm": [h["grad_norm"] for h in history]}
json.dump({"what": "strae train-multiview CTL seed 1, the first 300 steps of the 4-seed record's command "
           "(+ --max-steps 300), per-step loss (rounded to 4 decimals as train-multiview records it) at two commits",
           "runs": runs}, open(f"{out}/ctl-seed1-300steps.history.json", "w"), indent=1)
PY
# 2. the seed-0 runs of the two curve records (the workflow's runs, results/runs/en/multiview_{cl,ctl}/...) scored
#    by the 4-seed record's evaluation code and by this one (~2 min each), then under five SentEval seeds (~5 min each)
for model in cl ctl; do
    run=$REPO/results/runs/en/multiview_$model/${model}_h1000_e300/seed0
    senteval_at "$WT_EVAL" "$run" "$OUT/$model-seed0.senteval-ea098a9.json"
    senteval_at "$REPO" "$run" "$OUT/$model-seed0.senteval-head.json"
    python reproductions/multiview-rounding-cpu-2026-11-30/senteval_seeds.py "$run" "$OUT/$model-seed0.senteval-seeds.json"
done
# 3. CL seed 1 again, whole (~1.5-2 h), scored by this commit's and by the 4-seed record's evaluation code
train_at "$REPO" "$OUT/cl-seed1" --model cl --seed 1 --setting cl_h1000_e300 --record-failure
cp "$OUT/cl-seed1/train.json" "$OUT/cl-seed1.train.json"
senteval_at "$REPO" "$OUT/cl-seed1" "$OUT/cl-seed1.senteval-head.json"
senteval_at "$WT_EVAL" "$OUT/cl-seed1" "$OUT/cl-seed1.senteval-ea098a9.json"
python reproductions/multiview-rounding-cpu-2026-11-30/compare.py "$OUT"
