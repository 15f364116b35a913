"""Where every file the pipeline places or writes lives: one function per kind of file (docs/CONTRACTS.md).

Everything under ``resources/`` (fetched data, prepared corpora, tokenizers, tokenised corpora, parses) is relative
to the config's ``data.resources_dir`` (:func:`resources_dir`); everything under ``results/`` to a results root.
The CLIs' defaults, the baselines and the workflow's rules (workflow/rules/common.smk) all build their paths here,
so a layout change is one edit. Functions take plain strings too, so ``corpus_file("{lang}", "train", RES)`` is
the Snakemake pattern of the file ``corpus_file("en", "train", RES)`` names.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULT_RESOURCES = "resources"
DEFAULT_RESULTS = "results"
SPLITS = ("train", "dev")
# the files `strae tokenize-corpus` writes per split (strae.data.tokenized): ids, offsets, meta
TOKENIZED_SUFFIXES = ("ids.npy", "offsets.npy", "json")


def resources_dir(config: dict[str, Any] | None = None) -> Path:
    """``data.resources_dir`` of a config (``resources`` when the config or the key is absent)."""
    return Path(((config or {}).get("data") or {}).get("resources_dir") or DEFAULT_RESOURCES)


# --------------------------------------------------------------------------------------------- resources/
def data_file(relative: str | Path, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """A fetched file: ``resources/data/<relative>`` (relative = a registry entry's ``path``)."""
    return Path(resources) / "data" / relative


def language_files_manifest(lang: str, part: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """The checksum manifest of one part (``evaluation``, ``multiview``) of the files a language's runs read beyond
    corpus and tokenizer (``strae fetch --language L --part P``, the fetch rules)."""
    return data_file(Path("fetched") / f"{lang}.{part}.json", resources)


def corpus_dir(lang: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """A prepared corpus (``strae prepare-corpus``): ``train.txt``, ``dev.txt``, ``meta.json``."""
    return Path(resources) / "corpora" / lang


def corpus_file(lang: str, split: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    return corpus_dir(lang, resources) / f"{split}.txt"


def corpus_meta(lang: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    return corpus_dir(lang, resources) / "meta.json"


def tokenizer_model(lang: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """A language's SentencePiece model (``strae tokenizer``); its record is the ``.json`` beside it."""
    return Path(resources) / "tokenizers" / f"{lang}.model"


def tokenized_dir(lang: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """A tokenised corpus (``strae tokenize-corpus``; read with ``strae.data.tokenized.TokenizedCorpus``)."""
    return Path(resources) / "tokenized" / lang


def tokenized_file(lang: str, split: str, suffix: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """``tokenized/<lang>/<split>.<suffix>``, suffix one of :data:`TOKENIZED_SUFFIXES`."""
    if suffix not in TOKENIZED_SUFFIXES:
        raise ValueError(f"tokenized file suffix {suffix!r}; one of {TOKENIZED_SUFFIXES}")
    return tokenized_dir(lang, resources) / f"{split}.{suffix}"


def parses_dir(lang: str, name: str, resources: str | Path = DEFAULT_RESOURCES) -> Path:
    """A dependency-parsed corpus (``strae parse-corpus``), one directory per parse setting ``name``."""
    return Path(resources) / "parses" / lang / name


# ----------------------------------------------------------------------------------------------- results/
def runs_root(results: str | Path = DEFAULT_RESULTS) -> Path:
    """Where every run directory lives (a record keeps the same layout for its runs' train.json)."""
    return Path(results) / "runs"


def run_dir(lang: str, model: str, setting: str, seed: int | str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """A run directory (``strae train`` and the baseline trainers); ``train.json`` in it is the DAG's target."""
    return runs_root(results) / lang / model / setting / f"seed{seed}"


def snapshot_dir(lang: str, model: str, setting: str, seed: int | str, step: int | str,
                 results: str | Path = DEFAULT_RESULTS) -> Path:
    """An unfinished run's checkpoint exported at ``step`` (tools/campaign_chunk.sh; ``strae.report.progress``)."""
    return Path(results) / "snapshots" / lang / model / setting / f"seed{seed}" / f"step{step}"


def train_record(lang: str, model: str, setting: str, seed: int | str, results: str | Path = DEFAULT_RESULTS) -> Path:
    return run_dir(lang, model, setting, seed, results) / "train.json"


def eval_json(lang: str, model: str, setting: str, seed: int | str, variant: str, option: str | None = None,
              results: str | Path = DEFAULT_RESULTS) -> Path:
    """An evaluation JSON; an evaluation ``option`` (a baseline's ``eval_options`` key) is ``SETTING@OPTION``."""
    setting_dir = f"{setting}@{option}" if option else setting
    return Path(results) / "eval" / lang / model / setting_dir / f"seed{seed}.{variant}.json"


def encoder_eval_json(lang: str, name: str, variant: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """The evaluation of an encoder that is no run (a builtin such as ``random-token``, or a folder without a
    train.json): ``strae evaluate``'s default ``--out`` for it."""
    return Path(results) / "eval" / lang / f"{name}.{variant}.json"


def multiview_figure_file(name: str, ext: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """A figure of the multi-view paper (drawn by the multi-view workflow, beside its tables; not in figures/, whose
    figures the Self-StrAE / Banyan records keep)."""
    return Path(results) / "multiview" / f"{name}.{ext}"


def curve_json(lang: str, model: str, setting: str, seed: int | str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """A run's training curve (``strae evaluate --suite senteval --curve``): not an evaluation JSON, so not under
    ``eval/`` (where ``strae aggregate`` and the records read every ``seed*.json``)."""
    return Path(results) / "curves" / lang / model / setting / f"seed{seed}.json"


def effective_config(results: str | Path = DEFAULT_RESULTS) -> Path:
    """The merged config (config.yaml + overlays) the workflow passes to every CLI as ``--config``."""
    return Path(results) / "config.effective.yaml"


def scores_csv(results: str | Path = DEFAULT_RESULTS) -> Path:
    """Every planned evaluation's scores (``strae aggregate``): what figures and ``strae record`` read."""
    return Path(results) / "scores.csv"


def table_scores_csv(key: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """The scores of the evaluations one table (config/tables.yaml key) reads: what the table is built from, so
    a table target trains only its own rows' runs (strae.plan.table_eval_targets)."""
    return Path(results) / "scores" / f"{key}.csv"


def measurement_json(name: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """A measurement (``strae measure NAME``) that tables and figures read: parameter counts, node counts, ..."""
    return Path(results) / "measure" / f"{name}.json"


# Where a paper's tables go: the Self-StrAE tables at the top of results/ (the first paper reproduced; the
# targets users type), every other paper's in its own directory.
TOP_LEVEL_PAPER = "selfstrae"


def table_dir(paper: str) -> str:
    """``""`` or ``"<paper>/"``: the part of a table path between ``results/`` and ``table<N>``."""
    return "" if paper == TOP_LEVEL_PAPER else f"{paper}/"


def table_file(key: str, ext: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """The file of a config/tables.yaml table key ``<paper>_table<N>``: ``results/[<paper>/]table<N>.<ext>``."""
    paper, number = split_table_key(key)
    return table_path(table_dir(paper), number, ext, results)


def table_path(directory: str, number: int | str, ext: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    """``results/<directory>table<number>.<ext>``; ``directory`` is :func:`table_dir` of the paper."""
    return Path(results) / f"{directory}table{number}.{ext}"


def split_table_key(key: str) -> tuple[str, str]:
    paper, sep, number = key.rpartition("_table")
    if not sep or not paper or not number:
        raise ValueError(f"table key {key!r}: expected <paper>_table<N>")
    return paper, number


def figures_dir(results: str | Path = DEFAULT_RESULTS) -> Path:
    """The Self-StrAE / Banyan figures (a record copies the folder as it is)."""
    return Path(results) / "figures"


def figure_file(name: str, ext: str, results: str | Path = DEFAULT_RESULTS) -> Path:
    return figures_dir(results) / f"{name}.{ext}"
