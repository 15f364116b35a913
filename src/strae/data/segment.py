"""Streaming text reading and sentence segmentation (one sentence per line, whitespace normalised).

The mirror's corpora hold one paragraph per line; the papers train on one sentence per line. ``sentencex``
(Wikimedia, ~300 languages, rule-based, no model downloads) splits paragraphs; the language code comes from
the language block's ``segmenter`` key.
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections.abc import Iterator
from pathlib import Path

from sentencex import segment as _sentencex_segment


def open_text(path: str | Path, errors: str = "replace") -> io.TextIOBase:
    """Open plain, .xz, .gz or .bz2 text for streaming reads (UTF-8; by default undecodable bytes replaced, not
    fatal; ``errors="strict"`` where a corpus must be UTF-8 as it is)."""
    path = Path(path)
    opener = {".xz": lzma.open, ".lzma": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    return opener(path, "rt", encoding="utf-8", errors=errors, newline=None)


def normalize_whitespace(text: str) -> str:
    # str.split() without arguments splits on every Unicode whitespace run (incl. NBSP, tabs, U+2028),
    # so this also strips leading/trailing space.
    return " ".join(text.split())


def clean_line(text: str) -> str:
    """The one line normalisation of corpus text, also applied to evaluation texts read from published files:
    byte-order marks removed, whitespace runs collapsed to one space, ends stripped. Script-neutral: it never
    touches letters, digits, case or direction marks (the tokenizer's normalisation does the rest, both sides)."""
    return normalize_whitespace(text.replace("\ufeff", ""))


def iter_paragraphs(path: str | Path) -> Iterator[str]:
    """Non-empty, whitespace-normalised lines of a (possibly compressed) text file."""
    with open_text(path) as handle:
        for line in handle:
            line = clean_line(line)
            if line:
                yield line


def split_sentences(paragraph: str, language: str) -> list[str]:
    """Sentences of one paragraph, whitespace-normalised, empty pieces dropped."""
    out = []
    for sentence in _sentencex_segment(language, paragraph):
        sentence = normalize_whitespace(sentence)
        if sentence:
            out.append(sentence)
    return out


def iter_sentences(paths: list[Path], language: str | None) -> Iterator[str]:
    """Sentences of several files in order. Deterministic: the same files give the same sequence.

    ``language`` None: the files already hold one sentence per line (e.g. the authors' own corpora, which the
    reference trains on line by line), so lines are taken as they are (whitespace-normalised, empty ones dropped)."""
    for path in paths:
        for paragraph in iter_paragraphs(path):
            if language is None:
                yield paragraph
            else:
                yield from split_sentences(paragraph, language)
