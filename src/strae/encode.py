"""The one Encoder interface every model and baseline implements, and the loader the CLI uses.

An encoder maps raw text to vectors. It does its own tokenisation (each model knows its tokenizer and
preprocessing), so the evaluation harness hands it exactly the strings in the eval files.

Out-of-vocabulary convention: a row of NaN means "this encoder has no vector for that input" (e.g. a
GloVe word never seen in training, or a sentence whose words were all stop-words). The harness counts
such pairs (``n_oov``) and drops them from the correlation; it never silently substitutes zeros.
"""
from __future__ import annotations

import abc
import importlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

# Kinds of trained run directories the CLI can load: kind (``encoder.json``) -> "module:function".
# Each function has the signature ``load(run_dir: Path, **options) -> Encoder``.
ENCODER_LOADERS: dict[str, str] = {
    "strae": "strae.models.encoder:load_run",
    "glove": "baselines.glove.encoder:load_run",
    "roberta": "baselines.roberta.encoder:load_run",
    "multiview": "baselines.multiview.encoder:load_run",
}
# Encoders that need no training, addressed by name on the command line.
BUILTIN_ENCODERS: dict[str, str] = {
    "random-token": "strae.evaluate.random_token:load",
}


class Encoder(abc.ABC):
    """Sentences -> (n, d) float32 array; words -> (n, d) float32 array (NaN rows = no vector)."""

    #: short identifier written into every result (e.g. "banyan/ce_diagonal_entangled_k128_u2/seed0")
    encoder_id: str = "encoder"

    @abc.abstractmethod
    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """One vector per sentence. ``batch_size`` is an inference knob only; it never changes scores."""

    @abc.abstractmethod
    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        """One vector per word (a word split into several pieces is composed by the model itself)."""

    def describe(self) -> dict[str, Any]:
        """Provenance for result files: encoder id, checkpoint, config, seed, device, ..."""
        return {"encoder_id": self.encoder_id}

    def run_info(self) -> dict[str, Any]:
        """Run labels copied into evaluation JSON (language, model, setting, seed, status)."""
        return {}


def write_encoder_manifest(run_dir: str | Path, kind: str, **fields: Any) -> None:
    """Mark a run directory as loadable by ``load_encoder`` (written last, after the weights)."""
    from strae.io import write_json

    if kind not in ENCODER_LOADERS:
        raise ValueError(f"unknown encoder kind {kind!r}; known: {sorted(ENCODER_LOADERS)}")
    write_json(Path(run_dir) / "encoder.json", {"kind": kind, **fields})


def _resolve(target: str):
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def load_encoder(spec: str, **options: Any) -> Encoder:
    """``spec`` is a builtin name (``random-token``) or a run directory containing ``encoder.json``."""
    if spec in BUILTIN_ENCODERS:
        return _resolve(BUILTIN_ENCODERS[spec])(**options)
    run_dir = Path(spec)
    manifest = run_dir / "encoder.json"
    if not manifest.exists():
        raise SystemExit(
            f"--model {spec}: not a builtin encoder ({', '.join(sorted(BUILTIN_ENCODERS))}) and "
            f"{manifest} does not exist (is the training run finished?)"
        )
    kind = json.loads(manifest.read_text())["kind"]
    if kind not in ENCODER_LOADERS:
        raise SystemExit(f"{manifest}: unknown encoder kind {kind!r}; known: {sorted(ENCODER_LOADERS)}")
    return _resolve(ENCODER_LOADERS[kind])(run_dir, **options)
