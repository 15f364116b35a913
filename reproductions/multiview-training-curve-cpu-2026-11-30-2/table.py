"""The record's table: each point of both curves (curve-ctl.json, curve-cl.json here) side by side, by step."""
import json
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
curves = {name: {p["step"]: p for p in json.loads((here / f"curve-{name}.json").read_text())["points"]}
          for name in ("ctl", "cl")}
print("| step | sentences read | CTL SICK-E | CL SICK-E | CTL SICK-R | CL SICK-R |")
print("|---|---|---|---|---|---|")
for step in sorted(set(curves["ctl"]) | set(curves["cl"])):
    points = [curves[name].get(step) for name in ("ctl", "cl")]
    sentences = next(p["sentences_trained"] for p in points if p)
    final = " (finished)" if any(p and p["final"] for p in points) else ""

    def score(point, task):
        return f"{point['scores'][task]:.2f}" if point else "—"
    print(f"| {step:,}{final} | {sentences:,} | {score(points[0], 'SICK-E')} | {score(points[1], 'SICK-E')} | "
          f"{score(points[0], 'SICK-R')} | {score(points[1], 'SICK-R')} |")
