"""``strae aggregate --out results/scores.csv JSON...``: flatten evaluation JSONs into one tidy CSV.

One row per (run x task) with an empty ``subset`` for the task's headline score, plus one row per (run x task x
subset) for pooled tasks with per-subset scores. ``score`` is always the correct (numeric) Spearman, pooled over
subsets for STS; the further named metrics of the evaluation JSON (strae.evaluate.metrics) are columns of the same
row, empty where they do not apply or the JSON predates them (schema 1): ``spearman_reference_strings`` (word-level
tasks, the papers' string-ranked protocol) and ``spearman_subset_mean`` (STS years with subsets, SentEval's mean).
A failed run contributes one row per task it would have been evaluated on (``planned_tasks``) with
``status=failed`` and an empty score, so tables can show the failure. ``eval_label`` is the evaluation setting's
label (e.g. ``stopword_rm``; empty for a run's plain evaluation), which the reports select on.
Every JSON is read through ``strae.evaluate.result.EvalResult`` (older schema versions migrated there).
Columns: docs/CONTRACTS.md "Evaluation".

``--carry reproductions/<record>/scores.csv`` (repeatable) continues a campaign begun elsewhere (another machine, an
earlier session whose results/ is gone; records hold no evaluation JSONs, only their rows): the record's rows join
the output for every evaluation — (language, model, setting, seed, variant, eval_label) — that no given JSON (nor an
earlier ``--carry``) supplies, unchanged, so their provenance columns (git_sha, device, source_json) still say where
they were measured. A re-measured evaluation replaces the carried one whole, and is named on stderr (the same run
evaluated again is meant to; the run trained again, e.g. for a model-based figure, would replace the record's run).

    strae aggregate --out results/scores.csv --carry reproductions/cpu-2core-en-af-hi-2026-11-23/scores.csv \\
        results/eval/*/*/*/seed*.json
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strae.evaluate.metrics import SPEARMAN_REFERENCE_STRINGS, SPEARMAN_SUBSET_MEAN
from strae.evaluate.result import EvalResult, run_setting
from strae.io import atomic_open, check_output_file

EXTRA_METRICS = [SPEARMAN_REFERENCE_STRINGS, SPEARMAN_SUBSET_MEAN]
COLUMNS = [
    "schema_version", "language", "model", "setting", "seed", "status", "failure_reason", "variant", "task",
    "subset", "level", "score", "n_pairs", "n_oov", "split", "encoder_id", "git_sha", "device", "source_json",
    *EXTRA_METRICS,  # appended (schema 2), so readers that index the first columns are unaffected
    # how the run was trained (strae runs): recipe name, overridden recipe values, the corpus source it used
    "recipe", "recipe_overrides", "corpus_source",
    # the evaluation setting's label (schema 3; EvalResult.evaluation): e.g. stopword_rm, empty for plain
    "eval_label",
    # the CPU kernels the evaluation ran (provenance.cpu_kernels, since 2026-11-30): a classifier task's score moves
    # with the BLAS's (reproductions/senteval-blas-kernels-cpu-2026-11-30); e.g. "torch AVX512; openblas SkylakeX"
    "cpu_kernels",
]


# one evaluation (one strae evaluate JSON): what a carried row is matched on
EVALUATION_KEY = ("language", "model", "setting", "seed", "variant", "eval_label")


def evaluation_key(row: dict[str, Any]) -> tuple[str, ...]:
    """Rows of older records may name the evaluation's label in the setting: the same evaluation (run_setting)."""
    label = str(row.get("eval_label") or "")
    return tuple(str(run_setting(row.get("setting") or "", label) if column == "setting" else row.get(column, ""))
                 for column in EVALUATION_KEY)


# the columns every reader of a scores.csv needs (older records lack some later COLUMNS: those read blank)
KEY_COLUMNS = ("language", "model", "setting", "seed", "variant", "task", "subset", "score")


def check_scores_csv(path: str | Path) -> None:
    """Refuse, naming the file (and line), a scores.csv that `strae aggregate` did not write whole: missing, empty,
    a header without :data:`KEY_COLUMNS`, or a row with another number of fields than the header (a file cut short
    or edited by hand). Its readers (tables, records, --carry) call this first: pandas would fill a short row with
    blanks and the tables would show its cells as measured."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"{path}: no such scores.csv (`strae aggregate` writes it)")
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            missing = [column for column in KEY_COLUMNS if column not in (header or [])]
            if missing:
                raise SystemExit(f"{path}: not a scores.csv of `strae aggregate` (no column {', '.join(missing)}); "
                                 "columns: docs/CONTRACTS.md \"Evaluation\"")
            for row in reader:
                if len(row) != len(header):
                    raise SystemExit(f"{path}:{reader.line_num}: {len(row)} fields where the header has "
                                     f"{len(header)} (a file cut short or edited?); write it again with `strae "
                                     "aggregate`")
        except (UnicodeDecodeError, csv.Error) as error:
            # e.g. re-saved by a spreadsheet in another encoding
            raise SystemExit(f"{path}: not a UTF-8 CSV as `strae aggregate` writes it ({error}; after line "
                             f"{reader.line_num})") from None


def read_carried(path: str | Path) -> list[dict[str, Any]]:
    """Every row of an earlier scores.csv (older files lack later columns: blank; a column this version does not
    know is an error, naming the file)."""
    path = Path(path)
    if not path.exists():
        raise SystemExit(f"{path}: no such scores.csv to carry (a record's, e.g. reproductions/<record>/scores.csv)")
    check_scores_csv(path)  # every row whole, the file UTF-8
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        unknown = [column for column in header if column not in COLUMNS]
        missing = [column for column in EVALUATION_KEY[:5] if column not in header]
        if unknown or missing:
            raise SystemExit(f"{path}: not a strae scores.csv (unknown columns {unknown}, missing {missing}); "
                             f"columns: docs/CONTRACTS.md \"Evaluation\"")
        rows = [{column: row.get(column) or "" for column in COLUMNS} for row in reader]
    for row in rows:  # older records: a labelled evaluation's setting may name its label (result.run_setting)
        row["setting"] = run_setting(row["setting"], row["eval_label"]) or ""
    return rows


def with_carried(rows: list[dict[str, Any]], carry: Iterable[str | Path],
                 replaced: list[str] | None = None) -> list[dict[str, Any]]:
    """``rows`` plus each carried file's rows for evaluations not yet present (earlier sources win). ``replaced``,
    when given, gets one line per evaluation of ``rows`` that a carried file holds too, which ``rows`` therefore
    replace: where each was evaluated (git_sha, device). A re-evaluation of the same run is meant to; an
    evaluation of the run trained again (a model-based figure's retrain, another machine) replaces the record's run
    as well, and is said so that it is not done unnoticed."""
    here: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in rows:
        here.setdefault(evaluation_key(row), row)
    rows, said = list(rows), set()
    for path in carry:
        present = {evaluation_key(row) for row in rows}
        for row in read_carried(path):
            key = evaluation_key(row)
            if key not in present:
                rows.append(row)
            elif replaced is not None and key in here and key not in said:
                said.add(key)
                new = here[key]
                label = f"@{new['eval_label']}" if new.get("eval_label") else ""
                replaced.append(f"{new['language']} {new['model']} {new['setting']}{label} seed {new['seed']} "
                                f"({new['variant']}): {path}'s rows (evaluated at {_where(row)}) replaced by "
                                f"{new.get('source_json')} (at {_where(new)})")
    return rows


def _where(row: dict[str, Any]) -> str:
    """``<commit> on <device>`` of an evaluation's row, as far as it says."""
    sha, device = str(row.get("git_sha") or "?")[:7], row.get("device")
    return f"{sha} on {device}" if device else sha


def _blank(value: Any) -> Any:
    return "" if value is None else value


def kernels_text(kernels: dict[str, Any] | None) -> str:
    """``provenance.cpu_kernels`` in a cell: torch's ISA, then each BLAS family's kernels (numpy's and scipy's
    OpenBLAS once when they agree); blank for an evaluation that did not record them."""
    if not kernels:
        return ""
    blas = dict.fromkeys(f"{b.get('internal_api')} {b.get('architecture') or '?'}" for b in kernels.get("blas") or [])
    return "; ".join([f"torch {kernels.get('torch')}", *blas])


def rows_from_result(result: EvalResult, source: str) -> list[dict[str, Any]]:
    """The CSV rows of one evaluation result (``source``: its file, the ``source_json`` column)."""
    run, prov = result.run, result.provenance
    base = {
        "schema_version": result.schema_version,
        "language": _blank(run.get("language") or result.language),
        "model": _blank(run.get("model")),
        "setting": _blank(run.get("setting")),
        "seed": _blank(run.get("seed")),
        "status": _blank(run.get("status")),
        "failure_reason": _blank(run.get("failure_reason")),
        "variant": _blank(result.variant),
        "encoder_id": _blank(result.encoder.get("encoder_id")),
        "git_sha": _blank(prov.get("git_sha")),
        "device": _blank(prov.get("device")),
        "source_json": source,
        **{metric: "" for metric in EXTRA_METRICS},
        "recipe": _blank(run.get("recipe")),
        "recipe_overrides": _blank(run.get("recipe_overrides")),
        "corpus_source": _blank(run.get("corpus_source")),
        "eval_label": _blank(result.evaluation.label),
        "cpu_kernels": kernels_text(prov.get("cpu_kernels")),
    }
    rows: list[dict[str, Any]] = []
    if result.failed or not result.tasks:
        for name in result.planned_tasks or [""]:
            rows.append({**base, "task": name, "subset": "", "level": "", "score": "", "n_pairs": "",
                         "n_oov": "", "split": ""})
        return rows
    for name, task in result.tasks.items():
        common = {**base, "task": name, "level": _blank(task.level), "split": _blank(task.split)}
        extra = {metric: _blank(task.scores.get(metric)) for metric in EXTRA_METRICS}
        rows.append({**common, "subset": "", "score": _blank(task.score), "n_pairs": _blank(task.n_pairs),
                     "n_oov": _blank(task.n_oov), **extra})
        for subset, sub in (task.subsets or {}).items():
            rows.append({**common, "subset": subset, "score": _blank(sub.score), "n_pairs": _blank(sub.n_pairs),
                         "n_oov": _blank(sub.n_oov)})
    return rows


def rows_from_document(document: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The CSV rows of one evaluation JSON document (as read from ``source``)."""
    return rows_from_result(EvalResult.from_dict(document, source=source), source)


def aggregate(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The rows of every JSON. Refused: an evaluation of a run still training (a mid-training snapshot's: its scores
    would be averaged like a finished run's), and two JSONs of one evaluation (a table would keep one silently)."""
    rows: list[dict[str, Any]] = []
    sources: dict[tuple[str, ...], str] = {}
    for path in paths:
        found = rows_from_result(EvalResult.from_disk(path), str(path))
        if found and found[0]["status"] == "running":
            raise SystemExit(f"{path}: the evaluation of a run still training (train.json status running: a "
                             "mid-training snapshot?), not a finished run's; leave it out")
        key = evaluation_key(found[0]) if found else None
        if key in sources:
            raise SystemExit(f"{path} and {sources[key]}: two evaluations of {'/'.join(key)}; give one")
        if key is not None:
            sources[key] = str(path)
        rows.extend(found)
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
    # none is allowed: a table whose runs are all disabled (config/quick.yaml) gets a header-only CSV, its cells
    # "not run"
    parser.add_argument("json", nargs="*", help="evaluation JSON files (strae evaluate --out)")
    parser.add_argument("--carry", action="append", default=[], metavar="SCORES_CSV",
                        help="an earlier record's scores.csv: its rows for evaluations no JSON here supplies "
                             "(repeatable; earlier wins)")
    args = parser.parse_args(argv)
    check_output_file(args.out)  # before reading every JSON
    measured = aggregate(args.json)
    replaced: list[str] = []
    rows = with_carried(measured, args.carry, replaced)
    write_scores_csv(rows, args.out)
    if replaced:
        print(f"strae aggregate: {len(replaced)} evaluation(s) given replace a carried record's (a re-evaluation of "
              "the same run is meant to; a JSON of the run trained again replaces the record's run: leave it out if "
              "that is not meant):\n  " + "\n  ".join(replaced), file=sys.stderr)
    carried = f" and {len(rows) - len(measured)} carried from {', '.join(args.carry)}" if args.carry else ""
    print(f"wrote {args.out}: {len(measured)} rows from {len(args.json)} files{carried}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
