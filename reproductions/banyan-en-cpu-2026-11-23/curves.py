"""Learning curves of the CPU Banyan run: STS avg and lexical avg (the reference protocol the paper used) per epoch,
from the committed evaluation JSONs, against the paper's Banyan row (4 seeds, 15 epochs) and the pre-fidelity
recipe's CPU run of the same model (strae <= 0.1, epochs 1-6).

    .venv/bin/python reproductions/banyan-en-cpu-2026-11-23/curves.py   # writes curves.png beside this file
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
STS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel"]
LEX = ["simlex", "wordsim_sim", "wordsim_rel"]
PAPER = {"STS avg (8 sets)": 62.70, "lexical avg (reference protocol)": 49.61}
OLD = {"STS avg (8 sets)": [33.6, 52.0, 55.9, 57.5, 58.5, 59.0],
       "lexical avg (reference protocol)": [3.6, 27.1, 34.8, 38.6, 40.7, 41.9]}  # numeric Spearman, see README


def main() -> None:
    epochs, sts, lex, lex_numeric = [], [], [], []
    for path in sorted(HERE.glob("epoch*.paper.json"), key=lambda p: int(p.name[5:].split(".")[0])):
        tasks = json.loads(path.read_text())["tasks"]
        epochs.append(int(path.name[5:].split(".")[0]))
        sts.append(sum(tasks[t]["score"] for t in STS) / len(STS))
        lex.append(sum(tasks[t]["scores"]["spearman_reference_strings"] for t in LEX) / len(LEX))
        lex_numeric.append(sum(tasks[t]["score"] for t in LEX) / len(LEX))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (name, values) in zip(axes, (("STS avg (8 sets)", sts), ("lexical avg (reference protocol)", lex))):
        ax.plot(epochs, values, "o-", label="banyan recipe (this run, seed 0)")
        if name.startswith("lexical"):
            ax.plot(epochs, lex_numeric, "o:", color="C0", alpha=0.5, label="this run, numeric Spearman")
        ax.plot(range(1, len(OLD[name]) + 1), OLD[name], "s--", color="grey",
                label="strae ≤ 0.1 recipe (CPU, seed 0" + (", numeric)" if name.startswith("lexical") else ")"))
        ax.axhline(PAPER[name], color="black", linestyle=":", label=f"paper, 15 epochs, 4 seeds ({PAPER[name]:.2f})")
        ax.set(title=name, xlabel="epoch", ylabel="score (x100)", xlim=(0.5, 15.5))
        ax.grid(alpha=0.3)
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle("Banyan English (ce, diagonal, entangled, k=128 u=2), 2 CPU cores", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "curves.png", dpi=120)


if __name__ == "__main__":
    main()
