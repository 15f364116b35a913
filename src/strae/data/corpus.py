"""`strae prepare-corpus`: segment, subsample and split a language's corpus into train.txt / dev.txt.

Two streaming passes keep memory bounded (only one small integer per sentence is held):
  1. decompress + normalise + segment every source, recording each sentence's whitespace-token count;
  2. pick sentences with a seeded permutation of their indices until the token budget is reached
     (uniform over sentences, independent of model seeds), then stream again and write the chosen ones
     in corpus order.
When the language block has no ``dev_corpus``, the first ``dev_sentences`` indices of the same permutation
become dev.txt, so dev and train are disjoint by construction.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from strae.data.fetch import fetch_source
from strae.data.registry import DEFAULT_CONFIG, data_setting, language_block, load_config, load_registry
from strae.data.segment import iter_sentences
from strae.io import atomic_open, provenance, sha256_file, write_json

log = logging.getLogger(__name__)


def _count_sentences(paths: list[Path], language: str, desc: str) -> np.ndarray:
    counts = array("I")
    for sentence in tqdm(iter_sentences(paths, language), desc=desc, unit=" sent", mininterval=2.0):
        counts.append(sentence.count(" ") + 1)  # whitespace-normalised: tokens = spaces + 1
    return np.frombuffer(counts, dtype=np.uint32).astype(np.int64) if counts else np.zeros(0, dtype=np.int64)


def select_by_budget(order: np.ndarray, token_counts: np.ndarray, budget: int) -> np.ndarray:
    """Indices from ``order`` (in that order) until their tokens reach ``budget``.

    The sentence that crosses the budget is kept, so the total is >= budget and exceeds it by less than one
    sentence ("budget +- 1 line"). If the whole pool is smaller than the budget, everything is taken.
    """
    if budget <= 0 or len(order) == 0:
        return order[:0]
    cumulative = np.cumsum(token_counts[order])
    stop = int(np.searchsorted(cumulative, budget, side="left")) + 1  # first position with cumsum >= budget
    return order[: min(stop, len(order))]


def _write_selected(paths: list[Path], language: str, target: np.ndarray, outs: dict[int, Path],
                    desc: str) -> dict[int, tuple[int, int]]:
    """Stream the sentences again; sentence i goes to ``outs[target[i]]`` (0 = dropped). One pass, many files."""
    stats = {code: [0, 0] for code in outs}
    with contextlib.ExitStack() as stack:
        handles = {code: stack.enter_context(atomic_open(path, "w", encoding="utf-8", newline="\n"))
                   for code, path in outs.items()}
        for index, sentence in enumerate(tqdm(iter_sentences(paths, language), desc=desc, total=len(target),
                                              unit=" sent", mininterval=2.0)):
            code = int(target[index])
            if code:
                handles[code].write(sentence + "\n")
                stats[code][0] += 1
                stats[code][1] += sentence.count(" ") + 1
    return {code: (n, t) for code, (n, t) in stats.items()}


def _source_record(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    return {"spec": spec, "file": str(path), "sha256": sha256_file(path)}


def prepare_corpus(
    lang: str,
    config_path: str | Path = DEFAULT_CONFIG,
    out_dir: str | Path | None = None,
    tokens: int | None = None,
    seed: int | None = None,
    dev_sentences: int | None = None,
    resources_dir: str | Path | None = None,
    mirror: str | Path | None = None,
) -> dict[str, Any]:
    """Write ``out_dir/{train,dev}.txt`` + ``meta.json``; explicit arguments override the config's values."""
    started = time.time()
    config = load_config(config_path)
    block = language_block(config, lang, config_path)
    tokens = int(tokens if tokens is not None else data_setting(config, "tokens_per_language", config_path))
    seed = int(seed if seed is not None else data_setting(config, "subsample_seed", config_path))
    if dev_sentences is None:
        dev_sentences = int(data_setting(config, "dev_sentences", config_path))
    if resources_dir is None:
        resources_dir = (config.get("data") or {}).get("resources_dir", "resources")
    out_dir = Path(out_dir) if out_dir is not None else Path(resources_dir) / "corpora" / lang
    segmenter = block.get("segmenter")
    if not segmenter:
        raise SystemExit(f"{config_path}: languages.{lang}.segmenter is missing; set the sentencex language code")
    corpus_specs = block.get("corpus") or []
    if not corpus_specs:
        raise SystemExit(f"{config_path}: languages.{lang}.corpus is empty; list at least one source")
    registry_path = (config.get("data") or {}).get("registry", "config/registry.yaml")
    registry = load_registry(registry_path)

    def resolve(specs):
        return [fetch_source(s, resources_dir=resources_dir, mirror=mirror, registry=registry) for s in specs]

    train_paths = resolve(corpus_specs)
    dev_specs = block.get("dev_corpus") or []
    dev_paths = resolve(dev_specs)

    counts = _count_sentences(train_paths, segmenter, f"{lang}: segmenting (pass 1/2)")
    n_total, total_tokens = len(counts), int(counts.sum())
    if n_total == 0:
        raise SystemExit(f"languages.{lang}.corpus: the sources contain no text ({', '.join(map(str, train_paths))})")
    order = np.random.default_rng(seed).permutation(n_total)

    in_train_dev = 0 if dev_paths else min(dev_sentences, n_total // 10)
    if not dev_paths and in_train_dev < dev_sentences:
        log.warning("%s: corpus has only %d sentences; dev split reduced to %d (10%%)", lang, n_total, in_train_dev)
    dev_idx = order[:in_train_dev]
    train_idx = select_by_budget(order[in_train_dev:], counts, tokens)
    if int(counts[train_idx].sum()) < tokens:
        log.warning("%s: corpus has only %d whitespace tokens outside dev (< budget %d); using all of it",
                    lang, int(counts[train_idx].sum()), tokens)

    TRAIN, DEV = 1, 2
    target = np.zeros(n_total, dtype=np.uint8)
    target[train_idx] = TRAIN
    out_dir.mkdir(parents=True, exist_ok=True)
    if dev_paths:
        written = _write_selected(train_paths, segmenter, target, {TRAIN: out_dir / "train.txt"},
                                  f"{lang}: writing train (pass 2/2)")
        dev_counts = _count_sentences(dev_paths, segmenter, f"{lang}: segmenting dev corpus")
        written.update(_write_selected(dev_paths, segmenter, np.full(len(dev_counts), DEV, dtype=np.uint8),
                                       {DEV: out_dir / "dev.txt"}, f"{lang}: writing dev"))
        dev_origin = "dev_corpus"
    else:
        target[dev_idx] = DEV
        written = _write_selected(train_paths, segmenter, target,
                                  {TRAIN: out_dir / "train.txt", DEV: out_dir / "dev.txt"},
                                  f"{lang}: writing train + dev (pass 2/2)")
        dev_origin = "held out from corpus (same seeded permutation, disjoint from train)"
    (n_train, tok_train), (n_dev, tok_dev) = written[TRAIN], written[DEV]

    meta = {
        "language": lang,
        "segmenter": {"package": "sentencex", "language": segmenter},
        "subsample_seed": seed,
        "token_budget": tokens,
        "train": {"sentences": n_train, "whitespace_tokens": tok_train, "sha256": sha256_file(out_dir / "train.txt")},
        "dev": {"sentences": n_dev, "whitespace_tokens": tok_dev, "origin": dev_origin,
                "sha256": sha256_file(out_dir / "dev.txt")},
        "pool": {"sentences": n_total, "whitespace_tokens": total_tokens},
        "sources": [_source_record(s, p) for s, p in zip(corpus_specs, train_paths)],
        "dev_sources": [_source_record(s, p) for s, p in zip(dev_specs, dev_paths)],
        "seconds": round(time.time() - started, 1),
        "provenance": provenance(),
    }
    write_json(out_dir / "meta.json", meta)
    log.info("%s: train %d sentences / %d tokens, dev %d sentences -> %s", lang, n_train, tok_train, n_dev, out_dir)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae prepare-corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, help="language block name in the config")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--tokens", type=int, default=None, help="whitespace-token budget (default: data.tokens_per_language)")
    parser.add_argument("--seed", type=int, default=None, help="subsample seed (default: data.subsample_seed)")
    parser.add_argument("--dev-sentences", type=int, default=None, help="default: data.dev_sentences")
    parser.add_argument("--out-dir", default=None, help="default: <resources>/corpora/<lang>")
    parser.add_argument("--resources-dir", default=None, help="default: data.resources_dir")
    parser.add_argument("--mirror", default=None, help="data mirror (default: $STRAE_DATA_MIRROR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    meta = prepare_corpus(args.lang, args.config, out_dir=args.out_dir, tokens=args.tokens, seed=args.seed,
                          dev_sentences=args.dev_sentences, resources_dir=args.resources_dir, mirror=args.mirror)
    print(f"train: {meta['train']['sentences']} sentences, {meta['train']['whitespace_tokens']} tokens; "
          f"dev: {meta['dev']['sentences']} sentences ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
