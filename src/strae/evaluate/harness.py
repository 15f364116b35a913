"""``strae evaluate``: zero-shot evaluation of one encoder on one language's tasks; writes versioned JSON.

    strae evaluate --model SPEC --lang L --variant paper|official --out PATH.json [--tasks a,b]
                   [--encoder-option k=v ...] [--config config/config.yaml] [--batch-size N]

SPEC is a builtin encoder name (``random-token``) or a run directory (``encoder.json`` inside). A run directory
whose training failed (no ``encoder.json``, ``train.json`` status ``failed``) still gets a result file, with
``run.status == "failed"`` and no task scores, and the command exits 0 so the workflow can report the failure
in tables instead of stopping. Layout of the JSON: docs/CONTRACTS.md "Evaluation".
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm.auto import tqdm

from strae import paths
from strae.encode import Encoder, identity_options, load_encoder, runs_a_network
from strae.evaluate import metrics
from strae.evaluate.result import RUNTIME_OPTIONS, EvalResult, EvalSetting, TaskResult, options_label
from strae.evaluate.tasks import (
    PairSet,
    Task,
    TaskCatalog,
    language_tasks,
    load_tasks,
    make_resolver,
    read_pairs,
    tasks_file,
)
from strae.io import check_output_file, provenance, read_json, sha256_file
from strae.runs import ENCODER_MANIFEST, RunRecord
from strae.runtime import configure_float32_matmul, job_device

DEFAULT_CONFIG = "config/config.yaml"


# ----------------------------------------------------------------------------------------------- encoding
def _check_embeddings(array: Any, n: int, method: str, encoder: Encoder) -> np.ndarray:
    array = np.asarray(array)
    # an encoder is third-party code to the harness: a wrong shape would silently misalign pairs and gold scores
    if array.ndim != 2 or array.shape[0] != n:
        raise SystemExit(
            f"encoder {encoder.encoder_id!r}: {method} returned shape {array.shape} for {n} inputs (expected (n, d))"
        )
    return array.astype(np.float32, copy=False)


def encode_texts(encoder: Encoder, texts: Sequence[str], level: str, batch_size: int | None) -> np.ndarray:
    """Encode unique texts once (eval files repeat sentences) and return rows in the order of ``texts``."""
    # object dtype: a numpy str array is fixed-width, as wide as the longest text times every row. One vector per
    # distinct text also makes cosine ties exact: the same sentence on two sides gets bit-identical vectors
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    unique_list = [str(t) for t in unique]
    kwargs = {"batch_size": batch_size} if batch_size else {}
    if level == "word":
        vectors = encoder.encode_words(unique_list, **kwargs)
        method = "encode_words"
    else:
        vectors = encoder.encode_sentences(unique_list, **kwargs)
        method = "encode_sentences"
    vectors = _check_embeddings(vectors, len(unique_list), method, encoder)
    return vectors[inverse.reshape(-1)]


def encode_pairs(encoder: Encoder, pairs: PairSet, level: str, batch_size: int | None) -> tuple[np.ndarray, np.ndarray]:
    # both sides in one call, so a text on the left and the right is encoded once
    both = encode_texts(encoder, pairs.left + pairs.right, level, batch_size)
    return both[: len(pairs)], both[len(pairs):]


# ----------------------------------------------------------------------------------------------- one task
def _display_path(path: Path) -> str:
    # relative to the working directory where possible: result JSONs stay comparable across machines and checkouts
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _task_result(score: metrics.Score, details: dict[str, Any], **fields: Any) -> TaskResult:
    """A scored task or subset: the score's headline and named metrics; ``details`` say how it was scored."""
    return dataclasses.replace(TaskResult.from_dict({**details, **score.to_dict()}), **fields)


def evaluate_task(encoder: Encoder, task: Task, resolve, batch_size: int | None = None) -> TaskResult:
    """Score one task. ``resolve``: registry name (or an inline set's file spec) -> local path."""
    started = time.perf_counter()
    path = resolve(task.file_spec)
    details: dict[str, Any] = {
        "variant": task.variant, "language": task.language, "registry": task.registry or None,
        "origin": task.origin, "format": task.format,
        "data_id": task.data_id, "file": _display_path(path), "sha256": sha256_file(path),
        "aggregation": task.aggregation, "similarity": "cosine", "metric": "spearman_x100",
        "headline_metric": metrics.SPEARMAN, "score_range": list(task.score_range),
    }
    if task.source is not None:
        details["source"] = dict(task.source)
    if task.pooling:
        details["pooling"] = " ".join(task.pooling.split())
    full = read_pairs(path, task.level, task.rows, file_format=task.format)
    subsets: dict[str, TaskResult] = {}
    if task.subsets:
        # Pooled = concatenation of the subset files. Encode per subset, then pool; the year file must be exactly
        # that concatenation, so the pooled score is provably a score of the declared file.
        parts, sub_pairs, sub_scores = [], [], []
        for subset in task.subsets:
            sub_path = resolve(subset.registry)
            pairs = read_pairs(sub_path, task.level, subset.rows, file_format=task.format)
            left, right = encode_pairs(encoder, pairs, task.level, batch_size)
            parts.append((left, right, pairs.gold))
            sub_pairs.append(pairs)
            sub_scores.append(metrics.score_pairs(left, right, pairs.gold))
            subsets[subset.name] = _task_result(sub_scores[-1], {
                "registry": subset.registry, "file": _display_path(sub_path), "sha256": sha256_file(sub_path)})
        joined = PairSet.concatenate(sub_pairs)
        if joined.left != full.left or joined.right != full.right or not np.array_equal(joined.gold, full.gold):
            raise SystemExit(
                f"{path}: is not the concatenation of its subset files ({', '.join(s.registry for s in task.subsets)}) "
                "in config/tasks.yaml order; fix the subsets list or the data"
            )
        result = metrics.score_pooled(parts)
        # SentEval's per-subset mean, labelled, beside the pooled headline (the papers' and MTEB's convention)
        mean, why = metrics.subset_mean(sub_scores)
        result.extra[metrics.SPEARMAN_SUBSET_MEAN] = mean
        if why is not None:
            result.extra_reasons[metrics.SPEARMAN_SUBSET_MEAN] = why
    else:
        left, right = encode_pairs(encoder, full, task.level, batch_size)
        # word level: also the papers' string-ranked protocol, on the file's verbatim gold strings
        gold_text = full.gold_text if task.level == "word" else None
        result = metrics.score_pairs(left, right, full.gold, gold_text=gold_text)
    details["seconds"] = round(time.perf_counter() - started, 3)
    return _task_result(result, details, level=task.level, split=task.split, subsets=subsets)


# ----------------------------------------------------------------------------------------------- whole run
def select_tasks(catalog: TaskCatalog, config: dict[str, Any], language: str, variant: str,
                 only: Sequence[str] | None = None, config_path: str = DEFAULT_CONFIG) -> list[Task]:
    """The language block's tasks for ``variant``, or exactly ``only``: inline sets of the block (``eval_sets``) and
    catalogue tasks (tasks.yaml), validated (:func:`strae.evaluate.tasks.language_tasks`)."""
    return language_tasks(catalog, config, language, variant, list(only) if only else None, config_path)


def failed_run_info(spec: str) -> dict[str, Any] | None:
    """``run_info`` of a run directory whose training failed (train.json status failed, no encoder.json)."""
    run_dir = Path(spec)
    # encoder.json is written last and only by a finished run: with it the run is loadable whatever train.json says
    if not run_dir.is_dir() or (run_dir / ENCODER_MANIFEST).exists():
        return None
    record = RunRecord.from_disk(run_dir)
    if record is None or record.status != "failed":
        return None
    # the same labels a finished run's encoder gives (recipe, overrides, corpus source), so its table rows say how
    # the failed seed was trained
    run = record.run_info()
    run.update(status="failed", failure_reason=record.failure_reason or "training failed (no reason recorded)")
    return run


def _run_record(encoder_info: dict[str, Any], language: str) -> dict[str, Any]:
    run = {"language": language, "model": None, "setting": None, "seed": None, "status": "completed",
           "failure_reason": None}
    run.update({k: v for k, v in encoder_info.items() if v is not None})
    return run


def evaluation_setting(options: dict[str, Any] | None, config: dict[str, Any], model: str | None) -> EvalSetting:
    """The evaluation setting of the encoder options a user (or the workflow) chose. Its label is data: the name the
    config gives that option set (``baselines.<model>.eval_options``, e.g. ``stopword_rm: [stopwords=remove]``),
    else ``key-value_...`` (``options_label``); no options (runtime ones aside) = the plain evaluation. A builtin's
    identity options (random-token's ``dim``) are its run's setting and seed, so no label either."""
    ignored = (*RUNTIME_OPTIONS, *identity_options(model))
    chosen = {key: value for key, value in (options or {}).items() if key not in ignored}
    if not chosen:
        return EvalSetting(label=None, options={})
    named = (((config.get("baselines") or {}).get(model) or {}).get("eval_options")) or {}
    for label, items in named.items():
        if dict(parse_encoder_option(str(item)) for item in items) == chosen:
            return EvalSetting(label=label, options=chosen)
    return EvalSetting(label=options_label(chosen), options=chosen)


def variant_encoder_options(spec: str, variant: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """Encoder options implied by the evaluation variant (recorded in the JSON's provenance like any other).

    A strae run (and a RoBERTa / SimCSE run) pretokenises the text it embeds the way its training corpus was
    (``languages.<lang>.pretokenize``), which suits the official files (raw text). The paper-variant files are the
    reference code's own, and it embedded them exactly as they are - PTB-tokenised STS12-16/SICK/SimLex, but raw
    STS-B - so for that variant such a run embeds them unchanged too (``pretokenize=none``), unless the user passes
    the option explicitly. (A GloVe run trained with ``--pretokenize treebank`` reads them through the treebank
    tokeniser as its training lines were: it leaves their `'s`, `n't` as they are and splits brackets and hyphens as
    training did; its words are whole tokens, not pieces a different split would change.)
    """
    options = dict(options or {})
    if variant == "paper" and "pretokenize" not in options:
        manifest = Path(spec) / "encoder.json"
        if manifest.exists() and read_json(manifest).get("kind") in ("strae", "roberta"):
            options["pretokenize"] = "none"
    return options


def evaluate(spec: str, language: str, variant: str, *, config_path: str = DEFAULT_CONFIG,
             tasks_path: str | None = None, only: Sequence[str] | None = None,
             encoder_options: dict[str, Any] | None = None, batch_size: int | None = None,
             resources_dir: str | None = None, resolve=None, progress: bool = True) -> EvalResult:
    """Evaluate ``spec`` and return the result (not written)."""
    from strae.data.registry import load_config

    config = load_config(config_path)
    data_cfg = config.get("data") or {}
    tasks_path = tasks_path or tasks_file(config)
    catalog = load_tasks(tasks_path)
    tasks = select_tasks(catalog, config, language, variant, only, config_path)
    resources_dir = resources_dir or paths.resources_dir(config)
    if resolve is None:
        resolve = make_resolver(resources_dir, data_cfg.get("registry"))

    # the command as a user would type it (`strae evaluate ...`), not the interpreter's path to the cli module
    extra_prov = {"command": ["strae", "evaluate", *sys.argv[2:]] if sys.argv[1:2] == ["evaluate"] else sys.argv,
                  "config": str(config_path), "tasks_file": str(tasks_path),
                  "tasks_file_sha256": sha256_file(catalog.source), "encoder_options": encoder_options or {}}
    planned = [t.name for t in tasks]
    failed = failed_run_info(spec)
    if failed is not None:  # a result without scores: the tables then show the failed seed instead of hiding it
        return EvalResult(variant=variant, language=language, run=_run_record(failed, language),
                          evaluation=evaluation_setting(encoder_options, config, failed.get("model")),
                          encoder={"encoder_id": spec, "run_dir": spec}, planned_tasks=planned, tasks={},
                          provenance=provenance(**extra_prov, seed=failed.get("seed"), device=None, data_files={}))

    # the evaluation setting is what was chosen; the options the variant implies are provenance only
    given_options = variant_encoder_options(spec, variant, encoder_options)
    extra_prov["encoder_options"] = given_options
    encoder = load_encoder(spec, **given_options)
    extra_prov["float32_matmul"] = configure_float32_matmul()  # scores from fp32 products, as the references'
    described = encoder.describe()
    results: dict[str, TaskResult] = {}
    bar = tqdm(tasks, desc=f"evaluate {language}/{variant}", unit="task", disable=not progress)
    for task in bar:
        bar.set_postfix_str(task.name)
        try:
            results[task.name] = evaluate_task(encoder, task, resolve=resolve, batch_size=batch_size)
        except metrics.NonFiniteEmbeddingError as error:  # the model's fault, named with the task it broke
            raise SystemExit(f"{spec}: task {task.name} ({task.data_id}): {error}; no scores written") from error
    # every file a score was computed from, with its checksum: a result names exactly the data it measured
    data_files = {r.details["data_id"]: r.details["sha256"] for r in results.values()}
    for r in results.values():
        data_files.update({s.details["registry"]: s.details["sha256"] for s in r.subsets.values()})
    run = _run_record(encoder.run_info() or {}, language)
    return EvalResult(
        variant=variant, language=language, run=run,
        evaluation=evaluation_setting(encoder_options, config, run.get("model")), encoder=described,
        planned_tasks=planned, metrics=dict(metrics.METRIC_DEFINITIONS), tasks=results,
        provenance=provenance(**extra_prov, seed=run.get("seed", described.get("seed")),
                              device=described.get("device", "cpu"), batch_size=batch_size, data_files=data_files),
    )


# ----------------------------------------------------------------------------------------------- CLI
def parse_encoder_option(text: str) -> tuple[str, Any]:
    # partition, not split: a value may itself contain "=" (a path, a YAML mapping)
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--encoder-option {text!r}: expected key=value")
    try:
        return key, yaml.safe_load(value) if value else value  # "3" -> 3, "true" -> True, "remove" -> "remove"
    except yaml.YAMLError as error:
        raise SystemExit(f"--encoder-option {text!r}: the value is not YAML ({' '.join(str(error).split())}); quote "
                         "it as YAML would, e.g. key='[a'") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strae evaluate", description=__doc__.split("\n\n")[0],
        epilog="SentEval-style linear probes (MR, CR, ..., SICK-R; the probing tasks): `strae evaluate --suite "
               "senteval ...`, whose own options `strae evaluate --suite senteval --help` lists.")
    parser.add_argument("--model", required=True, help="builtin encoder (random-token) or a run directory")
    parser.add_argument("--lang", required=True, help="key of a language block under `languages:` in the config")
    parser.add_argument("--variant", required=True, choices=["paper", "official"])
    parser.add_argument("--out", default=None,
                        help="output JSON path, written atomically (default: the workflow's path for a run directory, "
                             "results/eval/LANG/MODEL/SETTING[@OPTIONS]/seedN.VARIANT.json; "
                             "results/eval/LANG/NAME.VARIANT.json for a builtin encoder)")
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: the language block's list)")
    parser.add_argument("--encoder-option", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to the encoder loader, e.g. stopwords=remove (repeatable)")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--tasks-file", default=None, help="default: data.tasks of the config")
    parser.add_argument("--resources-dir", default=None, help="default: data.resources_dir of the config")
    parser.add_argument("--batch-size", type=int, default=None, help="inference batch size (never changes scores)")
    parser.add_argument("--device", default=None,
                        help="auto | cpu | cuda[:N] for encoders that run a network (same as --encoder-option "
                             "device=); static-vector encoders (GloVe, random-token) always average on the CPU")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _summary_line(name: str, task: TaskResult) -> str:
    score = "null" if task.score is None else f"{task.score:6.2f}"
    extra = f"  ({task.reason})" if task.reason else ""
    others = [f"{key}={'null' if value is None else f'{value:.2f}'}"
              for key, value in task.scores.items() if key != metrics.SPEARMAN]
    others_text = f"  [{', '.join(others)}]" if others else ""
    return f"{name:<16} {score}  n={task.n_pairs} oov={task.n_oov}{others_text}{extra}"


def default_out_path(model: str, lang: str, variant: str, options: dict[str, Any]) -> Path:
    """Where `strae evaluate` writes without --out: the DAG's path for a run directory (from its train.json run
    block), else results/eval/LANG/NAME.VARIANT.json. Encoder options are part of the name (`@key-value`)."""
    label = options_label(options)
    suffix = f"@{label}" if label else ""
    record = RunRecord.from_disk(model) if Path(model).is_dir() else None
    if record is not None and None not in (record.model, record.setting, record.seed):
        return paths.eval_json(lang, record.model, f"{record.setting}{suffix}", record.seed, variant)
    return paths.encoder_eval_json(lang, f"{Path(model).name or 'model'}{suffix}", variant)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--suite" or a.startswith("--suite=") for a in argv):  # SentEval-style linear probes
        from strae.evaluate import senteval
        return senteval.main(argv)
    args = build_parser().parse_args(argv)
    if args.out is not None:
        check_output_file(args.out)
    only = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    options = dict(parse_encoder_option(o) for o in args.encoder_option)
    # --device is shorthand for the encoder option, so the workflow can pass the scale's device to every encoder
    if args.device is not None:
        if options.get("device", args.device) != args.device:
            raise SystemExit(f"--device {args.device} contradicts --encoder-option device={options['device']}")
        options["device"] = args.device
    requested = options.get("device", "auto")
    if requested in ("auto", "cuda") and runs_a_network(args.model):
        placed = job_device(requested)  # several GPUs: the one the fewest strae jobs hold
        if placed.index is not None:
            options["device"] = str(placed)
    result = evaluate(args.model, args.lang, args.variant, config_path=args.config, tasks_path=args.tasks_file,
                      only=only, encoder_options=options, batch_size=args.batch_size,
                      resources_dir=args.resources_dir, progress=not args.quiet)
    if args.out is None:
        args.out = str(default_out_path(args.model, args.lang, args.variant, options))
    result.to_disk(args.out)
    if result.failed:
        print(f"{args.out}: run failed ({result.run['failure_reason']}); recorded without scores")
    else:
        for name, task in result.tasks.items():
            print(_summary_line(name, task))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
