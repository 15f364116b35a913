"""Tokenizers: BPEmb SentencePiece models (copied from the registry) or SentencePiece BPE trained per language.

Id layout (the one place it is defined): ids ``0..V-1`` are the model's pieces (BPEmb layout: 0 ``<unk>``,
1 ``<s>``, 2 ``</s>``, then BPE pieces); ``pad_id == V`` is the only extra id. Models size their embedding
tables as ``V + 1`` rows or mask the pad id.

Preprocessing (BPEmb's, applied to BPEmb and trained models alike, before encoding and before training):
lowercase, then every Unicode digit -> ``0``. Before that, a language's word-level pretokenisation
(``languages.<lang>.pretokenize``, :mod:`strae.data.pretokenize`) when the tokenizer is loaded with one: corpus
tokenisation, SentencePiece training and a trained model's encoder all apply the same kind.

``strae tokenizer --lang L --config config/config.yaml --out resources/tokenizers/L.model`` writes the model and
``L.json`` beside it (kind, vocab size and how it was chosen, sha256s).

``tokenizer: {kind: bpemb, ...}`` names BPEmb's model file by ``registry`` name or local ``path``, or by BPEmb's own
``language`` code and ``vocab_size`` (+ optional ``sha256``): the file ``{language}.wiki.bpe.vs{vocab_size}.model``
is taken from resources/data/tokenizers/, the mirror's tokenizers/, or BPEmb's site (:data:`BPEMB_URL`), and
checksummed like any other download (without a ``sha256``: trust on first use). When it cannot be had (offline)
and ``fallback`` is ``sentencepiece`` (the default), a SentencePiece model is trained on the corpus with the same
vocabulary size instead, as for ``kind: sentencepiece``; the record says so (``fallback_reason``).
"""
from __future__ import annotations

import argparse
import logging
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm

from strae import paths
from strae.data.fetch import ChecksumError, FetchError
from strae.data.pretokenize import check_kind, get_pretokenizer
from strae.data.registry import DEFAULT_CONFIG, language_block, load_config, load_registry
from strae.io import atomic_path, package_versions, provenance, sha256_file, text_lines, write_json

log = logging.getLogger(__name__)

_DIGIT = re.compile(r"\d")  # str patterns: \d matches every Unicode decimal digit (Devanagari, Arabic-Indic, ...)

# Vocabulary rule for trained models: min(requested, max(MIN_VOCAB, word_types // TYPES_PER_PIECE)).
# A BPE vocabulary much larger than half the corpus' word types mostly memorises whole rare words and leaves
# pieces that occur a handful of times; BPEmb's own smaller-language models use smaller vocabularies for that
# reason. The floor keeps tiny corpora trainable (it is raised to the alphabet size + specials if needed).
TYPES_PER_PIECE = 2
MIN_VOCAB = 1000

# BPEmb-like SentencePiece settings (BPE, BPEmb special-id layout, no pad piece, no extra normalisation:
# the text is already lowercased/digit-mapped; nmt_nfkc is SentencePiece's default and BPEmb kept it).
TRAINER_SETTINGS: dict[str, Any] = {
    "model_type": "bpe",
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "pad_id": -1,
    "character_coverage": 0.9999,
    "normalization_rule_name": "nmt_nfkc",
    "input_sentence_size": 3_000_000,
    "shuffle_input_sentence": True,
    "max_sentence_length": 8192,
    # a corpus too small for the chosen size gets fewer pieces instead of an error; the record says how many
    "hard_vocab_limit": False,
}


SPM_SEED = 0  # the sample of a corpus over input_sentence_size lines (sampled_lines)


def sampled_lines(n_lines: int, size: int) -> np.ndarray | None:
    """Which of ``n_lines`` lines a tokenizer trains on: all (None) up to ``size``, else a seeded sample of ``size``
    as a mask (SentencePiece's own reservoir sample differs from process to process, whatever its seed)."""
    if n_lines <= size:
        return None
    keep = np.zeros(n_lines, dtype=bool)
    keep[np.random.default_rng(SPM_SEED).choice(n_lines, size=size, replace=False)] = True
    return keep

# BPEmb's own download location: bpemb 0.3.6's BPEmb.base_url + model_tpl ("{lang}/{lang}.wiki.bpe.vs{vs}.model")
BPEMB_URL = "https://nlp.h-its.org/bpemb/{language}/{language}.wiki.bpe.vs{vocab_size}.model"
BPEMB_FILE = "tokenizers/{language}.wiki.bpe.vs{vocab_size}.model"  # under the mirror and resources/data/
BPEMB_FALLBACKS = ("sentencepiece", "none")
_BPEMB_LANGUAGE = re.compile(r"^[a-z][a-z_]*$")


def normalize(text: str) -> str:
    """BPEmb preprocessing: lowercase, every digit -> 0."""
    return _DIGIT.sub("0", text.lower())


def _env_threads() -> int:
    """``OMP_NUM_THREADS`` as a positive count (of a nested list ``4,2``, the outer level's), else -1
    (SentencePiece: every core)."""
    import os

    try:
        count = int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip())
    except ValueError:
        return -1
    return count if count > 0 else -1


class Tokenizer:
    """A SentencePiece model with BPEmb preprocessing and a pad id one past the last piece.

    ``pretokenize`` (a :data:`strae.data.pretokenize.PRETOKENIZERS` kind) is applied to every text first."""

    def __init__(self, model_file: str | Path, pretokenize: str | None = None):
        self.model_file = Path(model_file)
        if not self.model_file.exists():
            raise SystemExit(f"{self.model_file}: tokenizer model not found; run `strae tokenizer --lang L` first")
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(self.model_file))
        except (RuntimeError, OSError) as error:  # e.g. the tokenizer's .json beside it, or a truncated file
            raise SystemExit(f"{self.model_file}: not a SentencePiece model ({error}); give the .model file "
                             "`strae tokenizer` wrote") from error
        self.vocab_size: int = self._sp.get_piece_size()
        self.pad_id: int = self.vocab_size
        self.unk_id: int = self._sp.unk_id()
        self.pretokenize: str = check_kind(pretokenize)
        self._pretokenizer = get_pretokenizer(self.pretokenize)

    def normalize(self, text: str) -> str:
        """The exact string SentencePiece sees: pretokenised, then BPEmb-normalised."""
        return normalize(self._pretokenizer(text))

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(self.normalize(text), out_type=int)

    def encode_batch(self, texts: Iterable[str], num_threads: int | None = None) -> list[list[int]]:
        """Ids of each text. ``num_threads`` default: ``OMP_NUM_THREADS`` where set (the workflow sets it per job,
        so several jobs on one machine do not each take every core), else every core (SentencePiece's -1)."""
        if num_threads is None:
            num_threads = _env_threads()
        return self._sp.encode([self.normalize(t) for t in texts], out_type=int, num_threads=num_threads)

    def encode_as_pieces(self, text: str, normalized: bool = False) -> list[str]:
        """The pieces of ``text``; ``normalized``: ``text`` is already :meth:`normalize`'s output (a word of a
        normalised sentence), encoded as it is — pretokenising it again would split it as if it ended a sentence
        (the treebank tokeniser reads a lone ``mr.`` as ``mr .``)."""
        return self._sp.encode(text if normalized else self.normalize(text), out_type=str)

    def decode(self, ids: Iterable[int]) -> str:
        return self._sp.decode([i for i in ids if i != self.pad_id])

    def id_to_piece(self, index: int) -> str:
        return "<pad>" if index == self.pad_id else self._sp.id_to_piece(index)

    def sha256(self) -> str:
        return sha256_file(self.model_file)


def load_tokenizer(model_file: str | Path, pretokenize: str | None = None) -> Tokenizer:
    return Tokenizer(model_file, pretokenize=pretokenize)


def choose_vocab_size(requested: int, word_types: int, alphabet: int) -> tuple[int, str]:
    """The explicit vocabulary rule for trained models; returns (size, human-readable reason)."""
    floor = max(MIN_VOCAB, alphabet + 3 + 1)
    by_corpus = max(floor, word_types // TYPES_PER_PIECE)
    size = min(requested, by_corpus)
    reason = (f"min(requested {requested}, max({floor} floor, {word_types} word types // {TYPES_PER_PIECE} = "
              f"{word_types // TYPES_PER_PIECE})) = {size}")
    return size, reason


def train_sentencepiece(corpus: str | Path, out: str | Path, requested_vocab: int = 25000,
                        threads: int = 2, pretokenize: str | None = None) -> dict[str, Any]:
    """Train a BPEmb-like SentencePiece BPE model on ``corpus`` (one sentence per line, pretokenised with
    ``pretokenize`` first, as the corpus will be when it is encoded); returns its record."""
    corpus, out = Path(corpus), Path(out)
    pretokenize = check_kind(pretokenize)
    pretokenizer = get_pretokenizer(pretokenize)
    if not corpus.exists():
        raise SystemExit(f"{corpus}: prepared corpus not found; run `strae prepare-corpus` first")
    types: set[str] = set()
    chars: set[str] = set()
    n_lines = 0
    with tempfile.TemporaryDirectory(prefix="strae-spm-") as tmpdir:
        normalized = Path(tmpdir) / "train.normalized.txt"
        with open(normalized, "w", encoding="utf-8") as dst:
            for line in text_lines(corpus):
                line = normalize(pretokenizer(line.strip()))
                if not line:
                    continue
                dst.write(line + "\n")
                words = line.split()
                types.update(words)
                n_lines += 1
                if n_lines <= 200_000:  # the alphabet saturates early; don't pay for it on every line
                    chars.update(line.replace(" ", ""))
        if n_lines == 0:
            raise SystemExit(f"{corpus}: no text to train a tokenizer on (empty, or blank lines only)")
        vocab, reason = choose_vocab_size(requested_vocab, len(types), len(chars))
        log.info("tokenizer vocab for %s: %s", corpus, reason)
        # The same bytes on every machine: a model trained from a file records that file's path and its model
        # prefix (here a random temp folder) in its trainer spec, so identical pieces got a different sha256 each
        # time, and a run's data fingerprint with it. Lines from an iterator and the model to a writer record
        # neither. SentencePiece's own sampling of a corpus over input_sentence_size lines does not repeat, even
        # seeded: such a corpus is sampled here instead, seeded, and SentencePiece gets at most that many lines.
        keep = sampled_lines(n_lines, TRAINER_SETTINGS["input_sentence_size"])
        with atomic_path(out, suffix=".model") as tmp_model, open(normalized, encoding="utf-8") as lines, \
                open(tmp_model, "wb") as writer:
            chosen = lines if keep is None else (line for i, line in enumerate(lines) if keep[i])
            spm.SentencePieceTrainer.train(
                sentence_iterator=chosen, model_writer=writer, vocab_size=vocab, num_threads=threads,
                minloglevel=2, **TRAINER_SETTINGS,
            )
    actual = spm.SentencePieceProcessor(model_file=str(out)).get_piece_size()
    if actual != vocab:
        log.warning("tokenizer %s: the corpus supports only %d pieces (rule asked for %d)", out, actual, vocab)
    return {"kind": "sentencepiece", "vocab_size": actual, "rule_vocab_size": vocab,
            "requested_vocab_size": requested_vocab,
            "vocab_rule": reason, "word_types": len(types), "alphabet_size": len(chars), "training_lines": n_lines,
            "pretokenize": pretokenize,
            "trainer_settings": TRAINER_SETTINGS, "corpus": str(corpus), "corpus_sha256": sha256_file(corpus)}


def language_pretokenize(block: dict[str, Any], lang: str, config_path: str | Path = DEFAULT_CONFIG) -> str:
    """A language block's ``pretokenize`` kind (absent -> ``none``), checked."""
    return check_kind(block.get("pretokenize"), f"{config_path}: languages.{lang}.pretokenize")


def build_tokenizer(lang: str, config_path: str | Path = DEFAULT_CONFIG, out: str | Path | None = None,
                    corpus: str | Path | None = None, mirror: str | Path | None = None) -> dict[str, Any]:
    config = load_config(config_path)
    block = language_block(config, lang, config_path)
    resources = paths.resources_dir(config)
    out = Path(out) if out is not None else paths.tokenizer_model(lang, resources)
    spec = block.get("tokenizer") or {}
    kind = spec.get("kind")
    where = f"{config_path}: languages.{lang}.tokenizer"
    fallback_reason = None
    if kind == "bpemb":
        # fetch()/fetch_url() verify the checksum and never trigger bpemb's own downloader
        try:
            source, record = _bpemb_model_file(spec, where, config, resources, mirror)
        except ChecksumError:
            raise  # a file that changed is an error, never a reason to fall back
        except FetchError as error:
            if spec.get("fallback", "sentencepiece") != "sentencepiece" or "language" not in spec:
                raise
            fallback_reason = str(error)
            log.warning("%s: BPEmb model not available (%s); training the SentencePiece fallback", lang, error)
        if fallback_reason is None:
            with atomic_path(out, suffix=".model") as tmp:
                shutil.copyfile(source, tmp)
                spm.SentencePieceProcessor(model_file=str(tmp))  # a file that does not load never gets the final name
            record.update(kind="bpemb", source_file=str(source))
    if kind == "sentencepiece" or fallback_reason is not None:
        corpus = Path(corpus) if corpus is not None else paths.corpus_file(lang, "train", resources)
        record = train_sentencepiece(corpus, out, requested_vocab=int(spec.get("vocab_size", 25000)),
                                     pretokenize=language_pretokenize(block, lang, config_path))
        if fallback_reason is not None:
            record.update(requested_kind="bpemb", bpemb_language=spec["language"], fallback_reason=fallback_reason)
    elif kind != "bpemb":
        raise SystemExit(f"{config_path}: languages.{lang}.tokenizer.kind is {kind!r}; use bpemb or sentencepiece")
    tokenizer = load_tokenizer(out)
    record.update({"language": lang, "model_file": str(out), "sha256": tokenizer.sha256(),
                   "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
                   "preprocessing": "lowercase; every digit -> 0 (BPEmb)",
                   "provenance": provenance(packages=package_versions("sentencepiece", "nltk"))})
    write_json(out.with_suffix(".json"), record)
    return record


def bpemb_spec_errors(spec: dict[str, Any], where: str) -> list[str]:
    """Problems of a ``kind: bpemb`` tokenizer block (empty when usable)."""
    given = [key for key in ("registry", "path", "language") if spec.get(key)]
    if len(given) != 1:
        return [f"{where}: kind bpemb needs exactly one of registry, path, or language (+ vocab_size); got "
                f"{given or 'none'}"]
    errors = []
    if "language" in given:
        if not _BPEMB_LANGUAGE.match(str(spec["language"])):
            errors.append(f"{where}.language: {spec['language']!r} is not a BPEmb language code "
                          "(lowercase letters and _, as in BPEmb's file names)")
        if not isinstance(spec.get("vocab_size"), int):
            errors.append(f"{where}.vocab_size: BPEmb's vocabulary size is required with language "
                          "(1000, 3000, 5000, 10000, 25000, 50000, 100000 or 200000)")
    if spec.get("fallback", "sentencepiece") not in BPEMB_FALLBACKS:
        errors.append(f"{where}.fallback: {spec['fallback']!r}; use one of {', '.join(BPEMB_FALLBACKS)}")
    return errors


def _bpemb_model_file(spec: dict[str, Any], where: str, config: dict[str, Any], resources: Path,
                      mirror: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The BPEmb model file a ``kind: bpemb`` block names, placed and verified; and its record."""
    from strae.data.fetch import default_mirror, fetch, fetch_url

    errors = bpemb_spec_errors(spec, where)
    if errors:
        raise SystemExit("; ".join(errors))
    if spec.get("registry"):
        registry = load_registry((config.get("data") or {}).get("registry", "config/registry.yaml"))
        return fetch(spec["registry"], resources_dir=resources, mirror=mirror, registry=registry), \
            {"registry": spec["registry"]}
    if spec.get("path"):
        path = Path(spec["path"])
        if not path.exists():
            raise SystemExit(f"{where}.path: {path} not found")
        if spec.get("sha256") and sha256_file(path) != str(spec["sha256"]).lower():
            raise ChecksumError(f"{path}: sha256 differs from {where}.sha256; fix one of them")
        return path, {"path": str(path)}
    names = {"language": spec["language"], "vocab_size": int(spec["vocab_size"])}
    relative = BPEMB_FILE.format(**names)
    url = BPEMB_URL.format(**names)
    mirror = Path(mirror) if mirror is not None else default_mirror()
    path = fetch_url(url, paths.data_file(relative, resources), sha256=spec.get("sha256"),
                     mirror_file=mirror / relative if mirror else None, what=f"BPEmb model {relative}")
    return path, {"bpemb_language": spec["language"], "url": url,
                  "checksum": "sha256 from the config" if spec.get("sha256") else "trust on first use"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae tokenizer", description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True)
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--out", default=None, help="default: <resources>/tokenizers/<lang>.model")
    parser.add_argument("--corpus", default=None, help="training text for kind sentencepiece "
                        "(default: <resources>/corpora/<lang>/train.txt)")
    parser.add_argument("--mirror", default=None, help="data mirror (default: $STRAE_DATA_MIRROR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    record = build_tokenizer(args.lang, args.config, out=args.out, corpus=args.corpus, mirror=args.mirror)
    print(f"{record['model_file']}: {record['kind']}, {record['vocab_size']} pieces, pad_id {record['pad_id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
