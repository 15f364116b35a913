"""Time the full English evaluation suite (both variants' task lists) for the cheap random-token encoder.

    .venv/bin/python benchmarks/eval_speed.py [--variant paper|official] [--lang L]

Prints one line: seconds (harness only: reading, hashing, encoding, scoring; not interpreter start-up), pairs
scored and pairs/s. Target: <= 30 s on 2 CPU cores. Files are fetched into resources/ once beforehand so the
timing does not include the first copy from the mirror. Not a timed test: run it by hand or from CI logs.
"""
from __future__ import annotations

import argparse
import time

import yaml

from strae.evaluate.harness import evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", default=None, help="default: the config's first language block (English)")
    parser.add_argument("--variant", default="paper", choices=["paper", "official"])
    parser.add_argument("--config", default="config/config.yaml")
    args = parser.parse_args()
    if args.lang is None:
        args.lang = next(iter(yaml.safe_load(open(args.config, encoding="utf-8"))["languages"]))
    evaluate("random-token", args.lang, args.variant, config_path=args.config, progress=False)  # warm: place files
    started = time.perf_counter()
    result = evaluate("random-token", args.lang, args.variant, config_path=args.config, progress=False)
    seconds = time.perf_counter() - started
    pairs = sum(t.n_pairs for t in result.tasks.values())
    print(f"eval_speed lang={args.lang} variant={args.variant} encoder=random-token tasks={len(result.tasks)} "
          f"pairs={pairs} seconds={seconds:.2f} pairs_per_s={pairs / seconds:.0f}")


if __name__ == "__main__":
    main()
