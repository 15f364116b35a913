"""The table of this record's README, from its evaluation JSONs (run from the record's folder)."""
import json
from pathlib import Path

TASKS = ["MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-R", "SICK-E", "MRPC_f1"]
ROWS = [("CTL probe, sklearn (strae's default)", "eval/ctl-sklearn.senteval.json"),
        ("CTL probe, pytorch (SentEval's default)", "eval/ctl-pytorch.senteval.json"),
        ("CTL probe, own view a positive, sklearn", "eval/ctl-ownview-sklearn.senteval.json"),
        ("random-token floor 256-d, sklearn", "eval/floor-sklearn.senteval.json")]
print("| | " + " | ".join(TASKS) + " |")
print("|---|" + "---|" * len(TASKS))
for label, path in ROWS:
    if not Path(path).exists():
        print(f"| {label} | " + " | ".join("—" for _ in TASKS) + " |")
        continue
    tasks = json.loads(Path(path).read_text())["tasks"]
    print(f"| {label} | " + " | ".join(f"{tasks[t]['score']:.2f}" if t in tasks else "—" for t in TASKS) + " |")
