"""`strae prepare-corpus`: segment, subsample and split a language's corpus into train.txt / dev.txt.

Two streaming passes keep memory bounded (only one small integer per sentence is held):
  1. decompress + normalise + segment every source, recording each sentence's whitespace-token count;
  2. pick sentences with a seeded permutation of their indices until the token budget is reached
     (uniform over sentences, independent of model seeds), then stream again and write the chosen ones
     in corpus order.
When the language block has no ``dev_corpus``, the first ``dev_sentences`` indices of the same permutation
become dev.txt, so dev and train are disjoint by construction.

Which sources: a block's ``paper_source`` (the authors' own corpus, e.g. the HF dataset the reference code trains
on) is used when it can be loaded; otherwise its ``corpus``/``dev_corpus`` (the offline mirror's substitute). The
choice is recorded in meta.json (``corpus_source``: ``paper_source`` or ``corpus``) with every source file's sha256
(for sources without a known checksum, trust on first use). ``--corpus-source`` forces one of them.
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

from strae import paths
from strae.argtypes import nonnegative_int, positive_int
from strae.data.fetch import ChecksumError, FetchError, fetch_source, hf_commit_file
from strae.data.registry import DEFAULT_CONFIG, data_setting, language_block, load_config, load_registry
from strae.data.segment import iter_sentences
from strae.io import atomic_open, package_versions, provenance, sha256_file, write_json

log = logging.getLogger(__name__)

# --corpus-source: auto = the paper source when it loads, else the block's corpus; or force one config key.
CORPUS_SOURCES = ("auto", "paper_source", "corpus")


def _count_sentences(paths: list[Path], language: str | None, desc: str) -> np.ndarray:
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


def _write_selected(paths: list[Path], language: str | None, target: np.ndarray, outs: dict[int, Path],
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
    if "registry" in spec:
        checksum = "verified against config/registry.yaml"
    elif spec.get("sha256"):
        checksum = "verified against the language block's sha256"
    else:  # e.g. an HF dataset: nothing to compare with the first time; later uses are checked against this value
        checksum = "trust on first use (this sha256 is of what was fetched)"
    record = {"spec": spec, "file": str(path), "sha256": sha256_file(path), "checksum": checksum}
    if "hf_dataset" in spec:  # the hub commit the text was read at (strae.data.fetch): what `revision:` would pin
        commit_file = hf_commit_file(path)
        record["hf_commit"] = commit_file.read_text().strip() if commit_file.exists() else "unknown"
    return record


def choose_sources(block: dict[str, Any], lang: str, config_path: str | Path, choice: str,
                   resolve) -> dict[str, Any]:
    """Pick the paper source or the block's corpus (see the module docstring); ``resolve(specs) -> paths``.

    Returns the config key used, its train/dev specs and paths, whether lines are already sentences, and why the
    paper source was not used (None when it was, or when none is defined)."""
    if choice not in CORPUS_SOURCES:
        raise SystemExit(f"--corpus-source {choice}: use one of {', '.join(CORPUS_SOURCES)}")
    paper = block.get("paper_source")
    if choice == "paper_source" and not paper:
        raise SystemExit(f"{config_path}: languages.{lang}.paper_source is not defined; use --corpus-source corpus")
    skipped = None
    if paper and choice != "corpus":
        specs = paper.get("corpus") or []
        if not specs:
            raise SystemExit(f"{config_path}: languages.{lang}.paper_source.corpus is empty; list its source(s)")
        dev_specs = paper.get("dev_corpus") or []
        try:
            return {"key": "paper_source", "specs": specs, "dev_specs": dev_specs, "paths": resolve(specs),
                    "dev_paths": resolve(dev_specs), "segmented": bool(paper.get("segmented")),
                    "subsample": paper.get("subsample", True) is not False, "skipped": None}
        except ChecksumError:
            raise  # a paper corpus that changed since its first use is an error, never a silent fallback
        except FetchError as error:
            if choice == "paper_source":
                raise
            skipped = str(error)
            log.warning("%s: paper source not available (%s); using languages.%s.corpus instead", lang, error, lang)
    elif paper:
        skipped = "--corpus-source corpus"
    specs = block.get("corpus") or []
    if not specs:
        raise SystemExit(f"{config_path}: languages.{lang}.corpus is empty; list at least one source")
    dev_specs = block.get("dev_corpus") or []
    return {"key": "corpus", "specs": specs, "dev_specs": dev_specs, "paths": resolve(specs),
            "dev_paths": resolve(dev_specs), "segmented": False, "subsample": True, "skipped": skipped}


def prepare_corpus(
    lang: str,
    config_path: str | Path = DEFAULT_CONFIG,
    out_dir: str | Path | None = None,
    tokens: int | None = None,
    seed: int | None = None,
    dev_sentences: int | None = None,
    resources_dir: str | Path | None = None,
    mirror: str | Path | None = None,
    corpus_source: str = "auto",
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
        resources_dir = paths.resources_dir(config)
    out_dir = Path(out_dir) if out_dir is not None else paths.corpus_dir(lang, resources_dir)
    segmenter = block.get("segmenter")
    if not segmenter:
        raise SystemExit(f"{config_path}: languages.{lang}.segmenter is missing; set the sentencex language code")
    registry_path = (config.get("data") or {}).get("registry", "config/registry.yaml")
    registry = load_registry(registry_path)

    def resolve(specs):
        return [fetch_source(s, resources_dir=resources_dir, mirror=mirror, registry=registry) for s in specs]

    chosen = choose_sources(block, lang, config_path, corpus_source, resolve)
    corpus_specs, train_paths = chosen["specs"], chosen["paths"]
    dev_specs, dev_paths = chosen["dev_specs"], chosen["dev_paths"]
    segmenter_record = {"package": "sentencex", "language": segmenter}
    if chosen["segmented"]:
        segmenter = None  # one sentence per line already: taken as they are, like the reference does
        segmenter_record = {"package": None,
                            "reason": f"languages.{lang}.paper_source.segmented: one sentence per line"}

    counts = _count_sentences(train_paths, segmenter, f"{lang}: segmenting (pass 1/2)")
    n_total, total_tokens = len(counts), int(counts.sum())
    if n_total == 0:
        raise SystemExit(f"languages.{lang}.{chosen['key']}: the sources contain no text "
                         f"({', '.join(map(str, train_paths))})")
    if total_tokens < 1.5 * n_total:
        # the budget counts whitespace-separated words: in a script that writes none (Chinese, Japanese, Thai) a
        # "token" is a whole sentence, and data.tokens_per_language a number of sentences
        log.warning("languages.%s: %.2f whitespace-separated words per sentence (%d sentences): the token budget "
                    "(data.tokens_per_language) counts such words, so for this text it is a count of sentences; "
                    "set it (or pretokenise the corpus into words) with that in mind",
                    lang, total_tokens / n_total, n_total)
    order = np.random.default_rng(seed).permutation(n_total)
    if not chosen["subsample"]:
        tokens = total_tokens  # paper_source.subsample: false - every sentence, as the reference trains on all of it

    in_train_dev = 0 if dev_paths else min(dev_sentences, n_total // 10)
    if not dev_paths and in_train_dev < dev_sentences:
        log.warning("%s: corpus has only %d sentences; dev split reduced to %d (10%%)", lang, n_total, in_train_dev)
    dev_idx = order[:in_train_dev]
    train_idx = select_by_budget(order[in_train_dev:], counts, tokens)
    if chosen["subsample"] and int(counts[train_idx].sum()) < tokens:
        log.warning("%s: corpus has only %d whitespace tokens outside dev (< budget %d); using all of it",
                    lang, int(counts[train_idx].sum()), tokens)

    TRAIN, DEV = 1, 2
    target = np.zeros(n_total, dtype=np.uint8)
    target[train_idx] = TRAIN
    out_dir.mkdir(parents=True, exist_ok=True)
    # meta.json is what makes train.txt + dev.txt one set: written last, naming both files' sha256, which
    # tokenize-corpus checks, so a rerun stopped between the files (one new, one old) is refused there
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
        "corpus_source": chosen["key"],
        "paper_source_skipped": chosen["skipped"],
        "segmenter": segmenter_record,
        "subsample_seed": seed,
        "token_budget": tokens,
        "subsampled": chosen["subsample"],
        "train": {"sentences": n_train, "whitespace_tokens": tok_train, "sha256": sha256_file(out_dir / "train.txt")},
        "dev": {"sentences": n_dev, "whitespace_tokens": tok_dev, "origin": dev_origin,
                "sha256": sha256_file(out_dir / "dev.txt")},
        "pool": {"sentences": n_total, "whitespace_tokens": total_tokens},
        "sources": [_source_record(s, p) for s, p in zip(corpus_specs, train_paths)],
        "dev_sources": [_source_record(s, p) for s, p in zip(dev_specs, dev_paths)],
        "seconds": round(time.time() - started, 1),
        "provenance": provenance(packages=package_versions("sentencex")),
    }
    write_json(out_dir / "meta.json", meta)
    log.info("%s: train %d sentences / %d tokens, dev %d sentences -> %s", lang, n_train, tok_train, n_dev, out_dir)
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae prepare-corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--lang", required=True, help="language block name in the config")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--tokens", type=positive_int, default=None,
                        help="whitespace-token budget (default: data.tokens_per_language)")
    parser.add_argument("--seed", type=nonnegative_int, default=None,
                        help="subsample seed (default: data.subsample_seed)")
    parser.add_argument("--dev-sentences", type=positive_int, default=None, help="default: data.dev_sentences")
    parser.add_argument("--out-dir", default=None, help="default: <resources>/corpora/<lang>")
    parser.add_argument("--resources-dir", default=None, help="default: data.resources_dir")
    parser.add_argument("--mirror", default=None, help="data mirror (default: $STRAE_DATA_MIRROR)")
    parser.add_argument("--corpus-source", choices=CORPUS_SOURCES, default="auto",
                        help="auto (default): the block's paper_source when it can be loaded, else its corpus; "
                             "paper_source / corpus: force one (paper_source fails if it cannot be loaded)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    meta = prepare_corpus(args.lang, args.config, out_dir=args.out_dir, tokens=args.tokens, seed=args.seed,
                          dev_sentences=args.dev_sentences, resources_dir=args.resources_dir, mirror=args.mirror,
                          corpus_source=args.corpus_source)
    print(f"train: {meta['train']['sentences']} sentences, {meta['train']['whitespace_tokens']} tokens; "
          f"dev: {meta['dev']['sentences']} sentences ({meta['seconds']} s); source: {meta['corpus_source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
