"""The table of this record's README, from its evaluation JSON and the one-epoch probe's (run from this folder)."""
import json
from pathlib import Path

TASKS = ["MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-R", "SICK-E", "MRPC_f1"]
EARLIER = Path("../multiview-classifier-objective-cpu-2026-11-30/eval")
ROWS = [("CTL probe, 1 epoch (122k sentences seen)", EARLIER / "ctl-sklearn.senteval.json"),
        ("CTL probe, 2 epochs (245k sentences seen)", Path("eval/ctl-ep2-sklearn.senteval.json")),
        ("CTL probe, 1 epoch, own view a positive", EARLIER / "ctl-ownview-sklearn.senteval.json"),
        ("random-token floor 256-d", EARLIER / "floor-sklearn.senteval.json")]
scores = {label: json.loads(path.read_text())["tasks"] for label, path in ROWS if path.exists()}
print("| | " + " | ".join(TASKS) + " | mean |")
print("|---|" + "---|" * (len(TASKS) + 1))
for label, _ in ROWS:
    tasks = scores.get(label)
    if tasks is None:
        print(f"| {label} | " + " | ".join("—" for _ in TASKS) + " | — |")
        continue
    values = [tasks[t]["score"] for t in TASKS]
    print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {sum(values) / len(values):.2f} |")
one, two = (scores.get(label) for label, _ in ROWS[:2])
if one and two:
    deltas = [two[t]["score"] - one[t]["score"] for t in TASKS]
    print(f"| 2 epochs − 1 epoch | " + " | ".join(f"{d:+.2f}" for d in deltas) + f" | {sum(deltas) / len(deltas):+.2f} |")
