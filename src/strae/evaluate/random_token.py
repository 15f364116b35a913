"""``random-token``: a seeded random vector per token, mean-pooled — the sanity floor every model must beat.

Tokens are the lowercased whitespace-separated words. Each token's vector is drawn from N(0, 1) with a numpy
generator seeded by sha256(seed, token), so a token gets the same vector in every process, on every machine,
and in any batch order (Python's ``hash()`` is salted per process, so it is not used). A sentence is the mean of
its tokens' vectors; an empty string has no vector (NaN row). What it measures: how much of a task is solved by
lexical overlap alone (identical words give identical vectors), with no learned similarity between different words.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from strae.encode import Encoder

DEFAULT_DIM = 256  # the floor's width unless asked (the records' floor; the workflow's `true`)


class RandomTokenEncoder(Encoder):
    def __init__(self, seed: int = 0, dim: int = DEFAULT_DIM):
        if dim < 1:
            raise SystemExit(f"--encoder-option dim={dim}: must be a positive integer")
        self.seed = int(seed)
        self.dim = int(dim)
        self.encoder_id = f"random-token/dim{self.dim}/seed{self.seed}"
        self._cache: dict[str, np.ndarray] = {}

    def token_vector(self, token: str) -> np.ndarray:
        vector = self._cache.get(token)
        if vector is None:
            digest = hashlib.sha256(f"{self.seed}\x00{token}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:16], "little"))
            vector = rng.standard_normal(self.dim).astype(np.float32)
            self._cache[token] = vector
        return vector

    @staticmethod
    def tokens(text: str) -> list[str]:
        return text.lower().split()

    def pool(self, token_lists: Sequence[Sequence[str]]) -> np.ndarray:
        """The mean of each list's token vectors; an empty list has no vector (NaN row). Also the multi-view
        encoder's floor over its own tokens (``vectors=random-token``)."""
        out = np.full((len(token_lists), self.dim), np.nan, dtype=np.float32)
        for row, tokens in enumerate(token_lists):
            if tokens:
                out[row] = np.mean([self.token_vector(t) for t in tokens], axis=0)
        return out

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.pool([self.tokens(text) for text in texts])

    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        return self._encode(sentences)

    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        # a multi-word entry ("New York") is pooled like a sentence
        return self._encode(words)

    def describe(self) -> dict[str, Any]:
        return {
            "encoder_id": self.encoder_id,
            "kind": "random-token",
            "device": "cpu (numpy)",
            "seed": self.seed,
            "dim": self.dim,
            "tokenization": "lowercase + whitespace split",
            "pooling": "mean",
            "vector": "N(0,1) from numpy default_rng seeded by sha256(seed, token)",
        }

    def run_info(self) -> dict[str, Any]:
        return {"language": None, "model": "random-token", "setting": f"dim{self.dim}", "seed": self.seed,
                "status": "completed", "failure_reason": None}


def load(seed: int | str = 0, dim: int | str = DEFAULT_DIM, device: str | None = None) -> RandomTokenEncoder:
    """Builtin kind ``random-token`` (``strae.encode.ENCODERS``): ``load_encoder("random-token", **options)``.
    ``device`` is accepted (the workflow passes every encoder one) and unused: the vectors are numpy's."""
    values = {}
    for name, value in (("seed", seed), ("dim", dim)):
        try:
            values[name] = int(value)
        except (TypeError, ValueError):
            raise SystemExit(f"--encoder-option {name}={value}: not an integer") from None
    return RandomTokenEncoder(**values)
