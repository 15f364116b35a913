"""Per-task scores of GloVe's treebank setting (seed 0) beside the default words setting (the main record's seeds
0-3, their mean and seed 0) and Banyan Tables 3-4's GloVe rows; prints a Markdown table."""
import csv
from pathlib import Path

HERE = Path(__file__).parent
MAIN = HERE.parent / "cpu-2core-2026-11-28-2" / "scores.csv"
TASKS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel", "simlex", "wordsim_sim",
         "wordsim_rel"]


def scores(path, setting):
    out = {}
    for row in csv.DictReader(open(path, encoding="utf-8")):
        if row["model"] != "glove" or row["variant"] != "paper" or row["subset"]:
            continue
        if row["setting"].split("@")[0] != setting:
            continue
        label = row.get("eval_label") or ""
        out.setdefault((label, row["task"]), {})[int(row["seed"])] = float(row["score"])
    return out


default = scores(MAIN, "words_w10_d256")
treebank = scores(HERE / "scores.csv", "words_w10_d256_treebank")
print("| evaluation | task | default seed 0 | default mean (4 seeds) | treebank seed 0 | Δ seed 0 |")
print("|---|---|---|---|---|---|")
for label in ("", "stopword_rm"):
    for task in TASKS:
        key = (label, task)
        if key not in treebank:
            continue
        base = default.get(key, {})
        mean = sum(base.values()) / len(base) if base else float("nan")
        new = treebank[key][0]
        print(f"| {label or 'plain'} | {task} | {base.get(0, float('nan')):.2f} | {mean:.2f} | {new:.2f} | "
              f"{new - base.get(0, float('nan')):+.2f} |")
