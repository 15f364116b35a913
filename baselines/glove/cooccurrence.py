"""Tokenisation and streaming co-occurrence counting for the GloVe baseline.

Counting follows the reference implementation (Pennington et al. 2014, ``cooccur.c``): every line is a
separate context (windows never cross a line break), out-of-vocabulary tokens are dropped *before*
windowing (so they do not occupy window positions), and a pair of tokens ``d`` positions apart
(1 <= d <= window) adds ``1/d`` to both ``X[a, b]`` and ``X[b, a]`` (symmetric window).

Memory stays bounded: token ids are buffered for ``chunk_tokens`` tokens, the chunk's pairs are reduced
into a CSR matrix (duplicates summed) and added to the running total, so peak memory is one chunk's
pair list plus the (unavoidable) running matrix of distinct pairs.
"""
from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from strae.data.pretokenize import pretokenize as pretokenize_text

TOKENIZATIONS = ("words", "subword")


@functools.lru_cache(maxsize=1)
def _punctuation_chars() -> frozenset[str]:
    """Every Unicode punctuation character (category P*), computed once; script-independent."""
    return frozenset(
        chr(code) for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)).startswith("P")
    )


# Penn Treebank clitics: tokens of their own in PTB-tokenised text (`dog 's`, `they 're`, `is n't`); with
# ``keep_clitics`` they stay whole instead of losing their apostrophe (`'s` -> `'`, `s`)
PTB_CLITICS = frozenset({"'s", "'re", "'ve", "'ll", "'d", "'m", "n't"})
# the Treebank tokeniser's other tokens made of punctuation (lowercased): its brackets (`(` -> `-LRB-`), dashes,
# ellipsis and quotes; with ``keep_clitics`` they stay whole too (not `-`, `lrb`, `-`; `.`, `.`, `.`)
PTB_SYMBOLS = frozenset({"-lrb-", "-rrb-", "-lsb-", "-rsb-", "-lcb-", "-rcb-", "--", "...", "``", "''"})
PTB_WHOLE = PTB_CLITICS | PTB_SYMBOLS


def word_tokenize(text: str, keep_clitics: bool = False) -> list[str]:
    """Lowercase, split on whitespace, and split leading/trailing punctuation off as separate tokens.

    WikiText-103 (the paper's GloVe corpus) and the papers' STS files are tokenised this way (``word ,``),
    while our prepared corpus keeps punctuation attached (``word,``); peeling it off keeps ``word`` and
    ``word,`` one vocabulary entry. Only Unicode category P* is split, and only at a token's ends, so
    word-internal marks (``don't``; ``u.s.`` keeps its inner dot: ``u.s`` + ``.``) and combining marks of any
    script survive.
    """
    punct = _punctuation_chars()
    tokens: list[str] = []
    for raw in text.lower().split():
        if (raw[0] not in punct and raw[-1] not in punct) or (keep_clitics and raw in PTB_WHOLE):
            tokens.append(raw)
            continue
        start, end = 0, len(raw)
        while start < end and raw[start] in punct:
            start += 1
        while end > start and raw[end - 1] in punct:
            end -= 1
        tokens.extend(raw[:start])
        if start < end:
            tokens.append(raw[start:end])
        tokens.extend(raw[end:])
    return tokens


def words_of(text: str, pretokenize: str = "none", trained_with: str | None = None) -> list[str]:
    """A text's words as a GloVe run of ``trained_with`` pretokenisation (default: ``pretokenize``) reads them:
    the text split by ``pretokenize`` first, then :func:`word_tokenize`, keeping PTB clitics and symbols whole
    when the run trained on pretokenised text. (``pretokenize`` differs from ``trained_with`` only where an encoder
    option says so, e.g. ``pretokenize=none`` for text already PTB-tokenised.)"""
    trained_with = pretokenize if trained_with is None else trained_with
    return word_tokenize(pretokenize_text(text, pretokenize) if pretokenize != "none" else text,
                         keep_clitics=trained_with != "none")


def iter_lines(path: str | Path, max_lines: int | None = None, desc: str = "reading corpus") -> Iterator[str]:
    """Stream a UTF-8 corpus (one sentence per line) with a byte-based progress bar."""
    path = Path(path)
    if not path.exists():
        raise SystemExit(f"{path}: corpus file does not exist (run `strae prepare-corpus` or pass --corpus)")
    with open(path, "rb") as handle, tqdm(
        total=path.stat().st_size, unit="B", unit_scale=True, desc=desc, mininterval=2.0
    ) as bar:
        for n, raw in enumerate(handle):
            if max_lines is not None and n >= max_lines:
                break
            bar.update(len(raw))
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                raise SystemExit(f"{path}:{n + 1}: not UTF-8 ({error.reason} at byte {error.start}); the corpus must "
                                 "be UTF-8 text, one sentence per line") from None
            if line:
                yield line


@dataclass
class Vocabulary:
    """Token strings (id = position) and their corpus frequencies."""

    tokens: list[str]
    counts: np.ndarray  # int64, same order as tokens

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class IdCorpus:
    """A corpus as concatenated int32 ids + per-line offsets (same layout as strae's tokenized corpora)."""

    ids: np.ndarray  # int32
    offsets: np.ndarray  # int64, n_lines + 1

    def lines(self) -> Iterator[np.ndarray]:
        for start, end in zip(self.offsets[:-1], self.offsets[1:]):
            yield self.ids[start:end]


def words_corpus(
    lines: Iterable[str], min_count: int = 5, max_vocab: int | None = None, pretokenize: str = "none"
) -> tuple[IdCorpus, Vocabulary]:
    """Tokenise lines into words, keep words seen ``min_count`` times (at most ``max_vocab``, most frequent
    first, ties broken by first appearance) and return the corpus with out-of-vocabulary words removed.
    ``pretokenize`` (strae.data.pretokenize): each line is first split as that pretokeniser splits it, and its
    clitics (``'s``, ``n't``, ...) stay whole words (:func:`words_of`)."""
    provisional: dict[str, int] = {}  # word -> id in order of first appearance (one tokenisation pass only)
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    for line in lines:
        ids = [provisional.setdefault(word, len(provisional)) for word in words_of(line, pretokenize)]
        chunks.append(np.asarray(ids, dtype=np.int32))
        lengths.append(len(ids))
    flat = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    counts = np.bincount(flat, minlength=len(provisional)).astype(np.int64)
    # Most frequent first; stable sort keeps first-appearance order among equal counts (deterministic).
    order = np.argsort(-counts, kind="stable")
    order = order[counts[order] >= min_count]
    if max_vocab is not None:
        order = order[:max_vocab]
    remap = np.full(len(provisional), -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    words_by_provisional_id = list(provisional)
    vocab = Vocabulary([words_by_provisional_id[i] for i in order], counts[order])
    mapped = remap[flat]
    keep = mapped >= 0
    line_index = np.repeat(np.arange(len(lengths)), lengths)
    kept_per_line = np.bincount(line_index[keep], minlength=len(lengths))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(kept_per_line, out=offsets[1:])
    return IdCorpus(mapped[keep], offsets), vocab


def subword_corpus(
    lines: Iterable[str], tokenizer, piece_names: Sequence[str], batch_lines: int = 4096
) -> tuple[IdCorpus, Vocabulary]:
    """Tokenise lines with a strae ``Tokenizer`` (``encode_batch``); vocabulary = all of its pieces,
    named by ``piece_names`` (id -> piece string, from the SentencePiece model)."""
    chunks: list[np.ndarray] = []
    lengths: list[int] = []

    def flush(batch: list[str]) -> None:
        for ids in tokenizer.encode_batch(batch):
            chunks.append(np.asarray(ids, dtype=np.int32))
            lengths.append(len(ids))

    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= batch_lines:
            flush(batch)
            batch = []
    flush(batch)
    flat = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    size = int(tokenizer.vocab_size)
    counts = np.bincount(flat, minlength=size).astype(np.int64)
    if len(piece_names) != size:
        raise ValueError(f"piece_names has {len(piece_names)} entries but the tokenizer has {size} pieces")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return IdCorpus(flat, offsets), Vocabulary(list(piece_names), counts)


def _chunk_pairs(ids: np.ndarray, line_of: np.ndarray, window: int, vocab_size: int) -> sp.csr_array:
    rows, cols, vals = [], [], []
    for distance in range(1, window + 1):
        if distance >= len(ids):
            break
        same_line = line_of[:-distance] == line_of[distance:]
        left = ids[:-distance][same_line]
        right = ids[distance:][same_line]
        weight = np.full(len(left), 1.0 / distance)
        rows += [left, right]
        cols += [right, left]
        vals += [weight, weight]
    if not rows:
        return sp.csr_array((vocab_size, vocab_size), dtype=np.float64)
    coo = sp.coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(vocab_size, vocab_size)
    )
    return coo.tocsr()  # sums duplicate (row, col) entries


def count_cooccurrences(
    lines: Iterable[np.ndarray],
    vocab_size: int,
    window: int = 10,
    chunk_tokens: int = 1_000_000,
    total_tokens: int | None = None,
) -> sp.csr_array:
    """Symmetric, 1/distance-weighted co-occurrence counts (float64 CSR, shape vocab x vocab)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    total = sp.csr_array((vocab_size, vocab_size), dtype=np.float64)
    buffer: list[np.ndarray] = []
    buffered = 0

    def flush() -> None:
        nonlocal total, buffer, buffered
        if not buffer:
            return
        ids = np.concatenate(buffer)
        line_of = np.repeat(np.arange(len(buffer)), [len(b) for b in buffer])
        total = total + _chunk_pairs(ids, line_of, window, vocab_size)
        bar.update(buffered)
        buffer, buffered = [], 0

    with tqdm(total=total_tokens, unit="tok", unit_scale=True, desc="co-occurrences", mininterval=2.0) as bar:
        for line_ids in lines:
            if len(line_ids) < 2:
                continue
            buffer.append(np.asarray(line_ids))
            buffered += len(line_ids)
            if buffered >= chunk_tokens:
                flush()
        flush()
    total.sum_duplicates()
    return total


def cooccurrence_triples(matrix: sp.csr_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows int64, cols int64, counts float64) of the non-zero entries, row-major order."""
    coo = matrix.tocoo()
    return coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data.astype(np.float64)

