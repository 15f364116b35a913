"""Tokenised corpora for training: ``{split}.ids.npy`` (int32, all ids concatenated), ``{split}.offsets.npy``
(int64, n_sentences + 1) and ``{split}.json`` (meta). Built once by ``strae tokenize-corpus``; read with
:class:`TokenizedCorpus` (memory-mapped, so many workers share the pages).

The papers' length filter is applied here: a sentence is kept when ``min_subword_tokens <= pieces <=
max_subword_tokens`` (config ``data.min_subword_tokens`` = 4 and ``max_subword_tokens`` = 200, i.e. 3 < n <= 200).
The language's pretokenisation (``languages.<lang>.pretokenize``) is applied here, before encoding, so the prepared
``corpora/<lang>/*.txt`` stay raw and serve every setting; pieces are counted after it. The kind is recorded in the
meta (``pretokenize``), as is the prepared corpus's ``corpus_source`` (which source it came from).
"""
from __future__ import annotations

import argparse
import itertools
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from strae import paths
from strae.argtypes import positive_int
from strae.io import atomic_open, package_versions, provenance, read_json, sha256_file, text_lines, write_json

log = logging.getLogger(__name__)

SPLITS = ("train", "dev")
_BATCH_LINES = 20_000


class TokenizedCorpus:
    """Read-only view of one tokenised split: ``len()``, ``[i] -> int32 array``, ``.lengths``."""

    def __init__(self, directory: str | Path, split: str = "train"):
        self.directory = Path(directory)
        self.split = split
        meta_path = self.directory / f"{split}.json"
        if not meta_path.exists():
            raise SystemExit(f"{meta_path}: tokenised corpus not found; run `strae tokenize-corpus` first")
        self.meta: dict[str, Any] = read_json(meta_path)
        self.ids, self.offsets = (self._array(f"{split}.{part}.npy") for part in ("ids", "offsets"))
        if len(self.offsets) != self.meta["n_sentences"] + 1 or int(self.offsets[-1]) != len(self.ids):
            raise SystemExit(f"{self.directory}: {split}.offsets.npy does not match {split}.ids.npy / {split}.json; "
                             "the files are from different runs; re-run `strae tokenize-corpus`")
        self.vocab_size: int = int(self.meta["vocab_size"])
        self.pad_id: int = int(self.meta["pad_id"])
        self.n_tokens: int = int(self.meta["n_tokens"])

    def _array(self, name: str) -> np.ndarray:
        path = self.directory / name
        try:
            return np.load(path, mmap_mode="r")
        except (OSError, ValueError) as error:  # missing, truncated (mmap longer than the file) or not an .npy
            raise SystemExit(f"{path}: unreadable ({error}); re-run `strae tokenize-corpus`") from error

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return np.asarray(self.ids[self.offsets[index]: self.offsets[index + 1]])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(np.asarray(self.offsets))

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]


def _batches(path: Path, size: int) -> Iterator[list[str]]:
    source = text_lines(path)
    while True:
        lines = [line.rstrip("\n") for line in itertools.islice(source, size)]
        if not lines:
            return
        yield lines


def _save_npy(path: Path, array: np.ndarray) -> None:
    # a file handle, not a name: np.save appends ".npy" to names that lack it (the temp name does)
    with atomic_open(path, "wb") as handle:
        np.save(handle, array)


def tokenize_split(text_file: Path, tokenizer, out_dir: Path, split: str, min_len: int, max_len: int,
                   text_sha256: str | None = None) -> dict:
    """Tokenise one split into ``out_dir``; ``text_sha256``, when the caller hashed ``text_file`` already (a split
    of a few hundred MB takes seconds to hash), is recorded as it is."""
    chunks: list[np.ndarray] = []
    n_in = too_short = too_long = 0
    with tqdm(desc=f"tokenising {split}", unit=" sent", mininterval=2.0) as bar:
        for lines in _batches(text_file, _BATCH_LINES):
            for ids in tokenizer.encode_batch(lines):
                n_in += 1
                if len(ids) < min_len:
                    too_short += 1
                elif len(ids) > max_len:
                    too_long += 1
                else:
                    chunks.append(np.asarray(ids, dtype=np.int32))
            bar.update(len(lines))
    lens = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    out_dir.mkdir(parents=True, exist_ok=True)
    # ids and offsets first, meta last: TokenizedCorpus needs the meta, so a half-written set is never read
    _save_npy(out_dir / f"{split}.ids.npy", ids)
    _save_npy(out_dir / f"{split}.offsets.npy", offsets)
    meta = {
        "split": split, "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
        "n_sentences": len(chunks), "n_tokens": int(len(ids)),
        "mean_pieces_per_sentence": round(float(lens.mean()), 3) if len(lens) else 0.0,
        "max_pieces": int(lens.max()) if len(lens) else 0,
        "length_filter": {"min_pieces": min_len, "max_pieces": max_len},
        "input_sentences": n_in, "dropped": {"too_short": too_short, "too_long": too_long},
        "text_file": str(text_file), "text_sha256": text_sha256 or sha256_file(text_file),
        "tokenizer": str(tokenizer.model_file), "tokenizer_sha256": tokenizer.sha256(),
        "pretokenize": tokenizer.pretokenize, **tokenizer_origin(Path(tokenizer.model_file)),
    }
    return meta


TOKENIZER_ORIGIN_KEYS = ("tokenizer_kind", "tokenizer_requested_kind", "tokenizer_fallback_reason")


def tokenizer_origin(model_file: Path) -> dict[str, str]:
    """Which kind of tokenizer ``model_file`` is (bpemb or sentencepiece) and, when a BPEmb model could not be had
    and SentencePiece was trained instead, that and why: read from the record `strae tokenizer` writes beside it.
    Empty for a model without one (passed by path)."""
    record_file = model_file.with_suffix(".json")
    if not record_file.exists():
        return {}
    record = read_json(record_file)
    values = (record.get("kind"), record.get("requested_kind"), record.get("fallback_reason"))
    return {key: value for key, value in zip(TOKENIZER_ORIGIN_KEYS, values) if value}


def check_tokenizer_record(tokenizer) -> None:
    """The record `strae tokenizer` wrote beside the model must describe it: the same file (sha256) and, for a
    model it trained, the pretokenizer this encoding applies (its pieces were learnt on text pretokenised so). A
    model passed by path, without a record, is taken as it is."""
    record_file = Path(tokenizer.model_file).with_suffix(".json")
    if not record_file.exists():
        return
    record = read_json(record_file)
    if record.get("sha256") and record["sha256"] != tokenizer.sha256():
        raise SystemExit(f"{tokenizer.model_file}: not the model {record_file} records (sha256 {record['sha256'][:12]}…"
                         f", the file {tokenizer.sha256()[:12]}…: replaced by hand?); run `strae tokenizer` again")
    if "pretokenize" in record and record["pretokenize"] != tokenizer.pretokenize:
        raise SystemExit(f"{record_file}: the tokenizer was trained on text pretokenised with "
                         f"{record['pretokenize']!r}, and this encoding applies {tokenizer.pretokenize!r} (the "
                         "language's `pretokenize` changed since?); train the tokenizer again (`strae tokenizer`)")


def tokenize_corpus(corpus_dir: str | Path, tokenizer_file: str | Path, out_dir: str | Path,
                    min_len: int = 4, max_len: int = 200, splits=SPLITS,
                    pretokenize: str | None = None) -> dict[str, dict]:
    from strae.data.tokenizer import load_tokenizer

    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    tokenizer = load_tokenizer(tokenizer_file, pretokenize=pretokenize)
    check_tokenizer_record(tokenizer)
    corpus_meta = corpus_dir / "meta.json"
    prepared = read_json(corpus_meta) if corpus_meta.exists() else {}
    if not corpus_meta.exists():
        log.warning("%s: not found, so the splits cannot be checked as one set (a corpus made by hand?)", corpus_meta)
    # which source the prepared corpus came from (paper or fallback), so a run's data says it without a detour
    corpus_source = prepared.get("corpus_source")
    hashes = {}
    for split in splits:  # every split checked before any is tokenised; each hashed once, here
        text_file = corpus_dir / f"{split}.txt"
        if not text_file.exists():
            raise SystemExit(f"{text_file}: prepared corpus split not found; run `strae prepare-corpus` first")
        hashes[split] = sha256_file(text_file)
        expected = (prepared.get(split) or {}).get("sha256")
        if expected and hashes[split] != expected:
            raise SystemExit(f"{text_file}: its sha256 is not the one {corpus_meta} records; the splits are not "
                             f"from one `strae prepare-corpus` run (an interrupted rerun?). Run it again.")
    # each split's .json is its completion mark: every one goes before any is rewritten, so a run interrupted between
    # splits leaves no new train beside an old dev (which the trainer would take as one set)
    for split in splits:
        (out_dir / f"{split}.json").unlink(missing_ok=True)
    prepared_sha = sha256_file(corpus_meta) if corpus_meta.exists() else None
    metas = {}
    for split in splits:
        text_file = corpus_dir / f"{split}.txt"
        started = time.time()
        meta = tokenize_split(text_file, tokenizer, out_dir, split, min_len, max_len, text_sha256=hashes[split])
        if meta["n_sentences"] == 0:
            problem = (f"{text_file}: no sentence of {min_len}..{max_len} subword pieces (dropped: {meta['dropped']})"
                       "; prepare the corpus again or widen --min-pieces / --max-pieces")
            if split == "train":  # no completion mark: nothing trains on it (the trainers would refuse it later)
                raise SystemExit(problem)
            log.warning("%s (strae train refuses an empty %s split; GloVe reads only train)", problem, split)
        if corpus_source is not None:
            meta["corpus_source"] = corpus_source
        if prepared_sha is not None:  # the prepared corpus both splits come from (the trainer compares them)
            meta["corpus_meta_sha256"] = prepared_sha
        meta["seconds"] = round(time.time() - started, 1)
        meta["provenance"] = provenance(packages=package_versions("sentencepiece", "nltk"))
        write_json(out_dir / f"{split}.json", meta)
        log.info("%s: %d sentences, %d pieces (%.1f / sentence), dropped %s", split, meta["n_sentences"],
                 meta["n_tokens"], meta["mean_pieces_per_sentence"], meta["dropped"])
        metas[split] = meta
    return metas


def main(argv: list[str] | None = None) -> int:
    from strae.data.pretokenize import PRETOKENIZERS
    from strae.data.registry import DEFAULT_CONFIG, language_block, load_config
    from strae.data.tokenizer import language_pretokenize

    parser = argparse.ArgumentParser(prog="strae tokenize-corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True)
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--corpus-dir", default=None, help="default: <resources>/corpora/<lang>")
    parser.add_argument("--tokenizer", default=None, help="default: <resources>/tokenizers/<lang>.model")
    parser.add_argument("--out-dir", default=None, help="default: <resources>/tokenized/<lang>")
    parser.add_argument("--min-pieces", type=positive_int, default=None, help="default: data.min_subword_tokens")
    parser.add_argument("--max-pieces", type=positive_int, default=None, help="default: data.max_subword_tokens")
    parser.add_argument("--pretokenize", choices=PRETOKENIZERS, default=None,
                        help="word-level pretokenisation before encoding (default: languages.<lang>.pretokenize)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    config = load_config(args.config)
    data = config.get("data") or {}
    pretokenize = args.pretokenize or language_pretokenize(language_block(config, args.lang, args.config), args.lang,
                                                           args.config)
    resources = paths.resources_dir(config)
    min_len = args.min_pieces if args.min_pieces is not None else int(data.get("min_subword_tokens", 4))
    max_len = args.max_pieces if args.max_pieces is not None else int(data.get("max_subword_tokens", 200))
    if min_len > max_len:
        raise SystemExit(f"--min-pieces / data.min_subword_tokens {min_len} > --max-pieces / data.max_subword_tokens "
                         f"{max_len}: no sentence could be kept")
    metas = tokenize_corpus(
        args.corpus_dir or paths.corpus_dir(args.lang, resources),
        args.tokenizer or paths.tokenizer_model(args.lang, resources),
        args.out_dir or paths.tokenized_dir(args.lang, resources),
        min_len=min_len, max_len=max_len, pretokenize=pretokenize,
    )
    for split, meta in metas.items():
        print(f"{split}: {meta['n_sentences']} sentences, {meta['n_tokens']} pieces, "
              f"{meta['mean_pieces_per_sentence']} pieces/sentence, dropped {meta['dropped']}, "
              f"pretokenize {meta['pretokenize']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
