"""The papers' tables, rebuilt from results/scores.csv: reproduced mean ± std over seeds next to the paper's value.

`strae report table --table selfstrae_table2 ...` writes a tidy CSV (one row per table cell) and a Markdown view;
`strae report tables` writes every table that has a measured cell in the scores given, each to its results/ path
(what `strae record` collects after runs made outside a table target: a chunked campaign, a partial grid).
Which run and task fills each cell is declared in config/tables.yaml; the paper's numbers come from
paper_tables/*.csv. Nothing is ever filled in that was not measured: a cell without runs reads "not run", a cell
whose seeds all diverged reads "failed", and failed seeds are counted, never averaged.

Which score a cell compares with the paper is the column's `metric` (default `spearman`, scores.csv `score`); a
column may show a second metric `beside` it. The lexical columns compare the paper with the reference code's
string-ranked Spearman (`spearman_reference_strings`, the protocol the published lexical numbers carry) and show
the correct `spearman` beside it; both are labelled in the Markdown cell.

Parameter-count cells (Banyan Table 6, SemEval Table 2 "# Params") read `strae measure param_counts`'s JSON
(``--param-counts results/measure/param_counts.json``): tables never build a model themselves.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from strae import paths
from strae.evaluate.result import table_setting
from strae.io import atomic_open, atomic_path, check_output_file
from strae.plan import cell_selector, other_half  # the workflow's per-table targets resolve cells with it too
from strae.report import measure

CELL_COLUMNS = [
    "table", "half", "row", "column", "language", "model", "setting", "variant", "tasks", "aggregate",
    "status", "mean", "std", "n_seeds", "n_failed", "seeds", "best_seed", "paper_mean", "paper_std", "delta",
    "paper_note", "note", "metric", "beside_metric", "beside_mean", "beside_std", "paper_tolerance",
]
SPEARMAN = "spearman"
# named metric (config/tables.yaml `metric:` / `beside:`) -> scores.csv column (strae.evaluate.aggregate)
METRIC_COLUMNS = {SPEARMAN: "score", "spearman_reference_strings": "spearman_reference_strings",
                  "spearman_subset_mean": "spearman_subset_mean"}
METRIC_LABELS = {SPEARMAN: "numeric", "spearman_reference_strings": "ref. strings",
                 "spearman_subset_mean": "subset mean"}
PARAM_COUNT = "(parameter count)"  # `tasks` value of a parameter-count cell
# Population std (ddof=0, numpy's default) over seeds: what the reference code's np.std reports; stated in the .md.
STD_DDOF = 0


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A workflow config (the merged one the workflow passes), checked as every command's is."""
    from strae.data.registry import load_config

    return load_config(path)


def load_tables(path: str | Path) -> dict[str, Any]:
    """config/tables.yaml, validated against workflow/schemas/tables.schema.yaml (errors name the file and key)."""
    from strae.schemas import load_sheet

    return load_sheet(path, "tables")


def load_scores(path: str | Path) -> pd.DataFrame:
    """scores.csv plus `eval_setting`, what table rows select on: the run's setting, `setting@label` for an
    evaluation setting such as GloVe stop-word removal (scores.csv `eval_label`, strae.evaluate.result)."""
    from strae.evaluate.aggregate import check_scores_csv

    check_scores_csv(path)
    scores = pd.read_csv(path, dtype={"subset": str, "setting": str, "failure_reason": str, "eval_label": str},
                         keep_default_na=True)
    scores["subset"] = scores["subset"].fillna("")
    if "eval_label" in scores:
        scores["eval_setting"] = [table_setting(setting if isinstance(setting, str) else None,
                                                label if isinstance(label, str) else None)
                                  for setting, label in zip(scores["setting"], scores["eval_label"])]
    else:
        scores["eval_setting"] = _legacy_eval_setting(scores)
    scores["seed"] = pd.to_numeric(scores["seed"], errors="coerce")
    for column in METRIC_COLUMNS.values():
        # scores.csv from schema-1 evaluation JSONs has no extra metric columns: read them as missing
        scores[column] = pd.to_numeric(scores[column], errors="coerce") if column in scores else math.nan
    return scores


def _legacy_eval_setting(scores: pd.DataFrame) -> Any:
    """A scores.csv from before `eval_label` (schema < 3): the setting directory of each evaluation JSON, which
    the workflow names `setting@label` for an evaluation setting."""
    if "source_json" not in scores or not scores["source_json"].notna().any():
        return scores["setting"]
    return [Path(str(src)).parent.name if isinstance(src, str) and src else setting
            for src, setting in zip(scores["source_json"], scores["setting"])]


def load_paper_table(path: Path | None) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(half, row, column) -> {mean, std, note, tolerance}; half is "" when the paper table has no halves;
    tolerance (optional column) is the printed precision of an approximate value (``≈10M``: 500000), else NaN."""
    if path is None or not path.exists():
        return {}
    # the csv module, not pandas: a row with one field too many (a comma inside an unquoted note) would become
    # pandas' index and shift every column of the file silently
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, [])
            rows = [(reader.line_num, row) for row in reader if row]  # (pandas skipped blank lines too)
        except (csv.Error, UnicodeDecodeError) as error:
            raise SystemExit(f"{path}: not a UTF-8 CSV ({error}; after line {reader.line_num})") from None
    missing = {"row", "column", "mean", "std"} - set(header)
    if missing:
        raise SystemExit(f"{path}: missing columns {sorted(missing)}; expected row,column,mean,std,note[,half]")
    cells = {}
    for line, row in rows:
        if len(row) != len(header):
            raise SystemExit(f"{path}:{line}: {len(row)} fields where the header has {len(header)} (a comma inside "
                             "an unquoted note?)")
        record = dict(zip(header, row))
        key = (record.get("half", "") or "", record["row"], record["column"])
        where = f"{path}:{line}"
        cells[key] = {
            "mean": _to_float(record["mean"], where, "mean"),
            "std": _to_float(record["std"], where, "std"),
            "note": record.get("note", ""),
            "tolerance": _to_float(record.get("tolerance", ""), where, "tolerance"),
        }
    return cells


def _to_float(text: Any, where: str, column: str) -> float:
    """A published value (``≈``/``~`` marks an approximate one); empty is "not published" (NaN), anything else that
    is not a number a typo, named, not shown as a silent ``n/a``."""
    text = str(text).replace("≈", "").replace("~", "").strip()
    if not text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"{where}: {column} {text!r} is not a number (leave it empty if the paper has none)") \
            from None


def _metric_column(metric: str, where: str) -> str:
    if metric not in METRIC_COLUMNS:
        raise SystemExit(f"config/tables.yaml: {where}: unknown metric {metric!r}; known: {sorted(METRIC_COLUMNS)}")
    return METRIC_COLUMNS[metric]


_SELECTOR_COLUMNS = ("language", "model", "eval_setting", "variant")  # a cell's rows; selector keys below
_SELECTOR_KEYS = ("language", "model", "setting", "variant")


class ScoreGroups:
    """The whole-set rows of a scores table (subset ""), grouped once by (language, model, eval setting, variant):
    a table's cells each read one group instead of filtering every row again (a paper-scale scores.csv has
    thousands of rows and the tables hundreds of cells; this was most of `strae report` and of its tests)."""

    def __init__(self, scores: pd.DataFrame):
        self.scores = scores
        self.groups: dict[tuple, pd.DataFrame] | None = None  # grouped when a cell first reads scores

    def rows(self, selector: dict[str, Any]) -> pd.DataFrame:
        if self.groups is None:
            whole = self.scores[self.scores["subset"] == ""]
            self.groups = dict(iter(whole.groupby(list(_SELECTOR_COLUMNS), sort=False)))
        group = self.groups.get(tuple(selector[name] for name in _SELECTOR_KEYS))
        return group if group is not None else self.scores.iloc[:0]


def _seed_values(scores: ScoreGroups, selector: dict[str, Any], tasks: list[str],
                 metric: str = SPEARMAN) -> tuple[dict[int, float], set[int]]:
    """Per-seed value of `metric` (mean over `tasks`; NaN if a task is missing for that seed) and the set of failed
    seeds."""
    value_column = _metric_column(metric, "metric")
    rows = scores.rows(selector)
    rows = rows.loc[rows["task"].isin(tasks), ["seed", "status", "task", value_column]]  # only what is read
    failed = {int(s) for s in rows.loc[rows["status"] == "failed", "seed"].dropna()}
    values: dict[int, float] = {}
    for seed, group in rows[rows["status"] != "failed"].groupby("seed"):
        measured = group.dropna(subset=[value_column]).drop_duplicates("task")  # a task's first measured row
        by_task = dict(zip(measured["task"], measured[value_column]))
        values[int(seed)] = (float(pd.Series([by_task[task] for task in tasks], dtype=float).mean())
                             if set(tasks) <= by_task.keys() else math.nan)
    return values, failed - set(values)


# a cell's note for the seeds it leaves out (Markdown: after the reproduced value)
INCOMPLETE_NOTE = "lacks a task of this cell: left out of it"

# paper_note of a cell in a column/row added for a language the paper never had (Markdown: "paper —")
NOT_IN_PAPER = "the paper has no result for this language"


def with_language_entries(tables: dict[str, Any], name: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """``tables`` with the columns (and, in a table with a row per language, the rows) that language blocks ask
    for (``languages.<lang>.tables.<name>: TASK``): a language added to the config shows up in the table without
    editing config/tables.yaml, its paper cells "—"."""
    entries = {lang: (block or {}).get("tables", {}).get(name)
               for lang, block in ((config or {}).get("languages") or {}).items()}
    entries = {lang: task for lang, task in entries.items() if task}
    if not entries or name not in tables.get("tables", {}):
        return tables
    table = dict(tables["tables"][name])
    columns, rows = dict(table["columns"]), list(table["rows"])
    language_rows = [row for row in rows if row.get("language")]
    for lang, task in entries.items():
        label = config["languages"][lang].get("label", lang)
        if label in columns:
            if columns[label].get("language", table.get("language")) == lang:
                continue  # the table has the language's column already
            raise SystemExit(f"languages.{lang}.tables.{name}: the table has a column {label!r} of another "
                             f"language already; give languages.{lang}.label another name")
        columns[label] = {"language": lang, "task": task, "new_language": True}
        if language_rows:  # one row per language (SemEval Table 3): the new language gets its own row too
            rows.append(dict(language_rows[0], label=label, language=lang))
    table.update(columns=columns, rows=rows)
    return dict(tables, tables={**tables["tables"], name: table})


def with_config_settings(tables: dict[str, Any], name: str,
                         config: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """``tables`` whose rows of a model the config trains under another setting than the row names read the
    config's setting, and a note per such row: a multi-view run's setting names its sizes (``ctl_h1000_e300``, the
    paper's), so config/quick.yaml's small models (``ctl_h64_e32``) would otherwise read "not run". A
    ``per_floor_width`` row (the random-token floor) becomes one row per width of a list in
    ``multiview.senteval.random_token`` (``LABEL (2000-d)``, setting ``dim2000``); ``true`` leaves it as it is."""
    from baselines.multiview import config_settings, floor_dims

    trained = config_settings(config or {})
    chosen = (((config or {}).get("multiview") or {}).get("senteval") or {}).get("random_token")
    widths = floor_dims(config or {}) if isinstance(chosen, list) else []
    if not (trained or widths) or name not in tables.get("tables", {}):
        return tables, []
    table = dict(tables["tables"][name])
    rows, notes = [], []
    for row in table["rows"]:
        if row.get("per_floor_width") and widths:
            rows += [dict(row, label=f"{row['label']} ({width}-d)", setting=f"dim{width}") for width in widths]
            notes.append(f"Rows `{row['label']} (N-d)`: the floor at each width of multiview.senteval.random_token "
                         f"({', '.join(map(str, widths))}). A linear probe gains from width alone, so a model's floor "
                         "is the one of its own width (its test vector: 2 x hidden).")
            continue
        model = row.get("model") or table.get("model")
        setting = trained.get(model)
        if setting and row.get("setting") and row["setting"] != setting:
            notes.append(f"Row `{row['label']}` reads {model}/{setting}, the setting this config trains "
                         f"(config/tables.yaml, the paper's: {row['setting']}).")
            row = dict(row, setting=setting)
        rows.append(row)
    table.update(rows=rows)
    return dict(tables, tables={**tables["tables"], name: table}), notes


def _column_tasks(column: dict[str, Any]) -> list[str]:
    if "task" in column:
        return [column["task"]]
    return list(column.get("mean_of", []))


def build_table(
    name: str,
    tables: dict[str, Any],
    scores: pd.DataFrame,
    paper_dir: str | Path,
    param_counts: dict[tuple[str, str], int] | None = None,
) -> pd.DataFrame:
    """One record per (half, row, column) cell of table `name` (see module docstring)."""
    if name not in tables.get("tables", {}):
        raise SystemExit(f"config/tables.yaml: no table {name!r}; declared: {sorted(tables.get('tables', {}))}")
    table = tables["tables"][name]
    unknown = sorted(set(table.get("select_on") or []) - set(table["columns"]))
    if unknown:
        raise SystemExit(f"config/tables.yaml: tables.{name}.select_on names no column of the table: {unknown}; "
                         f"columns: {list(table['columns'])}")
    paper_file = Path(paper_dir) / table["paper_file"] if table.get("paper_file") else None
    paper = load_paper_table(paper_file)
    param_counts = param_counts or {}
    halves = table.get("halves") or {None: {"aggregate": table.get("aggregate", "mean")}}
    scores = ScoreGroups(scores)
    records = []
    for half_name, half in halves.items():
        aggregate = half.get("aggregate", "mean")
        for row in table["rows"]:
            half_label = half_name if half_name is not None else row.get("half", "")
            best_seed = _best_seed(table, row, scores) if aggregate == "best_seed" else None
            for column_label, column in table["columns"].items():
                record = _cell(table, row, column, scores, param_counts, aggregate, best_seed)
                # a transposed paper table prints our rows as its columns (Banyan Table 6: models as columns)
                key = (column_label, row["label"]) if table.get("transpose") else (row["label"], column_label)
                paper_cell = paper.get((half_label, *key), {})
                paper_mean = paper_cell.get("mean", math.nan)
                record.update(
                    table=name, half=half_label, row=row["label"], column=column_label, aggregate=aggregate,
                    paper_mean=paper_mean, paper_std=paper_cell.get("std", math.nan),
                    paper_tolerance=paper_cell.get("tolerance", math.nan),
                    paper_note=paper_cell.get("note", "") if paper_cell else
                    (NOT_IN_PAPER if column.get("new_language") else
                     "paper table not transcribed" if not paper else "no paper value"),
                )
                record["delta"] = (
                    record["mean"] - paper_mean
                    if record["status"] == "ok" and not math.isnan(paper_mean) else math.nan
                )
                records.append(record)
    return pd.DataFrame.from_records(records, columns=CELL_COLUMNS)


def _own_score_columns(table: dict[str, Any], row: dict[str, Any]) -> list[str]:
    return [label for label, column in table["columns"].items()
            if _column_tasks(column) and not other_half(row, column)]


def _selection_columns(table: dict[str, Any], row: dict[str, Any]) -> list[str] | None:
    """The columns a row's best seed is chosen on: the table's ``select_on`` (None: every column of the row).
    A row none of whose own columns is among them (a language a config block added to SemEval Table 3: its
    column is its test set) is chosen on its own columns, which the table's notes say (:func:`selection_notes`)."""
    select_on = table.get("select_on")
    if select_on is not None and not set(select_on) & set(_own_score_columns(table, row)):
        return None
    return select_on


def selection_notes(table: dict[str, Any]) -> list[str]:
    """A line per row whose best seed is chosen on its own (test) columns, not on the table's ``select_on``."""
    aggregates = {half.get("aggregate", "mean") for half in (table.get("halves") or {}).values()}
    if table.get("select_on") is None or "best_seed" not in (aggregates or {table.get("aggregate", "mean")}):
        return []
    return [f"Row `{row['label']}`: no development column of its own among the table's `select_on` "
            f"({', '.join(table['select_on'])}), so its best seed is the best on its own columns "
            f"({', '.join(_own_score_columns(table, row))}): an optimistic pick, unlike the other rows'."
            for row in table["rows"] if not row.get("external") and _own_score_columns(table, row)
            and _selection_columns(table, row) is None]


def _best_seed(table: dict[str, Any], row: dict[str, Any], scores: ScoreGroups) -> int | None:
    """The seed with the highest mean over the row's task columns (one initialisation per row, as the papers'
    "best performing initialisation"), or over the table's ``select_on`` columns only (SemEval Table 3's
    submitted systems were chosen before the test labels were public: on the development sets); None when no seed
    has every task."""
    select_on = _selection_columns(table, row)
    totals: dict[int, list[float]] = {}
    considered = 0  # columns with a value for some seed
    for label, column in table["columns"].items():
        tasks = _column_tasks(column)
        if not tasks or row.get("external") or other_half(row, column):
            continue  # (another language's columns would pick this row's seed by that language's runs)
        if select_on is not None and label not in select_on:
            continue
        values, _ = _seed_values(scores, cell_selector(table, row, column), tasks, column.get("metric", SPEARMAN))
        considered += bool(values)
        for seed, value in values.items():
            totals.setdefault(seed, []).append(value)
    # a seed is ranked only with a value in every column some seed has (one without a row for a column has no
    # entry there: ranked on fewer columns it could win, and leave that column without a seed)
    complete = {seed: float(np.mean(v)) for seed, v in totals.items()
                if len(v) == considered and not any(math.isnan(x) for x in v)}
    return max(complete, key=complete.get) if complete else None


def _cell(table, row, column, scores, param_counts, aggregate, best_seed) -> dict[str, Any]:
    selector = cell_selector(table, row, column)
    base = dict(selector, tasks="", status="", mean=math.nan, std=math.nan, n_seeds=0, n_failed=0, seeds="",
                best_seed="", note="", metric="", beside_metric="", beside_mean=math.nan, beside_std=math.nan)
    if other_half(row, column):
        return dict(base, status="n/a", note="column belongs to another language's half of the table")
    if row.get("external"):
        return dict(base, status="external", note=f"published number ({row['external']}); not trained here")
    if column.get("unavailable"):
        return dict(base, status="unavailable", note=column["unavailable"])
    if column.get("param_count"):
        base["tasks"] = PARAM_COUNT
        count = param_counts.get((selector["model"], selector["setting"]))
        if count is None:
            return dict(base, status="not run", note="model not built (no parameter count)")
        return dict(base, status="ok", mean=float(count), n_seeds=0, note="non-embedding parameters (counted)")
    tasks = _column_tasks(column)
    metric = column.get("metric", SPEARMAN)
    beside = column.get("beside")
    values, failed = _seed_values(scores, selector, tasks, metric)
    if metric != SPEARMAN and values and all(math.isnan(v) for v in values.values()):
        numeric, _ = _seed_values(scores, selector, tasks, SPEARMAN)
        if any(not math.isnan(v) for v in numeric.values()):
            # results from schema-1 evaluation JSONs lack the metric: say so and fall back to the numeric score
            base["note"] = (f"no {metric} in these results (evaluation JSON schema 1; re-run strae evaluate): "
                            f"the paper is compared with {SPEARMAN}")
            metric, beside, values = SPEARMAN, metric, numeric  # the missing metric shows as "n/a" beside
    base.update(tasks=";".join(tasks), n_failed=len(failed), metric=metric)
    measured = {seed: value for seed, value in values.items() if not math.isnan(value)}
    base["seeds"] = ";".join(str(s) for s in sorted(measured))
    # a seed evaluated (under this cell's selector) but without every task of the cell is left out of its mean:
    # said, so n is not read as every seed there is (and a Score cell's n can differ from its columns')
    listed = {int(seed) for seed in scores.rows(selector)["seed"].dropna()}
    incomplete = sorted((listed - set(values) - failed) | (set(values) - set(measured)))
    if incomplete and measured:
        lacking = f"seed{'s' if len(incomplete) > 1 else ''} {', '.join(map(str, incomplete))}"
        base["note"] = "; ".join(filter(None, [base["note"], f"{lacking} {INCOMPLETE_NOTE}"]))
    if not values and not failed:
        return dict(base, status="not run", note=f"needs {column['needs']}" if column.get("needs") else "")
    if not measured:
        status = "failed" if failed else "missing"
        return dict(base, status=status, note="every seed failed" if failed else "a task score is missing")
    beside_values: dict[int, float] = {}
    if beside and beside != metric:
        beside_values, _ = _seed_values(scores, selector, tasks, beside)
        base["beside_metric"] = beside
    if aggregate == "best_seed":
        if best_seed is None or best_seed not in measured:
            return dict(base, status="missing", note="no seed has every task of this row")
        return dict(base, status="ok", mean=measured[best_seed], n_seeds=len(measured), best_seed=best_seed,
                    beside_mean=beside_values.get(best_seed, math.nan))
    array = np.array(list(measured.values()))
    beside_array = np.array([beside_values.get(seed, math.nan) for seed in measured])
    if beside_values and not np.isnan(beside_array).any():
        base.update(beside_mean=float(beside_array.mean()), beside_std=float(beside_array.std(ddof=STD_DDOF)))
    return dict(base, status="ok", mean=float(array.mean()), std=float(array.std(ddof=STD_DDOF)),
                n_seeds=len(measured))


def paper_std_text(std: float) -> str:
    """A paper's std as the tables print it: three decimals below 0.01 (Banyan's 0.002 is not 0.00)."""
    return _fmt(std, 3 if std < 0.01 else 2)


def _fmt(value: float, digits: int = 2) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _metric_suffix(cell: pd.Series) -> str:
    """" [ref. strings] · numeric 44.10 ± 0.40": which metric the reproduced value is, and the one beside it."""
    metric = cell.get("metric") or SPEARMAN
    beside = cell.get("beside_metric") or ""
    if metric == SPEARMAN and not beside:
        return ""
    text = f" [{METRIC_LABELS.get(metric, metric)}]"
    if beside:
        beside_mean = cell.get("beside_mean", math.nan)
        value = _fmt(beside_mean)
        if value and not math.isnan(cell.get("beside_std", math.nan)) and cell["aggregate"] != "best_seed" \
                and cell["n_seeds"] > 1:
            value += f" ± {_fmt(cell['beside_std'])}"
        text += f" · {METRIC_LABELS.get(beside, beside)} {value or 'n/a'}"
    return text


def format_cell(cell: pd.Series) -> str:
    """Markdown cell: reproduced (n seeds, failed) / paper / delta."""
    status = cell["status"]
    if status == "ok":
        if cell["tasks"] == PARAM_COUNT:
            reproduced = f"{int(cell['mean'])}"
        elif cell["aggregate"] == "best_seed":
            reproduced = f"{_fmt(cell['mean'])} (best of {cell['n_seeds']}: seed {cell['best_seed']})"
        else:
            # one seed has no spread of its own: "± 0.00" would read as a measured one
            spread = f" ± {_fmt(cell['std'])}" if cell["n_seeds"] > 1 else ""
            reproduced = f"{_fmt(cell['mean'])}{spread} (n={cell['n_seeds']})"
        if cell["n_failed"]:
            reproduced += f", {cell['n_failed']} failed"
        if INCOMPLETE_NOTE in str(cell.get("note") or ""):
            reproduced += f" ({next(n for n in str(cell['note']).split('; ') if INCOMPLETE_NOTE in n)})"
        reproduced += _metric_suffix(cell)
    elif status == "external":
        reproduced = "external"
    elif status == "failed":
        reproduced = f"failed ({cell['n_failed']} seeds)"
    else:
        reproduced = status
    paper_mean = cell["paper_mean"]
    whole = not math.isnan(paper_mean) and (cell["tasks"] == PARAM_COUNT or paper_mean >= 1000)
    paper = _fmt(paper_mean, 0 if whole else 2)
    if paper and not math.isnan(cell.get("paper_tolerance", math.nan)):
        paper = f"≈{paper}"  # printed as an approximation: matched within its printed precision (strae record)
    if paper and not math.isnan(cell["paper_std"]):
        paper += f" ± {paper_std_text(cell['paper_std'])}"
    missing = "paper —" if cell.get("paper_note") == NOT_IN_PAPER else "paper n/a"
    parts = [reproduced, f"paper {paper}" if paper else missing]
    if not math.isnan(cell["delta"]):
        parts.append(f"Δ {cell['delta']:+.2f}")
    return " · ".join(parts)


def to_markdown(cells: pd.DataFrame, title: str) -> str:
    columns = list(dict.fromkeys(cells["column"]))
    lines = [f"# {title}", "",
             "Each cell: reproduced mean ± std over seeds (n = seeds with a score, population std), failed seeds "
             "(diverged, excluded from the mean), the paper's value, and Δ = reproduced − paper. "
             "`not run` = no run configured/finished; `external` = a published number this project does not train.",
             ""]
    metrics_used = set(cells["metric"].dropna()) | set(cells["beside_metric"].dropna())
    if "spearman_reference_strings" in metrics_used:
        lines[-1:-1] = ["Lexical cells: `[ref. strings]` = the reference code's Spearman, which ranks predictions and "
                        "gold as strings (`10.00` between `1.x` and `2.x`, negative cosines reversed): the protocol "
                        "the papers' lexical numbers carry, so Δ is taken against it; `numeric` beside it = the "
                        "correct Spearman (`spearman`, the harness's headline score).", ""]
    if "spearman_subset_mean" in metrics_used:
        lines[-1:-1] = ["`subset mean` = SentEval's mean of per-subset STS scores (`spearman_subset_mean`); "
                        "`numeric` = the pooled Spearman over all subsets (the papers' and MTEB's convention).", ""]
    has_half = cells["half"].astype(str).str.len().gt(0).any()
    header = (["half"] if has_half else []) + ["row"] + columns
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for (half, row), group in cells.groupby(["half", "row"], sort=False):
        by_column = group.set_index("column")
        values = [format_cell(by_column.loc[c]) for c in columns]
        lines.append("| " + " | ".join(([str(half)] if has_half else []) + [str(row)] + values) + " |")
    # why columns have no scores, where the table says so (a column's `unavailable` or `needs`), once per reason
    notes = cells["note"].astype(str)
    empty = cells[cells["status"].eq("unavailable") | (cells["status"].isin(("not run", "missing")) &
                                                       notes.str.startswith("needs "))]
    reasons: dict[str, list[str]] = {}
    for column, note in dict.fromkeys(zip(empty["column"], empty["note"])):
        reasons.setdefault(str(note), []).append(f"`{column}`")
    if reasons:
        lines += [""] + [f"- {', '.join(names)}: {note}" for note, names in reasons.items()]
    return "\n".join(lines) + "\n"


def training_notes(cells: pd.DataFrame, scores: pd.DataFrame) -> list[str]:
    """Lines saying how the table's runs were trained where that is not the paper's recipe or corpus: recipe
    overrides (e.g. the quick CPU profile's epochs / batch / bf16 loss) and the corpus source (the authors' corpus
    or the offline mirror's substitute). Read from scores.csv, i.e. from each run's own train.json."""
    if not {"recipe", "recipe_overrides", "corpus_source"} <= set(scores.columns):
        return []
    # a cell's setting is what rows select on: the evaluation's (`SETTING@LABEL` for a labelled one, load_scores)
    selected = "eval_setting" if "eval_setting" in scores else "setting"
    used = cells[cells["status"] == "ok"][["language", "model", "setting"]].drop_duplicates()
    used = used.rename(columns={"setting": selected})
    rows = scores.merge(used, on=["language", "model", selected]) if len(used) else scores.iloc[0:0]
    lines = []
    for column, label in (("recipe_overrides", "recipe overrides"), ("corpus_source", "training corpus source")):
        # per model: a table of several models (Banyan Table 3: Banyan and GloVe) must not credit one model's
        # record to all of them (GloVe records before 2026-11-29 name no corpus source; GloVe has no recipe, so no
        # overrides: only the corpus line says "not recorded")
        per_model = {model: sorted({str(v) for v in group[column].dropna() if str(v) not in ("", "nan")})
                     for model, group in rows.groupby("model", sort=True)}
        if column == "recipe_overrides":
            per_model = {model: values for model, values in per_model.items() if values}
        if any(per_model.values()):
            parts = [f"{model} " + (" | ".join(f"`{v}`" for v in values) if values else "not recorded")
                     for model, values in per_model.items()]
            meaning = ""
            if column == "corpus_source":
                sources = sorted({v for values in per_model.values() for v in values})
                meaning = " (" + "; ".join(f"`{v}`: {CORPUS_SOURCES.get(v, 'see the run')}" for v in sources) + ")"
            lines.append(f"Runs in this table were trained with {label}: " + "; ".join(parts) + meaning
                         + (" (see each run's train.json)" if column == "recipe_overrides" else ""))
    recipes_used = sorted({str(v) for v in rows["recipe"].dropna() if str(v) not in ("", "nan")})
    if recipes_used:
        lines.append("Recipes (src/strae/recipes.yaml): " + ", ".join(f"`{r}`" for r in recipes_used))
    return lines


# what a run's data block `corpus_source` names (strae.data.corpus.choose_sources: the language block's key used)
CORPUS_SOURCES = {
    "corpus": "the language block's `corpus` - for the papers' languages the offline mirror's substitute, not "
              "the authors' corpus",
    "paper_source": "the language block's `paper_source` - the authors' own corpus",
}


def _write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path, suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False)


# a cell's status when the scores hold something for it: measured seeds, or seeds that failed
EVIDENCE_STATUSES = ("ok", "failed", "missing")


def has_results(cells: pd.DataFrame) -> bool:
    """Whether a rendered table shows anything measured: a cell read from scores (ok, failed or missing seeds), or,
    for a table of parameter counts only, a counted cell (a count alone does not make a scores table worth keeping)."""
    evidence = cells["status"].isin(EVIDENCE_STATUSES)
    counts = cells["tasks"] == PARAM_COUNT
    if (evidence & ~counts).any():
        return True
    own = ~cells["status"].isin(("external", "n/a", "unavailable"))  # cells this repository could fill
    return bool(counts[own].all() and evidence.any())


def render(key: str, tables: dict[str, Any], config: dict[str, Any] | None, scores: pd.DataFrame,
           paper_dir: str | Path, param_counts: dict[tuple[str, str], int]) -> tuple[pd.DataFrame, str]:
    """Table ``key``'s cells and its Markdown (title, cells, training notes)."""
    tables = with_language_entries(tables, key, config)
    tables, setting_notes = with_config_settings(tables, key, config)
    cells = build_table(key, tables, scores, paper_dir, param_counts)
    markdown = to_markdown(cells, tables["tables"][key].get("title", key))
    notes = setting_notes + selection_notes(tables["tables"][key]) + training_notes(cells, scores)
    if notes:
        markdown += "\n" + "\n\n".join(notes) + "\n"
    return cells, markdown


def write_table(cells: pd.DataFrame, markdown: str, out_csv: str | Path, out_md: str | Path,
                flags: tuple[str, str] = ("--out-csv", "--out-md")) -> None:
    """The table's two files; both paths are checked before either is written, so a bad one leaves none."""
    for path, flag in zip((out_csv, out_md), flags):
        check_output_file(path, flag)
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    _write_csv(cells, out_csv)
    with atomic_open(out_md, "w", encoding="utf-8") as handle:
        handle.write(markdown)


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tables", default="config/tables.yaml")
    parser.add_argument("--scores", default=str(paths.scores_csv()))
    parser.add_argument("--param-counts", default=None, help="results/measure/param_counts.json (strae measure)")
    parser.add_argument("--paper-dir", default="paper_tables")
    parser.add_argument("--config", default=None, help="config whose language blocks may add columns "
                        "(languages.<lang>.tables.<table>: TASK) and whose multi-view models' settings the rows "
                        "of those models read; default: none (the rows as config/tables.yaml names them)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae report", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="one paper table (csv + md)")
    table.add_argument("--table", required=True, help="a key of `tables:` in the tables file, e.g. selfstrae_table2")
    _common_arguments(table)
    table.add_argument("--out-csv", required=True)
    table.add_argument("--out-md", required=True)
    every = sub.add_parser("tables", help="every table with a measured cell, from the scores that exist, to its "
                           "results/ path (for `strae record` after runs made outside a table target)")
    _common_arguments(every)
    every.add_argument("--results", default="results", help="where the tables go: results/[<paper>/]table<N>.{csv,md}")
    args = parser.parse_args(argv)

    if not Path(args.scores).exists():
        raise SystemExit(f"{args.scores}: scores file not found; run `snakemake results/scores.csv` first")
    # a misspelt paper dir or config would render every paper value as n/a: refused; the parameter counts may not
    # be measured yet (runs made outside a table target): their cells read n/a, and the log says why
    for flag, given in (("--paper-dir", args.paper_dir), ("--config", args.config)):
        if given and not Path(given).exists():
            raise SystemExit(f"{flag} {given}: not found")
    if args.param_counts and not Path(args.param_counts).exists():
        print(f"strae report: --param-counts {args.param_counts} not found; parameter-count cells read n/a (measure "
              "them with `snakemake results/measure/param_counts.json`)", file=sys.stderr)
    tables = load_tables(args.tables)
    config = load_yaml(args.config) if args.config else None
    scores = load_scores(args.scores)
    param_counts = measure.load_param_counts(args.param_counts)
    if args.command == "table":
        cells, markdown = render(args.table, tables, config, scores, args.paper_dir, param_counts)
        write_table(cells, markdown, args.out_csv, args.out_md)
        print(markdown)
        return 0
    return _render_existing(args, tables, config, scores, param_counts)


def _render_existing(args: argparse.Namespace, tables: dict[str, Any], config: dict[str, Any] | None,
                     scores: pd.DataFrame, param_counts: dict[tuple[str, str], int]) -> int:
    """`strae report tables`: each table of the tables file whose cells the scores (or parameter counts) reach."""
    written = []
    for key in tables.get("tables", {}):  # every output checked before any table is written
        for ext in ("csv", "md"):
            check_output_file(paths.table_file(key, ext, args.results), "--results")
    for key in tables.get("tables", {}):
        cells, markdown = render(key, tables, config, scores, args.paper_dir, param_counts)
        if not has_results(cells):
            continue
        out_csv, out_md = (paths.table_file(key, ext, args.results) for ext in ("csv", "md"))
        write_table(cells, markdown, out_csv, out_md, ("--results", "--results"))
        written.append(f"{out_md} ({int((cells['status'] == 'ok').sum())} of {len(cells)} cells measured)")
    if not written:
        raise SystemExit(f"{args.scores}: no table of {args.tables} has a measured cell in these scores")
    print("\n".join(f"wrote {line}" for line in written))
    return 0

if __name__ == "__main__":
    sys.exit(main())
