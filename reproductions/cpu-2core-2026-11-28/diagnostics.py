"""The "measured afterwards" figures of this record's README, from the run's final weights.

    python reproductions/cpu-2core-2026-11-28/diagnostics.py [RUN_DIR] > OUT.json

run from the repository root (this record's diagnostics.json was written so).
RUN_DIR (default: results/runs/en/banyan/ce_linear_entangled_k16_u16/seed0) needs model.pt, which the record does not
keep (regenerate it as the README says). Reads the first 500 pairs of the paper-variant STS-B test set.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from strae.encode import load_encoder

PAIRS = 500
EVAL_FILE = "resources/data/eval/paper_variant/stsb_test.csv"


def main() -> None:
    run_dir = sys.argv[1] if len(sys.argv) > 1 else "results/runs/en/banyan/ce_linear_entangled_k16_u16/seed0"
    torch.set_num_threads(1)
    weights = torch.load(f"{run_dir}/model.pt", map_location="cpu", weights_only=False)["state_dict"]
    gains = {name: [round(float(s), 3) for s in torch.linalg.svdvals(weights[f"functions.{name}_weight"])]
             for name in ("compose", "decompose") if f"functions.{name}_weight" in weights}
    pairs = pd.read_csv(EVAL_FILE).head(PAIRS)
    encoder = load_encoder(run_dir)
    first, second = encoder.encode_sentences(list(pairs.sent1)), encoder.encode_sentences(list(pairs.sent2))
    unit = first / np.linalg.norm(first, axis=1, keepdims=True)
    off_diagonal = (unit @ unit.T)[~np.eye(len(unit), dtype=bool)]  # cosines between different sentences
    pair_cos = (first * second).sum(1) / np.linalg.norm(first, axis=1) / np.linalg.norm(second, axis=1)
    singular = np.linalg.svd(first - first.mean(0), compute_uv=False)
    share = singular ** 2 / np.sum(singular ** 2)
    words = np.array([len(s.split()) for s in pairs.sent1])
    print(json.dumps({
        "run_dir": run_dir, "eval_file": EVAL_FILE, "pairs": PAIRS,
        "function_singular_values": gains,
        "unrelated_cosine_mean": round(float(off_diagonal.mean()), 4),
        "unrelated_abs_cosine_mean": round(float(np.abs(off_diagonal).mean()), 4),
        "pair_cosine_mean": round(float(pair_cos.mean()), 4),
        "pair_cosine_spearman_with_gold": round(float(spearmanr(pair_cos, pairs.score)[0]), 4),
        "effective_rank_centred": round(float(np.exp(-(share * np.log(share + 1e-30)).sum())), 2),
        "dimensions": int(first.shape[1]),
        "norm_mean": round(float(np.linalg.norm(first, axis=1).mean()), 2),
        "norm_spearman_with_word_count": round(float(spearmanr(np.linalg.norm(first, axis=1), words)[0]), 4),
    }, indent=1))


if __name__ == "__main__":
    main()
