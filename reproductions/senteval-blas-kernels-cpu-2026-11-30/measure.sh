#!/usr/bin/env bash
# This record's evaluations, from the repository root (strae's venv on PATH, STRAE_DATA_MIRROR set), on one CPU
# thread. RUN: the multi-view CL seed-1 run trained again at 3ef632b (reproductions/multiview-rounding-cpu-2026-11-30
# made it: the workflow's results/runs/en/multiview_cl/cl_h1000_e300/seed1). OUT: a scratch folder.
# OpenBLAS reads OPENBLAS_CORETYPE when it loads, so every scoring is its own process. ~40 min in all.
set -euo pipefail
OUT=${1:?usage: measure.sh OUT}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)   # absolute: the scorings run from inside worktrees
RUN=${RUN:-$PWD/results/runs/en/multiview_cl/cl_h1000_e300/seed1}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HF_HUB_OFFLINE=1
REPO=$PWD HERE=$PWD/reproductions/senteval-blas-kernels-cpu-2026-11-30
WT=$OUT/wt-ea098a9   # the 4-seed record's evaluation code (multiview-cpu-full-4seeds-2026-11-29)
git worktree add -f "$WT" ea098a9
score_at() {  # score_at WORKTREE CORETYPE TASKS CONFIG OUT: strae's SentEval evaluation as that commit's code runs it
    local tree=$1 coretype=$2 tasks=$3 config=$4 out=$5
    (cd "$tree" && if [ "$coretype" != default ]; then export OPENBLAS_CORETYPE=$coretype; fi &&
     PYTHONPATH=$tree/src:$tree python -c \
        "import sys; from strae.evaluate import senteval; sys.exit(senteval.main(sys.argv[1:]))" \
        --suite senteval --model "$RUN" --lang en --tasks "$tasks" --config "$config" \
        --resources-dir "$REPO/resources" --out "$out" --quiet)
}
# 1. SICK-E by the 4-seed record's code: this CPU's default kernels (SkylakeX here) and six named ones (~45 s each)
for ct in default Haswell Zen SkylakeX Sandybridge Nehalem Prescott; do
    score_at "$WT" $ct SICK-E config/config.yaml "$OUT/sick-e.ea098a9.$ct.json"
done
# 2. MR the same way, default and Haswell kernels (~10 min each)
for ct in default Haswell; do score_at "$WT" $ct MR config/config.yaml "$OUT/mr.ea098a9.$ct.json"; done
# 3. SICK-E by commit 40aa837 (SentEval's row order; provenance.cpu_kernels names the kernels), then with the
#    refits run to convergence (multiview.senteval.max_iter 2000; they stop at 260-306 iterations)
git worktree add -f "$OUT/wt-40aa837" 40aa837
python - "$OUT/wt-40aa837/config/config.yaml" "$OUT/max_iter2000.yaml" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))   # that commit's config: its schema refuses keys added later
config["multiview"]["senteval"]["max_iter"] = 2000
yaml.safe_dump(config, open(sys.argv[2], "w"), sort_keys=False)
PY
for ct in default Haswell; do
    score_at "$OUT/wt-40aa837" $ct SICK-E config/config.yaml "$OUT/sick-e.40aa837.$ct.json"
    score_at "$OUT/wt-40aa837" $ct SICK-E "$OUT/max_iter2000.yaml" "$OUT/sick-e.40aa837.$ct.max_iter2000.json"
done
# 4. training under torch's two CPU ISAs: CTL seed 1, the first 100 steps of the 4-seed record's command, with this
#    CPU's own (AVX512 here) and with ATEN_CPU_CAPABILITY=avx2 (~3 min each; the multi-view parse of ELTeC-eng in
#    resources/parses/en/pall_sall, which `snakemake --cores 2 multiview` makes)
for isa in default avx2; do
    (cd "$OUT/wt-40aa837" && if [ $isa != default ]; then export ATEN_CPU_CAPABILITY=$isa; fi &&
     PYTHONPATH=$OUT/wt-40aa837/src:$OUT/wt-40aa837 python -c \
        "import sys; from baselines.multiview import train; sys.exit(train.main(sys.argv[1:]))" \
        --parses "$REPO/resources/parses/en/pall_sall" --lang en --vocab-size 20000 --embedding-dim 300 \
        --hidden 1000 --lr 0.005 --clip-grad-norm 5.0 --batch-size 100 --max-tokens 64 --threads 1 \
        --model ctl --seed 1 --max-steps 100 --out "$OUT/ctl-$isa" --quiet)
done
python - "$OUT" <<'PY'
import json, sys, torch
out = sys.argv[1]
runs, weights = {}, {}
for isa in ("default", "avx2"):
    checkpoint = torch.load(f"{out}/ctl-{isa}/checkpoint.pt", weights_only=False, map_location="cpu")
    prov = json.load(open(f"{out}/ctl-{isa}/train.json"))["provenance"]
    weights[isa] = checkpoint["model"]
    runs[isa] = {"ATEN_CPU_CAPABILITY": None if isa == "default" else isa, "git_sha": prov["git_sha"],
                 "cpu_kernels": prov["cpu_kernels"], "loss": [h["loss"] for h in checkpoint["history"]],
                 "grad_norm": [h["grad_norm"] for h in checkpoint["history"]]}
json.dump({"what": "strae train-multiview CTL seed 1, the first 100 steps of the 4-seed record's command "
           "(+ --max-steps 100), per-step loss (4 decimals, as train-multiview records it), with torch's own CPU "
           "kernels (AVX512 here) and with ATEN_CPU_CAPABILITY=avx2",
           "max_abs_weight_difference_after_100_steps": max(
               (weights["default"][k] - weights["avx2"][k]).abs().max().item() for k in weights["default"]),
           "runs": runs}, open(f"{out}/ctl-seed1-100steps.torch-isa.json", "w"), indent=1)
PY
git worktree remove --force "$WT" && git worktree remove --force "$OUT/wt-40aa837"
python "$HERE/compare.py" "$OUT"
