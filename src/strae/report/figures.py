"""The papers' figures (PNG + PDF, matplotlib, error bars = std over seeds).

`strae figure NAME --tables config/tables.yaml ...` draws the figure declared under `figures.NAME`:
- `ku_curves`      SemEval Table 2 / Banyan Table 9 as score-vs-k curves, from scores.csv (via the table builder);
- `ablation_bars`  Banyan Fig. 1: original vs change bars of a table's Score column, from scores.csv;
- `node_counts`    Banyan Fig. 2: total nodes of sentential trees vs one entangled graph as the batch grows;
- `uniformity_alignment`  SemEval Fig. 2: alignment (up vs down of each node) and uniformity per objective;
- `training_curve` the multi-view paper's Fig. 2: SentEval scores (SICK-E, SICK-R) along training, one line per model,
  from `strae evaluate --suite senteval --curve` JSONs (--curves).
`node_counts` and `uniformity_alignment` plot `strae measure NAME`'s JSON (--measurement): figures never load a model
themselves.
A panel without finished runs says "not run" instead of plotting anything.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from strae.io import atomic_path  # noqa: E402
from strae.report import measure  # noqa: E402
from strae.report import tables as table_builder  # noqa: E402


def _not_run(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _save(fig, png: str, pdf: str) -> None:
    fig.tight_layout()
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path, suffix=f".{fmt}") as tmp:
            # no creation date in the PDF: the same figure rebuilt from the same scores is the same file
            fig.savefig(tmp, format=fmt, dpi=150, metadata={"CreationDate": None} if fmt == "pdf" else None)
    plt.close(fig)


def _scores(args) -> pd.DataFrame:
    if not args.scores:
        raise SystemExit("--scores: this figure is built from results/scores.csv; pass it")
    return table_builder.load_scores(args.scores[0])


def ku_curves(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    scores = _scores(args)
    panels = spec["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        table = tables["tables"][panel["table"]]
        cells = table_builder.build_table(panel["table"], tables, scores, args.paper_dir)
        cells = cells[cells["aggregate"] == "mean"]
        ks = {row["label"]: int(row["setting"].split("_k")[1].split("_u")[0]) for row in table["rows"]}
        plotted = False
        for column in panel["columns"]:
            sub = cells[(cells["column"] == column) & (cells["status"] == "ok")]
            if sub.empty:
                continue
            x = np.array([ks[label] for label in sub["row"]])
            order = np.argsort(x)
            # lexical columns plot the reference code's string-ranked Spearman (what the paper's values carry)
            label = column + (" [ref. strings]" if "spearman_reference_strings" in set(sub["metric"]) else "")
            line = ax.errorbar(x[order], sub["mean"].to_numpy()[order], yerr=sub["std"].to_numpy()[order],
                               marker="o", capsize=3, label=label)
            paper = cells[cells["column"] == column]
            px = np.array([ks[label] for label in paper["row"]])
            porder = np.argsort(px)
            # the paper's means, dashed in the same colour, for a visual comparison
            ax.plot(px[porder], paper["paper_mean"].to_numpy()[porder], linestyle="--", linewidth=1,
                    color=line.lines[0].get_color(), alpha=0.6)
            plotted = True
        ax.set_title(table.get("title", panel["table"]), fontsize=9)
        if plotted:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("k (channels); u = E / k")
            ax.set_ylabel("Spearman ρ × 100 (mean ± std over seeds)")
            ax.legend(fontsize=7, title="solid: reproduced; dashed: paper", title_fontsize=7)
        else:
            _not_run(ax, f"{panel['table']}: not run")
    return fig


def ablation_bars(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    scores = _scores(args)
    built = {name: table_builder.build_table(name, tables, scores, args.paper_dir) for name in spec["tables"]}
    panels = spec["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        labels, means, stds, groups = [], [], [], []
        for table_name in spec["tables"]:
            cells = built[table_name]
            for role in ("original", "change"):
                _, half, row = panel[role]
                cell = cells[(cells["half"] == half) & (cells["row"] == row) & (cells["column"] == spec["column"])]
                ok = not cell.empty and cell.iloc[0]["status"] == "ok"
                means.append(cell.iloc[0]["mean"] if ok else math.nan)
                stds.append(cell.iloc[0]["std"] if ok else 0.0)
                labels.append(role)
                groups.append(table_name)
        if all(math.isnan(m) for m in means):
            _not_run(ax, "not run")
        else:
            x = np.arange(len(means))
            colors = ["#9aa5b1" if label == "original" else "#2f7ebc" for label in labels]
            ax.bar(x, np.nan_to_num(means), yerr=stds, color=colors, capsize=3)
            ax.set_xticks(x, [f"{g.split('_')[-1]}\n{label}" for g, label in zip(groups, labels)], fontsize=7)
            for xi, m in zip(x, means):
                if math.isnan(m):
                    ax.text(xi, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=7)
            ax.set_ylabel(f"{spec['column']} (mean ± std over seeds)")
        ax.set_title(panel["title"], fontsize=9)
    return fig


def _measurement(spec_name: str, kind: str, args) -> dict[str, Any]:
    if not args.measurement:
        raise SystemExit(f"--measurement: figure {spec_name!r} is drawn from "
                         f"`strae measure {spec_name}`'s JSON; pass it")
    return measure.load_measurement(args.measurement[0], spec_name, kind)


def node_counts(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.5, 4))
    measured = _measurement(args.figure, "node_counts", args)
    if measured["status"] != "ok":
        _not_run(ax, f"not run ({measured['reason']})")
        return fig
    sizes = measured["batch_sizes"]
    for kind, marker in (("sentential", "o"), ("entangled", "s")):
        nodes = measured["nodes"][kind]
        ax.errorbar(sizes, nodes["mean"], yerr=nodes["std"], marker=marker, capsize=3, label=f"{kind} trees")
    ax.set_xlabel("batch size (sentences)")
    ax.set_ylabel(f"total nodes (mean ± std over {measured['repeats']} batches)")
    ax.set_title(f"Total nodes vs batch size\n{measured['corpus']} corpus; {measured['source']}", fontsize=8)
    ax.legend()
    return fig


def uniformity_alignment(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    measured = _measurement(args.figure, "uniformity_alignment", args)
    by_setting: dict[str, list[dict[str, float]]] = {}
    for point in measured["runs"]:
        by_setting.setdefault(point["setting"], []).append(point)
    if not by_setting:
        _not_run(ax, f"not run ({measured.get('reason', 'no finished runs for these objectives')})")
        return fig
    for label, setting in spec["settings"].items():
        points = by_setting.get(setting)
        if not points:
            continue
        align = np.array([p["alignment"] for p in points])
        unif = np.array([p["uniformity"] for p in points])
        ax.errorbar(align.mean(), unif.mean(), xerr=align.std(), yerr=unif.std(), marker="o", capsize=3,
                    label=f"{label} (n={len(points)})")
    ax.set_xlabel("alignment (lower is better)")
    ax.set_ylabel("uniformity (lower is better)")
    ax.set_title("Uniformity vs alignment per objective (mean ± std over seeds)", fontsize=9)
    ax.legend()
    return fig


def training_curve(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    """One panel per task (top to bottom, as the paper's), x = training sentences read, a line per model (mean ±
    std over the seeds that kept a curve), the paper's final value of the panel's cell dashed."""
    from strae.evaluate import curve

    panels = spec["panels"]
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.5, 3.2 * len(panels)), squeeze=False, sharex=True)
    by_model: dict[str, list[dict[str, Any]]] = {}
    for path in args.curves:
        document = curve.load_curve(path)
        if document["points"]:  # a failed run's curve has none
            by_model.setdefault(document["run"]["model"], []).append(document)
    labels = spec.get("labels") or {}
    for ax, panel in zip(axes[:, 0], panels):
        plotted = False
        for model, documents in sorted(by_model.items()):
            steps = [[(p["sentences_trained"], p["scores"].get(panel["task"])) for p in d["points"]]
                     for d in documents]
            if any(score is None for points in steps for _, score in points):
                continue  # a curve scored without this task
            if len({tuple(x for x, _ in points) for points in steps}) != 1:
                raise SystemExit(f"{args.figure}: the {model} curves were kept at different steps; plot seeds "
                                 "trained with the same --curve-every")
            x = np.array([x for x, _ in steps[0]]) / 1000
            y = np.array([[score for _, score in points] for points in steps])
            ax.errorbar(x, y.mean(axis=0), yerr=y.std(axis=0), marker="o", markersize=3, capsize=2,
                        label=f"{labels.get(model, model)} (n={len(documents)})")
            plotted = True
        paper = panel.get("paper")
        if paper and plotted:
            value = _paper_value(tables, args.paper_dir, *paper)
            if value is not None:
                ax.axhline(value, linestyle="--", linewidth=1, color="0.4",
                           label=f"paper, {paper[1]} ({value:g})")
        ax.set_title(panel.get("title", panel["task"]), fontsize=9)
        if plotted:
            ax.set_ylabel(panel.get("ylabel", "score"))
            ax.legend(fontsize=7)
        else:
            if by_model:
                why = "no curve scored this task"
            elif args.curves:
                why = "every curve given is empty (failed runs)"
            else:
                why = "no curve given (--curves; the workflow keeps seed 0's with multiview.curve.every_sentences)"
            _not_run(ax, f"{panel['task']}: {why}")
    axes[-1, 0].set_xlabel("training sentences read (thousands); the paper: a point an hour, ~139k sentences "
                           "(4.6M in 33 h)", fontsize=8)
    return fig


def _paper_value(tables: dict[str, Any], paper_dir: str, table: str, row: str, column: str) -> float | None:
    """The paper's number in ``table`` (its transcribed CSV under ``paper_dir``) at ``row``, ``column``."""
    path = Path(paper_dir) / tables["tables"][table]["paper_file"]
    cell = table_builder.load_paper_table(path).get(("", row, column))
    if cell is None:
        raise SystemExit(f"{path}: no cell ({row!r}, {column!r})")
    return None if math.isnan(cell["mean"]) else cell["mean"]


KINDS = {
    "ku_curves": ku_curves,
    "ablation_bars": ablation_bars,
    "node_counts": node_counts,
    "uniformity_alignment": uniformity_alignment,
    "training_curve": training_curve,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae figure", description=__doc__.splitlines()[0])
    parser.add_argument("figure", help="a key of `figures:` in the tables file")
    parser.add_argument("--tables", default="config/tables.yaml")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scores", nargs="*", default=[], help="results/scores.csv (figures built from scores)")
    parser.add_argument("--measurement", nargs="*", default=[],
                        help="results/measure/NAME.json (model-based figures: `strae measure NAME`)")
    parser.add_argument("--curves", nargs="*", default=[],
                        help="training-curve JSONs (`strae evaluate --suite senteval --curve`; training_curve)")
    parser.add_argument("--paper-dir", default=None)
    parser.add_argument("--out-png", required=True)
    parser.add_argument("--out-pdf", required=True)
    args = parser.parse_args(argv)
    tables = table_builder.load_tables(args.tables)
    config = table_builder.load_yaml(args.config)
    args.paper_dir = args.paper_dir or config.get("report", {}).get("paper_tables_dir", "paper_tables")
    figures = tables.get("figures", {})
    if args.figure not in figures:
        raise SystemExit(f"{args.tables}: no figure {args.figure!r}; declared: {sorted(figures)}")
    spec = figures[args.figure]
    if spec.get("kind") not in KINDS:
        raise SystemExit(f"{args.tables}: figures.{args.figure}.kind {spec.get('kind')!r}; known: {sorted(KINDS)}")
    fig = KINDS[spec["kind"]](spec, tables, args)
    _save(fig, args.out_png, args.out_pdf)
    print(f"wrote {args.out_png} and {args.out_pdf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
