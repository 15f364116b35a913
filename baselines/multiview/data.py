"""Parsed corpus -> vocabulary, id sentences and batches of consecutive sentences (in-batch negatives)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from baselines.multiview.model import TreeBatch, make_batch
from baselines.multiview.parse import iter_parsed

PAD, UNK = "<pad>", "<unk>"


def normalize_token(token: str, lowercase: bool) -> str:
    return token.lower() if lowercase else token


class Vocabulary:
    """The ``size`` most frequent training tokens (ties by string, so it is deterministic); ids 0..size-1, then
    <pad> = size, <unk> = size + 1 (MultiviewConfig.pad_id / unk_id)."""

    def __init__(self, tokens: Sequence[str], lowercase: bool):
        self.tokens = list(tokens)
        self.lowercase = lowercase
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id = len(self.tokens)
        self.unk_id = len(self.tokens) + 1

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], size: int, lowercase: bool) -> Vocabulary:
        counts: Counter[str] = Counter()
        for tokens in sentences:
            counts.update(normalize_token(t, lowercase) for t in tokens)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
        return cls([t for t, _ in ranked], lowercase)

    def ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.index.get(normalize_token(t, self.lowercase), self.unk_id) for t in tokens]

    def to_dict(self) -> dict:
        return {"lowercase": self.lowercase, "tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: dict) -> Vocabulary:
        return cls(data["tokens"], data["lowercase"])


@dataclass
class ParsedCorpus:
    """Sentences kept for training, in corpus order."""

    tokens: list[list[str]]
    heads: list[list[int]]
    books: np.ndarray  # (n,) int64
    positions: np.ndarray  # (n,) int64 position in the book before filtering
    n_read: int
    n_dropped_length: int

    def __len__(self) -> int:
        return len(self.tokens)


def load_parsed(directory: Path, max_tokens: int) -> ParsedCorpus:
    """Sentences with 1..max_tokens tokens (longer ones are dropped; their position stays a gap so no false
    context pair forms around them)."""
    tokens, heads, books, positions = [], [], [], []
    n_read = dropped = 0
    for book, position, toks, hds in iter_parsed(directory):
        n_read += 1
        if not 1 <= len(toks) <= max_tokens:
            dropped += 1
            continue
        tokens.append(toks)
        heads.append(hds)
        books.append(book)
        positions.append(position)
    if not tokens:
        raise SystemExit(f"{directory}: no sentences with 1..{max_tokens} tokens")
    return ParsedCorpus(tokens, heads, np.asarray(books, dtype=np.int64), np.asarray(positions, dtype=np.int64),
                        n_read, dropped)


def select_training(corpus: ParsedCorpus, max_sentences: int | None, sentences_per_book: int | None) -> ParsedCorpus:
    """The training subset, still in corpus order: each book's first ``sentences_per_book`` kept sentences (every
    book contributes a contiguous stretch), then the first ``max_sentences`` of those."""
    keep = np.arange(len(corpus))
    if sentences_per_book is not None:
        rank = np.zeros(len(corpus), dtype=np.int64)
        seen: dict[int, int] = {}
        for i, book in enumerate(corpus.books.tolist()):
            rank[i] = seen.get(book, 0)
            seen[book] = rank[i] + 1
        keep = keep[rank < sentences_per_book]
    if max_sentences is not None:
        keep = keep[:max_sentences]
    return ParsedCorpus([corpus.tokens[i] for i in keep], [corpus.heads[i] for i in keep], corpus.books[keep],
                        corpus.positions[keep], corpus.n_read, corpus.n_dropped_length)


def count_context_pairs(books: np.ndarray, positions: np.ndarray, batch_size: int) -> int:
    """Ordered (target, context) pairs the batching yields: neighbours in the same batch, same book."""
    total = 0
    for start in range(0, len(books), batch_size):
        b, p = books[start:start + batch_size], positions[start:start + batch_size]
        total += 2 * int(np.sum((b[1:] == b[:-1]) & (p[1:] - p[:-1] == 1)))
    return total


def batch_at(corpus: ParsedCorpus, vocab: Vocabulary, start: int, batch_size: int) -> tuple[TreeBatch, np.ndarray,
                                                                                              np.ndarray]:
    end = min(start + batch_size, len(corpus))
    sentences = [(vocab.ids(corpus.tokens[i]), corpus.heads[i]) for i in range(start, end)]
    return make_batch(sentences, vocab.pad_id), corpus.books[start:end], corpus.positions[start:end]
