"""Each re-scored task against the record's own value: score before, after, difference, outer folds whose C changed.

    python reproductions/multiview-cpu-2026-11-28-rounded-c/compare.py [DIR]   (DIR: the re-scored JSONs; default eval/)
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORD = HERE.parent / "multiview-cpu-2026-11-28" / "eval"
rescored = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "eval"
changed_folds = total_folds = 0
for path in sorted(rescored.glob("*.senteval.json")):
    before = json.loads((RECORD / path.name).read_text())["tasks"]
    after = json.loads(path.read_text())["tasks"]
    for task in ("MR", "CR", "SUBJ", "MPQA"):
        old, new = before[task], after[task]
        changed = sum(a != b for a, b in zip(old["c_selected"], new["c_selected"]))
        changed_folds, total_folds = changed_folds + changed, total_folds + len(new["c_selected"])
        print(f"{path.name.removesuffix('.senteval.json'):<20} {task:<5} {old['score']:6.2f} {new['score']:6.2f} "
              f"{new['score'] - old['score']:+6.2f} {changed}")
print(f"outer folds whose C changed: {changed_folds} of {total_folds}")
