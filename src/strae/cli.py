"""The `strae` command: one entry point, one sub-command per pipeline stage.

Each sub-command lives in its own module and exposes ``main(argv: list[str] | None) -> int``;
``python -m strae.<stage>`` and ``strae <stage>`` are the same thing. Keeping the table here (not
argparse sub-parsers that import everything) makes ``strae --help`` fast and lets each stage own its
arguments.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import sys

# sub-command -> module with a main(argv) function
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("strae.data.fetch", "place a registered data file in resources/ (resources -> mirror -> upstream)"),
    "prepare-corpus": ("strae.data.corpus", "segment, filter and subsample a language's corpus; split off dev"),
    "tokenizer": ("strae.data.tokenizer", "place or train a language's SentencePiece tokenizer"),
    "coverage": ("strae.data.coverage", "how often a corpus uses the language's word-task vocabulary (per task)"),
    "tokenize-corpus": ("strae.data.tokenized", "tokenise a prepared corpus into ids + offsets (numpy)"),
    "train": ("strae.train", "train Self-StrAE / Banyan (any structure x functions x objective x k/u)"),
    "evaluate": ("strae.evaluate.harness", "zero-shot evaluation of an encoder; writes versioned JSON"),
    "aggregate": ("strae.evaluate.aggregate", "flatten evaluation JSONs into a tidy scores.csv"),
    "report": ("strae.report.tables", "build paper tables (csv + md) from scores.csv: one, or every one it reaches"),
    "measure": ("strae.report.measure", "measure what tables/figures read: parameter counts, node counts, geometry"),
    "figure": ("strae.report.figures", "build a paper figure (png + pdf)"),
    "record": ("strae.report.record", "freeze results/ into a committed reproduction record; README results block"),
    "export": ("strae.export", "export a trained run as a sentence-transformers folder"),
    "bundle": ("strae.bundle", "carry resources, eval files and wheels to an offline GPU box (--unpack there)"),
    "parts": ("strae.parts", "move a file too big for one transfer (a run's checkpoint) in checked parts; join them"),
    "train-glove": ("baselines.glove.train", "train the GloVe baseline"),
    "train-roberta": ("baselines.roberta.train", "pre-train the RoBERTa-medium MLM baseline"),
    "train-simcse": ("baselines.roberta.simcse", "continue a RoBERTa run with unsupervised SimCSE"),
    "parse-corpus": ("baselines.multiview.parse",
                     "dependency-parse a book-ordered corpus once (spaCy, resumable shards)"),
    "train-multiview": ("baselines.multiview.train",
                        "train the contrastive multi-view BiLSTM / Tree-LSTM encoder (or CL)"),
}


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = ["usage: strae [--quiet | --verbose] <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "global options (before the command):",
              "  -q, --quiet    warnings and errors only; no progress bars",
              "  -v, --verbose  debug messages too",
              "", "`strae <command> --help` for a command's options."]
    return "\n".join(lines)


# One logging setup for every command: the root logger is configured here, before the command's module runs, so a
# module's own logging.basicConfig(...) is a no-op and every command honours --quiet / --verbose the same way.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = {"quiet": logging.WARNING, "default": logging.INFO, "verbose": logging.DEBUG}


def configure_logging(verbosity: str = "default") -> None:
    """Root logger at the level for ``verbosity``; ``quiet`` also turns tqdm's progress bars off.

    tqdm reads TQDM_DISABLE for every bar that does not pass ``disable=`` itself (tqdm >= 4.66), so the switch
    reaches all modules (and subprocesses) without editing each one.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    logging.basicConfig(level=LEVELS[verbosity], format=LOG_FORMAT, datefmt="%H:%M:%S", stream=sys.stderr)
    if verbosity == "quiet":
        os.environ["TQDM_DISABLE"] = "1"
        # tqdm reads TQDM_* when it is imported; if it already was, give its constructor the same default
        std = sys.modules.get("tqdm.std")
        if std is not None and not getattr(std.tqdm.__dict__["__init__"], "strae_quiet", False):
            quiet_init = functools.partialmethod(std.tqdm.__dict__["__init__"], disable=True)
            quiet_init.strae_quiet = True
            std.tqdm.__init__ = quiet_init


def _global_options(argv: list[str]) -> tuple[str, list[str]]:
    """Strip the global options that precede the command; returns (verbosity, remaining argv)."""
    verbosity = "default"
    while argv and argv[0] in {"-q", "--quiet", "-v", "--verbose"}:
        chosen = "quiet" if argv.pop(0) in {"-q", "--quiet"} else "verbose"
        if verbosity != "default" and verbosity != chosen:
            raise SystemExit("strae: --quiet and --verbose contradict each other; give one")
        verbosity = chosen
    return verbosity, argv


def main(argv: list[str] | None = None) -> int:
    try:
        status = _dispatch(argv)
        sys.stdout.flush()  # inside the try: a closed pipe shows up at this flush when the output was short
        return status
    except BrokenPipeError:
        # The reader of stdout went away (`strae record --todo --targets | head -1`): it read what it wanted, so
        # end quietly and successfully instead of with a traceback (and, under `set -o pipefail`, a failed
        # pipeline). Point stdout at /dev/null so the interpreter's own flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _dispatch(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbosity, argv = _global_options(argv)
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
    configure_logging(verbosity)
    from strae.io import git_sha

    git_sha()  # the code's commit as the command starts: its results' provenance names it, whatever is committed later
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
