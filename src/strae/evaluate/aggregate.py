"""``strae aggregate --out results/scores.csv JSON...``: flatten evaluation JSONs into one tidy CSV.

One row per (run x task) with an empty ``subset`` for the task's headline score, plus one row per (run x task x
subset) for pooled tasks with per-subset scores. ``score`` is always the correct (numeric) Spearman, pooled over
subsets for STS; the further named metrics of the evaluation JSON (strae.evaluate.metrics) are columns of the same
row, empty where they do not apply or the JSON predates them (schema 1): ``spearman_reference_strings`` (word-level
tasks, the papers' string-ranked protocol) and ``spearman_subset_mean`` (STS years with subsets, SentEval's mean).
A failed run contributes one row per task it would have been evaluated on (``planned_tasks``) with
``status=failed`` and an empty score, so tables can show the failure.
Columns: docs/CONTRACTS.md "Evaluation".
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Iterable

from strae.evaluate.metrics import SPEARMAN_REFERENCE_STRINGS, SPEARMAN_SUBSET_MEAN
from strae.io import READABLE_SCHEMA_VERSIONS, atomic_open, read_json

EXTRA_METRICS = [SPEARMAN_REFERENCE_STRINGS, SPEARMAN_SUBSET_MEAN]
COLUMNS = [
    "schema_version", "language", "model", "setting", "seed", "status", "failure_reason", "variant", "task",
    "subset", "level", "score", "n_pairs", "n_oov", "split", "encoder_id", "git_sha", "device", "source_json",
    *EXTRA_METRICS,  # appended (schema 2), so readers that index the first columns are unaffected
    # how the run was trained (strae runs): recipe name, overridden recipe values, the corpus source it used
    "recipe", "recipe_overrides", "corpus_source",
]


def _blank(value: Any) -> Any:
    return "" if value is None else value


def rows_from_document(document: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The CSV rows of one evaluation JSON document."""
    version = document.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        raise SystemExit(f"{source}: schema_version {version!r} is not one of {list(READABLE_SCHEMA_VERSIONS)}; "
                         "re-run `strae evaluate`")
    run = document.get("run") or {}
    prov = document.get("provenance") or {}
    encoder = document.get("encoder") or {}
    base = {
        "schema_version": version,
        "language": _blank(run.get("language") or document.get("language")),
        "model": _blank(run.get("model")),
        "setting": _blank(run.get("setting")),
        "seed": _blank(run.get("seed")),
        "status": _blank(run.get("status")),
        "failure_reason": _blank(run.get("failure_reason")),
        "variant": _blank(document.get("variant")),
        "encoder_id": _blank(encoder.get("encoder_id")),
        "git_sha": _blank(prov.get("git_sha")),
        "device": _blank(prov.get("device")),
        "source_json": source,
        **{metric: "" for metric in EXTRA_METRICS},
        "recipe": _blank(run.get("recipe")),
        "recipe_overrides": _blank(run.get("recipe_overrides")),
        "corpus_source": _blank(run.get("corpus_source")),
    }
    rows: list[dict[str, Any]] = []
    tasks = document.get("tasks") or {}
    if run.get("status") == "failed" or not tasks:
        for name in document.get("planned_tasks") or [""]:
            rows.append({**base, "task": name, "subset": "", "level": "", "score": "", "n_pairs": "",
                         "n_oov": "", "split": ""})
        return rows
    for name, record in tasks.items():
        common = {**base, "task": name, "level": record.get("level", ""), "split": record.get("split", "")}
        extra = {metric: _blank((record.get("scores") or {}).get(metric)) for metric in EXTRA_METRICS}
        rows.append({**common, "subset": "", "score": _blank(record.get("score")),
                     "n_pairs": record.get("n_pairs", ""), "n_oov": record.get("n_oov", ""), **extra})
        for subset, sub in (record.get("subsets") or {}).items():
            rows.append({**common, "subset": subset, "score": _blank(sub.get("score")),
                         "n_pairs": sub.get("n_pairs", ""), "n_oov": _blank(sub.get("n_oov"))})
    return rows


def aggregate(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise SystemExit(f"{path}: evaluation JSON not found")
        rows.extend(rows_from_document(read_json(path), str(path)))
    return rows


def write_scores_csv(rows: list[dict[str, Any]], out: str | Path) -> None:
    with atomic_open(out, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="raise")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae aggregate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="CSV to write (e.g. results/scores.csv)")
    parser.add_argument("json", nargs="+", help="evaluation JSON files (strae evaluate --out)")
    args = parser.parse_args(argv)
    rows = aggregate(args.json)
    write_scores_csv(rows, args.out)
    print(f"wrote {args.out}: {len(rows)} rows from {len(args.json)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
