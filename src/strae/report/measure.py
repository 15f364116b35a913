"""Measurements the tables and figures read (``results/measure/NAME.json``): the one report step that runs models.

``strae measure param_counts --config CFG --out results/measure/param_counts.json`` builds every configured
Self-StrAE/Banyan setting's model (and the RoBERTa baseline's) and counts its non-embedding parameters (Banyan
Table 6, SemEval Table 2 "# Params").

``strae measure FIGURE --tables config/tables.yaml --config CFG --runs TRAIN_JSON... [--corpus-dir DIR]
[--device auto] --out results/measure/FIGURE.json`` measures what a model-based figure of config/tables.yaml plots:

- kind ``node_counts`` (Banyan Fig. 2): total nodes of sentential trees vs one entangled graph as the batch grows,
  with ``StraeModel.node_counts`` on the language's tokenised training corpus (the declared run, or, before it
  has finished, that setting's freshly initialised model; ``source`` says which);
- kind ``uniformity_alignment`` (SemEval Fig. 2): alignment (up vs down of each node) and uniformity of every
  finished run of the declared settings, ``strae.evaluate.geometry`` on ``StraeModel.up_down`` of dev sentences.

A measurement that has nothing to measure (no corpus, no finished run) is written with ``status: "not run"`` and
its ``reason``; the figure then says so. Sampling is seeded, so a rerun on the same device gives the same numbers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from strae import paths
from strae.io import provenance, read_json, write_json

SCHEMA_VERSION = 1
PARAM_COUNTS = "param_counts"
# figure kinds (config/tables.yaml figures.<name>.kind) drawn from a measurement rather than from scores.csv
MEASURED_FIGURE_KINDS = ("node_counts", "uniformity_alignment")
DEFAULT_BATCH_SIZES = [16, 64, 256, 1024]
DEFAULT_GEOMETRY_SENTENCES = 2000


def measurement_names(tables: dict[str, Any]) -> list[str]:
    """Every measurement the declared tables and figures need: parameter counts and the model-based figures."""
    figures = tables.get("figures") or {}
    return [PARAM_COUNTS] + [name for name, spec in figures.items() if spec.get("kind") in MEASURED_FIGURE_KINDS]


def _device_name(device) -> str:
    # torch only when a measurement runs: the workflow imports this module to name its targets, and every snakemake
    # call (a dry run too) would otherwise pay torch's ~2 s import
    from strae.runtime import describe_device

    return describe_device(device)


def _document(name: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "measurement": name, "kind": kind, "status": "ok", **fields,
            "provenance": provenance()}


# ------------------------------------------------------------------------------------------- parameter counts
def _model_settings(config: dict[str, Any]) -> list[tuple[str, str]]:
    """Every configured Self-StrAE/Banyan (model, setting), enabled or not, once each, in the config's order."""
    from strae import plan

    return list(dict.fromkeys((run.model, run.setting) for run in plan.model_runs(config, include_disabled=True)))


def counted_settings(config: dict[str, Any]) -> list[str]:
    """``model/setting`` of every count :func:`param_counts` writes (the workflow's rerun trigger: a setting added
    to the config is counted again, not left a missing "# Params" cell)."""
    baselines = config.get("baselines") or {}
    keys = _model_settings(config) + [(name, baselines[name]["setting"]) for name in ("roberta", "roberta_simcse")
                                      if name in baselines and "roberta" in baselines]
    return sorted(f"{model}/{setting}" for model, setting in keys)


def param_counts(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Non-embedding parameter count of every configured Self-StrAE/Banyan setting (enabled or not)."""
    from strae import plan
    from strae.models.config import ModelConfig
    from strae.models.model import StraeModel

    records = []
    for model, setting in _model_settings(config):
        # vocab size does not change the non-embedding count; a small one keeps this fast
        model_config = ModelConfig.preset(model, vocab_size=16, **plan.parse_setting(setting))
        count = StraeModel(model_config).non_embedding_parameter_count()
        records.append({"model": model, "setting": setting, "non_embedding_parameters": int(count)})
    return records + _baseline_param_counts(config)


def _baseline_param_counts(config: dict[str, Any]) -> list[dict[str, Any]]:
    """RoBERTa-medium (and its SimCSE continuation, same weights) counted from the baseline's own model builder:
    the transformer encoder without embeddings and without the LM head (the Banyan paper's convention)."""
    baselines = config.get("baselines") or {}
    if "roberta" not in baselines:
        return []
    from baselines.roberta.model import RobertaShape, build_mlm_model, non_embedding_parameter_count

    model = build_mlm_model(RobertaShape(n_pieces=16))
    count = int(non_embedding_parameter_count(getattr(model, "roberta", model)))
    return [{"model": name, "setting": baselines[name]["setting"], "non_embedding_parameters": count}
            for name in ("roberta", "roberta_simcse") if name in baselines]


def load_param_counts(path: str | Path | None) -> dict[tuple[str, str], int]:
    """(model, setting) -> count from a ``param_counts`` measurement ({} when no file is given)."""
    if not path or not Path(path).exists():
        return {}
    document = read_json(path)
    if document.get("measurement") != PARAM_COUNTS:
        raise SystemExit(f"{path}: not a parameter-count measurement (measurement: {document.get('measurement')!r}); "
                         f"write it with `strae measure {PARAM_COUNTS}`")
    return {(r["model"], r["setting"]): int(r["non_embedding_parameters"]) for r in document["counts"]}


# ------------------------------------------------------------------------------------------ model-based figures
def _batch(corpus, indices, pad_id, device):
    from strae.data.batching import collate

    ids, lengths = collate(corpus, indices, pad_id)
    return ids.to(device), lengths.to(device)


def _completed_runs(train_jsons: list[str]) -> list[Path]:
    from strae.runs import MODEL_FILE, RunRecord

    done = []
    for path in train_jsons:
        record = RunRecord.from_disk(Path(path).parent)
        if record is not None and record.status == "completed" and (Path(path).parent / MODEL_FILE).exists():
            done.append(Path(path).parent)
    return done


def _run_label(run_dir: Path) -> str:
    return "/".join(run_dir.parts[-4:])


def _load_model(run_dir: Path, device: str):
    from strae.models.encoder import StraeEncoder

    return StraeEncoder(run_dir, device=device).model


def node_counts(name: str, spec: dict[str, Any], args) -> dict[str, Any]:
    from strae.data.tokenized import TokenizedCorpus

    if not args.corpus_dir:
        return _document(name, "node_counts", status="not run", reason="no tokenised corpus (corpus_language)")
    corpus = TokenizedCorpus(args.corpus_dir, "train")
    runs = _completed_runs(args.runs)
    if runs:
        model, source = _load_model(runs[0], args.device), f"trained run {_run_label(runs[0])}"
    else:
        # No finished run: the node counts are still measured on the real corpus, with the declared setting's
        # freshly initialised model (trees from untrained embeddings); the source says so.
        from strae import plan
        from strae.models.config import ModelConfig
        from strae.models.model import StraeModel
        from strae.runtime import seed_everything

        selector = spec["runs"]
        seed_everything(int(selector.get("seed", 0)))
        config = ModelConfig.preset(selector["model"], vocab_size=corpus.vocab_size,
                                    **plan.parse_setting(selector["setting"]))
        model = StraeModel(config).eval().to(args.device)
        source = f"untrained {selector['setting']} (no finished run)"
    rng = np.random.default_rng(spec.get("seed", 0))
    sizes = [b for b in args.batch_sizes if b <= len(corpus)]
    repeats = spec.get("repeats", 3)
    nodes: dict[str, dict[str, list[float]]] = {kind: {"mean": [], "std": []} for kind in ("sentential", "entangled")}
    for size in tqdm(sizes, desc="node counts", unit="batch size"):
        per_kind: dict[str, list[int]] = {kind: [] for kind in nodes}
        for _ in range(repeats):
            indices = rng.choice(len(corpus), size=size, replace=False)
            counts = model.node_counts(*_batch(corpus, indices, model.config.vocab_size, args.device))
            for kind in per_kind:
                per_kind[kind].append(counts[kind])
        for kind in nodes:
            nodes[kind]["mean"].append(float(np.mean(per_kind[kind])))
            nodes[kind]["std"].append(float(np.std(per_kind[kind])))
    return _document(name, "node_counts", source=source, corpus=Path(args.corpus_dir).name, batch_sizes=sizes,
                     repeats=repeats, nodes=nodes, device=_device_name(args.device))


def uniformity_alignment(name: str, spec: dict[str, Any], args) -> dict[str, Any]:
    from strae.data.tokenized import TokenizedCorpus
    from strae.evaluate.geometry import alignment_uniformity

    measured = []
    for run_dir in tqdm(_completed_runs(args.runs), desc="geometry", unit="run"):
        setting = run_dir.parent.name
        if setting not in spec["settings"].values():
            continue
        model = _load_model(run_dir, args.device)
        corpus_dir = args.corpus_dir or paths.tokenized_dir(run_dir.parts[-4], args.resources_dir)
        corpus = TokenizedCorpus(corpus_dir, "dev")
        rng = np.random.default_rng(0)  # same sentences for every run
        n = min(args.geometry_sentences, len(corpus))
        indices = rng.choice(len(corpus), size=n, replace=False)
        up, down = model.up_down(*_batch(corpus, indices, model.config.vocab_size, args.device))
        measured.append({"run": _run_label(run_dir), "setting": setting, "sentences": n,
                         **alignment_uniformity(up.cpu(), down.cpu())})
    if not measured:
        return _document(name, "uniformity_alignment", status="not run",
                         reason="no finished runs for these objectives", runs=[])
    return _document(name, "uniformity_alignment", runs=measured, device=_device_name(args.device))


FIGURE_MEASURES = {"node_counts": node_counts, "uniformity_alignment": uniformity_alignment}


def load_measurement(path: str | Path, name: str, kind: str) -> dict[str, Any]:
    """A figure's measurement, checked to be the one the figure declares."""
    document = read_json(path)
    if document.get("measurement") != name or document.get("kind") != kind:
        raise SystemExit(f"{path}: a measurement of {document.get('measurement')!r} ({document.get('kind')}), "
                         f"not of figure {name!r} ({kind}); rerun `strae measure {name}`")
    return document


def main(argv: list[str] | None = None) -> int:
    from strae.report.tables import load_tables, load_yaml
    from strae.runtime import resolve_device

    parser = argparse.ArgumentParser(prog="strae measure", description=__doc__.splitlines()[0])
    parser.add_argument("name", help=f"{PARAM_COUNTS}, or a model-based figure (a key of `figures:` in --tables)")
    parser.add_argument("--tables", default="config/tables.yaml")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--runs", nargs="*", default=[], help="train.json files of the runs a figure measures")
    parser.add_argument("--corpus-dir", default=None, help="tokenised corpus a figure samples sentences from "
                        "(default: <data.resources_dir>/tokenized/<the run's language>)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available) | cpu | cuda[:N]")
    parser.add_argument("--out", required=True, help="results/measure/NAME.json")
    args = parser.parse_args(argv)
    config = load_yaml(args.config)
    if args.name == PARAM_COUNTS:
        counts = param_counts(config)
        write_json(args.out, _document(PARAM_COUNTS, PARAM_COUNTS, counts=counts))
        for record in counts:
            print(f"{record['model']:>16} {record['setting']:<40} {record['non_embedding_parameters']}")
        return 0
    figures = load_tables(args.tables).get("figures") or {}
    spec = figures.get(args.name)
    if spec is None or spec.get("kind") not in FIGURE_MEASURES:
        measured = [PARAM_COUNTS] + [n for n, s in figures.items() if s.get("kind") in FIGURE_MEASURES]
        raise SystemExit(f"{args.tables}: nothing to measure for {args.name!r}; measurements: {measured}")
    report = config.get("report") or {}
    args.batch_sizes = report.get("node_count_batch_sizes", DEFAULT_BATCH_SIZES)
    args.geometry_sentences = report.get("geometry_pairs", DEFAULT_GEOMETRY_SENTENCES)
    args.resources_dir = paths.resources_dir(config)
    args.device = resolve_device(args.device)
    document = FIGURE_MEASURES[spec["kind"]](args.name, spec, args)
    write_json(args.out, document)
    print(f"wrote {args.out} ({document['status']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
