"""Summarise the fidelity ablation's evaluation JSONs into one Markdown table (run.sh calls it).

STS avg = mean of STS12-16, STS-B, SICK-R, SemRel (the papers' 8); lexical avg = mean of SimLex, WordSim-S/R,
with the correct numeric Spearman and, where the evaluation JSON carries it, the reference code's string-ranked one.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

STS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel"]
LEX = ["simlex", "wordsim_sim", "wordsim_rel"]


def reference(task: dict) -> float | None:
    """The reference code's string-ranked Spearman (evaluation JSON schema 2, word-level tasks)."""
    return (task.get("scores") or {}).get("spearman_reference_strings")


def row(out: Path, name: str, variant: str) -> dict:
    path = out / f"{name}.{variant}.json"
    if not path.exists():
        return {}
    tasks = json.loads(path.read_text())["tasks"]
    train = json.loads((out / name / "train.json").read_text())
    sts = [tasks[t]["score"] for t in STS if t in tasks]
    lex = [tasks[t]["score"] for t in LEX if t in tasks]
    ref = [reference(tasks[t]) for t in LEX if t in tasks and reference(tasks[t]) is not None]
    last = train["history"][-1] if train.get("history") else {}
    return {"sts": sum(sts) / len(sts) if len(sts) == len(STS) else None,
            "lex": sum(lex) / len(lex) if len(lex) == len(LEX) else None,
            "lex_ref": sum(ref) / len(ref) if len(ref) == len(LEX) else None,
            "sts12": tasks.get("sts12", {}).get("score"), "tasks": tasks,
            "steps": last.get("global_step"), "tok_s": last.get("tokens_per_second"),
            "dev_loss": last.get("dev", {}).get("loss")}


def fmt(value) -> str:
    return "—" if value is None else f"{value:.1f}"


def main(out: str) -> None:
    out = Path(out)
    names = sorted(p.name for p in out.iterdir() if p.is_dir())
    print("| variant | steps | tokens/s | dev loss | STS avg (paper) | lexical avg (paper, numeric) | lexical avg "
          "(paper, reference protocol) | STS-12 (paper) | SimLex | WS-S | WS-R | STS avg (official) | lexical avg "
          "(official) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        p, o = row(out, name, "paper"), row(out, name, "official")
        if not p:
            continue
        lex = [p["tasks"].get(t, {}).get("score") for t in LEX]
        print(f"| {name} | {p['steps']} | {p['tok_s']:,.0f} | {p['dev_loss']:.3f} | {fmt(p['sts'])} | "
              f"{fmt(p['lex'])} | {fmt(p['lex_ref'])} | {fmt(p['sts12'])} | {' | '.join(fmt(v) for v in lex)} | "
              f"{fmt(o.get('sts'))} | {fmt(o.get('lex'))} |")


if __name__ == "__main__":
    main(sys.argv[1])
