"""Encoder for a trained Self-StrAE / Banyan run directory (``encoder.json`` kind ``strae``).

- sentence -> the root's upward embedding of the tree the model induces over the sentence's pieces;
- word -> the same, over the word's pieces: the model composes a multi-piece word with its own
  composition function, and a one-piece word is that piece's embedding row.

Inputs are tokenised with the run's own copy of the tokenizer (``tokenizer.model``), after the word-level
pretokenisation its training corpus had (``languages.<lang>.pretokenize``), so raw evaluation text is treated like
the training text. The kind is read from the run: ``encoder.json`` ``pretokenize``, else ``train.json``
``data.pretokenize``; a run recording neither predates the setting, and its corpus' own meta
(``<data.dir>/train.json``) decides if it is still there, else ``none`` (the only kind before the setting
existed). The ``pretokenize`` encoder option overrides all of these (recorded in ``describe()``). Texts with no
pieces get a NaN row (the harness counts them as OOV). Batches are formed from texts of similar length (fewer pad
positions) and results are put back in the input order; batch size is an inference knob only and never changes a
vector.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strae.data.batching import pad_batch
from strae.encode import Encoder
from strae.io import read_json, sha256_file
from strae.runs import RunRecord, load_weights_file
from strae.runtime import describe_device, resolve_device


def run_pretokenize(run_dir: Path, record: RunRecord | None, option: str | None = None) -> tuple[str, str]:
    """How a strae run splits raw text before its tokenizer, and where that came from: ``option`` (an encoder
    option), then the run's encoder.json, its train.json, its corpus' meta, else none (runs before the setting).
    The one rule for `strae evaluate`'s encoder and `strae export`."""
    from strae.data.pretokenize import check_kind

    if option not in (None, ""):
        return check_kind(option, "--encoder-option pretokenize"), "encoder option"
    manifest = Path(run_dir) / "encoder.json"
    recorded = read_json(manifest).get("pretokenize") if manifest.exists() else None
    if recorded is not None:
        return check_kind(recorded, f"{manifest}: pretokenize"), "encoder.json"
    data = (record.blocks.get("data") if record is not None else None) or {}
    if data.get("pretokenize") is not None:
        return check_kind(data["pretokenize"], f"{Path(run_dir) / 'train.json'}: data.pretokenize"), "train.json"
    corpus_meta = Path(data["dir"]) / "train.json" if data.get("dir") else None
    if corpus_meta is not None and corpus_meta.exists():
        recorded = read_json(corpus_meta).get("pretokenize")
        if recorded is not None:
            return check_kind(recorded, f"{corpus_meta}: pretokenize"), str(corpus_meta)
    return "none", "not recorded (run predates the setting)"


class StraeEncoder(Encoder):
    def __init__(self, run_dir: str | Path, device: str = "auto", max_pieces: int | None = None,
                 pretokenize: str | None = None) -> None:
        from strae.data.tokenizer import load_tokenizer
        from strae.models.config import ModelConfig
        from strae.models.model import StraeModel

        self.run_dir = Path(run_dir)
        weights = self.run_dir / "model.pt"
        tokenizer_file = self.run_dir / "tokenizer.model"
        for path in (weights, tokenizer_file):
            if not path.exists():
                raise SystemExit(f"{path}: missing; is {self.run_dir} a finished `strae train` run?")
        payload = load_weights_file(weights)
        if not isinstance(payload, dict) or "config" not in payload or "state_dict" not in payload:
            raise SystemExit(f"{weights}: expected a dict with 'config' and 'state_dict' (written by strae train)")
        # An empty field the engine has since dropped (e.g. ``extra: {}``) carries nothing: ignore it.
        self.config = ModelConfig.from_dict({k: v for k, v in payload["config"].items() if v not in ({}, [])})
        self.device = resolve_device(device)
        self.recipe = load_recipe(payload)
        self.model = StraeModel(self.config, self.recipe)
        self.model.load_state_dict(payload["state_dict"])
        self.model.to(self.device).eval()
        # a run directory copied without its train.json still loads (labels from the config, status completed)
        self.record = RunRecord.from_disk(self.run_dir) or RunRecord.from_dict({})
        self.pretokenize, self.pretokenize_source = run_pretokenize(self.run_dir, self.record, pretokenize)
        self.tokenizer = load_tokenizer(tokenizer_file, pretokenize=self.pretokenize)
        if self.tokenizer.vocab_size != self.config.vocab_size:
            raise SystemExit(
                f"{tokenizer_file}: vocab_size {self.tokenizer.vocab_size} != model vocab_size "
                f"{self.config.vocab_size} ({weights})"
            )
        self.pad_id = self.config.vocab_size
        # Optional cap on pieces per text (None = keep all; training used at most 200 pieces per sentence).
        self.max_pieces = None
        if max_pieces not in (None, "", "none"):
            try:
                self.max_pieces = int(max_pieces)
            except ValueError:
                self.max_pieces = 0
            if self.max_pieces < 1:
                raise SystemExit(f"--encoder-option max_pieces={max_pieces}: a positive number of pieces, or none")
        record = self.record
        self.encoder_id = (f"{record.model or self.config.model}/{record.setting or self.config.setting_name()}/"
                           f"seed{'?' if record.seed is None else record.seed}")
        self._weights_sha = sha256_file(weights)
        self._tokenizer_sha = sha256_file(tokenizer_file)

    # ------------------------------------------------------------------------------------------ encoding
    def _encode_pieces(self, pieces: list[list[int]], batch_size: int) -> np.ndarray:
        # Sort by length so each batch pads little; stable sort keeps the result independent of batch size.
        order = sorted((i for i, p in enumerate(pieces) if len(p) > 0), key=lambda i: len(pieces[i]))
        results: dict[int, np.ndarray] = {}
        with torch.no_grad():
            for start in range(0, len(order), max(int(batch_size), 1)):
                chunk = order[start : start + int(batch_size)]
                ids, lengths = pad_batch([pieces[i] for i in chunk], self.pad_id)
                vectors = self.model.encode(ids.to(self.device), lengths.to(self.device)).float().cpu().numpy()
                for row, i in enumerate(chunk):
                    results[i] = vectors[row]
        dim = next(iter(results.values())).shape[0] if results else self.config.k * self.config.u
        out = np.full((len(pieces), dim), np.nan, dtype=np.float32)
        for i, vector in results.items():
            out[i] = vector
        return out

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        pieces = self.tokenizer.encode_batch(list(texts))
        if self.max_pieces is not None:
            pieces = [p[: self.max_pieces] for p in pieces]
        return [list(p) for p in pieces]

    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        return self._encode_pieces(self._tokenize(sentences), batch_size)

    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        return self._encode_pieces(self._tokenize(words), batch_size)

    # ---------------------------------------------------------------------------------------- provenance
    def describe(self) -> dict[str, Any]:
        record = self.record
        return {
            "encoder_id": self.encoder_id,
            "kind": "strae",
            "run_dir": str(self.run_dir),
            "model_sha256": self._weights_sha,
            "tokenizer_sha256": self._tokenizer_sha,
            "pretokenize": self.pretokenize,
            "pretokenize_source": self.pretokenize_source,
            "max_pieces": self.max_pieces,
            "config": self.config.to_dict(),
            "training": record.config.get("training"),
            "epochs_completed": len(record.history),
            "snapshot": record.blocks.get("snapshot"),
            "sentence_vector": "root upward embedding",
            "word_vector": "root upward embedding over the word's pieces (one piece = its embedding row)",
            "device": describe_device(self.device),
        }

    def run_info(self) -> dict[str, Any]:
        fallback = {"model": self.config.model, "setting": self.config.setting_name()}
        return self.record.run_info(fallback=fallback)


def load_run(run_dir: str | Path, **options: Any) -> StraeEncoder:
    """``strae.encode.ENCODERS["strae"]`` (which lists its options: ``device``, ``max_pieces``, ``pretokenize``)."""
    return StraeEncoder(run_dir, **options)


def load_recipe(payload: dict[str, Any]):
    """The recipe a model.pt was trained with (``recipe`` block), or the pre-recipe one its config implies."""
    from strae import recipes

    if "recipe" in payload:
        return recipes.from_record(payload["recipe"])
    return recipes.legacy(payload["config"])
