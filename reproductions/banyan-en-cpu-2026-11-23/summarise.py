"""Per-epoch table of the CPU Banyan run (watch.sh's evaluation JSONs): STS avg over the papers' 8 sets, lexical
avg over SimLex / WordSim-S / WordSim-R (numeric Spearman and the reference code's string-ranked one), with the
Banyan paper's Tables 1-2 row (62.70 / 49.61) and, for the same epoch, the pre-fidelity recipe's CPU run (README
"Earlier results": strae <= 0.1 recipe, raw corpus).

    python3 reproductions/banyan-en-cpu-2026-11-23/summarise.py > table.md
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

STS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel"]
LEX = ["simlex", "wordsim_sim", "wordsim_rel"]
PAPER = {"sts": 62.70, "lex": 49.61}
OLD_RECIPE = {1: (33.6, 3.6), 2: (52.0, 27.1), 3: (55.9, 34.8), 4: (57.5, 38.6), 5: (58.5, 40.7), 6: (59.0, 41.9)}


def mean(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values) / len(values)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def main(out: str) -> None:
    out = Path(out)
    print("| epoch | steps | dev loss | STS avg | lexical avg (numeric / reference protocol) | STS-12 | SimLex | WS-S | "
          "WS-R | Δ STS / lexical vs paper (62.70 / 49.61) | old recipe, same epoch (STS / lexical) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(out.glob("epoch*.paper.json"), key=lambda p: int(p.name[5:].split(".")[0])):
        epoch = int(path.name[5:].split(".")[0])
        document = json.loads(path.read_text())
        tasks = document["tasks"]
        run_dir = out / f"epoch{epoch}"  # watch.sh's export (results/) or its train.json copied into the record
        train = json.loads((run_dir / "train.json").read_text()) if (run_dir / "train.json").exists() else {}
        # an epoch's export has a snapshot block; the finished run (epoch 15) is the run directory's own train.json
        step = (train.get("snapshot") or {}).get("global_step") or (train.get("history") or [{}])[-1].get("global_step")
        dev = (train.get("history") or [{}])[-1].get("dev", {}).get("loss")
        sts = mean([tasks.get(t, {}).get("score") for t in STS])
        lex = mean([tasks.get(t, {}).get("score") for t in LEX])
        ref = mean([(tasks.get(t, {}).get("scores") or {}).get("spearman_reference_strings") for t in LEX])
        old = OLD_RECIPE.get(epoch)
        delta = "—" if sts is None or ref is None else f"{sts - PAPER['sts']:+.1f} / {ref - PAPER['lex']:+.1f}"
        words = " | ".join(fmt(tasks.get(t, {}).get("score")) for t in LEX)
        print(f"| {epoch} | {step if step is not None else '—'} | {'—' if dev is None else f'{dev:.3f}'} | {fmt(sts)} | "
              f"{fmt(lex)} / {fmt(ref)} | {fmt(tasks.get('sts12', {}).get('score'))} | {words} | {delta} | "
              f"{'—' if old is None else f'{old[0]:.1f} / {old[1]:.1f}'} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent))
