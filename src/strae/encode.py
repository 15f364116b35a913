"""The one Encoder protocol every model and baseline implements, and the one registry of encoder kinds.

An encoder maps raw text to vectors. It does its own tokenisation (each model knows its tokenizer and
preprocessing), so the evaluation harness hands it exactly the strings in the eval files.

Out-of-vocabulary convention: a row of NaN means "this encoder has no vector for that input" (e.g. a
GloVe word never seen in training, or a sentence whose words were all stop-words). The harness counts
such pairs (``n_oov``) and drops them from the correlation; it never silently substitutes zeros.

Registry: ``ENCODERS`` (below) names every kind. A trained run directory says its kind in ``encoder.json``
(``write_encoder_manifest``); a builtin kind needs no training and is addressed by name (``--model random-token``).
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from strae.io import read_json
from strae.runs import CHECKPOINT_FILE, TRAIN_JSON


@runtime_checkable
class Encoder(Protocol):
    """Sentences -> (n, d) float32 array; words -> (n, d) float32 array (NaN rows = no vector).

    Encoders subclass it (for the defaults below); any object with these members is accepted. Optional, not part of
    the protocol: ``token_counts``, running totals ``{"tokens": n, "unknown": m}`` of the tokens the encoder has read
    and how many were outside its vocabulary (a word-vocabulary model); the SentEval suite records each task's."""

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


@dataclass(frozen=True)
class EncoderKind:
    """One kind of encoder: ``load(run_dir, **options)`` for a trained run directory, ``load(**options)`` for a
    builtin (``builtin=True``, addressed by name on the command line). ``network=False``: static vectors averaged
    with numpy, which take no GPU whatever ``device`` says."""

    load: Callable[..., Encoder]
    builtin: bool = False
    network: bool = True
    # the --encoder-option keys its loader takes; load_encoder refuses any other (a typo would otherwise be ignored,
    # or recorded as the evaluation's label while the default ran). None: not checked (a kind added at run time)
    options: tuple[str, ...] | None = None
    # options that say which encoder it is, not how it is evaluated: a builtin's run labels (its setting, seed) are
    # made of them (random-token's ``dim=2000`` is the run dim2000), so they are no evaluation label of their own
    identity: tuple[str, ...] = ()


# Each loader imports its module when called: a kind's module pulls its own heavy dependencies (torch, gensim,
# transformers, spaCy), which loading another kind, `strae aggregate` or `strae --help` should not pay for.
def _strae(run_dir: Path, **options: Any) -> Encoder:
    from strae.models.encoder import load_run

    return load_run(run_dir, **options)


def _glove(run_dir: Path, **options: Any) -> Encoder:
    from baselines.glove.encoder import load_run

    return load_run(run_dir, **options)


def _roberta(run_dir: Path, **options: Any) -> Encoder:
    from baselines.roberta.encoder import load_run

    return load_run(run_dir, **options)


def _multiview(run_dir: Path, **options: Any) -> Encoder:
    from baselines.multiview.encoder import load_run

    return load_run(run_dir, **options)


def _random_token(**options: Any) -> Encoder:
    from strae.evaluate.random_token import load

    return load(**options)


# kind (encoder.json "kind", or a builtin's name) -> how to load it. The one list of encoders.
ENCODERS: dict[str, EncoderKind] = {
    # Self-StrAE / Banyan runs (strae train)
    "strae": EncoderKind(_strae, options=("device", "max_pieces", "pretokenize")),
    # strae train-glove
    "glove": EncoderKind(_glove, network=False,
                         options=("device", "stopwords", "stopword_list", "stopwords_language", "pretokenize")),
    # strae train-roberta / train-simcse
    "roberta": EncoderKind(_roberta, options=("device", "word_occurrences", "word_context", "corpus", "precision",
                                              "max_length", "occurrence_seed", "pooler", "pretokenize")),
    # strae train-multiview
    "multiview": EncoderKind(_multiview, options=("device", "view", "vectors", "dim")),
    # the sanity floor, no training
    "random-token": EncoderKind(_random_token, builtin=True, network=False, options=("device", "seed", "dim"),
                                identity=("seed", "dim")),
}


def identity_options(model: str | None) -> tuple[str, ...]:
    """The encoder options of builtin ``model`` that name the encoder itself (``EncoderKind.identity``); none for a
    trained run's model, whose identity is its run directory."""
    entry = ENCODERS.get(model or "")
    return entry.identity if entry is not None and entry.builtin else ()


def _run_kinds() -> list[str]:
    return sorted(kind for kind, entry in ENCODERS.items() if not entry.builtin)


def write_encoder_manifest(run_dir: str | Path, kind: str, **fields: Any) -> None:
    """Mark a run directory as loadable by ``load_encoder`` (written last, after the weights)."""
    from strae.io import write_json

    if kind not in _run_kinds():
        raise ValueError(f"unknown encoder kind {kind!r}; known: {_run_kinds()}")
    write_json(Path(run_dir) / "encoder.json", {"kind": kind, **fields})


def _checked(encoder: Any, what: str) -> Encoder:
    if not isinstance(encoder, Encoder):
        raise TypeError(f"{what}: the loader returned {type(encoder).__name__}, not an Encoder")
    return encoder


def runs_a_network(spec: str) -> bool:
    """Whether the encoder ``spec`` names (as :func:`load_encoder` takes it) runs on a device; True when it cannot
    tell (no manifest yet: loading will say what is wrong)."""
    entry = ENCODERS.get(spec)
    if entry is not None and entry.builtin:
        return entry.network
    manifest = Path(spec) / "encoder.json"
    try:
        kind = read_json(manifest)["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return ENCODERS[kind].network if kind in ENCODERS else True


def load_encoder(spec: str, **options: Any) -> Encoder:
    """``spec`` is a builtin name (``random-token``) or a run directory containing ``encoder.json``."""
    entry = ENCODERS.get(spec)
    if entry is not None and entry.builtin:
        _check_options(spec, entry, options)
        return _checked(entry.load(**options), spec)
    builtins = sorted(kind for kind, entry in ENCODERS.items() if entry.builtin)
    run_dir = Path(spec)
    manifest = run_dir / "encoder.json"
    if not manifest.exists():
        raise SystemExit(
            f"--model {spec}: not a builtin encoder ({', '.join(builtins)}) and "
            f"{manifest} does not exist ({_unfinished_reason(run_dir)})"
        )
    written = read_json(manifest)
    kind = written.get("kind") if isinstance(written, dict) else None
    if kind not in _run_kinds():
        raise SystemExit(f"{manifest}: unknown encoder kind {kind!r}; known: {_run_kinds()}")
    _check_options(kind, ENCODERS[kind], options)
    return _checked(ENCODERS[kind].load(run_dir, **options), str(manifest))


def _unfinished_reason(run_dir: Path) -> str:
    """Why a run directory has no encoder.json, as far as its train.json tells."""
    record = run_dir / TRAIN_JSON
    try:
        status = read_json(record).get("status")
    except (OSError, ValueError, AttributeError):
        return "is the training run finished?"
    if status == "running":
        # the workflow declares train.json as the training's output and a trainer writes it at its start, so a run
        # started by hand and killed leaves one that Snakemake takes as done (its own jobs it marks incomplete)
        again = (f"it resumes from {CHECKPOINT_FILE}" if (run_dir / CHECKPOINT_FILE).exists()
                 else f"no {CHECKPOINT_FILE} yet: it starts over")
        return (f"{record} says status running: the training is under way or was stopped before it "
                f"finished; rerun its train command ({again}), or delete that {TRAIN_JSON} and rerun the workflow "
                "target")
    return f"{record} says status {status}" if status else "is the training run finished?"


def _check_options(kind: str, entry: EncoderKind, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(entry.options)) if entry.options is not None else []
    if unknown:
        raise SystemExit(f"--encoder-option {', '.join(unknown)}: unknown for {kind} encoders; known: "
                         f"{', '.join(entry.options)}")
