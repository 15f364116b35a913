"""Use a trained strae run outside strae: a sentence-transformers folder, and an MTEB-style encoder object.

``strae export RUN --format sentence-transformers OUT`` writes a self-contained folder:

- ``model.pt`` (the run's weights + ModelConfig, as ``strae train`` wrote them), ``tokenizer.model`` (the run's
  SentencePiece model), ``strae_export.json`` (the config, the source run, sha256 of every file);
- ``strae_st.py``: a small sentence-transformers module (tokenise with BPEmb preprocessing -> the model's root
  upward embedding), plus a copy of the engine source it needs (``strae_models_*.py`` ...), imported relatively, so
  the folder needs torch, numpy, pyyaml, sentencepiece and, for a run whose corpus was pretokenised (``treebank``),
  nltk, but not strae (the copy includes the Triton induction, used on CUDA when triton is installed, as in strae);
- ``modules.json`` / ``config_sentence_transformers.json``: what ``SentenceTransformer(OUT, trust_remote_code=True)``
  reads. It encodes exactly as ``strae evaluate --variant official`` does (same tokeniser and pretokenisation, same
  engine, same weights; a text with no pieces gets a NaN row, as in strae). The ``paper`` variant embeds the
  reference code's already tokenised files with ``pretokenize=none``; an export can too: set ``"pretokenize":
  "none"`` in its ``strae_export.json``.

``MTEBEncoder(path)`` wraps a run directory or an exported folder in the object MTEB evaluates:
``encode(sentences, **kwargs) -> np.ndarray``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from strae.io import atomic_open, read_json, sha256_file, write_json
from strae.runs import RunRecord, load_weights_file

FORMATS = ("sentence-transformers",)
MODULE_FILE = "strae_st.py"
MODULE_CLASS = "StraeSentenceEncoder"
# the engine module whose import closure is copied into the export (everything StraeModel needs)
ENGINE_ROOT = "strae.models.model"
_IMPORT = re.compile(r"^(?P<indent>\s*)from (?P<module>strae(?:\.\w+)+) import ", re.M)
_BARE_IMPORT = re.compile(r"^\s*import strae\b|^\s*from strae import ", re.M)


class ExportError(SystemExit):
    """An export the user asked for cannot be made; the message names the file and what to do."""


def flat_name(module: str) -> str:
    """``strae.models.trees`` -> ``strae_models_trees`` (the file name inside the export folder)."""
    return module.replace(".", "_")


def engine_sources(root: str = ENGINE_ROOT) -> dict[str, str]:
    """{flat file stem: source} for ``root`` and every strae module it imports, imports rewritten to relative ones.

    The closure is followed from the installed code at export time, so an export always carries the engine that
    trained and evaluates the run; a strae import the rewrite cannot express is an error, not a silent omission.
    """
    pending, sources = [root], {}
    while pending:
        module = pending.pop()
        if flat_name(module) in sources:
            continue
        path = Path(inspect.getfile(importlib.import_module(module)))
        text = path.read_text(encoding="utf-8")
        if _BARE_IMPORT.search(text):
            raise ExportError(f"{path}: `import strae...` cannot be made relative; use `from strae.x import y`")
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines):
            match = _IMPORT.match(line)
            if not match:
                continue
            names = line[match.end():].strip()
            submodules = _submodule_imports(match["module"], names)
            if submodules is None:  # names of the module itself
                pending.append(match["module"])
                lines[number] = f"{match['indent']}from .{flat_name(match['module'])} import {line[match.end():]}"
            else:  # `from strae.pkg import module [as alias]`: the module's own file, imported as one
                pending.extend(full for full, _ in submodules)
                lines[number] = "".join(f"{match['indent']}from . import {flat_name(full)} as {alias}\n"
                                        for full, alias in submodules)
        sources[flat_name(module)] = "".join(lines)
    return sources


def _submodule_imports(package: str, names: str) -> list[tuple[str, str]] | None:
    """For ``from PACKAGE import NAMES``: [(module, alias)] when every name is a submodule of PACKAGE, None when
    none is; a mix (or a parenthesised list, which the line-wise rewrite cannot follow) is refused."""
    import importlib.util

    if names.startswith("(") or names.endswith("\\"):
        raise ExportError(f"{package}: a multi-line `from {package} import (...)` cannot be rewritten; one line")
    parsed = []
    for item in names.split("#")[0].split(","):
        name, _, alias = item.strip().partition(" as ")
        parsed.append((f"{package}.{name.strip()}", (alias or name).strip()))
    found = [importlib.util.find_spec(full) is not None if hasattr(importlib.import_module(package), "__path__")
             else False for full, _ in parsed]
    if all(found):
        return parsed
    if any(found):
        raise ExportError(f"from {package} import {names}: modules and names mixed; import them on separate lines")
    return None


def _normalize_source() -> str:
    """The tokeniser's preprocessing (BPEmb: lowercase, digits -> 0), copied from strae.data.tokenizer."""
    from strae.data import tokenizer

    return (f"_DIGIT = re.compile({tokenizer._DIGIT.pattern!r})\n\n\n"
            + inspect.getsource(tokenizer.normalize))


MODULE_TEMPLATE = '''"""sentence-transformers module for a strae (Self-StrAE / Banyan) model, written by `strae export`.

Sentence vector = the root's upward embedding of the tree the model induces over the sentence's SentencePiece
pieces (BPEmb preprocessing: lowercase, digits -> 0), exactly as `strae evaluate` computes it. A text with no
pieces gets a NaN row, as in strae (its similarity is undefined).
"""
from __future__ import annotations

import json
import os
import re

import sentencepiece as spm
import torch
from torch import nn

from .strae_data_pretokenize import pretokenize
from .strae_models_config import ModelConfig
from .strae_models_model import StraeModel
from .strae_recipes import from_record, legacy

{normalize}


class {cls}(nn.Module):
    config_file = "strae_export.json"
    # SentenceTransformer.save writes this module into the folder's root (with modules.json's "path": ""), so a
    # re-saved model loads again: in a subfolder its relative imports would not resolve
    save_in_root = True

    def __init__(self, model_dir: str) -> None:
        super().__init__()
        payload = torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu", weights_only=True)
        config = ModelConfig.from_dict({{k: v for k, v in payload["config"].items() if v not in ({{}}, [])}})
        # the recipe the run trained with (its bias and functions' init shape the weights); pre-recipe runs: legacy
        recipe = from_record(payload["recipe"]) if "recipe" in payload else legacy(payload["config"])
        self.model = StraeModel(config, recipe)
        with open(os.path.join(model_dir, "strae_export.json"), encoding="utf-8") as handle:
            # the run's pretokenisation (languages.<lang>.pretokenize), applied to raw text as strae evaluate does
            self.pretokenize = json.load(handle).get("pretokenize", "none")
        self.model.load_state_dict(payload["state_dict"])
        self.model.eval()
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
        if self.sp.get_piece_size() != config.vocab_size:
            raise ValueError(f"{{model_dir}}: tokenizer has {{self.sp.get_piece_size()}} pieces, "
                             f"model {{config.vocab_size}}")
        self.pad_id = config.vocab_size
        self.dimension = config.k * config.u
        self.model_dir = model_dir

    # sentence-transformers interface ------------------------------------------------------------------------
    def tokenize(self, texts, **kwargs):
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in texts]
        pieces = self.sp.encode([normalize(pretokenize(t, self.pretokenize)) for t in texts], out_type=int)
        lengths = torch.tensor([len(p) for p in pieces], dtype=torch.long)
        ids = torch.full((len(pieces), max(int(lengths.max()) if len(pieces) else 0, 1)), self.pad_id,
                         dtype=torch.long)
        for row, piece_ids in enumerate(pieces):
            ids[row, : len(piece_ids)] = torch.tensor(piece_ids, dtype=torch.long)
        return {{"input_ids": ids, "lengths": lengths}}

    def forward(self, features):
        ids, lengths = features["input_ids"], features["lengths"]
        out = torch.full((ids.shape[0], self.dimension), float("nan"), dtype=torch.float32, device=ids.device)
        keep = (lengths > 0).nonzero().flatten()
        if len(keep):
            # sort by length (as strae's encoder does) so padding never exceeds the longest text of the batch
            order = keep[torch.argsort(lengths[keep], stable=True)]
            lengths_kept = lengths[order]
            vectors = self.model.encode(ids[order][:, : int(lengths_kept.max())], lengths_kept)
            out[order] = vectors.float()
        features["sentence_embedding"] = out
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return self.dimension

    def get_embedding_dimension(self) -> int:
        return self.dimension

    def save(self, output_path: str, *args, **kwargs) -> None:
        import shutil

        for name in os.listdir(self.model_dir):
            source = os.path.join(self.model_dir, name)
            if os.path.isfile(source) and not os.path.exists(os.path.join(output_path, name)):
                shutil.copy2(source, os.path.join(output_path, name))

    @staticmethod
    def load(input_path):
        return {cls}(input_path)
'''


def _write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def export_sentence_transformers(run_dir: str | Path, out: str | Path, overwrite: bool = False) -> Path:
    """Write the sentence-transformers folder for a finished strae run; returns ``out``."""

    from strae.encode import _unfinished_reason

    run_dir, out = Path(run_dir), Path(out).resolve()  # resolved: `strae export RUN .` names a folder too
    manifest = run_dir / "encoder.json"
    if not manifest.exists():
        raise ExportError(f"{manifest}: missing ({_unfinished_reason(run_dir)}); export a finished `strae train` "
                          "run directory")
    kind = read_json(manifest).get("kind")
    if kind != "strae":
        raise ExportError(f"{run_dir}: encoder kind {kind!r}; only strae (Self-StrAE / Banyan) runs can be exported")
    for name in ("model.pt", "tokenizer.model"):
        if not (run_dir / name).exists():
            raise ExportError(f"{run_dir / name}: missing; is {run_dir} a finished `strae train` run?")
    here, source = out.resolve(), run_dir.resolve()
    if here == source or here in source.parents or source in here.parents:
        raise ExportError(f"{out}: is, holds or lies inside the run directory {run_dir}; choose another OUT")
    replace = out.exists() and any(out.iterdir())
    if replace:
        if not overwrite:
            raise ExportError(f"{out}: exists and is not empty; choose another OUT or pass --overwrite")
        if not (out / "strae_export.json").exists():
            # --overwrite replaces an earlier export, never a folder that merely shares the name
            raise ExportError(f"{out}: not a strae export (no strae_export.json); --overwrite replaces only an "
                              "earlier export: choose another OUT")
    staging = out.with_name(f".{out.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        _stage(run_dir, out, staging, manifest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # nothing partial is left behind, and OUT is as it was
        raise
    if replace:  # the old export goes only once the new one is complete
        old = out.with_name(f".{out.name}.replaced")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old)
    else:
        if out.exists():
            out.rmdir()  # an empty folder
        staging.rename(out)
    return out


def _stage(run_dir: Path, out: Path, staging: Path, manifest: Path) -> None:
    """Write the export's files into ``staging`` (renamed to ``out`` by the caller)."""
    from strae import __version__
    from strae.models.encoder import run_pretokenize

    # weights + tokenizer, byte for byte
    for name in ("model.pt", "tokenizer.model"):
        shutil.copyfile(run_dir / name, staging / name)
    # the encoder code: the module + the engine closure (relative imports)
    _write_text(staging / MODULE_FILE, MODULE_TEMPLATE.format(cls=MODULE_CLASS, normalize=_normalize_source()))
    for root in (ENGINE_ROOT, "strae.data.pretokenize"):
        for stem, source in engine_sources(root).items():
            _write_text(staging / f"{stem}.py", source)
    # the recipes file strae.recipes reads (only for runs written before model.pt carried their recipe)
    from strae.recipes import RECIPES_FILE

    shutil.copyfile(RECIPES_FILE, staging / RECIPES_FILE.name)
    # sentence-transformers metadata
    write_json(staging / "modules.json",
               [{"idx": 0, "name": "0", "path": "", "type": f"{Path(MODULE_FILE).stem}.{MODULE_CLASS}"}])
    write_json(staging / "config_sentence_transformers.json", {
        "__version__": {"strae": __version__}, "prompts": {}, "default_prompt_name": None,
        "similarity_fn_name": "cosine", "model_type": "SentenceTransformer"})
    payload = load_weights_file(run_dir / "model.pt")
    train = RunRecord.from_disk(run_dir)  # None for a run directory copied without its train.json
    run = train.to_dict()["run"] if train is not None else None
    record = {
        "format": "sentence-transformers",
        "load": f"SentenceTransformer({str(out)!r}, trust_remote_code=True)",
        "model_config": payload["config"],
        "recipe": (payload.get("recipe") or {}).get("name"),
        # raw text is pretokenised like the run's training corpus (as `strae evaluate --variant official` does)
        "pretokenize": run_pretokenize(run_dir, train)[0],
        "run": run,
        "status": train.status if train is not None else None,
        # a mid-training export (strae train --export-checkpoint): where it stands
        "snapshot": train.blocks.get("snapshot") if train is not None else None,
        "source_run_dir": str(run_dir.resolve()),
        "sentence_vector": "root upward embedding (as strae evaluate); NaN row for a text with no pieces",
        "strae_version": __version__,
        "files": {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.is_file()},
    }
    write_json(staging / "strae_export.json", record)
    with open(staging / "README.md", "w", encoding="utf-8") as handle:
        handle.write(f"# strae export: {(run or {}).get('model')} {(run or {}).get('setting')} "
                     f"seed {(run or {}).get('seed')}\n\n"
                     "```python\nfrom sentence_transformers import SentenceTransformer\n"
                     f"model = SentenceTransformer(\"{out.name}\", trust_remote_code=True)\n"
                     "vectors = model.encode([\"a sentence\", \"another one\"])\n```\n\n"
                     "Needs torch, numpy, pyyaml, sentencepiece and (for pretokenised runs) nltk - not strae. "
                     "Provenance: `strae_export.json`.\n")


class MTEBEncoder:
    """MTEB's encoder protocol over a strae run directory or an exported sentence-transformers folder.

    ``encode(sentences, **kwargs) -> np.ndarray`` (float32, one row per sentence). ``sentences`` is a list of
    strings (MTEB 1.x) or an iterable of batches with a ``text`` field (MTEB 2.x DataLoader). MTEB cannot score
    NaN rows, so a text with no pieces gets a zero vector here (strae's own harness drops such pairs instead).
    """

    def __init__(self, path: str | Path, device: str = "cpu", batch_size: int = 256) -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        if (self.path / "modules.json").exists() and (self.path / MODULE_FILE).exists():
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.path), trust_remote_code=True, device=device)
            self._encode = lambda texts: self._model.encode(list(texts), batch_size=self.batch_size,
                                                            convert_to_numpy=True, show_progress_bar=False)
        else:
            from strae.encode import load_encoder

            self._model = load_encoder(str(self.path), device=device)
            self._encode = lambda texts: self._model.encode_sentences(list(texts), batch_size=self.batch_size)
        self.model_card_data = {"name": f"strae/{self.path.name}"}

    @staticmethod
    def _texts(sentences: Any) -> list[str]:
        if isinstance(sentences, str):
            return [sentences]
        texts: list[str] = []
        for item in sentences:
            if isinstance(item, dict):  # an MTEB 2.x batch: {"text": [...], ...}
                value = item["text"]
                texts.extend([value] if isinstance(value, str) else list(value))
            else:
                texts.append(str(item))
        return texts

    def encode(self, sentences: Sequence[str] | Iterable[dict], **kwargs: Any) -> np.ndarray:
        vectors = np.asarray(self._encode(self._texts(sentences)), dtype=np.float32)
        return np.nan_to_num(vectors, nan=0.0)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        a = a / np.clip(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12, None)
        b = b / np.clip(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12, None)
        return a @ b.T

    def similarity_pairwise(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        a = a / np.clip(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12, None)
        b = b / np.clip(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12, None)
        return (a * b).sum(-1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae export", description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a finished strae run directory (results/runs/LANG/MODEL/SETTING/seedN)")
    parser.add_argument("out", help="output folder (created; must not exist or be empty)")
    parser.add_argument("--format", choices=FORMATS, default="sentence-transformers")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT")
    args = parser.parse_args(argv)
    out = export_sentence_transformers(args.run, args.out, overwrite=args.overwrite)
    print(f"wrote {out} (load with SentenceTransformer({str(out)!r}, trust_remote_code=True))")
    snapshot = read_json(out / "strae_export.json").get("snapshot")
    if snapshot:  # say it where the user looks: this is not a finished run's model
        print(f"note: {args.run} is a mid-training snapshot ({snapshot.get('note')}; step "
              f"{snapshot.get('global_step')}), not a finished run", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
