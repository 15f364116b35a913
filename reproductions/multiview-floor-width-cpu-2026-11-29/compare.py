"""Table 1's tasks: the paper's CTL, the 4-seed record's CTL and CL means, the floors at 256 and 2,000 dimensions
(plain: whitespace tokens, each word its vector; vocabulary: the models' parse and 20k vocabulary, one <unk>), and
the 2,000-d plain floor's margin over the paper's CTL (Markdown on stdout).

    python reproductions/multiview-floor-width-cpu-2026-11-29/compare.py [DIR]   (DIR: this record's JSON; default eval/)
"""
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEEDS = ROOT / "multiview-cpu-full-4seeds-2026-11-29" / "eval"
VOCABULARY = ROOT / "multiview-vocabulary-floor-cpu-2026-11-29" / "eval"
PAPER = ROOT.parent / "paper_tables" / "multiview_table1.csv"
ours = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "eval"
TASKS = ("MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-R", "SICK-E", "MRPC_f1")
PAPER_COLUMNS = dict(zip(TASKS, ("MR", "CR", "SUBJ", "MPQA", "TREC", "SICKR", "SICKE", "MRPC")))


def tasks(path: Path) -> dict:
    return json.loads(path.read_text())["tasks"]


def mean(model: str, task: str) -> float:
    scores = [tasks(SEEDS / f"multiview_{model}.seed{s}.senteval.json")[task]["score"] for s in range(4)]
    return sum(scores) / len(scores)


with open(PAPER, newline="") as handle:
    paper = {r["column"]: float(r["mean"]) for r in csv.DictReader(handle) if r["row"] == "Contrastive Tree"}
columns = {
    "Contrastive Tree, paper": lambda t: paper[PAPER_COLUMNS[t]],
    "CTL, mean of 4 seeds (record)": lambda t: mean("ctl", t),
    "CL, mean of 4 seeds (record)": lambda t: mean("cl", t),
    "plain floor, 256-d (vocabulary record, SentEval order)": lambda t: tasks(VOCABULARY / "plain-floor.senteval.json")[t]["score"],
    "plain floor, 2000-d (this record)": lambda t: tasks(ours / "random-token.dim2000.senteval.json")[t]["score"],
    "vocabulary floor, 256-d": lambda t: tasks(VOCABULARY / "vocab-floor.senteval.json")[t]["score"],
    "vocabulary floor, 2000-d": lambda t: tasks(VOCABULARY / "vocab-floor-dim2000.senteval.json")[t]["score"],
}
print("| | " + " | ".join(TASKS) + " |")
print("|---" * (len(TASKS) + 1) + "|")
for name, score in columns.items():
    print(f"| {name} | " + " | ".join(f"{score(t):.2f}" for t in TASKS) + " |")
wide = tasks(ours / "random-token.dim2000.senteval.json")
print("| plain 2000-d − paper CTL | " + " | ".join(f"{wide[t]['score'] - paper[PAPER_COLUMNS[t]]:+.2f}" for t in TASKS) + " |")
print("| plain 2000-d − CTL here (4 seeds) | " + " | ".join(f"{wide[t]['score'] - mean('ctl', t):+.2f}" for t in TASKS) + " |")


def chosen(task: dict) -> str:
    """The C each fold (or the one split) chose, and the smallest C of the task's grid."""
    picked = task.get("c_selected")
    if picked is None:
        return "—"
    values = sorted(set(picked if isinstance(picked, list) else [picked]))
    return "/".join(f"{c:g}" for c in values) + f" (grid from {min(task['c_grid']):g})"


print("| plain 2000-d: C chosen | " + " | ".join(chosen(wide[t]) for t in TASKS) + " |")
