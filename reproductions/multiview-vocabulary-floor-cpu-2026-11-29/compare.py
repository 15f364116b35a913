"""Table 1's tasks: the 4-seed record's CTL and CL means, its plain floor, and this record's floors, with each task's
share of tokens outside the 20k vocabulary (Markdown on stdout).

    python reproductions/multiview-vocabulary-floor-cpu-2026-11-29/compare.py [DIR]   (DIR: the JSONs; default eval/)
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORD = HERE.parent / "multiview-cpu-full-4seeds-2026-11-29" / "eval"
ours = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "eval"
TASKS = ("MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-R", "SICK-E", "MRPC_f1")


def tasks(path: Path) -> dict:
    return json.loads(path.read_text())["tasks"]


def mean(model: str, task: str) -> float:
    scores = [tasks(RECORD / f"multiview_{model}.seed{s}.senteval.json")[task]["score"] for s in range(4)]
    return sum(scores) / len(scores)


columns = {
    "CTL, mean of 4 seeds (record)": lambda t: mean("ctl", t),
    "CL, mean of 4 seeds (record)": lambda t: mean("cl", t),
    "plain floor, 256-d (record: file order)": lambda t: tasks(RECORD / "random-token.senteval.json")[t]["score"],
    "plain floor, 256-d (SentEval order)": lambda t: tasks(ours / "plain-floor.senteval.json")[t]["score"],
    "vocabulary floor, 256-d": lambda t: tasks(ours / "vocab-floor.senteval.json")[t]["score"],
    "vocabulary floor, 2000-d": lambda t: tasks(ours / "vocab-floor-dim2000.senteval.json")[t]["score"],
}
print("| | " + " | ".join(TASKS) + " |")
print("|---" * (len(TASKS) + 1) + "|")
for name, score in columns.items():
    try:
        print(f"| {name} | " + " | ".join(f"{score(t):.2f}" for t in TASKS) + " |")
    except FileNotFoundError as missing:
        print(f"| {name} | " + " | ".join("—" for _ in TASKS) + f" |  <!-- {missing.filename} -->")
shares = tasks(ours / "vocab-floor.senteval.json")
print("| tokens outside the vocabulary (%) | "
      + " | ".join(f"{100 * shares[t]['unknown_tokens']['share']:.1f}" for t in TASKS) + " |")
