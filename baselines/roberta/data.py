"""Sentence corpora, batching and MLM masking for the RoBERTa baseline.

A training example is one sentence of the language's tokenised corpus wrapped as ``<s> pieces </s>``. (The Banyan
paper does not say how it packed WikiText-103 for RoBERTa; sentence examples match what is evaluated — single
sentences and words.) A step's sentences are masked on the padded layout (:func:`collate` + :func:`mask_for_mlm`,
so the masked positions do not depend on the layout) and then, by default, packed several to a row
(:func:`pack`, first-fit decreasing into rows of ``max_length`` ids) with block-diagonal attention between them: on
real English batches (32 sentences) padding to the longest made 2.6 ids per real token, packing 1.05.

Batches are a pure function of (seed, step) (:func:`strae.data.batching.batch_at_step`: epoch ``e`` visits the
sentences in ``default_rng([seed, e])``'s permutation), so a resumed run sees exactly the batches an uninterrupted
one would.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from baselines.roberta.model import SpecialIds
from strae.io import read_json, text_lines


class SentenceCorpus(Protocol):
    """What the trainer needs from a corpus (``strae.data.tokenized.TokenizedCorpus`` satisfies it)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> np.ndarray: ...


class InMemoryCorpus:
    """Sentences already tokenised into id lists (used for ``--corpus`` text files and tests)."""

    def __init__(self, sentences: Sequence[Sequence[int]], vocab_size: int):
        self.sentences = [np.asarray(s, dtype=np.int32) for s in sentences if len(s) > 0]
        self.vocab_size = vocab_size
        self.pad_id = vocab_size
        self.lengths = np.array([len(s) for s in self.sentences], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.sentences[index]


def load_corpus(data_dir: str | Path | None, corpus_file: str | Path | None, tokenizer, split: str = "train",
                max_sentences: int | None = None):
    """The training sentences: a tokenised-corpus directory (contract layout) or a plain text file.

    ``corpus_file`` is UTF-8 text, one sentence per line, tokenised here with ``tokenizer`` (only the first
    ``max_sentences`` lines are read when given). Exactly one of the two sources must be given.
    """
    if (data_dir is None) == (corpus_file is None):
        raise SystemExit("give exactly one of --data-dir (tokenised corpus) or --corpus (text file)")
    if corpus_file is not None:
        path = Path(corpus_file)
        if not path.is_file():
            raise SystemExit(f"--corpus {path}: file not found")
        lines: list[str] = []
        for line in text_lines(path):
            line = line.strip()
            if line:
                lines.append(line)
            if max_sentences is not None and len(lines) >= max_sentences:
                break
        return InMemoryCorpus(tokenizer.encode_batch(lines), tokenizer.vocab_size)
    directory = Path(data_dir)
    if not (directory / f"{split}.ids.npy").exists():
        raise SystemExit(
            f"--data-dir {directory}: {split}.ids.npy not found (run `strae tokenize-corpus` for this language first)"
        )
    from strae.data.tokenized import TokenizedCorpus

    corpus = TokenizedCorpus(directory, split)
    if corpus.vocab_size != tokenizer.vocab_size:
        raise SystemExit(
            f"{directory}/{split}.json: vocab_size {corpus.vocab_size} != tokenizer's {tokenizer.vocab_size} "
            "(the corpus was tokenised with a different tokenizer)"
        )
    recorded = read_json(directory / f"{split}.json").get("tokenizer_sha256")
    if recorded and recorded != tokenizer.sha256():  # another model of the same size would pass the check above
        raise SystemExit(f"{directory}/{split}.json: tokenised with the tokenizer of sha256 {recorded[:12]}…, not "
                         f"{tokenizer.model_file} ({tokenizer.sha256()[:12]}…); pass that corpus' own tokenizer")
    return corpus


def collate(sentences: Sequence[np.ndarray], special: SpecialIds, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``<s> pieces </s>`` per sentence, truncated to ``max_length`` ids in all, padded with pad; (ids, attention).

    Filled with array ops (the pieces of all sentences placed by one boolean-mask assignment, which fills row-major,
    the order they are concatenated in) instead of a Python list per sentence: 0.6 -> 0.3 ms per 64 English
    sentences on a 2-core CPU, host time every GPU step pays. The same ids as ``strae.data.batching.pad_batch`` of
    the lists (tested)."""
    max_pieces = max_length - 2
    pieces = [np.asarray(s[:max_pieces]) for s in sentences]  # the corpus' own dtype; one conversion below
    n_pieces = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    width = int(n_pieces.max()) + 2 if len(pieces) else 0
    ids = np.full((len(pieces), width), special.pad, dtype=np.int64)
    column = np.arange(width)
    ids[(column >= 1) & (column <= n_pieces[:, None])] = np.concatenate(pieces).astype(np.int64) if pieces else []
    rows = np.arange(len(pieces))
    ids[rows, 0] = special.bos
    ids[rows, n_pieces + 1] = special.eos
    ids = torch.from_numpy(ids)
    return ids, (ids != special.pad).long()


@dataclass
class Rows:
    """Model input rows: ids, MLM labels (-100 = not predicted) and segment ids (sentence index within the step's
    batch, -1 = padding); the attention is block-diagonal over segments (``baselines.roberta.model.encode``)."""

    inputs: torch.Tensor
    labels: torch.Tensor
    segments: torch.Tensor
    predicted: torch.Tensor | None = None  # set by ``to``: flat indices of the predicted positions

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def chunks(self, n: int) -> list[Rows]:
        """``n`` near-equal groups of rows (gradient accumulation), each trimmed to its own longest fill."""
        out = []
        for index in np.array_split(np.arange(len(self)), min(n, len(self))):
            segments = self.segments[index]
            width = int((segments >= 0).sum(1).max())
            out.append(Rows(self.inputs[index, :width], self.labels[index, :width], segments[:, :width]))
        return out

    def predicted_index(self) -> torch.Tensor:
        """Flat indices of the predicted positions, computed where the labels live (the CPU, before ``to``), so the
        device never has to sync to find them."""
        return (self.labels.flatten() != -100).nonzero().squeeze(1)

    def to(self, device: torch.device) -> Rows:
        return Rows(*(t.to(device, non_blocking=True) for t in (self.inputs, self.labels, self.segments,
                                                                  self.predicted_index())))


def padded_rows(inputs: torch.Tensor, labels: torch.Tensor, special: SpecialIds) -> Rows:
    """One sentence per row, as :func:`collate` laid it out (segment = row index, -1 on pad)."""
    rows = torch.arange(inputs.shape[0]).unsqueeze(1).expand_as(inputs)
    return Rows(inputs, labels, torch.where(inputs != special.pad, rows, -1))


def pack(inputs: torch.Tensor, labels: torch.Tensor, special: SpecialIds, row_length: int) -> Rows:
    """Pack the padded batch's sentences (after masking) into as few rows of ``row_length`` ids as first-fit
    decreasing finds; sentence ``i`` keeps segment id ``i``. Deterministic (ties broken by sentence index)."""
    lengths = (inputs != special.pad).sum(1).tolist()
    if max(lengths) > row_length:
        raise ValueError(f"a sentence of {max(lengths)} ids does not fit a row of {row_length}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    fills: list[int] = []
    members: list[list[int]] = []
    for i in order:
        for row, fill in enumerate(fills):
            if fill + lengths[i] <= row_length:
                fills[row] += lengths[i]
                members[row].append(i)
                break
        else:
            fills.append(lengths[i])
            members.append([i])
    width = max(fills)
    # every sentence's (row, first column), then all ids moved in one gather: three slice copies per sentence
    # were ~2 ms of host time per 64-sentence step, beside a ~0.04 s GPU step
    row_of = np.zeros(len(lengths), dtype=np.int64)
    start_of = np.zeros(len(lengths), dtype=np.int64)
    for row, sentence_ids in enumerate(members):
        at = 0
        for i in sentence_ids:
            row_of[i], start_of[i] = row, at
            at += lengths[i]
    sentence, position = np.nonzero(np.arange(inputs.shape[1])[None, :] < np.asarray(lengths)[:, None])
    rows, columns = row_of[sentence], start_of[sentence] + position
    inputs_np, labels_np = inputs.numpy(), labels.numpy()
    packed_inputs = np.full((len(fills), width), special.pad, dtype=inputs_np.dtype)
    packed_labels = np.full((len(fills), width), -100, dtype=labels_np.dtype)
    segments = np.full((len(fills), width), -1, dtype=np.int64)
    packed_inputs[rows, columns] = inputs_np[sentence, position]
    packed_labels[rows, columns] = labels_np[sentence, position]
    segments[rows, columns] = sentence
    return Rows(torch.from_numpy(packed_inputs), torch.from_numpy(packed_labels), torch.from_numpy(segments))


def mask_for_mlm(ids: torch.Tensor, special: SpecialIds, generator: torch.Generator,
                 probability: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT/RoBERTa masking: choose ``probability`` of the piece positions; of those 80% -> <mask>, 10% -> a
    random piece, 10% unchanged. Labels are -100 except at chosen positions. Specials are never chosen."""
    is_piece = ids < special.n_pieces
    chosen = (torch.rand(ids.shape, generator=generator) < probability) & is_piece
    # guarantee at least one prediction per batch so a tiny batch never yields a NaN loss
    if not chosen.any():
        candidates = is_piece.nonzero()
        pick = candidates[torch.randint(len(candidates), (1,), generator=generator)]
        chosen[pick[0, 0], pick[0, 1]] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    action = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = special.mask
    random_positions = chosen & (action >= 0.8) & (action < 0.9)
    inputs[random_positions] = torch.randint(special.n_pieces, ids.shape, generator=generator)[random_positions]
    return inputs, labels
