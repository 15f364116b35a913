"""How much already-tokenised text a pretokeniser leaves unchanged, token for token.

    .venv/bin/python benchmarks/pretokenize_idempotence.py FILE... [--kind treebank] [--examples N]

FILE is a plain text file (one sentence per line, e.g. the reference's data/small_train.txt) or an evaluation CSV
with header sent1,sent2,score or word1,word2,score (e.g. the mirror's eval/paper_variant/*.csv). Prints one line
per file: unique texts, how many the pretokeniser leaves unchanged (same whitespace tokens), and the most frequent
changes (token span before -> after); with --examples N also N changed texts.
"""
from __future__ import annotations

import argparse
import collections
import csv
import difflib
from pathlib import Path

from strae.data.pretokenize import PRETOKENIZERS, get_pretokenizer


def read_texts(path: Path) -> list[str]:
    if path.suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader)
            columns = [i for i, name in enumerate(header) if name in ("sent1", "sent2", "word1", "word2")]
            texts = [row[i] for row in reader for i in columns]
    else:
        texts = [line.rstrip("\n") for line in open(path, encoding="utf-8")]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def changes(before: str, after: str) -> list[str]:
    a, b = before.split(), after.split()
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return [f"{' '.join(a[i1:i2])!r}->{' '.join(b[j1:j2])!r}" for op, i1, i2, j1, j2 in ops if op != "equal"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--kind", default="treebank", choices=PRETOKENIZERS)
    parser.add_argument("--top", type=int, default=5, help="most frequent changes to print per file")
    parser.add_argument("--examples", type=int, default=0)
    args = parser.parse_args()
    function = get_pretokenizer(args.kind)
    for path in args.files:
        texts = read_texts(path)
        counter: collections.Counter[str] = collections.Counter()
        changed = []
        for text in texts:
            out = function(text)
            if out.split() != text.split():
                changed.append((text, out))
                counter.update(changes(text, out))
        top = "; ".join(f"{change} x{n}" for change, n in counter.most_common(args.top))
        share = 100 * (len(texts) - len(changed)) / max(len(texts), 1)
        print(f"{path.name}: {len(texts) - len(changed)}/{len(texts)} unchanged ({share:.1f}%); top changes: {top}")
        for text, out in changed[: args.examples]:
            print(f"    {text!r}\n -> {out!r}")


if __name__ == "__main__":
    main()
