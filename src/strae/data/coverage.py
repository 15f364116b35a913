"""How much of a language's evaluation vocabulary a training corpus carries: ``strae coverage``.

A word-similarity score (SimLex, WordSim) can only be as good as the training text's evidence for the words it
asks about, and a sentence task's words need evidence too. This counts, per corpus and per task of the language
(word-level by default, ``--level sentence|all`` for the others; and their union): how often the task's words
occur (per million words), how many of its word types occur at all and at least ten times, what share of lines
contains one, and the histogram of *distinct* task words per line. Comparing the corpus strae trains on
with a sample of the authors' (the reference repositories ship one, ``data/small_train.txt``) shows how the two
were drawn: a uniform sample of Wikipedia has most lines with 0-2 distinct WordSim-353 words; a corpus selected for
that vocabulary has a floor (README, "The English corpus: the authors' is selected for WordSim's words").

Words are found the same way in every script: case-folded, every punctuation or symbol character (Unicode
categories P* and S*) taken as a space, then split on whitespace; combining marks stay part of their word. A task's
vocabulary is the case-folded words of its pairs (both sides; a sentence's every word).
"""
from __future__ import annotations

import argparse
import functools
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strae import paths
from strae.data.segment import open_text
from strae.evaluate.tasks import VARIANTS
from strae.io import provenance, sha256_file, write_json

SCHEMA_VERSION = 1
HISTOGRAM_TOP = 10  # distinct task words per line: 0..9 counted one by one, 10 and more together
FREQUENT = 10  # a task word with at least this many occurrences counts as "frequent"
LEVELS = ("word", "sentence", "all")

@functools.cache
def _breaks() -> dict[int, str]:
    """{code point: " "} for every punctuation or symbol character of Unicode (built once, ~0.3 s)."""
    return {point: " " for point in range(sys.maxunicode + 1) if unicodedata.category(chr(point))[0] in "PS"}


def words(text: str) -> list[str]:
    """Case-folded words of ``text``: punctuation and symbols become spaces (any script), then whitespace splits."""
    return text.casefold().translate(_breaks()).split()


def task_vocabulary(left: Iterable[str], right: Iterable[str]) -> Counter[str]:
    """{word: occurrences} over both sides of a task's pairs."""
    return Counter(word for text in (*left, *right) for word in words(text))


def coverage(lines: Iterable[str], vocabularies: dict[str, set[str] | Counter[str]]) -> dict[str, Any]:
    """One pass over ``lines`` (empty ones skipped) for every named vocabulary: the figures the module doc lists.
    A vocabulary given as {word: occurrences in the task} also weighs the task's running words: the share of them
    whose word the corpus has at all / at least ``FREQUENT`` times (a set counts each word once)."""
    weights = {name: vocabulary if isinstance(vocabulary, Counter) else Counter(vocabulary)
               for name, vocabulary in vocabularies.items()}
    vocabularies = {name: set(vocabulary) for name, vocabulary in vocabularies.items()}
    n_lines = n_words = 0
    counts: Counter[str] = Counter()
    union = set().union(*vocabularies.values()) if vocabularies else set()
    with_one = Counter()
    distinct_sum = Counter()
    histograms = {name: [0] * (HISTOGRAM_TOP + 1) for name in vocabularies}
    for line in lines:
        tokens = words(line)
        if not tokens:
            continue
        n_lines += 1
        n_words += len(tokens)
        present = {token for token in tokens if token in union}
        counts.update(token for token in tokens if token in union)
        for name, vocabulary in vocabularies.items():
            distinct = len(present & vocabulary)
            with_one[name] += distinct > 0
            distinct_sum[name] += distinct
            histograms[name][min(distinct, HISTOGRAM_TOP)] += 1
    sets: dict[str, Any] = {}
    for name, vocabulary in vocabularies.items():
        occurrences = sum(counts[word] for word in vocabulary)
        sets[name] = {
            "types": len(vocabulary),
            "types_present": sum(1 for word in vocabulary if counts[word]),
            f"types_with_{FREQUENT}_or_more": sum(1 for word in vocabulary if counts[word] >= FREQUENT),
            "occurrences": occurrences,
            "per_million_words": round(occurrences / n_words * 1e6, 1) if n_words else None,
            "lines_with_one": round(with_one[name] / n_lines, 4) if n_lines else None,
            "distinct_per_line": round(distinct_sum[name] / n_lines, 3) if n_lines else None,
            "distinct_per_line_histogram": {(str(k) if k < HISTOGRAM_TOP else f"{HISTOGRAM_TOP}+"): v
                                            for k, v in enumerate(histograms[name])},
            "task_words_present": _weighted_share(weights[name], counts, 1),
            f"task_words_with_{FREQUENT}_or_more": _weighted_share(weights[name], counts, FREQUENT),
        }
    return {"lines": n_lines, "words": n_words, "sets": sets}


def _weighted_share(task_counts: Counter[str], corpus_counts: Counter[str], at_least: int) -> float | None:
    total = sum(task_counts.values())
    covered = sum(n for word, n in task_counts.items() if corpus_counts[word] >= at_least)
    return round(covered / total, 4) if total else None


def union_name(level: str) -> str:
    """The name of the union of every counted task: ``all word tasks``, ``all sentence tasks``, ``all tasks``."""
    return "all tasks" if level == "all" else f"all {level} tasks"


def task_vocabularies(language: str, variant: str, config_path: str, only: list[str] | None = None,
                      level: str = "word") -> tuple[dict[str, Counter[str]], dict[str, str]]:
    """{task: vocabulary} of the language block's tasks of ``level`` (``all``: every level; ``only``: exactly these
    names), and {task: file}."""
    from strae.data.registry import load_config
    from strae.evaluate.harness import select_tasks
    from strae.evaluate.tasks import load_tasks, make_resolver, read_pairs, tasks_file

    config = load_config(config_path)
    data_cfg = config.get("data") or {}
    catalog = load_tasks(tasks_file(config))
    tasks = [task for task in select_tasks(catalog, config, language, variant, only, config_path)
             if level == "all" or task.level == level]
    if not tasks:
        raise SystemExit(f"{config_path}: languages.{language}.eval.{variant} has no {level}-level task"
                         + (f" among {', '.join(only)}" if only else "") + "; nothing to count")
    resolve = make_resolver(paths.resources_dir(config), data_cfg.get("registry"))
    vocabularies, files = {}, {}
    for task in tasks:
        path = resolve(task.file_spec)
        pairs = read_pairs(path, task.level, task.rows, file_format=task.format)
        vocabularies[task.name] = task_vocabulary(pairs.left, pairs.right)
        files[task.name] = str(path)
    if len(vocabularies) > 1:
        vocabularies[union_name(level)] = sum(vocabularies.values(), Counter())
    return vocabularies, files


def render(document: dict[str, Any]) -> str:
    rows = ["| corpus | word set | lines | words | per million words | lines with one | distinct per line | "
            f"types present / ≥{FREQUENT} / all | task's running words present / ≥{FREQUENT} | "
            "distinct per line: 0, 1, 2, 3, 4, 5+ |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for corpus in document["corpora"]:
        for name, figures in corpus["sets"].items():
            histogram = list(figures["distinct_per_line_histogram"].values())
            shares = [value / corpus["lines"] for value in (*histogram[:5], sum(histogram[5:]))]
            rows.append(
                f"| {corpus['label']} | {name} | {corpus['lines']:,} | {corpus['words']:,} | "
                f"{figures['per_million_words']:,.0f} | {figures['lines_with_one']:.1%} | "
                f"{figures['distinct_per_line']:.2f} | {figures['types_present']} / "
                f"{figures[f'types_with_{FREQUENT}_or_more']} / {figures['types']} | "
                f"{figures['task_words_present']:.1%} / {figures[f'task_words_with_{FREQUENT}_or_more']:.1%} | "
                + ", ".join(f"{share:.1%}" for share in shares) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", required=True, help="language block of the config whose tasks to count")
    parser.add_argument("--corpus", type=Path, nargs="+", default=None,
                        help="text files (plain, .xz, .gz, .bz2), one sentence or paragraph per line; default: "
                             "RESOURCES/corpora/LANG/train.txt (what `strae prepare-corpus` wrote)")
    parser.add_argument("--label", nargs="+", default=None, help="a name per --corpus file (default: the paths)")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks (of --level)")
    parser.add_argument("--level", default="word", choices=LEVELS,
                        help="which tasks' words: word-level (default), sentence-level, or all")
    parser.add_argument("--union", action="append", default=[], metavar="NAME=TASK,TASK",
                        help="also count the union of these tasks' words under NAME (repeatable), e.g. "
                             "wordsim353=wordsim_sim,wordsim_rel")
    parser.add_argument("--variant", default="official", choices=VARIANTS,
                        help="which task files (default official)")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON (with provenance)")
    args = parser.parse_args(argv)

    vocabularies, files = task_vocabularies(args.lang, args.variant, args.config, args.tasks, args.level)
    for spec in args.union:
        name, _, members = spec.partition("=")
        members = [member.strip() for member in members.split(",") if member.strip()]
        unknown = [member for member in members if member not in files]
        if not name or not members or unknown:
            parser.error(f"--union {spec}: expected NAME=TASK,TASK with tasks of the run"
                         f" ({', '.join(files)})" + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
        vocabularies[name] = sum((vocabularies[member] for member in members), Counter())
    if args.corpus is None:
        from strae.data.registry import load_config

        args.corpus = [paths.corpus_file(args.lang, "train", paths.resources_dir(load_config(args.config)))]
    if args.label is not None and len(args.label) != len(args.corpus):
        parser.error(f"--label: {len(args.label)} names for {len(args.corpus)} --corpus files")
    corpora = []
    for index, path in enumerate(args.corpus):
        if not path.is_file():
            raise SystemExit(f"{path}: corpus file not found" + (
                " (run `strae prepare-corpus` or the workflow's corpus rule first, or pass --corpus)"
                if args.label is None and len(args.corpus) == 1 else ""))
        with open_text(path) as handle:
            figures = coverage(handle, vocabularies)
        if not figures["lines"]:
            raise SystemExit(f"{path}: no words in the file")
        corpora.append({"label": args.label[index] if args.label else str(path), "file": str(path),
                        "sha256": sha256_file(path), **figures})
    document = {"schema_version": SCHEMA_VERSION, "language": args.lang, "variant": args.variant, "level": args.level,
                "task_files": files, "corpora": corpora,
                "provenance": provenance(command=["strae", "coverage", *(argv if argv is not None else sys.argv[2:])])}
    print(render(document))
    if args.out is not None:
        write_json(args.out, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
