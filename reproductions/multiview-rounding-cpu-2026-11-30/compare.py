"""Print this record's tables from its files (and the earlier records it compares with):
    python reproductions/multiview-rounding-cpu-2026-11-30/compare.py [DIR]   (DIR: where measure.sh wrote; default here)"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIR = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
RECORDS = HERE.parent
FOUR = RECORDS / "multiview-cpu-full-4seeds-2026-11-29"
CURVE = RECORDS / "multiview-training-curve-cpu-2026-11-30-2"


def windows(losses, size=50):
    return [round(sum(losses[i:i + size]) / len(losses[i:i + size]), 4) for i in range(0, len(losses), size)]


def summary_windows(train_json):
    return [w["mean_loss"] for w in json.loads(Path(train_json).read_text())["summary"]["curve"]]


def scores(path, point=None):
    document = json.loads(Path(path).read_text())
    if point is not None:  # a curve JSON: its final point
        return document["points"][point]["scores"]
    return {task: result["score"] for task, result in document["tasks"].items()}


def four_seed(model, seed):
    rows = {}
    for task in ("SICK-R", "SICK-E"):
        rows[task] = scores(FOUR / "eval" / f"multiview_{model}.seed{seed}.senteval.json")[task]
    return rows


history = json.loads((DIR / "ctl-seed1-300steps.history.json").read_text())["runs"]
pre, head = history["5137af0"]["loss"], history["head"]["loss"]
first = next(i + 1 for i, (a, b) in enumerate(zip(pre, head)) if a != b)
record = summary_windows(FOUR / "runs/multiview_ctl/seed1/train.json")[:6]
print("CTL seed 1, mean training loss per 50 steps (first differing step, 4 decimals: %d)" % first)
print("| steps | 4-seed record (28c10f8) | e6e97e6 | before the speed-up (5137af0) | before − after |")
print("|---|---|---|---|---|")
for i, (r, h, p) in enumerate(zip(record, windows(head), windows(pre))):
    print(f"| {50 * i + 1}-{50 * i + 50} | {r:.4f} | {h:.4f} | {p:.4f} | {p - h:+.4f} |")

for model, post in (("cl", CURVE / "run-cl.train.json"), ("ctl", RECORDS / "multiview-training-curve-cpu-2026-11-30/run.train.json")):
    pre0, post0 = summary_windows(FOUR / f"runs/multiview_{model}/seed0/train.json"), summary_windows(post)
    diffs = sorted(b - a for a, b in zip(pre0, post0))
    print(f"\n{model.upper()} seed 0, after - before the speed-up per 50-step window: {sum(d > 0 for d in diffs)} of "
          f"{len(diffs)} higher after it, mean {sum(diffs) / len(diffs):+.4f}, median {diffs[len(diffs) // 2]:+.4f}")

print("\n| run | trained at | scored at | SICK-R | SICK-E |")
print("|---|---|---|---|---|")
for model, name, curve_json, trained in (("cl", "CL", CURVE / "curve-cl.json", "65ed6da"),
                                         ("ctl", "CTL", CURVE / "curve-ctl.json", "0862c57, 596a3ca")):
    row = four_seed(model, 0)
    print(f"| {name} seed 0, 4-seed record | 5137af0 | 5a67abe | {row['SICK-R']:.2f} | {row['SICK-E']:.2f} |")
    final = scores(curve_json, point=-1)
    print(f"| {name} seed 0, curve record's run | {trained} | its curve's last point (2 threads) | "
          f"{final['SICK-R']:.2f} | {final['SICK-E']:.2f} |")
    for label, path in (("ea098a9 (file order)", DIR / f"{model}-seed0.senteval-ea098a9.json"),
                        ("e6e97e6 (SentEval's order)", DIR / f"{model}-seed0.senteval-head.json")):
        if path.exists():
            got = scores(path)
            print(f"| {name} seed 0, curve record's run | {trained} | {label} | {got['SICK-R']:.2f} | {got['SICK-E']:.2f} |")
    seeds = json.loads((DIR / f"{model}-seed0.senteval-seeds.json").read_text())
    for task in ("SICK-R", "SICK-E"):
        values = ", ".join(f"{v:.2f}" for v in seeds["scores"][task])
        print(f"|   the same, SentEval seeds {seeds['seeds']}: {task} | | | {values} (std {seeds['summary'][task]['std']:.2f}) | |")
row = four_seed("cl", 1)
print(f"| CL seed 1, 4-seed record | 28c10f8 | ea098a9 | {row['SICK-R']:.2f} | {row['SICK-E']:.2f} |")
rerun = DIR / "cl-seed1.train.json"
trained = json.loads(rerun.read_text())["provenance"]["git_sha"][:7] if rerun.exists() else "?"
for label, path in (("ea098a9 (file order)", DIR / "cl-seed1.senteval-ea098a9.json"),
                    ("e6e97e6 (SentEval's order)", DIR / "cl-seed1.senteval-head.json")):
    if path.exists():
        got = scores(path)
        print(f"| CL seed 1, trained again | {trained} | {label} | {got['SICK-R']:.2f} | {got['SICK-E']:.2f} |")
if rerun.exists():
    a, b = summary_windows(FOUR / "runs/multiview_cl/seed1/train.json"), summary_windows(rerun)
    print(f"\nCL seed 1 again against the 4-seed record's: {sum(x == y for x, y in zip(a, b))} of {len(a)} "
          f"50-step loss windows equal (4 decimals), largest difference {max(abs(x - y) for x, y in zip(a, b)):.4f}")
