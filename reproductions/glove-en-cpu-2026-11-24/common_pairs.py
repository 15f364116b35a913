"""Lexical scores of GloVe runs on the word pairs every one of them has vectors for (corpus_size.sh's diagnostic:
a smaller corpus has a smaller vocabulary, so its own score is over fewer pairs). Prints one line per task.
  python reproductions/glove-en-cpu-2026-11-24/common_pairs.py RUN_DIR [RUN_DIR ...]"""
from __future__ import annotations

import sys

import numpy as np

from strae import paths
from strae.encode import load_encoder
from strae.evaluate import metrics
from strae.data.registry import load_config as _load_yaml  # (strae.evaluate.harness._load_yaml until 2026-11-28)
from strae.evaluate.harness import select_tasks
from strae.evaluate.tasks import load_tasks, make_resolver, read_pairs

CONFIG = "results/config.effective.yaml"


def main(runs: list[str]) -> None:
    config = _load_yaml(CONFIG)
    catalog = load_tasks((config.get("data") or {}).get("tasks") or "config/tasks.yaml")
    tasks = select_tasks(catalog, config, "en", "paper", ["simlex", "wordsim_sim", "wordsim_rel"], CONFIG)
    resolve = make_resolver(paths.resources_dir(config), (config.get("data") or {}).get("registry"))
    encoders = [load_encoder(run) for run in runs]
    for task in tasks:
        pairs = read_pairs(resolve(task.file_spec), task.level, task.rows, file_format=task.format)
        embedded = [(e.encode_words(pairs.left), e.encode_words(pairs.right)) for e in encoders]
        known = np.ones(len(pairs.gold), dtype=bool)
        for left, right in embedded:
            known &= ~(metrics.nan_rows(left) | metrics.nan_rows(right))
        scores = []
        for left, right in embedded:
            score = metrics.score_pairs(left[known], right[known], np.asarray(pairs.gold)[known],
                                        gold_text=[t for t, k in zip(pairs.gold_text, known) if k])
            scores.append(f"{score.score:.2f} / {score.extra[metrics.SPEARMAN_REFERENCE_STRINGS]:.2f}")
        print(f"{task.name:12s} {int(known.sum())} of {len(known)} pairs  numeric / reference: " + "   ".join(scores))


if __name__ == "__main__":
    main(sys.argv[1:])
