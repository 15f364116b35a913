"""`strae train-roberta`'s own loop, timed: steps/s with and without ``--cuda-graphs``, one printed line.

    python benchmarks/roberta_loop.py [--modes off,on] [--steps 600] [--lang en] [--device cuda]

``roberta_throughput.py`` times a bare step; this runs the trainer itself (checkpointing, schedule, the next batch
prepared while the device runs the backward, the graphs' captures, train.json) for ``--steps`` steps on the
language's tokenised corpus (``resources/tokenized/LANG``, the default shape and batch 64), once per mode, in a
temporary folder. Per mode: the whole run's ``steps_per_s`` from ``train.json`` (captures included) and the last
logging window's (steady state), plus the final loss — a smoke test of the integration as much as a speed figure.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

from baselines.roberta.train import main as train_roberta
from strae.io import read_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="off,on", help="comma-separated --cuda-graphs values")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--lang", default="en")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--extra", default="", help="more train-roberta arguments, space-separated")
    args = parser.parse_args(argv)
    parts, status = [], 0
    with tempfile.TemporaryDirectory(prefix="strae-roberta-loop-") as folder:
        for mode in args.modes.split(","):
            out = Path(folder) / mode
            command = ["--lang", args.lang, "--seed", "0", "--steps", str(args.steps), "--log-every",
                       str(args.log_every), "--device", args.device, "--cuda-graphs", mode, "--out", str(out),
                       *args.extra.split()]
            log = io.StringIO()
            try:
                with contextlib.redirect_stderr(log):
                    train_roberta(command)
            except (SystemExit, Exception) as error:  # noqa: BLE001 - reported in the line
                tail = " ⏎ ".join(line for line in log.getvalue()[-400:].splitlines() if line.strip())
                parts.append(f"{mode}: FAILED {type(error).__name__}: {str(error)[:300]} {tail}")
                status = 1
                continue
            record = read_json(out / "train.json")
            last = record["history"][-1]
            parts.append(f"{mode}: {record['timings']['steps_per_s']:.2f} steps/s whole run, "
                         f"{last['steps_per_s']:.2f} last {args.log_every} steps, loss {last['loss']:.3f}")
    print(f"roberta train-roberta loop lang={args.lang} steps={args.steps} device={args.device} | " + " | ".join(parts))
    return status


if __name__ == "__main__":
    sys.exit(main())
