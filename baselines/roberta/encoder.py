"""Encoder for RoBERTa runs (MLM and SimCSE): `strae evaluate --model RUN_DIR`.

Sentences: ``<s> pieces </s>`` through the encoder; by default the sentence vector is the mean of the last layer over
all non-pad positions (<s> and </s> included, as SimCSE's ``avg`` pooler; the Banyan paper mean-pools both
baselines). ``pooler=cls_before_pooler`` takes the <s> state, ``pooler=cls`` the <s> state through a SimCSE run's
trained MLP; a SimCSE run's default is the ``eval_pooler`` its train.json records.

Words (lexical tasks), following Bommasani et al. (2020) as the Banyan paper does: the static vector of a word is the
average of its contextual representations over its occurrences in the run's training corpus. One occurrence's
representation = mean of the last-layer states of the word's pieces in that sentence. An occurrence is the word's
piece sequence (the tokenizer's segmentation of the word alone) starting at a word boundary and followed by a word
boundary or the sentence end. ``word_occurrences=all`` (default) uses every occurrence, as the Banyan paper did
("average the contextualised representations of all occurrences of the word in the training set"; each needed
corpus sentence is encoded once); ``word_occurrences=N`` caps it at a seeded uniform sample of N per word (strae's
earlier default was 100, for CPU time). A word that never occurs is encoded alone, ``<s> pieces </s>`` (mean over
its pieces); ``describe()`` counts those fallbacks.

Options (``strae evaluate --encoder-option key=value``): ``pooler=mean|cls_before_pooler|cls``,
``word_occurrences=all|N``, ``word_context=corpus|none``
(``none``: every word encoded alone), ``corpus=PATH`` (tokenised-corpus directory or sentence text file overriding
the one recorded in train.json), ``device=auto|cpu|cuda``, ``precision=fp32|bf16``, ``max_length=N`` (ids per
input, ``<s>``/``</s>`` included; default: the longest the run's training saw, :func:`trained_length` — its relative
position embeddings of farther distances were never trained), ``pretokenize=none|treebank``.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from strae.encode import Encoder
from strae.io import read_json, sha256_file, text_lines
from strae.runs import TRAIN_JSON, RunRecord, load_weights_file

WORD_START_MARK = "\u2581"  # SentencePiece's word-boundary prefix


def load_weights(model_file: str | Path, with_mlp: bool = False):
    """(shape, RobertaForMaskedLM) from a run's ``model.pt``; with ``with_mlp``, also the SimCSE MLP head (or None)."""
    from baselines.roberta.model import RobertaShape, SimcseMLP, build_mlm_model

    weights = load_weights_file(Path(model_file), weights_only=False)
    try:
        if not isinstance(weights, dict):
            raise TypeError(f"a {type(weights).__name__}, not a dict of shape and weights")
        shape = RobertaShape.from_dict(weights["shape"])
        model = build_mlm_model(shape)
        model.load_state_dict(weights["state_dict"])
        mlp = None
        if with_mlp and weights.get("simcse_mlp") is not None:
            mlp = SimcseMLP(shape.hidden_size)
            mlp.load_state_dict(weights["simcse_mlp"])
    except (KeyError, TypeError, ValueError, RuntimeError, SystemExit) as error:  # a foreign file: name it
        raise SystemExit(f"{model_file}: not the weights of a `strae train-roberta` / `train-simcse` run this code "
                         f"can load ({str(error).splitlines()[0] if str(error) else error!r})") from error
    return (shape, model, mlp) if with_mlp else (shape, model)


def parse_occurrences(value: int | str) -> int | None:
    """``all`` -> None (no cap); a positive integer -> that cap."""
    if str(value) == "all":
        return None
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap < 1:
        raise SystemExit(f"--encoder-option word_occurrences={value}: expected 'all' or a positive integer")
    return cap


def flat_corpus(source: str | Path, tokenizer, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of a tokenised-corpus directory (memory-mapped contract files) or a sentence text file."""
    path = Path(source)
    if path.is_dir():
        ids_file, offsets_file = path / f"{split}.ids.npy", path / f"{split}.offsets.npy"
        if not ids_file.exists() or not offsets_file.exists():
            raise SystemExit(f"{path}: {split}.ids.npy / {split}.offsets.npy not found (word-context corpus)")
        return np.load(ids_file, mmap_mode="r"), np.load(offsets_file, mmap_mode="r")
    if not path.is_file():
        raise SystemExit(f"{path}: word-context corpus not found "
                         "(pass --encoder-option corpus=PATH or word_context=none)")
    lines = [line.strip() for line in text_lines(path) if line.strip()]
    encoded = tokenizer.encode_batch(lines)
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.fromiter((i for e in encoded for i in e), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def find_occurrences(pieces: Sequence[int], ids: np.ndarray, offsets: np.ndarray, sorted_positions: np.ndarray,
                     sorted_ids: np.ndarray, is_word_start: np.ndarray) -> list[tuple[int, int]]:
    """All (sentence, start-within-sentence) where ``pieces`` occur as a whole word."""
    first = pieces[0]
    lo, hi = np.searchsorted(sorted_ids, first, "left"), np.searchsorted(sorted_ids, first, "right")
    starts = np.asarray(sorted_positions[lo:hi], dtype=np.int64)
    if len(starts) == 0:
        return []
    sentences = np.searchsorted(offsets, starts, "right") - 1
    ends = starts + len(pieces)
    keep = ends <= offsets[sentences + 1]
    starts, sentences, ends = starts[keep], sentences[keep], ends[keep]
    for k in range(1, len(pieces)):
        keep = np.asarray(ids[starts + k]) == pieces[k]
        starts, sentences, ends = starts[keep], sentences[keep], ends[keep]
    at_sentence_end = ends == offsets[sentences + 1]
    next_ids = np.asarray(ids[np.minimum(ends, len(ids) - 1)])
    keep = at_sentence_end | is_word_start[next_ids]
    starts, sentences = starts[keep], sentences[keep]
    return list(zip(sentences.tolist(), (starts - offsets[sentences]).tolist()))


def corpus_pretokenize(config: dict[str, Any]) -> str:
    """How a RoBERTa / SimCSE run's training sentences were split before they were tokenised (train.json
    ``config.corpus.meta.pretokenize`` of a tokenised corpus; a text corpus was tokenised as it is: none)."""
    return ((config.get("corpus") or {}).get("meta") or {}).get("pretokenize") or "none"


def trained_length(config: dict[str, Any]) -> int:
    """The longest input (ids, ``<s>``/``</s>`` included) a RoBERTa / SimCSE run trained on: its own ``max_length``
    or, for SimCSE, the MLM run's it continues, whichever is longer (distances beyond it index relative-position
    rows still at their initialisation); 512 for a record that names neither."""
    lengths = [value for value in (config.get("max_length"), (config.get("init_config") or {}).get("max_length"))
               if value]
    return int(max(lengths)) if lengths else 512


def recorded_tokenizer_sha256(config: dict[str, Any]) -> str | None:
    """The sha256 of the tokenizer a RoBERTa / SimCSE run trained with, as its train.json records it: an MLM run's
    ``config.tokenizer``; a SimCSE run's is the MLM run's it continues (``config.init_config.tokenizer``), whose
    tokenizer.model it copies. None for a record that names none."""
    for source in (config, config.get("init_config") or {}):
        sha = (source.get("tokenizer") or {}).get("sha256")
        if sha:
            return sha
    return None


def check_run_tokenizer(tokenizer_file: Path, config: dict[str, Any], record_file: Path,
                        remedy: str = "copy the run's own tokenizer back (train.json config.tokenizer.path or the "
                                      "--init run's) or retrain") -> None:
    """A run's tokenizer.model must be the file it trained with: another one (e.g. the --tokenizer of a refused
    rerun, which the trainer once copied in before its resume check) maps text to pieces the weights never saw,
    and every score would be silently wrong. The trainer checks the file it is about to copy in the same way."""
    if not tokenizer_file.is_file():
        raise SystemExit(f"{tokenizer_file}: missing; is {tokenizer_file.parent} a completed RoBERTa / SimCSE run?")
    expected = recorded_tokenizer_sha256(config)
    found = sha256_file(tokenizer_file)
    if expected is not None and found != expected:
        raise SystemExit(f"{tokenizer_file}: sha256 {found[:12]}…, not the tokenizer {record_file} records for this "
                         f"run ({expected[:12]}…); {remedy}")


class RobertaEncoder(Encoder):
    def __init__(self, run_dir: str | Path, word_occurrences: int | str = "all", word_context: str = "corpus",
                 corpus: str | None = None, device: str = "auto", precision: str = "fp32",
                 max_length: int | str | None = None, occurrence_seed: int | str = 0, pooler: str | None = None,
                 pretokenize: str | None = None):
        from strae.data.tokenizer import load_tokenizer
        from strae.runtime import describe_device, resolve_device

        self.run_dir = Path(run_dir)
        self.record = RunRecord.from_disk(self.run_dir)
        if self.record is None:
            raise SystemExit(f"{self.run_dir / TRAIN_JSON}: missing; is {self.run_dir} a `strae train-roberta` run?")
        self.device = resolve_device(device)
        self.device_name = describe_device(self.device)
        if precision not in ("fp32", "bf16"):
            raise SystemExit(f"--encoder-option precision={precision}: expected fp32 or bf16")
        self.precision = precision
        self.max_length = int(max_length) if max_length is not None else trained_length(self.record.config)
        self.word_occurrences = parse_occurrences(word_occurrences)
        self.occurrence_seed = int(occurrence_seed)
        if word_context not in ("corpus", "none"):
            raise SystemExit(f"--encoder-option word_context={word_context}: expected corpus or none")
        self.word_context = word_context
        self.tokenizer_path = self.run_dir / "tokenizer.model"
        check_run_tokenizer(self.tokenizer_path, self.record.config, self.run_dir / TRAIN_JSON)
        # text is split the way the training corpus was before its pieces were made (a strae run's encoder does the
        # same); the paper-variant files go in unchanged (strae.evaluate.harness.variant_encoder_options)
        self.pretokenize = pretokenize or corpus_pretokenize(self.record.config)
        self.tokenizer = load_tokenizer(self.tokenizer_path, pretokenize=self.pretokenize)
        from baselines.roberta.model import POOLERS

        self.shape, model, mlp = load_weights(self.run_dir / "model.pt", with_mlp=True)
        self.special = self.shape.special
        self.model = model.roberta.to(self.device).eval()
        self.mlp = mlp.to(self.device).eval() if mlp is not None else None
        self.pooler = pooler or self.record.config.get("eval_pooler", "mean")
        if self.pooler not in POOLERS:
            raise SystemExit(f"--encoder-option pooler={self.pooler}: expected one of {POOLERS}")
        if self.pooler == "cls" and self.mlp is None:
            raise SystemExit(f"--encoder-option pooler=cls: {self.run_dir}/model.pt has no SimCSE MLP head "
                             "(only runs trained with --train-pooler cls do); use mean or cls_before_pooler")
        self.corpus_source = corpus or self._recorded_corpus()
        self._word_cache: dict[str, np.ndarray] = {}
        self._corpus_index: tuple | None = None
        self.word_stats = {"from_context": 0, "fallback_alone": 0, "no_pieces": 0, "occurrences_used": 0}
        self.encoder_id = f"{self.record.model}/{self.record.setting}/seed{self.record.seed}"

    def _recorded_corpus(self) -> str | None:
        config = self.record.config
        candidates = []
        if config.get("data_dir"):
            candidates += [config["data_dir"], config.get("corpus", {}).get("resolved")]
        if config.get("corpus_file"):
            candidates += [config["corpus_file"], config.get("corpus", {}).get("resolved")]
        for candidate in candidates:
            if candidate and Path(candidate).exists():
                return candidate
        return candidates[0] if candidates else None

    # -- shared forward ---------------------------------------------------------------------------------------
    def _forward(self, rows: Sequence[np.ndarray], pooler: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(last hidden states, attention) of a padded batch; with ``pooler``, (sentence vectors, attention)."""
        from baselines.roberta.data import collate
        from baselines.roberta.model import encode, pool, segments_from_attention

        ids, attention = collate(rows, self.special, self.max_length)
        context = (torch.autocast(device_type=self.device.type, dtype=torch.bfloat16) if self.precision == "bf16"
                   else torch.autocast(device_type=self.device.type, enabled=False))
        with torch.no_grad(), context:
            ids, on_device = ids.to(self.device), attention.to(self.device)
            hidden = encode(self.model, ids, segments_from_attention(on_device))
            if pooler is not None:
                hidden = pool(hidden, on_device, pooler, self.mlp)
        return hidden.float().cpu(), attention

    def _encode_text(self, texts: Sequence[str]) -> list[np.ndarray]:
        # encode_batch applies the BPEmb normalisation (lowercase, digits -> 0)
        return [np.asarray(ids, dtype=np.int64) for ids in self.tokenizer.encode_batch(list(texts))]

    # -- sentences --------------------------------------------------------------------------------------------
    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        encoded = self._encode_text(sentences)
        out = np.full((len(sentences), self.shape.hidden_size), np.nan, dtype=np.float32)
        order = sorted((i for i, e in enumerate(encoded) if len(e)), key=lambda i: len(encoded[i]))
        for start in tqdm(range(0, len(order), batch_size), desc="roberta sentences", leave=False, mininterval=5):
            chunk = order[start:start + batch_size]
            pooled, _ = self._forward([encoded[i] for i in chunk], self.pooler)
            out[chunk] = pooled.numpy()
        return out

    # -- words ------------------------------------------------------------------------------------------------
    def _index(self):
        if self._corpus_index is None:
            if self.corpus_source is None:
                raise SystemExit(f"{self.run_dir}/train.json: no training corpus recorded; pass "
                                 "--encoder-option corpus=PATH or word_context=none")
            ids, offsets = flat_corpus(self.corpus_source, self.tokenizer)
            # specials (pad/mask/bos/eos) count as boundaries
            is_word_start = np.array([self.tokenizer.id_to_piece(i).startswith(WORD_START_MARK)
                                      for i in range(self.tokenizer.vocab_size)] + [True] * 8, dtype=bool)
            order = np.argsort(np.asarray(ids), kind="stable")
            self._corpus_index = (ids, offsets, order, np.asarray(ids)[order], is_word_start)
        return self._corpus_index

    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        missing = [w for w in dict.fromkeys(words) if w not in self._word_cache]
        if missing:
            self._encode_new_words(missing, batch_size)
        return np.stack([self._word_cache[w] for w in words]) if words else np.zeros((0, self.shape.hidden_size),
                                                                                         np.float32)

    def _encode_new_words(self, words: list[str], batch_size: int) -> None:
        dim = self.shape.hidden_size
        pieces = dict(zip(words, self._encode_text(words)))
        occurrences: dict[str, list[tuple[int, int]]] = {w: [] for w in words}
        if self.word_context == "corpus":
            ids, offsets, order, sorted_ids, is_word_start = self._index()
            rng = np.random.default_rng(self.occurrence_seed)
            for word in tqdm(words, desc="roberta word occurrences", leave=False, mininterval=5):
                if len(pieces[word]) == 0 or len(pieces[word]) > self.max_length - 2:
                    continue
                found = [o for o in find_occurrences(pieces[word].tolist(), ids, offsets, order, sorted_ids,
                                                     is_word_start)
                         if o[1] + len(pieces[word]) <= self.max_length - 2]
                if self.word_occurrences is not None and len(found) > self.word_occurrences:
                    found = [found[i] for i in sorted(rng.choice(len(found), self.word_occurrences, replace=False))]
                occurrences[word] = found
        sums = {w: np.zeros(dim, dtype=np.float64) for w in words}
        # encode each needed corpus sentence once, however many words it serves
        by_sentence: dict[int, list[tuple[str, int]]] = {}
        for word, found in occurrences.items():
            for sentence, start in found:
                by_sentence.setdefault(sentence, []).append((word, start))
        if by_sentence:
            ids, offsets = self._index()[:2]
            sentence_ids = sorted(by_sentence, key=lambda s: offsets[s + 1] - offsets[s])
            batch = max(1, batch_size // 8)
            for begin in tqdm(range(0, len(sentence_ids), batch), desc="roberta word contexts", leave=False,
                              mininterval=5):
                chunk = sentence_ids[begin:begin + batch]
                hidden, _ = self._forward([np.asarray(ids[offsets[s]:offsets[s + 1]]) for s in chunk])
                for row, sentence in enumerate(chunk):
                    for word, start in by_sentence[sentence]:
                        span = hidden[row, 1 + start:1 + start + len(pieces[word])]  # +1: <s>
                        sums[word] += span.mean(0).numpy()
        alone = [w for w in words if not occurrences[w] and len(pieces[w])]
        for begin in range(0, len(alone), batch_size):
            chunk = alone[begin:begin + batch_size]
            hidden, _ = self._forward([pieces[w] for w in chunk])
            for row, word in enumerate(chunk):
                self._word_cache[word] = hidden[row, 1:1 + len(pieces[word])].mean(0).numpy().astype(np.float32)
        for word in words:
            if occurrences[word]:
                self._word_cache[word] = (sums[word] / len(occurrences[word])).astype(np.float32)
                self.word_stats["from_context"] += 1
                self.word_stats["occurrences_used"] += len(occurrences[word])
            elif len(pieces[word]):
                self.word_stats["fallback_alone"] += 1
            else:
                self._word_cache[word] = np.full(dim, np.nan, dtype=np.float32)
                self.word_stats["no_pieces"] += 1

    # -- provenance -------------------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        config = self.record.config
        return {
            "encoder_id": self.encoder_id,
            "kind": "roberta",
            "run_dir": str(self.run_dir),
            "model_sha256": sha256_file(self.run_dir / "model.pt"),
            "objective": config.get("objective"),
            "steps": self.record.timings.get("steps_done"),
            "shape": self.shape.to_dict(),
            "sentence_pooling": self.pooler,
            "pretokenize": self.pretokenize,
            "max_length": self.max_length,
            "sentence_pooling_means": {
                "mean": "mean over non-pad tokens of the last layer (<s> and </s> included)",
                "cls_before_pooler": "last-layer <s> state", "cls": "last-layer <s> state through the SimCSE MLP",
            }[self.pooler],
            "word_vectors": {
                "method": "Bommasani et al. 2020: mean of contextual representations over corpus occurrences"
                if self.word_context == "corpus" else "word encoded alone",
                "max_occurrences": "all" if self.word_occurrences is None else self.word_occurrences,
                "occurrence_seed": self.occurrence_seed,
                "corpus": self.corpus_source, **self.word_stats,
            },
            "precision": self.precision,
            "device": self.device_name,
        }

    def run_info(self) -> dict[str, Any]:
        return self.record.run_info()


def load_run(run_dir: str | Path, **options: Any) -> RobertaEncoder:
    manifest = read_json(Path(run_dir) / "encoder.json")
    if manifest.get("kind") != "roberta":
        raise SystemExit(f"{run_dir}/encoder.json: kind {manifest.get('kind')!r} is not a RoBERTa run")
    return RobertaEncoder(run_dir, **options)
