"""The papers' figures (PNG + PDF, matplotlib, error bars = std over seeds).

`strae figure NAME --tables config/tables.yaml ...` draws the figure declared under `figures.NAME`:
- `ku_curves`      SemEval Table 2 / Banyan Table 9 as score-vs-k curves, from scores.csv (via the table builder);
- `ablation_bars`  Banyan Fig. 1: original vs change bars of a table's Score column, from scores.csv;
- `node_counts`    Banyan Fig. 2: total nodes of sentential trees vs one entangled graph as the batch grows,
                   measured with StraeModel.node_counts on the language's tokenised training corpus;
- `uniformity_alignment`  SemEval Fig. 2: alignment (up vs down of each node) and uniformity per objective,
                   strae.evaluate.geometry on StraeModel.up_down of each trained seed.
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
from tqdm import tqdm  # noqa: E402

from strae.io import atomic_path  # noqa: E402
from strae.report import tables as table_builder  # noqa: E402


def _not_run(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _save(fig, png: str, pdf: str) -> None:
    fig.tight_layout()
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path, suffix=f".{fmt}") as tmp:
            fig.savefig(tmp, format=fmt, dpi=150)
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


def _load_model(run_dir: Path):
    from strae.models.encoder import StraeEncoder

    return StraeEncoder(run_dir, device="cpu").model


def _completed_runs(train_jsons: list[str]) -> list[Path]:
    from strae.runs import MODEL_FILE, RunRecord

    done = []
    for path in train_jsons:
        record = RunRecord.from_disk(Path(path).parent)
        if record is not None and record.status == "completed" and (Path(path).parent / MODEL_FILE).exists():
            done.append(Path(path).parent)
    return done


def node_counts(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    from strae.data.batching import collate
    from strae.data.tokenized import TokenizedCorpus

    fig, ax = plt.subplots(figsize=(5.5, 4))
    runs = _completed_runs(args.runs)
    if not args.corpus:
        _not_run(ax, "not run (no tokenised corpus)")
        return fig
    corpus = TokenizedCorpus(Path(args.corpus[0]).parent, "train")
    if runs:
        model, source = _load_model(runs[0]), f"trained run {'/'.join(runs[0].parts[-4:])}"
    else:
        # No finished run: the node counts are still measured on the real corpus, with the declared setting's
        # freshly initialised model (trees from untrained embeddings); the title says so.
        from strae import plan
        from strae.models.config import ModelConfig
        from strae.models.model import StraeModel
        from strae.runtime import seed_everything

        selector = spec["runs"]
        seed_everything(int(selector.get("seed", 0)))
        config = ModelConfig.preset(selector["model"], vocab_size=corpus.vocab_size,
                                    **plan.parse_setting(selector["setting"]))
        model, source = StraeModel(config).eval(), f"untrained {selector['setting']} (no finished run)"
    rng = np.random.default_rng(spec.get("seed", 0))
    sizes = [b for b in args.batch_sizes if b <= len(corpus)]
    repeats = spec.get("repeats", 3)
    results = {"sentential": [], "entangled": []}
    for size in tqdm(sizes, desc="node counts", unit="batch size"):
        per_kind = {"sentential": [], "entangled": []}
        for _ in range(repeats):
            ids, lengths = collate(corpus, rng.choice(len(corpus), size=size, replace=False), model.config.vocab_size)
            counts = model.node_counts(ids, lengths)
            for kind in per_kind:
                per_kind[kind].append(counts[kind])
        for kind in results:
            results[kind].append((np.mean(per_kind[kind]), np.std(per_kind[kind])))
    for kind, marker in (("sentential", "o"), ("entangled", "s")):
        mean, std = np.array(results[kind]).T
        ax.errorbar(sizes, mean, yerr=std, marker=marker, capsize=3, label=f"{kind} trees")
    ax.set_xlabel("batch size (sentences)")
    ax.set_ylabel(f"total nodes (mean ± std over {repeats} batches)")
    ax.set_title(f"Total nodes vs batch size\n{Path(args.corpus[0]).parent.name} corpus; {source}", fontsize=8)
    ax.legend()
    return fig


def uniformity_alignment(spec: dict[str, Any], tables: dict[str, Any], args) -> plt.Figure:
    from strae.data.batching import collate
    from strae.data.tokenized import TokenizedCorpus
    from strae.evaluate.geometry import alignment_uniformity

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    runs = _completed_runs(args.runs)
    by_setting: dict[str, list[dict[str, float]]] = {}
    for run_dir in tqdm(runs, desc="geometry", unit="run"):
        setting = run_dir.parent.name
        if setting not in spec["settings"].values():
            continue
        model = _load_model(run_dir)
        corpus_dir = Path(args.corpus[0]).parent if args.corpus else Path(args.resources_dir) / "tokenized" / run_dir.parts[-4]
        corpus = TokenizedCorpus(corpus_dir, "dev")
        rng = np.random.default_rng(0)  # same sentences for every run
        n = min(args.geometry_sentences, len(corpus))
        ids, lengths = collate(corpus, rng.choice(len(corpus), size=n, replace=False), model.config.vocab_size)
        up, down = model.up_down(ids, lengths)
        by_setting.setdefault(setting, []).append(alignment_uniformity(up, down))
    if not by_setting:
        _not_run(ax, "not run (no finished runs for these objectives)")
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


KINDS = {
    "ku_curves": ku_curves,
    "ablation_bars": ablation_bars,
    "node_counts": node_counts,
    "uniformity_alignment": uniformity_alignment,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae figure", description=__doc__.splitlines()[0])
    parser.add_argument("figure", help="a key of `figures:` in the tables file")
    parser.add_argument("--tables", default="config/tables.yaml")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scores", nargs="*", default=[], help="results/scores.csv (figures built from scores)")
    parser.add_argument("--runs", nargs="*", default=[], help="train.json files of the runs a figure measures")
    parser.add_argument("--corpus", nargs="*", default=[], help="tokenised corpus ids (node-count figure)")
    parser.add_argument("--paper-dir", default=None)
    parser.add_argument("--out-png", required=True)
    parser.add_argument("--out-pdf", required=True)
    args = parser.parse_args(argv)
    tables = table_builder.load_yaml(args.tables)
    config = table_builder.load_yaml(args.config)
    report = config.get("report", {})
    args.paper_dir = args.paper_dir or report.get("paper_tables_dir", "paper_tables")
    args.batch_sizes = report.get("node_count_batch_sizes", [16, 64, 256, 1024])
    args.geometry_sentences = report.get("geometry_pairs", 2000)
    args.resources_dir = config.get("data", {}).get("resources_dir", "resources")
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
