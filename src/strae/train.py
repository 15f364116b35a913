"""`strae train`: train Self-StrAE / Banyan on a tokenized corpus, resumably.

One run directory per (language, model, setting, seed). The trainer is built so that a run killed at any
point and restarted with the same command ends with bit-identical weights (CPU, same seed):

- the order of sentences in epoch ``e`` is a pure function of ``(seed, e)`` (not of the global RNG), so a
  resumed run regenerates the same batches and skips the ones already done;
- ``checkpoint.pt`` (written atomically every ``--checkpoint-every-s`` seconds — or every
  ``--checkpoint-every-steps`` steps when given — at every epoch end, and when SIGTERM / SIGINT asks the run to
  stop) holds the model, the optimizer, every RNG state (torch, CUDA, numpy, python), the epoch, the position in
  the epoch and the running epoch statistics;
- dev evaluation runs under ``torch.random.fork_rng`` so it never perturbs the training RNG stream.

Divergence guard: a non-finite loss or gradient norm, or a collapsed encoder at an epoch end (dev sentence
embeddings nearly identical: mean pairwise cosine above ``--collapse-cosine`` or spread below
``--collapse-std``), marks the run ``failed`` in ``train.json`` with the reason and exits 1 (0 with
``--record-failure``, so the workflow can report the failed seed instead of dying). No weights or
``encoder.json`` are written for a failed run, so it can never be averaged in by mistake.

Final weights: the recipe's ``final_weights``. ``best_dev_loss`` (both references: they save the model only when
the dev loss improves) keeps the epoch-end weights with the lowest dev loss, written to ``best.pt`` whenever an epoch
end improves on every earlier one; ``last`` keeps the last step's weights. train.json's ``final_weights`` block says
which epoch's weights ``model.pt`` holds.

Outputs, in order: ``checkpoint.pt`` (during training), ``model.pt`` (final weights + config),
``tokenizer.model`` (copy), ``train.json`` (status completed), ``encoder.json`` (last); the layout, the record
and the checkpoint files are :mod:`strae.runs`', the batches :mod:`strae.data.batching`'s.

The training section reads top-down: :func:`train` is the whole procedure, each step a short helper below it.
"""
from __future__ import annotations

import argparse
import hashlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strae import paths, recipes
from strae.argtypes import finite_float, nonnegative_float, nonnegative_int, positive_float, positive_int
from strae.data.batching import batch_indices, collate, epoch_order
from strae.data.tokenized import TOKENIZER_ORIGIN_KEYS
from strae.io import make_output_dir, provenance, read_json, sha256_file, sha256_json
from strae.models import propagation as passes
from strae.models.config import FUNCTIONS, MODELS, OBJECTIVES, STRUCTURES
from strae.models.fused import fell_back
from strae.models.propagation import PROPAGATION_MODES
from strae.models.scatter import SCATTER_MODES
from strae.runs import (
    BEST_WEIGHTS_FILE,
    CHECKPOINT_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    TRAIN_JSON,
    ProgressFile,
    RunRecord,
    Sessions,
    TrainingFailed,
    checkpoint_to_export,
    copy_tokenizer,
    invalidate_outputs,
    load_checkpoint,
    lock_run_dir,
    save_checkpoint,
    save_weights,
    snapshot_block,
)
from strae.runtime import (
    StopRequest,
    capture_rng_states,
    configure_determinism,
    configure_float32_matmul,
    describe_device,
    job_device,
    placement_fields,
    restore_rng_states,
    seed_everything,
)

# Flags that override the recipe value of the same name (also reachable as --set KEY=VALUE; --lr sets the run's
# objective's learning rate, lr.<objective>).
RECIPE_FLAGS = ("lr", "temperature", "epochs", "batch_size", "clip_grad_norm")


# --------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strae train",
        description="Train Self-StrAE / Banyan on <resources>/tokenized/LANG (resumable: rerun the same command).",
    )
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--structure", choices=STRUCTURES, help="default: the model's paper preset")
    p.add_argument("--functions", choices=FUNCTIONS, help="default: the model's paper preset")
    p.add_argument("--objective", choices=OBJECTIVES, help="default: the model's paper preset")
    p.add_argument("--k", type=positive_int, help="number of channels (default: preset)")
    p.add_argument("--u", type=positive_int, help="channel size (default: preset)")
    p.add_argument("--recipe", choices=recipes.names(),
                   help="training recipe from strae/recipes.yaml (default: --model's own, i.e. its reference code)")
    p.add_argument("--set", dest="recipe_set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one recipe value (YAML syntax; lr.<objective>=..., gate_init=[0.6,0.9]); "
                   "repeatable; recorded in train.json")
    p.add_argument("--temperature", type=finite_float,
                   help="override the recipe's contrastive tau (logits = cos * exp(tau))")
    p.add_argument("--lr", type=positive_float,
                   help="override the recipe's Adam learning rate for this run's objective")
    p.add_argument("--epochs", type=positive_int, help="override the recipe's epochs")
    p.add_argument("--batch-size", type=positive_int, help="override the recipe's batch size")
    p.add_argument("--clip-grad-norm", type=nonnegative_float, help="override the recipe's max gradient norm (0 = off)")
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (only used for paths/labels)")
    p.add_argument("--seed", type=nonnegative_int, required=True, help="model seed (init, dropout, batch order)")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--resources-dir", type=Path, default=Path(paths.DEFAULT_RESOURCES),
                   help="the config's data.resources_dir: where --data-dir and --tokenizer default to")
    p.add_argument("--data-dir", type=Path, help="tokenized corpus directory (default <resources>/tokenized/LANG)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer model (default <resources>/tokenizers/LANG.model)")
    p.add_argument("--setting", help="setting label (default: ModelConfig.setting_name())")
    p.add_argument("--device", default="auto", help="auto (CUDA when available) | cpu | cuda[:N]")
    p.add_argument("--induction-kernel", default="auto", choices=("auto", "torch", "triton"),
                   help="engine of the no-grad tree induction: auto (the fused Triton kernel on CUDA when triton "
                   "imports and passes a first-use check, else torch) | torch | triton; recorded in train.json")
    p.add_argument("--scatter", default="index_add", choices=SCATTER_MODES,
                   help="how the message passing sums rows: torch's index_add, or index structures sorted once on "
                   "the host (models/scatter.py: no sort per call under CUDA's deterministic mode; GPU speed not "
                   "measured yet); the same numbers either way; recorded in train.json")
    p.add_argument("--propagation", default="auto", choices=PROPAGATION_MODES,
                   help="how the up and down passes are differentiated: autograd over each level's ops, or one "
                   "function with a hand-derived backward (models/propagation.py; on CUDA each tree level is one "
                   "Triton kernel); same forward numbers, gradients equal to rounding. auto (default): handwritten "
                   "where the induction runs Triton (CUDA), autograd elsewhere; recorded in train.json")
    p.add_argument("--nondeterministic", action="store_true",
                   help="on CUDA, allow non-deterministic (atomics) kernels; default: deterministic, recorded")
    p.add_argument(
        "--record-failure", action="store_true", help="exit 0 after recording a diverged/collapsed run as failed"
    )
    p.add_argument("--max-steps", type=positive_int, help="stop (and finish the run) after this many optimizer steps")
    # Seconds, not steps, by default: a checkpoint (~150 MB for Banyan with Adam's moments, ~0.4 s to write) every
    # 100 steps was 0.2% of a CPU run's time (~2 s/step) but ~15% of a GPU run's (~0.03 s/step).
    p.add_argument("--checkpoint-every-s", type=nonnegative_float, default=120.0,
                   help="seconds between mid-epoch checkpoints (0 = only at epoch ends; default 120); a stop by "
                   "SIGTERM / SIGINT checkpoints where the run stands anyway")
    p.add_argument("--checkpoint-every-steps", type=nonnegative_int,
                   help="a mid-epoch checkpoint every N steps instead of by time (0 = only at epoch ends)")
    p.add_argument("--dev-max-sentences", type=positive_int,
                   help="evaluate dev loss on the first N dev sentences only")
    p.add_argument("--collapse-sentences", type=positive_int, default=1024,
                   help="dev sentences used by the collapse check")
    # 0.999, not 0.99: freshly initialised / anisotropic models legitimately reach 0.99 (all roots share a large
    # common component) while still ranking pairs; a collapsed model sits at ~1.0. Values > 1 disable the check.
    p.add_argument("--collapse-cosine", type=finite_float, default=0.999,
                   help="fail if mean pairwise cosine exceeds this")
    p.add_argument("--collapse-std", type=finite_float, default=1e-6, help="fail if the embeddings' mean std is below")
    p.add_argument("--restart", action="store_true", help="discard an existing checkpoint/failed state; start over")
    p.add_argument("--restart-stale", action="store_true",
                   help="discard a checkpoint written with other settings, or trained past this command's epochs / "
                   "steps, and train from scratch instead of refusing it (the workflow's train rule: Snakemake "
                   "reruns a job whose settings changed, e.g. an edited recipe, after deleting its train.json)")
    p.add_argument(
        "--export-checkpoint",
        type=Path,
        metavar="DIR",
        help="do not train: export OUT/checkpoint.pt (a mid-training state) as a loadable run directory DIR; its "
        "train.json says status 'running' and carries a 'snapshot' block (epoch, step)",
    )
    p.add_argument("--progress-interval", type=float, default=None, help="tqdm refresh seconds (default 1 tty/30)")
    return p


# ------------------------------------------------------------------------------------------------- setup
@dataclass
class TrainSettings:
    """Everything that defines the optimisation, resolved from the CLI and the paper defaults."""

    model: str
    language: str
    seed: int
    setting: str
    recipe: str
    lr: float
    epochs: int
    batch_size: int
    clip_grad_norm: float
    max_steps: int | None
    checkpoint_every_steps: int | None  # None: by time (checkpoint_every_s)
    checkpoint_every_s: float
    data_dir: str
    tokenizer: str
    optimizer: str = "adam"
    extra: dict[str, Any] = field(default_factory=dict)


def _import_model_classes():
    from strae.models.config import ModelConfig
    from strae.models.model import StraeModel

    return ModelConfig, StraeModel


def _load_corpora(data_dir: Path):
    from strae.data.tokenized import TokenizedCorpus

    for split in ("train", "dev"):
        for suffix in (".ids.npy", ".offsets.npy", ".json"):
            path = data_dir / f"{split}{suffix}"
            if not path.exists():
                raise SystemExit(f"{path}: missing; run `strae tokenize-corpus` for this language first")
    train = TokenizedCorpus(data_dir, "train")
    dev = TokenizedCorpus(data_dir, "dev")
    if len(train) == 0:
        raise SystemExit(f"{data_dir}/train.*: the training split is empty")
    if len(dev) == 0:
        raise SystemExit(f"{data_dir}/dev.*: the dev split is empty (needed for dev loss and the collapse check)")
    # the two splits must come from one tokenize-corpus run: a dev split left from another tokenizer or
    # pretokenisation (an interrupted rerun) would drive the dev loss, the weights kept and the collapse check
    unset = {"pretokenize": "none"}  # what a corpus tokenised before the key existed had
    for key in ("vocab_size", "tokenizer_sha256", "pretokenize", "length_filter", "corpus_meta_sha256"):
        ours, theirs = (split.meta.get(key, unset.get(key)) for split in (train, dev))
        if ours is not None and theirs is not None and ours != theirs:
            raise SystemExit(f"{data_dir}: train.json and dev.json differ in {key} ({ours!r} vs {theirs!r}): the "
                             "splits come from different runs; re-run `strae tokenize-corpus`")
    return train, dev


def _check_tokenizer(tokenizer_path: Path, data_dir: Path, vocab_size: int) -> str:
    """The copied tokenizer must be the one the corpus was tokenised with (else encoding is garbage)."""
    if not tokenizer_path.exists():
        raise SystemExit(f"{tokenizer_path}: tokenizer model not found (pass --tokenizer or run `strae tokenizer`)")
    digest = sha256_file(tokenizer_path)
    meta_path = data_dir / "train.json"
    meta = read_json(meta_path)
    nested = meta.get("tokenizer")
    recorded = meta.get("tokenizer_sha256") or (nested.get("sha256") if isinstance(nested, dict) else None)
    if recorded and recorded != digest:
        raise SystemExit(
            f"{tokenizer_path}: sha256 {digest[:12]} differs from the tokenizer recorded in {meta_path} "
            f"({recorded[:12]}); pass the tokenizer the corpus was tokenised with"
        )
    from strae.data.tokenizer import load_tokenizer

    tok_vocab = load_tokenizer(tokenizer_path).vocab_size
    if tok_vocab != vocab_size:
        raise SystemExit(f"{tokenizer_path}: vocab_size {tok_vocab} != corpus vocab_size {vocab_size} ({data_dir})")
    return digest


def resolve_recipe(args: argparse.Namespace, objective: str) -> recipes.ResolvedRecipe:
    """--recipe (default: the model's own) + --set / single-value flags, each override recorded with its flag."""
    overrides: list[tuple[str, object, str]] = []
    for item in args.recipe_set:
        try:
            overrides.append(recipes.parse_set(item, f"strae train --set {item}"))
        except ValueError as error:
            raise SystemExit(f"strae train: {error}") from error
    for key in RECIPE_FLAGS:
        value = getattr(args, key)
        if value is not None:
            flag = "--" + key.replace("_", "-")
            overrides.append((f"lr.{objective}" if key == "lr" else key, value, f"strae train {flag} {value}"))
    try:
        return recipes.resolve(args.recipe or args.model, overrides)
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error


def resolve(args: argparse.Namespace):
    """CLI -> (ModelConfig, ResolvedRecipe, TrainSettings, corpora, tokenizer sha)."""
    data_dir = args.data_dir or paths.tokenized_dir(args.lang, args.resources_dir)
    tokenizer_path = args.tokenizer or paths.tokenizer_model(args.lang, args.resources_dir)
    train, dev = _load_corpora(data_dir)
    tokenizer_sha = _check_tokenizer(tokenizer_path, data_dir, train.vocab_size)
    config = _model_config(args, train.vocab_size)
    resolved = resolve_recipe(args, config.objective)
    recipe = resolved.recipe
    if recipe.decoder_child_order == "node_id" and config.structure != "sentential":
        raise SystemExit(f"strae train: recipe {recipe.name!r} has decoder_child_order node_id (the Self-StrAE "
                         f"reference decoder, sentential trees only); with --structure {config.structure} pass "
                         "--set decoder_child_order=position")
    settings = TrainSettings(
        model=args.model, language=args.lang, seed=args.seed, setting=args.setting or config.setting_name(),
        recipe=recipe.name, lr=recipe.lr_for(config.objective), epochs=recipe.epochs, batch_size=recipe.batch_size,
        clip_grad_norm=recipe.clip_grad_norm, max_steps=args.max_steps,
        checkpoint_every_steps=args.checkpoint_every_steps, checkpoint_every_s=args.checkpoint_every_s,
        data_dir=str(data_dir), tokenizer=str(tokenizer_path),
    )
    return config, resolved, settings, (train, dev), tokenizer_sha


def _model_config(args: argparse.Namespace, vocab_size: int):
    """The model's paper preset with the architecture flags given on the command line."""
    ModelConfig, _ = _import_model_classes()
    architecture = {
        key: getattr(args, key) for key in ("structure", "functions", "objective", "k", "u")
        if getattr(args, key) is not None
    }
    try:
        return ModelConfig.preset(args.model, vocab_size=vocab_size, **architecture)
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error


# the recipe keys that pick the kept weights (fingerprinted apart: checkpoints written before 2026-11-29 lack them)
SELECTION_KEYS = ("final_weights", "dev_loss_average")


def fingerprint(config_dict: dict, settings: TrainSettings, data_meta: dict,
                recipe: recipes.Recipe | None = None, dev_meta: dict | None = None,
                dev_max_sentences: int | None = None) -> dict[str, Any]:
    """What must not change between a checkpoint and its resumption (epochs / max-steps may grow). The dev split
    and how much of it is read pick the weights kept (best dev loss) and drive the collapse check: part of it too
    (a checkpoint written before they were has none, and is compared without them)."""
    # epochs may grow; final_weights (which epoch's weights are kept) and dev_loss_average (how the dev loss that
    # picks them is averaged) never change the trajectory, but they must hold for the whole run: dev losses of
    # earlier epochs averaged another way would be ranked against these, and epochs trained under `last` wrote no
    # best.pt for a later `best_dev_loss` to pick from ("selection", apart from the recipe)
    values = {} if recipe is None else recipe.values()
    recipe_values = {k: v for k, v in values.items() if k not in ("epochs", *SELECTION_KEYS)}
    return {
        "model_config": without_empty_fields(config_dict),
        "recipe": recipe_values,
        "selection": {k: values[k] for k in SELECTION_KEYS if k in values},
        "seed": settings.seed,
        "lr": settings.lr,
        "batch_size": settings.batch_size,
        "clip_grad_norm": settings.clip_grad_norm,
        "optimizer": settings.optimizer,
        "data": sha256_json(_stable_data_fields(data_meta)),
        "dev": {"data": sha256_json(_stable_data_fields(dev_meta or {})), "max_sentences": dev_max_sentences},
    }


def without_empty_fields(config_dict: dict) -> dict:
    """Config fields holding an empty container carry no setting; dropping them keeps checkpoints comparable
    (and loadable) when the engine adds or removes such a field."""
    return {key: value for key, value in config_dict.items() if value not in ({}, [])}


def _stable_data_fields(data_meta: dict) -> dict:
    """The content-defining part of a tokenized split's meta (not its timestamps or timings), so a corpus
    re-tokenised identically still matches a checkpoint while a different corpus does not."""
    keys = ("vocab_size", "pad_id", "n_sentences", "n_tokens", "tokenizer_sha256", "text_sha256", "length_filter",
            "pretokenize", "corpus_source")
    fields = {key: data_meta.get(key) for key in keys}
    # the same raw text tokenised with and without pretokenisation is different data; a corpus tokenised before
    # the setting existed was not pretokenised
    fields["pretokenize"] = fields["pretokenize"] or "none"
    return fields


# ---------------------------------------------------------------------------------------- checkpointing
def engine_source_sha256() -> str:
    """Hash of the model engine's source files: recorded per session, so a resumed run that picked up engine
    edits (e.g. a faster implementation) says so in train.json instead of hiding it."""
    import strae.models as models_package
    import strae.objectives as objectives_module  # a package: one module per objective

    digest = hashlib.sha256()
    files = [path for package in (models_package, objectives_module)
             for path in sorted(Path(package.__file__).parent.glob("*.py"))]
    for path in files:
        if path.name != "encoder.py":
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _load_weights(module, state_dict, checkpoint_path: Path, what: str) -> None:
    try:
        module.load_state_dict(state_dict)
    except (RuntimeError, ValueError, KeyError) as error:
        raise SystemExit(
            f"{checkpoint_path}: its {what} does not fit the current model code (the engine changed since it was "
            f"written: {str(error).splitlines()[-1].strip()}); pass --restart to train from scratch"
        ) from error


def _diff_keys(a: dict, b: dict) -> list[str]:
    return [key for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


# ----------------------------------------------------------------------------------------- evaluation
def _evaluate_dev(model, dev, batch_size: int, pad_id: int, device, max_sentences: int | None,
                  average: str = "batches") -> dict[str, float]:
    """Mean dev loss (and metrics); eval mode, no grad, training RNG untouched. ``average`` (recipe
    ``dev_loss_average``): "batches" = mean of the batches' means, as both references (the last, shorter batch
    counts as much as a full one); "sentences" = weighted by each batch's sentences."""
    n = len(dev) if max_sentences is None else min(len(dev), max_sentences)
    totals: dict[str, float] = {}
    weights = 0
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        model.eval()
        for indices in batch_indices(np.arange(n), batch_size):
            ids, lengths = collate(dev, indices, pad_id)
            loss, metrics = model.loss(ids.to(device), lengths.to(device))
            values = {"loss": float(loss.detach()), **{k: float(v) for k, v in metrics.items()}}
            weight = 1 if average == "batches" else len(indices)
            for key, value in values.items():
                totals[key] = totals.get(key, 0.0) + value * weight
            weights += weight
        model.train()
    return {key: value / weights for key, value in totals.items()}


def collapse_statistics(embeddings: torch.Tensor) -> dict[str, float]:
    """Mean pairwise cosine (off-diagonal) and mean per-dimension std of a set of sentence embeddings."""
    x = embeddings.double()
    n = x.shape[0]
    unit = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    summed = unit.sum(dim=0)
    # sum_{i != j} cos_ij = |sum_i u_i|^2 - sum_i |u_i|^2 ; rows of norm 0 count as 0 similarity
    self_sim = (unit * unit).sum()
    mean_cos = float((summed @ summed - self_sim) / max(n * (n - 1), 1))
    std = float(x.std(dim=0, unbiased=False).mean()) if n > 1 else 0.0
    centroid = x.mean(dim=0)
    # spread around the centroid relative to the centroid's size: ~0 when every sentence gets the same vector
    spread = float((x - centroid).norm(dim=1).mean() / centroid.norm().clamp_min(1e-12))
    return {"mean_pairwise_cosine": mean_cos, "mean_std": std, "relative_spread": spread, "n_sentences": n}


def _collapse_check(model, dev, batch_size, pad_id, device, n_sentences, max_cos, min_std) -> dict[str, float]:
    n = min(len(dev), n_sentences)
    chunks = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        model.eval()
        for indices in batch_indices(np.arange(n), batch_size):
            ids, lengths = collate(dev, indices, pad_id)
            chunks.append(model.encode(ids.to(device), lengths.to(device)).float().cpu())
        model.train()
    embeddings = torch.cat(chunks)
    if not torch.isfinite(embeddings).all():
        raise TrainingFailed("collapse check: non-finite dev sentence embeddings")
    stats = collapse_statistics(embeddings)
    if stats["mean_pairwise_cosine"] > max_cos:
        raise TrainingFailed(
            f"collapse: mean pairwise cosine of {n} dev sentence embeddings is "
            f"{stats['mean_pairwise_cosine']:.4f} > {max_cos}"
        )
    if stats["mean_std"] < min_std:
        raise TrainingFailed(f"collapse: dev sentence embeddings have mean std {stats['mean_std']:.3g} < {min_std}")
    return stats


# ---------------------------------------------------------------------------------------------- outputs
def new_record(job: Job, history: list, timings: dict, **blocks: Any) -> RunRecord:
    """This run's train.json: labels, the architecture and training settings, the recipe, and ``blocks``."""
    settings = job.settings
    return RunRecord(
        language=settings.language, model=settings.model, setting=settings.setting, seed=settings.seed,
        config={"model": job.config.to_dict(),
                "training": {k: v for k, v in vars(settings).items() if k != "extra"}},
        history=history, timings=timings, blocks={"recipe": job.resolved.record(), **blocks},
    )


def data_block(job: Job) -> dict[str, Any]:
    """train.json ``data``. pretokenize: what the encoder must apply to text it embeds (the corpus' own; "none"
    for corpora tokenised before the setting existed); corpus_source: which source the prepared corpus came from."""
    meta = job.data_meta
    return {"dir": job.settings.data_dir, "train_sentences": len(job.train_corpus),
            "train_tokens": int(job.train_corpus.n_tokens), "dev_sentences": len(job.dev_corpus),
            "tokenizer_sha256": job.tokenizer_sha, "pretokenize": meta.get("pretokenize", "none"),
            "corpus_source": meta.get("corpus_source"), "text_sha256": meta.get("text_sha256"),
            # bpemb | sentencepiece, and why a BPEmb model was replaced (offline); absent for older corpora
            **{key: meta[key] for key in TOKENIZER_ORIGIN_KEYS if key in meta}}


def write_outputs(job: Job, dest: Path, model: torch.nn.Module, record: RunRecord) -> None:
    """model.pt, tokenizer copy, train.json, then encoder.json last (the 'run is usable' mark)."""
    from strae.encode import write_encoder_manifest

    settings = job.settings
    save_weights(dest, {"config": job.config.to_dict(), "recipe": job.resolved.record(),
                        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}})
    copy_tokenizer(Path(settings.tokenizer), dest, job.tokenizer_sha)
    record.to_disk(dest)
    write_encoder_manifest(
        dest, "strae", model=settings.model, setting=settings.setting, seed=settings.seed,
        language=settings.language, weights=MODEL_FILE, tokenizer=TOKENIZER_FILE,
        model_sha256=sha256_file(dest / MODEL_FILE), tokenizer_sha256=job.tokenizer_sha,
        pretokenize=job.data_meta.get("pretokenize", "none"),
    )


# --------------------------------------------------------------------------------------------- training
def train(argv: list[str] | None = None, *, step_callback: Callable[[int], None] | None = None) -> int:
    """Run ``strae train``. ``step_callback(global_step)`` is called after each optimizer step (and after any
    checkpoint of that step); tests use it to interrupt a run the way a kill would. SIGTERM / SIGINT stop the run
    at the next step boundary with a checkpoint there (exit status 128 + signal; the same command resumes)."""
    job = prepare(build_parser().parse_args(argv))
    if job.args.export_checkpoint is not None:
        return export_checkpoint(job)
    make_output_dir(job.out)
    lock = lock_run_dir(job.out, "strae train")  # noqa: F841 - held until this function returns
    previous = previous_status(job)
    if previous == "failed":
        return 0 if job.args.record_failure else 1
    state = build_state(job)
    if resume(job, state) == "discarded":
        previous = None  # its train.json went with it
    refuse_orphaned_record(job, state, previous)
    refuse_past_the_request(job, state)
    if already_completed(job, state, previous):
        return 0
    record = start_session(job, state)
    with StopRequest() as state.stop:
        try:
            while state.epoch < job.settings.epochs and not steps_exhausted(job, state):
                outcome = run_epoch(job, state, record, step_callback)
                if outcome == "stopped" or state.stop.requested:
                    return stopped(job, state)
                if outcome == "max_steps":
                    break  # --max-steps ended the epoch early
            entered = bool(state.history) and state.history[-1]["global_step"] == state.global_step
            if steps_exhausted(job, state) and state.epoch_sums and not entered:
                # stopped by a signal at its --max-steps step, before that epoch's dev evaluation and history
                # entry: they are made now, as an uninterrupted run made them (a partial epoch's sums outlive its
                # entry, for the budget that completes it: `entered` tells the two apart)
                end_epoch(job, state, record, state.batch_in_epoch < len(epoch_batches(job, state.epoch)),
                          time.perf_counter())
        except TrainingFailed as failure:
            state.sessions.close(state.global_step, "failure")
            return record.fail(job.out, str(failure), job.args.record_failure)
        return finish(job, state, record)


@dataclass
class Job:
    """One resolved ``strae train`` command: what to train, on which data, where."""

    args: argparse.Namespace
    config: Any  # strae.models.config.ModelConfig
    resolved: recipes.ResolvedRecipe
    settings: TrainSettings
    train_corpus: Any  # strae.data.tokenized.TokenizedCorpus
    dev_corpus: Any
    tokenizer_sha: str
    data_meta: dict[str, Any]  # the tokenized training split's meta (train.json beside the ids)
    device: torch.device
    fingerprint: dict[str, Any]  # what a checkpoint must have been written with to be resumed

    @property
    def out(self) -> Path:
        return self.args.out


# What checkpoint.pt saves of the State besides the model and optimizer, in this order.
PROGRESS_KEYS = ("epoch", "batch_in_epoch", "global_step", "history", "timings", "epoch_sums")


@dataclass
class State:
    """The model, its optimizer and where training stands: what checkpoint.pt holds."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    engine_sha: str
    determinism: dict[str, Any]
    induction_kernel: dict[str, Any]  # KernelChoice.record(): requested, used, reason (not in the fingerprint)
    float32_matmul: dict[str, str] = field(default_factory=dict)  # runtime.configure_float32_matmul's record
    propagation: dict[str, Any] = field(default_factory=dict)  # mode + which engine runs its levels (not fingerprinted)
    epoch: int = 0  # the position of the next batch: its epoch ...
    batch_in_epoch: int = 0  # ... and its index in that epoch's order
    global_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=lambda: {"train_seconds": 0.0, "dev_seconds": 0.0,
                                                              "sessions": []})
    epoch_sums: dict[str, float] = field(default_factory=dict)
    sessions: Sessions = field(default_factory=Sessions)  # timings["sessions"] is its list (strae.runs.Sessions)
    last_checkpoint: float = field(default_factory=lambda: time.monotonic())  # the last checkpoint (or start)
    progress: ProgressFile | None = None  # progress.json, made at the session's first step
    stop: StopRequest = field(default_factory=StopRequest)  # set by SIGTERM / SIGINT while train() runs

    def __post_init__(self) -> None:
        self.params = [p for p in self.model.parameters() if p.requires_grad]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def prepare(args: argparse.Namespace) -> Job:
    """Resolve the command: model config, recipe, settings, corpora, device and the checkpoint fingerprint."""
    config, resolved, settings, (train_corpus, dev_corpus), tokenizer_sha = resolve(args)
    data_meta = read_json(Path(settings.data_dir) / "train.json")
    dev_meta = read_json(Path(settings.data_dir) / "dev.json")
    device = job_device(args.device)  # on a box with several GPUs: the one the fewest strae jobs hold
    expected = fingerprint(config.to_dict(), settings, data_meta, resolved.recipe, dev_meta, args.dev_max_sentences)
    return Job(args, config, resolved, settings, train_corpus, dev_corpus, tokenizer_sha, data_meta, device,
               expected)


def previous_status(job: Job) -> str | None:
    """The status train.json already records (None after --restart, which also discards the checkpoint)."""
    if job.args.restart:
        discard_training(job)
        return None
    previous = RunRecord.from_disk(job.out)
    # A divergence is deterministic (same seed, same data): a failed run stays failed until --restart.
    if previous is not None and previous.status == "failed":
        log(f"{job.out}/train.json: run already recorded as failed: {previous.failure_reason} "
            "(pass --restart to train again from scratch)")
    return previous.status if previous is not None else None


def build_state(job: Job) -> State:
    """The seeded, freshly initialised model and its optimizer (deterministic kernels unless told otherwise)."""
    _, StraeModel = _import_model_classes()
    engine_sha = engine_source_sha256()
    determinism = configure_determinism(job.device, not job.args.nondeterministic)
    float32_matmul = configure_float32_matmul()
    seed_everything(job.settings.seed)
    try:
        model = StraeModel(job.config, job.resolved.recipe, induction_kernel=job.args.induction_kernel,
                           scatter=job.args.scatter, propagation=job.args.propagation).to(job.device)
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error
    try:  # which induction engine runs (auto: the fused kernel on CUDA when it passes its first-use check)
        induction_kernel = model.kernel_choice(job.device).record()
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error
    optimizer = torch.optim.Adam(model.parameters(), lr=job.settings.lr)
    # the handwritten passes' level engine (torch, or the Triton kernels where the induction runs Triton)
    propagation = {"requested": job.args.propagation, "mode": model.propagation_mode(job.device),
                   "levels": model.levels_choice(job.device).record()}
    if propagation["levels"]["used"] == "triton":  # the narrow top levels' shared launch (0: a launch per level)
        propagation["level_tail_nodes"] = passes.level_tail_nodes(model.functions)
    for engine, choice in (("induction", induction_kernel), ("levels", propagation["levels"])):
        if fell_back(choice):
            # correct but slow (the torch induction is ~25x slower on an H100): a time-boxed GPU chunk must see it
            log(f"warning: {job.device.type}: the Triton {engine} engine fell back to torch ({choice['reason']}); "
                "the run is correct but much slower; recorded in train.json provenance")
    return State(model, optimizer, engine_sha, determinism, induction_kernel, float32_matmul=float32_matmul,
                 propagation=propagation)


def resume(job: Job, state: State) -> str | None:
    """Continue from checkpoint.pt when there is one: weights, optimizer, RNG states and position ("resumed");
    "discarded" when --restart-stale threw it away (discard_stale_checkpoint); None without one. Loaded once."""
    path = job.out / CHECKPOINT_FILE
    if not path.exists():
        return None
    saved = load_checkpoint(path, "delete it or pass --restart")
    if job.args.restart_stale and discard_stale_checkpoint(job, saved):
        return "discarded"
    check_fingerprint(job, saved, path, "use another --out or pass --restart to discard it")
    _load_weights(state.model, saved["model"], path, "model state")
    _load_weights(state.optimizer, saved["optimizer"], path, "optimizer state")
    if saved.get("engine_sha256") not in (None, state.engine_sha):
        log(f"warning: the model engine's source changed since {path} was written; resuming with the current "
            "code (recorded in train.json timings.sessions)")
    restore_rng_states(saved["rng"], job.device)
    for key in PROGRESS_KEYS:
        setattr(state, key, saved[key])
    state.sessions = Sessions.from_checkpoint(state.timings.get("sessions"), state.global_step)
    log(state.sessions.resume_report(f"resuming {job.out} at epoch {state.epoch + 1}, batch {state.batch_in_epoch}, "
                                     f"step {state.global_step}", map(epoch_line, state.history)))
    return "resumed"


def discard_training(job: Job) -> None:
    """What a run directory holds of a training (checkpoint, best weights, completion mark): --restart's and
    --restart-stale's clean slate."""
    (job.out / CHECKPOINT_FILE).unlink(missing_ok=True)
    (job.out / BEST_WEIGHTS_FILE).unlink(missing_ok=True)
    invalidate_outputs(job.out)


def discard_stale_checkpoint(job: Job, saved: dict[str, Any]) -> bool:
    """--restart-stale: a checkpoint this command would refuse (other settings, or trained past its epochs / steps)
    is deleted with best.pt and the run's outputs, and the run starts over, said on stderr. Anything else about the
    directory is checked as without the flag: a train.json naming another run (language, model, setting, seed: a
    mistyped --out) keeps everything, and the command is refused as without it. ``saved``: the loaded checkpoint."""
    path = job.out / CHECKPOINT_FILE
    if _other_runs_labels(job):
        return False
    changed = fingerprint_changes(job, saved, path)
    reason = (f"written with different settings ({', '.join(changed)})" if changed else
              past_the_request(job, saved["epoch"], saved["batch_in_epoch"], saved["global_step"]))
    if reason is None:
        return False
    log(f"warning: {path}: {reason}; discarded with {BEST_WEIGHTS_FILE} and the run's outputs, training from "
        "scratch (--restart-stale)")
    discard_training(job)
    (job.out / TRAIN_JSON).unlink(missing_ok=True)  # the old run's record: this one starts a new one
    return True


def check_fingerprint(job: Job, saved: Any, path: Path, remedy: str) -> None:
    """A loaded checkpoint (``path``) must have been written with this command's settings."""
    changed = fingerprint_changes(job, saved, path)
    if changed:
        raise SystemExit(f"{path}: written with different settings ({', '.join(changed)}); {remedy}")


def fingerprint_changes(job: Job, saved: Any, path: Path) -> list[str]:
    """The fingerprint keys a loaded checkpoint (``path``) was written with other values of (none: resumable)."""
    written = saved.get("fingerprint") if isinstance(saved, dict) else None
    if written is None:
        raise SystemExit(f"{path}: not a `strae train` checkpoint (another trainer's?); use another --out, or delete "
                         "it")
    written["model_config"] = without_empty_fields(written["model_config"])
    written.setdefault("recipe", {})
    written.setdefault("dev", job.fingerprint["dev"])  # written before the dev split was part of it (2026-11-29)
    written.setdefault("selection", job.fingerprint["selection"])  # written before the selection was (2026-11-29)
    return _diff_keys(written, job.fingerprint) if written != job.fingerprint else []


def _other_runs_labels(job: Job) -> list[str]:
    """The labels of train.json (if any) that name another run than this command's (new_record writes the job's
    settings' labels)."""
    recorded = RunRecord.from_disk(job.out)
    if recorded is None:
        return []
    return [f"{key} {getattr(recorded, key)!r} (this command: {getattr(job.settings, key)!r})"
            for key in ("language", "model", "setting", "seed")
            if getattr(recorded, key) is not None and getattr(recorded, key) != getattr(job.settings, key)]


def refuse_orphaned_record(job: Job, state: State, previous: str | None) -> None:
    """A train.json that names another run (its labels are not in the checkpoint's fingerprint), or a completed
    run whose checkpoint is gone (deleted to save disk: starting over would silently replace its weights), is
    refused. A run that stopped before its first checkpoint has lost nothing and simply starts."""
    if previous is None or previous == "failed":
        return
    mismatched = _other_runs_labels(job)
    if mismatched:
        raise SystemExit(f"{job.out}/train.json: another run's directory ({'; '.join(mismatched)}); use another "
                         "--out, or --restart to discard it")
    if state.global_step == 0 and previous == "completed" and (job.out / "encoder.json").exists():
        raise SystemExit(f"{job.out}: a completed run whose {CHECKPOINT_FILE} is gone, so this command cannot be "
                         "checked against it or continue it; its outputs stay as they are (pass --restart to train "
                         "it again from scratch)")


def refuse_past_the_request(job: Job, state: State) -> None:
    """A checkpoint already trained past this command's --epochs or --max-steps is refused: finishing there would
    record the epochs asked for beside weights trained further (epochs and max-steps may only grow)."""
    past = past_the_request(job, state.epoch, state.batch_in_epoch, state.global_step)
    if past is not None:
        raise SystemExit(f"{job.out}/{CHECKPOINT_FILE}: {past}; ask for at least that much, or pass --restart (or use "
                         "another --out) to train it again")


def past_the_request(job: Job, epoch: int, batch_in_epoch: int, global_step: int) -> str | None:
    """Why a checkpoint at this position is past the command's --epochs / --max-steps, or None."""
    epochs, max_steps = job.settings.epochs, job.settings.max_steps
    past_epochs = epoch > epochs or (epoch == epochs and batch_in_epoch > 0)
    past_steps = max_steps is not None and global_step > max_steps
    if not (past_epochs or past_steps):
        return None
    asked = f"--epochs {epochs}" + (f" --max-steps {max_steps}" if max_steps is not None else "")
    return f"trained to epoch {epoch} (+{batch_in_epoch} batches), step {global_step}: past this command's {asked}"


def steps_exhausted(job: Job, state: State) -> bool:
    return job.settings.max_steps is not None and state.global_step >= job.settings.max_steps


def already_completed(job: Job, state: State, previous: str | None) -> bool:
    """True when a completed run is asked for again; a run with steps left loses its completion mark first."""
    if state.epoch < job.settings.epochs and not steps_exhausted(job, state):
        invalidate_outputs(job.out)
        return False
    if (job.out / "encoder.json").exists() and previous == "completed":
        log(f"{job.out}: already completed ({state.global_step} steps)")
        return True
    return False


def start_session(job: Job, state: State) -> RunRecord:
    """Open this process' timing session and write train.json (status running)."""
    # placement_fields: with several GPUs, which one this session took and how many jobs it shared
    state.sessions.open(state.global_step, describe_device(job.device), engine_sha256=state.engine_sha,
                        **placement_fields())
    state.timings["sessions"] = state.sessions.entries
    record = new_record(job, state.history, state.timings, data=data_block(job), parameters={
        "total": sum(p.numel() for p in state.params),
        "non_embedding": int(state.model.non_embedding_parameter_count()),
    })
    record.provenance = provenance(device=describe_device(job.device), torch_threads=torch.get_num_threads(),
                                   determinism=state.determinism, induction_kernel=state.induction_kernel,
                                   scatter=job.args.scatter, propagation=state.propagation,
                                   float32_matmul=state.float32_matmul)
    record.to_disk(job.out)
    return record


def epoch_batches(job: Job, epoch: int) -> list[np.ndarray]:
    """Epoch ``epoch``'s batches of sentence indices (its seeded order, cut into --batch-size slices)."""
    return batch_indices(epoch_order(len(job.train_corpus), job.settings.seed, epoch), job.settings.batch_size)


def run_epoch(job: Job, state: State, record: RunRecord, step_callback: Callable[[int], None] | None) -> str:
    """Train the rest of epoch ``state.epoch``, evaluate dev, checkpoint. Returns "completed", "max_steps" (cut
    short by --max-steps; evaluated) or "stopped" (a signal asked to stop: checkpointed where it stands, no dev
    evaluation)."""
    batches = epoch_batches(job, state.epoch)
    if state.batch_in_epoch == 0:
        state.epoch_sums = {}
    state.model.train()
    tick = time.perf_counter()
    with epoch_progress_bar(job, state, len(batches)) as bar:
        for position in range(state.batch_in_epoch, len(batches)):
            if steps_exhausted(job, state):
                break
            train_step(job, state, batches[position], bar)
            report_progress(job, state, len(batches))
            # the epoch's wall time so far, in its sums: a checkpoint keeps it, so a resumed epoch's wall_elapsed
            # covers every session's part of it, not only the last one's
            now = time.perf_counter()
            state.epoch_sums["wall"] = state.epoch_sums.get("wall", 0.0) + now - tick
            tick = now
            if state.stop.requested:
                return "stopped"  # stopped() checkpoints here
            if checkpoint_due(job, state, len(batches)):
                save_progress(job, state, record)
            if step_callback is not None:
                step_callback(state.global_step)
    partial = state.batch_in_epoch < len(batches)
    end_epoch(job, state, record, partial, tick)
    return "max_steps" if partial else "completed"


def report_progress(job: Job, state: State, n_batches: int) -> None:
    """progress.json after a step: the steps the run plans are epochs x batches, or --max-steps."""
    if state.progress is None:
        planned = job.settings.epochs * n_batches
        if job.settings.max_steps is not None:
            planned = min(planned, job.settings.max_steps)
        state.progress = ProgressFile(job.out, planned)
    state.progress.update(state.global_step)


def epoch_progress_bar(job: Job, state: State, n_batches: int):
    from tqdm import tqdm

    interactive = sys.stderr.isatty()
    return tqdm(total=n_batches, initial=state.batch_in_epoch, desc=f"epoch {state.epoch + 1}/{job.settings.epochs}",
                unit="batch", mininterval=job.args.progress_interval or (1.0 if interactive else 30.0),
                dynamic_ncols=interactive, file=sys.stderr)


def train_step(job: Job, state: State, indices: np.ndarray, bar) -> None:
    """One optimizer step on the sentences ``indices``, added to the epoch's running sums."""
    ids, lengths = collate(job.train_corpus, indices, job.train_corpus.pad_id)
    started = time.perf_counter()
    values = optimizer_step(job, state, ids, lengths)
    seconds = time.perf_counter() - started
    state.global_step += 1
    state.batch_in_epoch += 1
    n_tokens = int(lengths.sum())
    accumulate(state.epoch_sums, values, len(lengths), n_tokens, seconds)
    state.timings["train_seconds"] += seconds
    bar.update(1)
    bar.set_postfix(loss=f"{values['loss']:.4f}", tok_s=f"{n_tokens / max(seconds, 1e-9):,.0f}", refresh=False)


def optimizer_step(job: Job, state: State, ids: torch.Tensor, lengths: torch.Tensor) -> dict[str, float]:
    """Forward, backward, clip, step; a non-finite loss or gradient norm fails the run. The batch stays on the
    host: the model packs it there and sends its tokens in one asynchronous copy (trees.pack_batch)."""
    where = f"epoch {state.epoch + 1}, batch {state.batch_in_epoch}, step {state.global_step + 1}"
    return training_step(state.model, state.optimizer, state.params, job.settings.clip_grad_norm, ids, lengths,
                         where)


def training_step(model, optimizer: torch.optim.Optimizer, params: list[torch.Tensor], clip_grad_norm: float,
                  ids: torch.Tensor, lengths: torch.Tensor, where: str) -> dict[str, float]:
    """One optimizer step, as `strae train` takes it (benchmarks/train_throughput.py times this very function, host
    syncs included: the loss and metrics are read back after the forward, the gradient norm after backward). A
    non-finite loss or gradient norm raises TrainingFailed before the optimizer touches the weights.

    The loss and metrics are read back after backward and the gradient norm have been queued, not between forward
    and backward: each read waits for the GPU, and on a host-bound GPU step the host would idle through the
    objective's products instead of launching the backward meanwhile. Same numbers, same checks."""
    loss, metrics = model.loss(ids, lengths, read_back=False)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clip_gradients(params, clip_grad_norm)
    loss_value = float(loss.detach())  # the step's first host sync
    if not math.isfinite(loss_value):
        raise TrainingFailed(f"non-finite training loss ({loss_value}) at {where}")
    norm_value = float(grad_norm)
    if not math.isfinite(norm_value):
        raise TrainingFailed(f"non-finite gradient norm at {where}")
    optimizer.step()
    return {"loss": loss_value, "grad_norm": norm_value, **{k: float(v) for k, v in metrics.items()}}


def clip_gradients(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """The gradients' total norm (before clipping); they are clipped to ``max_norm`` when it is > 0."""
    if max_norm > 0:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    # the per-tensor norms in one multi-tensor op (clip_grad_norm_'s own route), not one launch per parameter
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in params if p.grad is not None])))


def accumulate(sums: dict[str, float], values: dict[str, float], n_sentences: int, n_tokens: int,
               seconds: float) -> None:
    """Add one batch to the epoch's running sums (metrics weighted by the batch's sentences)."""
    for key, value in values.items():
        sums[key] = sums.get(key, 0.0) + value * n_sentences
    for key, value in (("sentences", n_sentences), ("tokens", n_tokens), ("seconds", seconds)):
        sums[key] = sums.get(key, 0.0) + value


def checkpoint_due(job: Job, state: State, n_batches: int) -> bool:
    """Every --checkpoint-every-s seconds since the last checkpoint (or every --checkpoint-every-steps steps when
    given), but not on an epoch's last batch (the epoch end checkpoints)."""
    if state.batch_in_epoch >= n_batches:
        return False
    every_steps = job.settings.checkpoint_every_steps
    if every_steps is not None:
        return bool(every_steps) and state.global_step % every_steps == 0
    every_s = job.settings.checkpoint_every_s
    return every_s > 0 and time.monotonic() - state.last_checkpoint >= every_s


def save_progress(job: Job, state: State, record: RunRecord) -> None:
    """checkpoint.pt at the current position, then train.json (still running; not once a signal asked to stop:
    see stopped())."""
    write_checkpoint(job, state)
    if not state.stop.requested:
        record.to_disk(job.out)


def write_checkpoint(job: Job, state: State) -> None:
    save_checkpoint(job.out / CHECKPOINT_FILE, {
        "fingerprint": job.fingerprint, "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
        "rng": capture_rng_states(job.device), **{key: getattr(state, key) for key in PROGRESS_KEYS},
        "model_config": job.config.to_dict(), "engine_sha256": state.engine_sha,
    })
    state.last_checkpoint = time.monotonic()


def epoch_line(entry: dict[str, Any]) -> str:
    """An epoch's summary line, as printed at its end (and again, from the history, when a later session resumes)."""
    gains = entry.get("function_gains") or {}
    partial = "  (partial: --max-steps)" if entry.get("partial") else ""
    return (f"epoch {entry['epoch']}: train loss {entry['train'].get('loss', float('nan')):.4f}  dev loss "
            f"{entry['dev']['loss']:.4f}  {entry['tokens_per_second']:,.0f} tok/s  mean cos "
            f"{entry['collapse']['mean_pairwise_cosine']:.3f}  gains {gains.get('compose', float('nan')):.2f} / "
            f"{gains.get('decompose', float('nan')):.2f}{partial}")


def end_epoch(job: Job, state: State, record: RunRecord, partial: bool, tick: float) -> None:
    """Dev loss and the collapse check, the epoch's history entry, then a checkpoint at the next position."""
    dev, collapse = evaluate_dev(job, state)
    entry = epoch_entry(state, dev, collapse, partial, state.epoch_sums.get("wall", 0.0) + time.perf_counter() - tick)
    if state.history and state.history[-1].get("partial") and state.history[-1]["epoch"] == entry["epoch"]:
        # an earlier --max-steps cut of this epoch, continued by a larger budget: this entry replaces it, so the
        # history (and the best-dev-loss pick over it) is the one an uninterrupted run to here writes
        state.history.pop()
    state.history.append(entry)
    log(epoch_line(entry))
    if not partial:
        # a partial epoch's sums go on: a larger budget completes the epoch, and its entry (which replaces the
        # partial one) then covers every batch of it, as an uninterrupted run's does
        state.epoch_sums = {}
    keep_if_best(job, state)
    # Position "next epoch, batch 0" (or where --max-steps stopped: a later, larger --max-steps resumes).
    if not partial:
        state.epoch, state.batch_in_epoch = state.epoch + 1, 0
    if state.epoch >= job.settings.epochs or steps_exhausted(job, state):
        # the run's last checkpoint: its session ends here, so a later, larger budget that continues from it
        # finds a finished session, not one lost after its checkpoint (finish() leaves a closed session as it is)
        state.sessions.close(state.global_step)
    save_progress(job, state, record)


def evaluate_dev(job: Job, state: State) -> tuple[dict[str, float], dict[str, float]]:
    """(dev loss and metrics, collapse statistics); a non-finite dev loss or a collapse fails the run."""
    args, batch_size, pad_id = job.args, job.settings.batch_size, job.train_corpus.pad_id
    started = time.perf_counter()
    dev = _evaluate_dev(state.model, job.dev_corpus, batch_size, pad_id, job.device, args.dev_max_sentences,
                        job.resolved.recipe.dev_loss_average)
    if not all(math.isfinite(v) for v in dev.values()):
        raise TrainingFailed(f"non-finite dev loss after epoch {state.epoch + 1}: {dev}")
    collapse = _collapse_check(state.model, job.dev_corpus, batch_size, pad_id, job.device,
                               args.collapse_sentences, args.collapse_cosine, args.collapse_std)
    state.timings["dev_seconds"] += time.perf_counter() - started
    return dev, collapse


def epoch_entry(state: State, dev: dict, collapse: dict, partial: bool, wall_elapsed: float) -> dict[str, Any]:
    """train.json's history entry of the epoch that just ended (train metrics: means over its sentences)."""
    sums = state.epoch_sums
    sentences = max(sums.get("sentences", 0.0), 1.0)
    return {
        "epoch": state.epoch + 1, "global_step": state.global_step, "batches": state.batch_in_epoch,
        "partial": partial,
        "train": {k: v / sentences for k, v in sums.items() if k not in ("sentences", "tokens", "seconds", "wall")},
        "dev": dev, "collapse": collapse,
        # spectral norms of the composition / decomposition maps: unbounded for linear functions, <= sqrt(2) for
        # diagonal ones; how CE with linear functions goes wrong (Banyan Appendix B) shows here first
        "function_gains": state.model.functions.gains(),
        "sentences": int(sums.get("sentences", 0)), "tokens": int(sums.get("tokens", 0)),
        "seconds": sums.get("seconds", 0.0),
        "tokens_per_second": sums.get("tokens", 0.0) / max(sums.get("seconds", 0.0), 1e-9),
        "wall_elapsed": wall_elapsed,
    }


def best_entry(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The epoch-end entry with the lowest dev loss (the earliest on ties: the references save on ``<``). A partial
    (--max-steps) entry competes only as the last: one before it is a cut its epoch later went past (histories
    written before such entries were replaced, 2026-11-29, keep them)."""
    candidates = [entry for position, entry in enumerate(history)
                  if not entry.get("partial") or position == len(history) - 1]
    return min(candidates, key=lambda entry: entry["dev"]["loss"], default=None)


def keep_if_best(job: Job, state: State) -> None:
    """best.pt <- the current weights when the epoch end just recorded has the lowest dev loss so far. Not for a
    partial epoch (--max-steps): it is either the run's last entry (whose weights the model holds anyway) or
    replaced when a larger budget completes the epoch, and best.pt must not hold weights the history no longer
    names."""
    if job.resolved.recipe.final_weights != "best_dev_loss" or state.history[-1].get("partial") \
            or best_entry(state.history) is not state.history[-1]:
        return
    entry = state.history[-1]
    save_checkpoint(job.out / BEST_WEIGHTS_FILE, {
        "epoch": entry["epoch"], "global_step": entry["global_step"], "dev_loss": entry["dev"]["loss"],
        "model": {k: v.detach().cpu() for k, v in state.model.state_dict().items()}})


def select_final_weights(job: Job, state: State) -> dict[str, Any]:
    """Load the weights the recipe keeps into the model; train.json's ``final_weights`` block says which."""
    rule = job.resolved.recipe.final_weights
    last = state.history[-1] if state.history else None
    chosen = best_entry(state.history) if rule == "best_dev_loss" else last
    block: dict[str, Any] = {"rule": rule, "last_epoch": last and last["epoch"],
                             "last_dev_loss": last and last["dev"]["loss"]}
    if chosen is not None and chosen is not last:
        path = job.out / BEST_WEIGHTS_FILE
        saved = load_checkpoint(path, "pass --restart to train again") if path.exists() else None
        if saved is None or saved["global_step"] != chosen["global_step"]:
            reason = f"{path} missing or not from step {chosen['global_step']}; kept the last weights"
            log(f"warning: final_weights {rule}: {reason}")
            block["unavailable"] = reason
            chosen = last
        else:
            _load_weights(state.model, saved["model"], path, "best weights")
    if chosen is not None:
        block.update(epoch=chosen["epoch"], global_step=chosen["global_step"], dev_loss=chosen["dev"]["loss"])
    return block


def finish(job: Job, state: State, record: RunRecord) -> int:
    """Close the session, pick the final weights and write the finished run's outputs (encoder.json last)."""
    state.sessions.close(state.global_step)
    state.timings["total_steps"] = state.global_step
    record.status = "completed"
    record.blocks["final_weights"] = selection = select_final_weights(job, state)
    write_outputs(job, job.out, state.model, record)
    kept = "" if selection.get("epoch") in (None, selection["last_epoch"]) else (
        f"; model.pt holds epoch {selection['epoch']}'s weights (dev loss {selection['dev_loss']:.4f})")
    log(f"{job.out}: completed ({state.global_step} steps, {state.timings['train_seconds']:.0f} s training){kept}")
    return 0


def stopped(job: Job, state: State) -> int:
    """A signal stopped the run: checkpoint.pt where it stands (its sessions say why this one ended; train.json
    shows them once resumed). Exit status 128 + signal.

    train.json is NOT rewritten here: it is the train rule's declared output, and a Snakemake stopped by the same
    signal deletes it as incomplete meanwhile; written after that, it would look complete to the next run."""
    state.sessions.close(state.global_step, state.stop.name)
    write_checkpoint(job, state)
    log(state.stop.stopped_line(job.out, f"epoch {state.epoch + 1}, batch {state.batch_in_epoch}, step "
                                          f"{state.global_step}"))
    return state.stop.exit_status


def export_checkpoint(job: Job) -> int:
    """Write a loadable run directory from a mid-training checkpoint, labelled as such (status 'running')."""
    saved, sha256, path = checkpoint_to_export(job.out)
    check_fingerprint(job, saved, path, "pass the run's own options")
    _, StraeModel = _import_model_classes()
    model = StraeModel(job.config, job.resolved.recipe)
    _load_weights(model, saved["model"], path, "model state")
    snapshot = snapshot_block(path, sha256, "strae train", epoch=saved["epoch"], batch_in_epoch=saved["batch_in_epoch"],
                              global_step=saved["global_step"], epochs_planned=job.settings.epochs)
    record = new_record(job, saved["history"], saved["timings"], snapshot=snapshot)
    record.provenance = provenance()
    dest: Path = job.args.export_checkpoint
    make_output_dir(dest, "--export-checkpoint")
    write_outputs(job, dest, model, record)
    log(f"exported {path} (epoch {saved['epoch']}, batch {saved['batch_in_epoch']}, step {saved['global_step']}) "
        f"-> {dest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return train(argv)


if __name__ == "__main__":
    sys.exit(main())
