"""`strae train`: train Self-StrAE / Banyan on a tokenized corpus, resumably.

One run directory per (language, model, setting, seed). The trainer is built so that a run killed at any
point and restarted with the same command ends with bit-identical weights (CPU, same seed):

- the order of sentences in epoch ``e`` is a pure function of ``(seed, e)`` (not of the global RNG), so a
  resumed run regenerates the same batches and skips the ones already done;
- ``checkpoint.pt`` (written atomically every ``--checkpoint-every-steps`` steps and at every epoch end) holds
  the model, the optimizer, every RNG state (torch, CUDA, numpy, python), the epoch, the position in the
  epoch and the running epoch statistics;
- dev evaluation runs under ``torch.random.fork_rng`` so it never perturbs the training RNG stream.

Divergence guard: a non-finite loss or gradient norm, or a collapsed encoder at an epoch end (dev sentence
embeddings nearly identical: mean pairwise cosine above ``--collapse-cosine`` or spread below
``--collapse-std``), marks the run ``failed`` in ``train.json`` with the reason and exits 1 (0 with
``--record-failure``, so the workflow can report the failed seed instead of dying). No weights or
``encoder.json`` are written for a failed run, so it can never be averaged in by mistake.

Outputs, in order: ``checkpoint.pt`` (during training), ``model.pt`` (final weights + config),
``tokenizer.model`` (copy), ``train.json`` (status completed), ``encoder.json`` (last).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from strae import recipes
from strae.io import atomic_path, provenance, read_json, sha256_file, write_json
from strae.models.config import FUNCTIONS, MODELS, OBJECTIVES, STRUCTURES
from strae.runtime import (capture_rng_states, configure_determinism, describe_device, resolve_device,
                           restore_rng_states, seed_everything)

# 2: the run's recipe (strae/recipes.yaml + overrides) is recorded under "recipe"; the model config is the
# architecture only.
TRAIN_SCHEMA_VERSION = 2

# Flags that override the recipe value of the same name (also reachable as --set KEY=VALUE; --lr sets the run's
# objective's learning rate, lr.<objective>).
RECIPE_FLAGS = ("lr", "temperature", "epochs", "batch_size", "clip_grad_norm")


class TrainingFailed(Exception):
    """The run diverged or collapsed; the message is the failure reason written to train.json."""


# --------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strae train",
        description="Train Self-StrAE / Banyan on resources/tokenized/LANG (resumable: rerun the same command).",
    )
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--structure", choices=STRUCTURES, help="default: the model's paper preset")
    p.add_argument("--functions", choices=FUNCTIONS, help="default: the model's paper preset")
    p.add_argument("--objective", choices=OBJECTIVES, help="default: the model's paper preset")
    p.add_argument("--k", type=int, help="number of channels (default: preset)")
    p.add_argument("--u", type=int, help="channel size (default: preset)")
    p.add_argument("--recipe", choices=recipes.names(),
                   help="training recipe from strae/recipes.yaml (default: --model's own, i.e. its reference code)")
    p.add_argument("--set", dest="recipe_set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one recipe value (YAML syntax; lr.<objective>=..., gate_init=[0.6,0.9]); "
                   "repeatable; recorded in train.json")
    p.add_argument("--temperature", type=float, help="override the recipe's contrastive tau (logits = cos * exp(tau))")
    p.add_argument("--lr", type=float, help="override the recipe's Adam learning rate for this run's objective")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--batch-size", type=int, help="override the recipe's batch size")
    p.add_argument("--clip-grad-norm", type=float, help="override the recipe's max gradient norm (0 = off)")
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (only used for paths/labels)")
    p.add_argument("--seed", type=int, required=True, help="model seed (init, dropout, batch order)")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--data-dir", type=Path, help="tokenized corpus directory (default resources/tokenized/LANG)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer model (default resources/tokenizers/LANG.model)")
    p.add_argument("--setting", help="setting label (default: ModelConfig.setting_name())")
    p.add_argument("--device", default="auto", help="auto (CUDA when available) | cpu | cuda[:N]")
    p.add_argument("--induction-kernel", default="auto", choices=("auto", "torch", "triton"),
                   help="engine of the no-grad tree induction: auto (the fused Triton kernel on CUDA when triton "
                   "imports and passes a first-use check, else torch) | torch | triton; recorded in train.json")
    p.add_argument("--nondeterministic", action="store_true",
                   help="on CUDA, allow non-deterministic (atomics) kernels; default: deterministic, recorded")
    p.add_argument(
        "--record-failure", action="store_true", help="exit 0 after recording a diverged/collapsed run as failed"
    )
    p.add_argument("--max-steps", type=int, help="stop (and finish the run) after this many optimizer steps")
    p.add_argument("--checkpoint-every-steps", type=int, default=100, help="0 = only at epoch ends")
    p.add_argument("--dev-max-sentences", type=int, help="evaluate dev loss on the first N dev sentences only")
    p.add_argument("--collapse-sentences", type=int, default=1024, help="dev sentences used by the collapse check")
    # 0.999, not 0.99: freshly initialised / anisotropic models legitimately reach 0.99 (all roots share a large
    # common component) while still ranking pairs; a collapsed model sits at ~1.0. Values > 1 disable the check.
    p.add_argument("--collapse-cosine", type=float, default=0.999, help="fail if mean pairwise cosine exceeds this")
    p.add_argument("--collapse-std", type=float, default=1e-6, help="fail if the embeddings' mean std is below")
    p.add_argument("--restart", action="store_true", help="discard an existing checkpoint/failed state; start over")
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
    checkpoint_every_steps: int
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
    if train.vocab_size != dev.vocab_size:
        raise SystemExit(f"{data_dir}: train vocab_size {train.vocab_size} != dev vocab_size {dev.vocab_size}")
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
    from strae.tokenize import load_tokenizer

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
    ModelConfig, _ = _import_model_classes()
    data_dir = args.data_dir or Path("resources/tokenized") / args.lang
    tokenizer_path = args.tokenizer or Path("resources/tokenizers") / f"{args.lang}.model"
    train, dev = _load_corpora(data_dir)
    tokenizer_sha = _check_tokenizer(tokenizer_path, data_dir, train.vocab_size)
    architecture = {
        key: getattr(args, key) for key in ("structure", "functions", "objective", "k", "u")
        if getattr(args, key) is not None
    }
    try:
        config = ModelConfig.preset(args.model, vocab_size=train.vocab_size, **architecture)
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error
    resolved = resolve_recipe(args, config.objective)
    recipe = resolved.recipe
    if recipe.decoder_child_order == "node_id" and config.structure != "sentential":
        raise SystemExit(f"strae train: recipe {recipe.name!r} has decoder_child_order node_id (the Self-StrAE "
                         f"reference decoder, sentential trees only); with --structure {config.structure} pass "
                         "--set decoder_child_order=position")
    settings = TrainSettings(
        model=args.model,
        language=args.lang,
        seed=args.seed,
        setting=args.setting or config.setting_name(),
        recipe=recipe.name,
        lr=recipe.lr_for(config.objective),
        epochs=recipe.epochs,
        batch_size=recipe.batch_size,
        clip_grad_norm=recipe.clip_grad_norm,
        max_steps=args.max_steps,
        checkpoint_every_steps=args.checkpoint_every_steps,
        data_dir=str(data_dir),
        tokenizer=str(tokenizer_path),
    )
    return config, resolved, settings, (train, dev), tokenizer_sha


def fingerprint(config_dict: dict, settings: TrainSettings, data_meta: dict,
                recipe: recipes.Recipe | None = None) -> dict[str, Any]:
    """What must not change between a checkpoint and its resumption (epochs / max-steps may grow)."""
    recipe_values = {} if recipe is None else {k: v for k, v in recipe.values().items() if k != "epochs"}
    return {
        "model_config": without_empty_fields(config_dict),
        "recipe": recipe_values,
        "seed": settings.seed,
        "lr": settings.lr,
        "batch_size": settings.batch_size,
        "clip_grad_norm": settings.clip_grad_norm,
        "optimizer": settings.optimizer,
        "data": hashlib.sha256(json.dumps(_stable_data_fields(data_meta), sort_keys=True).encode()).hexdigest(),
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


# -------------------------------------------------------------------------------------------------- data
def epoch_order(n_sentences: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled sentence order of one epoch: a pure function of (seed, epoch) so resumption replays it."""
    return np.random.default_rng([seed, epoch]).permutation(n_sentences)


def batch_indices(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def collate(corpus, indices: np.ndarray, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded (B, T) LongTensor of ids (pad = ``pad_id``) and (B,) lengths, in the order of ``indices``."""
    lengths = np.asarray(corpus.lengths)[indices].astype(np.int64)
    ids = np.full((len(indices), int(lengths.max())), pad_id, dtype=np.int64)
    for row, index in enumerate(indices):
        sentence = corpus[int(index)]
        ids[row, : len(sentence)] = sentence
    return torch.from_numpy(ids), torch.from_numpy(lengths)


# ---------------------------------------------------------------------------------------- checkpointing
def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, device: torch.device | None = None) -> dict[str, Any]:
    """A checkpoint, loaded to the CPU whatever device wrote it: the RNG states inside must stay CPU ByteTensors
    (torch.set_rng_state refuses CUDA tensors), and load_state_dict moves weights and optimizer state to the
    model's device anyway. ``device`` is accepted for callers' symmetry and ignored."""
    del device
    # Our own file with numpy/python RNG states inside: a full (trusted) unpickle is needed.
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the same user-facing problem
        raise SystemExit(f"{path}: unreadable checkpoint ({error}); delete it or pass --restart") from error


def engine_source_sha256() -> str:
    """Hash of the model engine's source files: recorded per session, so a resumed run that picked up engine
    edits (e.g. a faster implementation) says so in train.json instead of hiding it."""
    import strae.models as models_package
    import strae.objectives as objectives_module

    digest = hashlib.sha256()
    files = sorted(Path(models_package.__file__).parent.glob("*.py")) + [Path(objectives_module.__file__)]
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
def _evaluate_dev(model, dev, batch_size: int, pad_id: int, device, max_sentences: int | None) -> dict[str, float]:
    """Mean dev loss (and metrics) weighted by sentences; eval mode, no grad, training RNG untouched."""
    n = len(dev) if max_sentences is None else min(len(dev), max_sentences)
    totals: dict[str, float] = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        model.eval()
        for indices in batch_indices(np.arange(n), batch_size):
            ids, lengths = collate(dev, indices, pad_id)
            loss, metrics = model.loss(ids.to(device), lengths.to(device))
            values = {"loss": float(loss.detach()), **{k: float(v) for k, v in metrics.items()}}
            for key, value in values.items():
                totals[key] = totals.get(key, 0.0) + value * len(indices)
        model.train()
    return {key: value / n for key, value in totals.items()}


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
def _train_json(status, reason, settings, config_dict, history, timings, extra=None) -> dict[str, Any]:
    record = {
        "schema_version": TRAIN_SCHEMA_VERSION,
        "status": status,
        "failure_reason": reason,
        "run": {
            "language": settings.language,
            "model": settings.model,
            "setting": settings.setting,
            "seed": settings.seed,
        },
        "config": {"model": config_dict, "training": {k: v for k, v in vars(settings).items() if k != "extra"}},
        "history": history,
        "timings": timings,
    }
    record.update(extra or {})
    return record


def _write_final(out: Path, model, config_dict, tokenizer_path: Path, tokenizer_sha: str, record, settings,
                 recipe_record: dict[str, Any], pretokenize: str | None = None) -> None:
    """model.pt, tokenizer copy, train.json (completed), then encoder.json last (the 'run is usable' mark)."""
    from strae.encode import write_encoder_manifest

    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_path(out / "model.pt", suffix=".pt") as tmp:
        torch.save({"config": config_dict, "recipe": recipe_record, "state_dict": state}, tmp)
    if not (out / "tokenizer.model").exists() or sha256_file(out / "tokenizer.model") != tokenizer_sha:
        with atomic_path(out / "tokenizer.model") as tmp:
            shutil.copyfile(tokenizer_path, tmp)
    write_json(out / "train.json", record)
    write_encoder_manifest(
        out,
        "strae",
        model=settings.model,
        setting=settings.setting,
        seed=settings.seed,
        language=settings.language,
        weights="model.pt",
        tokenizer="tokenizer.model",
        model_sha256=sha256_file(out / "model.pt"),
        tokenizer_sha256=tokenizer_sha,
        **({"pretokenize": pretokenize} if pretokenize else {}),
    )


def _invalidate_outputs(out: Path) -> None:
    """A run that (re)starts training is not usable until it finishes: drop the completion mark first."""
    for name in ("encoder.json", "model.pt"):
        (out / name).unlink(missing_ok=True)


def _lock_run_dir(out: Path):
    """Two trainers writing one run directory would interleave checkpoints: refuse the second one."""
    import fcntl

    handle = open(out / ".train.lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise SystemExit(f"{out}: another `strae train` process is training this run directory") from None
    return handle


# --------------------------------------------------------------------------------------------- training
def train(argv: list[str] | None = None, *, step_callback: Callable[[int], None] | None = None) -> int:
    """Run ``strae train``. ``step_callback(global_step)`` is called after each optimizer step (and after any
    checkpoint of that step); tests use it to interrupt a run the way a kill would."""
    args = build_parser().parse_args(argv)
    _, StraeModel = _import_model_classes()
    config, resolved, settings, (train_corpus, dev_corpus), tokenizer_sha = resolve(args)
    recipe = resolved.recipe
    config_dict = config.to_dict()
    data_meta = read_json(Path(settings.data_dir) / "train.json")
    print_ = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731

    out: Path = args.out
    checkpoint_path = out / "checkpoint.pt"
    device = resolve_device(args.device)
    expected = fingerprint(config_dict, settings, data_meta, recipe)

    if args.export_checkpoint is not None:
        return _export(args, checkpoint_path, device, expected, StraeModel, config, resolved, settings,
                       tokenizer_sha)

    out.mkdir(parents=True, exist_ok=True)
    lock = _lock_run_dir(out)  # held until this process exits  # noqa: F841
    previous = read_json(out / "train.json") if (out / "train.json").exists() else None
    if args.restart:
        checkpoint_path.unlink(missing_ok=True)
        _invalidate_outputs(out)
        previous = None
    # A divergence is deterministic (same seed, same data): a failed run stays failed until --restart.
    if previous and previous.get("status") == "failed":
        print_(f"{out}/train.json: run already recorded as failed: {previous.get('failure_reason')} "
               "(pass --restart to train again from scratch)")
        return 0 if args.record_failure else 1

    engine_sha = engine_source_sha256()
    determinism = configure_determinism(device, not args.nondeterministic)
    seed_everything(settings.seed)
    model = StraeModel(config, recipe, induction_kernel=args.induction_kernel).to(device)
    try:
        induction_kernel = model.kernel_choice(device).record()
    except ValueError as error:
        raise SystemExit(f"strae train: {error}") from error
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    history: list[dict[str, Any]] = []
    timings: dict[str, Any] = {"train_seconds": 0.0, "dev_seconds": 0.0, "sessions": []}
    start_epoch, start_batch, global_step = 0, 0, 0
    epoch_sums: dict[str, float] = {}

    if checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path)
        state["fingerprint"]["model_config"] = without_empty_fields(state["fingerprint"]["model_config"])
        state["fingerprint"].setdefault("recipe", {})
        if state["fingerprint"] != expected:
            changed = _diff_keys(state["fingerprint"], expected)
            raise SystemExit(
                f"{checkpoint_path}: written with different settings ({', '.join(changed)}); use another --out "
                "or pass --restart to discard it"
            )
        _load_weights(model, state["model"], checkpoint_path, "model state")
        _load_weights(optimizer, state["optimizer"], checkpoint_path, "optimizer state")
        if state.get("engine_sha256") not in (None, engine_sha):
            print_(f"warning: the model engine's source changed since {checkpoint_path} was written; resuming "
                   "with the current code (recorded in train.json timings.sessions)")
        restore_rng_states(state["rng"])
        start_epoch, start_batch, global_step = state["epoch"], state["batch_in_epoch"], state["global_step"]
        history, timings, epoch_sums = state["history"], state["timings"], state["epoch_sums"]
        print_(f"resuming {out} at epoch {start_epoch + 1}, batch {start_batch}, step {global_step}")

    max_steps = settings.max_steps
    finished_steps = max_steps is not None and global_step >= max_steps
    if start_epoch >= settings.epochs or finished_steps:
        if (out / "encoder.json").exists() and previous and previous.get("status") == "completed":
            print_(f"{out}: already completed ({global_step} steps)")
            return 0
    else:
        _invalidate_outputs(out)

    session = {"started": time.time(), "start_step": global_step, "device": describe_device(device),
               "engine_sha256": engine_sha}
    timings.setdefault("sessions", []).append(session)
    prov = provenance(device=describe_device(device), torch_threads=torch.get_num_threads(), determinism=determinism,
                      induction_kernel=induction_kernel)
    params = [p for p in model.parameters() if p.requires_grad]
    extra = {
        "recipe": resolved.record(),
        "provenance": prov,
        # pretokenize: what the encoder must apply to text it embeds (the corpus' own; "none" for corpora
        # tokenised before the setting existed); corpus_source: which source the prepared corpus came from.
        "data": {"dir": settings.data_dir, "train_sentences": len(train_corpus), "train_tokens":
                 int(train_corpus.n_tokens), "dev_sentences": len(dev_corpus), "tokenizer_sha256": tokenizer_sha,
                 "pretokenize": data_meta.get("pretokenize", "none"), "corpus_source": data_meta.get("corpus_source"),
                 "text_sha256": data_meta.get("text_sha256")},
        "parameters": {
            "total": sum(p.numel() for p in params),
            "non_embedding": int(model.non_embedding_parameter_count()),
        },
    }

    def write_state(status: str, reason: str | None = None, **more: Any) -> None:
        write_json(out / "train.json", _train_json(status, reason, settings, config_dict, history, timings,
                                                   {**extra, **more}))

    def checkpoint(epoch: int, batch_in_epoch: int) -> None:
        save_checkpoint(checkpoint_path, {
            "fingerprint": expected, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "rng": capture_rng_states(), "epoch": epoch, "batch_in_epoch": batch_in_epoch,
            "global_step": global_step, "history": history, "timings": timings, "epoch_sums": epoch_sums,
            "model_config": config_dict, "engine_sha256": engine_sha,
        })

    write_state("running")
    pad_id = train_corpus.pad_id
    interactive = sys.stderr.isatty()
    interval = args.progress_interval or (1.0 if interactive else 30.0)
    from tqdm import tqdm

    try:
        for epoch in range(start_epoch, settings.epochs):
            if max_steps is not None and global_step >= max_steps:
                break
            batches = batch_indices(epoch_order(len(train_corpus), settings.seed, epoch), settings.batch_size)
            first = start_batch if epoch == start_epoch else 0
            if first == 0:
                epoch_sums = {}
            model.train()
            bar = tqdm(total=len(batches), initial=first, desc=f"epoch {epoch + 1}/{settings.epochs}",
                       unit="batch", mininterval=interval, dynamic_ncols=interactive, file=sys.stderr)
            tick = time.perf_counter()
            done_batches = first
            for position in range(first, len(batches)):
                if max_steps is not None and global_step >= max_steps:
                    break
                ids, lengths = collate(train_corpus, batches[position], pad_id)
                step_start = time.perf_counter()
                loss, metrics = model.loss(ids.to(device), lengths.to(device))
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise TrainingFailed(f"non-finite training loss ({loss_value}) at epoch {epoch + 1}, "
                                         f"batch {position}, step {global_step + 1}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if settings.clip_grad_norm > 0:
                    grad_norm = torch.nn.utils.clip_grad_norm_(params, settings.clip_grad_norm)
                else:
                    grad_norm = torch.linalg.vector_norm(
                        torch.stack([torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]))
                if not torch.isfinite(grad_norm):
                    raise TrainingFailed(f"non-finite gradient norm at epoch {epoch + 1}, batch {position}, "
                                         f"step {global_step + 1}")
                optimizer.step()
                global_step += 1
                done_batches = position + 1
                n_tokens = int(lengths.sum())
                step_seconds = time.perf_counter() - step_start
                values = {"loss": loss_value, "grad_norm": float(grad_norm),
                          **{k: float(v) for k, v in metrics.items()}}
                for key, value in values.items():
                    epoch_sums[key] = epoch_sums.get(key, 0.0) + value * len(lengths)
                for key, value in (("sentences", len(lengths)), ("tokens", n_tokens), ("seconds", step_seconds)):
                    epoch_sums[key] = epoch_sums.get(key, 0.0) + value
                timings["train_seconds"] += step_seconds
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.4f}", tok_s=f"{n_tokens / max(step_seconds, 1e-9):,.0f}",
                                refresh=False)
                is_last = position + 1 == len(batches)
                if settings.checkpoint_every_steps and global_step % settings.checkpoint_every_steps == 0 \
                        and not is_last:
                    checkpoint(epoch, position + 1)
                    write_state("running")
                if step_callback is not None:
                    step_callback(global_step)
            bar.close()
            partial = done_batches < len(batches)

            dev_start = time.perf_counter()
            dev = _evaluate_dev(model, dev_corpus, settings.batch_size, pad_id, device, args.dev_max_sentences)
            if not all(math.isfinite(v) for v in dev.values()):
                raise TrainingFailed(f"non-finite dev loss after epoch {epoch + 1}: {dev}")
            collapse = _collapse_check(model, dev_corpus, settings.batch_size, pad_id, device,
                                       args.collapse_sentences, args.collapse_cosine, args.collapse_std)
            timings["dev_seconds"] += time.perf_counter() - dev_start
            sentences = max(epoch_sums.get("sentences", 0.0), 1.0)
            entry = {
                "epoch": epoch + 1,
                "global_step": global_step,
                "batches": done_batches,
                "partial": partial,
                "train": {k: v / sentences for k, v in epoch_sums.items()
                          if k not in ("sentences", "tokens", "seconds")},
                "dev": dev,
                "collapse": collapse,
                "sentences": int(epoch_sums.get("sentences", 0)),
                "tokens": int(epoch_sums.get("tokens", 0)),
                "seconds": epoch_sums.get("seconds", 0.0),
                "tokens_per_second": epoch_sums.get("tokens", 0.0) / max(epoch_sums.get("seconds", 0.0), 1e-9),
                "wall_elapsed": time.perf_counter() - tick,
            }
            history.append(entry)
            print_(f"epoch {epoch + 1}: train loss {entry['train'].get('loss', float('nan')):.4f}  dev loss "
                   f"{dev['loss']:.4f}  {entry['tokens_per_second']:,.0f} tok/s  mean cos "
                   f"{collapse['mean_pairwise_cosine']:.3f}" + ("  (partial: --max-steps)" if partial else ""))
            epoch_sums = {}
            # Position "next epoch, batch 0" (or where --max-steps stopped: a later, larger --max-steps resumes).
            checkpoint(epoch + 1 if not partial else epoch, 0 if not partial else done_batches)
            write_state("running")
            if partial:
                break
    except TrainingFailed as failure:
        session["ended"] = time.time()
        write_state("failed", str(failure))
        print_(f"training failed: {failure}")
        return 0 if args.record_failure else 1

    session["ended"] = time.time()
    session["end_step"] = global_step
    timings["total_steps"] = global_step
    record = _train_json("completed", None, settings, config_dict, history, timings, extra)
    _write_final(out, model, config_dict, Path(settings.tokenizer), tokenizer_sha, record, settings,
                 resolved.record(), pretokenize=data_meta.get("pretokenize", "none"))
    print_(f"{out}: completed ({global_step} steps, {timings['train_seconds']:.0f} s training)")
    return 0


def _export(args, checkpoint_path, device, expected, StraeModel, config, resolved, settings, tokenizer_sha) -> int:
    """Write a loadable run directory from a mid-training checkpoint, labelled as such (status 'running')."""
    if not checkpoint_path.exists():
        raise SystemExit(f"{checkpoint_path}: no checkpoint to export (has this run started?)")
    state = load_checkpoint(checkpoint_path)
    state["fingerprint"]["model_config"] = without_empty_fields(state["fingerprint"]["model_config"])
    state["fingerprint"].setdefault("recipe", {})
    if state["fingerprint"] != expected:
        raise SystemExit(f"{checkpoint_path}: written with different settings "
                         f"({', '.join(_diff_keys(state['fingerprint'], expected))}); pass the run's own options")
    model = StraeModel(config, resolved.recipe)
    _load_weights(model, state["model"], checkpoint_path, "model state")
    snapshot = {"source": str(checkpoint_path.resolve()), "source_sha256": sha256_file(checkpoint_path),
                "epoch": state["epoch"], "batch_in_epoch": state["batch_in_epoch"],
                "global_step": state["global_step"], "epochs_planned": settings.epochs,
                "note": "mid-training export (strae train --export-checkpoint); not a finished run"}
    record = _train_json("running", None, settings, config.to_dict(), state["history"], state["timings"],
                         {"snapshot": snapshot, "recipe": resolved.record(), "provenance": provenance()})
    dest: Path = args.export_checkpoint
    dest.mkdir(parents=True, exist_ok=True)
    pretokenize = read_json(Path(settings.data_dir) / "train.json").get("pretokenize", "none")
    _write_final(dest, model, config.to_dict(), Path(settings.tokenizer), tokenizer_sha, record, settings,
                 resolved.record(), pretokenize=pretokenize)
    print(f"exported {checkpoint_path} (epoch {state['epoch']}, batch {state['batch_in_epoch']}, step "
          f"{state['global_step']}) -> {dest}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    return train(argv)


if __name__ == "__main__":
    sys.exit(main())
