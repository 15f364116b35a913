"""The `strae` command: one entry point, one sub-command per pipeline stage.

Each sub-command lives in its own module and exposes ``main(argv: list[str] | None) -> int``;
``python -m strae.<stage>`` and ``strae <stage>`` are the same thing. Keeping the table here (not
argparse sub-parsers that import everything) makes ``strae --help`` fast and lets each stage own its
arguments.
"""
from __future__ import annotations

import importlib
import sys

# sub-command -> module with a main(argv) function
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("strae.data.fetch", "place a registered data file in resources/ (resources -> mirror -> upstream)"),
    "prepare-corpus": ("strae.data.corpus", "segment, filter and subsample a language's corpus; split off dev"),
    "tokenizer": ("strae.tokenize", "place or train a language's SentencePiece tokenizer"),
    "tokenize-corpus": ("strae.data.tokenized", "tokenise a prepared corpus into ids + offsets (numpy)"),
    "train": ("strae.train", "train Self-StrAE / Banyan (any structure x functions x objective x k/u)"),
    "evaluate": ("strae.evaluate.harness", "zero-shot evaluation of an encoder; writes versioned JSON"),
    "aggregate": ("strae.evaluate.aggregate", "flatten evaluation JSONs into a tidy scores.csv"),
    "report": ("strae.report.tables", "build a paper table (csv + md) from scores.csv"),
    "figure": ("strae.report.figures", "build a paper figure (png + pdf)"),
    "train-glove": ("baselines.glove.train", "train the GloVe baseline"),
    "train-roberta": ("baselines.roberta.train", "pre-train the RoBERTa-medium MLM baseline"),
    "train-simcse": ("baselines.roberta.simcse", "continue a RoBERTa run with unsupervised SimCSE"),
    "parse-corpus": ("baselines.multiview.parse", "dependency-parse a book-ordered corpus once (spaCy, resumable shards)"),
    "train-multiview": ("baselines.multiview.train", "train the contrastive multi-view BiLSTM / Tree-LSTM encoder (or CL)"),
}


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = ["usage: strae <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "`strae <command> --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(_usage())
        return 0
    if argv[0] == "--version":
        from strae import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"strae: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
