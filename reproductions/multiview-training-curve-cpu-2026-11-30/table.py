"""The record's table: each point of the curve (curve.json here), with the paper's hours at its rate."""
import json
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
document = json.loads((here / "curve.json").read_text())
print("| step | sentences read | paper hours at 139k/h | training s (here) | SICK-E | SICK-R |")
print("|---|---|---|---|---|---|")
for p in document["points"]:
    s = p["scores"]
    print(f"| {p['step']:,} | {p['sentences_trained']:,} | {p['sentences_trained'] / 139_000:.1f} | "
          f"{p['train_seconds']:,.0f} | {s['SICK-E']:.2f} | {s['SICK-R']:.2f} |")
