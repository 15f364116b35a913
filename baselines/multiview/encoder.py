"""Multi-view run directory (``encoder.json`` kind ``multiview``) -> ``strae.encode.Encoder``.

A text is parsed with the spaCy pipeline the training parse used (``parser.json``; all sentences spaCy finds in
one input become one tree, later roots under the first), its tokens mapped to the run's vocabulary, and encoded
by both views. ``view=both`` (default, the paper's test-time vector) concatenates [target; context]; ``target``
or ``context`` gives one view. Batching by length is an inference knob only; it changes a vector by rounding at
most (the CPU's BiLSTM groups a batch's sentences by length).

``vectors=random-token`` replaces the trained views by the random-token floor over what the model sees: the same
parse, tokens and vocabulary (every out-of-vocabulary token is the one ``<unk>``), each vocabulary entry the floor's
seeded vector (``strae.evaluate.random_token``, ``dim`` 256 by default, seed 0), mean-pooled. Against the plain
floor (whitespace tokens, every word its own vector) it tells how much of a task the 20k-word vocabulary and the
tokenisation leave to a model that knows nothing else. ``token_counts`` (tokens parsed, how many were outside the
vocabulary) is read by the SentEval suite per task.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.multiview.data import PAD, UNK, Vocabulary
from baselines.multiview.model import MultiviewConfig, MultiviewModel, make_batch
from baselines.multiview.parse import PARSER_IDENTITY_KEYS, doc_to_tree, load_pipeline, pipeline_info
from strae.encode import Encoder
from strae.io import read_json, sha256_file
from strae.runs import RunRecord, load_weights_file
from strae.runtime import describe_device, resolve_device

VIEW_CHOICES = ("both", "target", "context")
VECTOR_CHOICES = ("model", "random-token")


class MultiviewEncoder(Encoder):
    def __init__(self, run_dir: str | Path, device: str = "auto", view: str = "both", nlp=None,
                 vectors: str = "model", dim: int | str | None = None) -> None:
        self.run_dir = Path(run_dir)
        for name in ("model.pt", "vocab.json", "parser.json"):
            if not (self.run_dir / name).exists():
                raise SystemExit(f"{self.run_dir / name}: missing; is {self.run_dir} a finished train-multiview run?")
        if view not in VIEW_CHOICES:
            raise SystemExit(f"--encoder-option view={view}: use one of {VIEW_CHOICES}")
        if vectors not in VECTOR_CHOICES:
            raise SystemExit(f"--encoder-option vectors={vectors}: use one of {VECTOR_CHOICES}")
        if vectors == "model" and dim is not None:
            raise SystemExit("--encoder-option dim: only with vectors=random-token (the model's width is its own)")
        if vectors == "random-token" and view != "both":
            raise SystemExit(f"--encoder-option view={view}: the random-token vectors have no views")
        self.view = view
        self.floor = None  # the random-token floor, when vectors=random-token
        if vectors == "random-token":
            from strae.evaluate.random_token import load as load_floor

            self.floor = load_floor() if dim is None else load_floor(dim=dim)
        self.token_counts = {"tokens": 0, "unknown": 0}  # running totals of parse(), for the evaluation's record
        payload = load_weights_file(self.run_dir / "model.pt")
        self.config = MultiviewConfig.from_dict(payload["config"])
        self.device = resolve_device(device)
        self.model = MultiviewModel(self.config)
        self.model.load_state_dict(payload["state_dict"])
        self.model.to(self.device).eval()
        self.vocab = Vocabulary.from_dict(read_json(self.run_dir / "vocab.json"))
        self.parser_info = read_json(self.run_dir / "parser.json")
        self.parser_loaded = None  # the pipeline that parses the evaluation texts, when loaded here
        if nlp is None:
            nlp, package = load_pipeline(self.parser_info["package"])
            self.parser_loaded = pipeline_info(nlp, package)
            differs = [key for key in PARSER_IDENTITY_KEYS
                       if self.parser_loaded.get(key) != self.parser_info.get(key)]
            if differs:  # another parser's trees than the training corpus': said, and recorded in describe()
                print(f"{self.run_dir}: the evaluation texts are parsed by {self.parser_loaded}, the training corpus "
                      f"was by {self.parser_info} (differs in {', '.join(differs)})", file=sys.stderr)
        self.nlp = nlp
        # a run directory copied without its train.json still loads (labels unknown, status completed)
        self.record = RunRecord.from_disk(self.run_dir) or RunRecord.from_dict({})
        record = self.record
        self.encoder_id = (f"{record.model or 'multiview'}/{record.setting or '?'}/"
                           f"seed{'?' if record.seed is None else record.seed}"
                           + (f"@random-token-dim{self.floor.dim}" if self.floor is not None
                              else "" if view == "both" else f"@{view}"))

    def parse(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        trees = []
        for doc in self.nlp.pipe(list(texts), batch_size=256):  # an empty text -> no tokens -> NaN row
            tokens, heads = doc_to_tree(doc)
            ids = self.vocab.ids(tokens)
            self.token_counts["tokens"] += len(ids)
            self.token_counts["unknown"] += sum(i == self.vocab.unk_id for i in ids)
            trees.append((ids, heads))
        return trees

    def _floor_vectors(self, trees: Sequence[tuple[list[int], list[int]]]) -> np.ndarray:
        """The random-token floor over the vocabulary's entries: one seeded vector per entry, mean-pooled."""
        names = self.vocab.tokens + [PAD, UNK]  # by id: pad_id, unk_id follow the entries (Vocabulary)
        return self.floor.pool([[names[i] for i in ids] for ids, _ in trees])

    @torch.no_grad()
    def encode_trees(self, trees: Sequence[tuple[list[int], list[int]]], batch_size: int = 256) -> np.ndarray:
        if self.floor is not None:
            return self._floor_vectors(trees)
        order = np.argsort([len(t[0]) for t in trees], kind="stable")
        hidden = self.config.hidden
        width = {"both": 2 * hidden, "target": hidden, "context": hidden}[self.view]
        out = np.full((len(trees), width), np.nan, dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            keep = [i for i in idx if len(trees[i][0]) > 0]
            if not keep:
                continue
            batch = make_batch([trees[i] for i in keep], self.config.pad_id).to(self.device)
            if self.view == "target":
                vectors = self.model.target(batch)
            elif self.view == "context":
                vectors = self.model.context(batch)
            else:
                vectors = self.model.encode(batch)
            out[keep] = vectors.float().cpu().numpy()
        return out

    def encode_sentences(self, sentences: Sequence[str], batch_size: int = 256) -> np.ndarray:
        return self.encode_trees(self.parse(sentences), batch_size)

    def encode_words(self, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        return self.encode_sentences(words, batch_size)

    def describe(self) -> dict[str, Any]:
        vectors = ({"vectors": "model"} if self.floor is None else
                   {"vectors": "random-token",
                    "random_token": {**{k: v for k, v in self.floor.describe().items()
                                        if k not in ("encoder_id", "kind", "device")},
                                     "tokenization": f"the run's parser and vocab.json (outside it: {UNK})"},
                    "vocabulary_sha256": sha256_file(self.run_dir / "vocab.json")})
        return {"encoder_id": self.encoder_id, "run_dir": str(self.run_dir), "kind": "multiview", "view": self.view,
                **vectors,
                "weights_sha256": sha256_file(self.run_dir / "model.pt"), "config": self.config.to_dict(),
                "parser": self.parser_info if self.parser_loaded is None else self.parser_loaded,
                "training_parser": self.parser_info, "device": describe_device(self.device),
                "seed": self.record.seed}

    def run_info(self) -> dict[str, Any]:
        # the run's own labels: an option's table row (SETTING@LABEL) is the evaluation's label, which strae
        # evaluate makes from the options (strae.evaluate.harness.evaluation_setting)
        return self.record.run_info()


def load_run(run_dir: Path, **options: Any) -> MultiviewEncoder:
    return MultiviewEncoder(run_dir, **options)
