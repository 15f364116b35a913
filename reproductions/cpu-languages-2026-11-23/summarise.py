"""Per-seed table of this folder's runs from a record (its scores.csv and runs/**/train.json): every task each run
was evaluated on (paper variant), the run's steps, final dev loss and training time, and the mean ± std over the seeds
(population std, the tables' statistic).

    python3 reproductions/cpu-languages-2026-11-23/summarise.py reproductions/<record> > table.md
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pandas as pd

RUNS = [("af", "banyan", "ce_diagonal_entangled_k128_u2"), ("hi", "banyan", "ce_diagonal_entangled_k128_u2"),
        ("af", "selfstrae", "ceco_linear_sentential_k128_u2")]


def main(record: str) -> None:
    record = Path(record)
    scores = pd.read_csv(record / "scores.csv")
    scores = scores[scores["variant"] == "paper"]
    for language, model, setting in RUNS:
        rows = scores[(scores["language"] == language) & (scores["model"] == model) & (scores["setting"] == setting)]
        if rows.empty:
            continue
        tasks = list(dict.fromkeys(rows["task"]))
        print(f"\n**{model} {setting}, {language}**\n")
        print("| seed | steps | epochs | final dev loss (kept epoch) | train min | " + " | ".join(tasks) + " |")
        print("|---" * (5 + len(tasks)) + "|")
        per_task: dict[str, list[float]] = {task: [] for task in tasks}
        for seed in sorted(rows["seed"].unique()):
            run = json.loads((record / "runs" / language / model / setting / f"seed{seed}" / "train.json").read_text())
            kept = run.get("final_weights") or {}
            cells = []
            for task in tasks:
                value = rows[(rows["seed"] == seed) & (rows["task"] == task)]["score"]
                cells.append(f"{value.iloc[0]:.2f}" if len(value) else "—")
                per_task[task] += list(value)
            print(f"| {seed} | {run['history'][-1]['global_step']} | {len(run['history'])} | "
                  f"{run['history'][-1]['dev']['loss']:.3f} ({kept.get('epoch', '—')}) | "
                  f"{run['timings']['train_seconds'] / 60:.1f} | " + " | ".join(cells) + " |")
        stats = [f"{statistics.mean(v):.2f} ± {statistics.pstdev(v):.2f}" if len(v) > 1 else "—"
                 for v in per_task.values()]
        print("| mean ± std | | | | | " + " | ".join(stats) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
