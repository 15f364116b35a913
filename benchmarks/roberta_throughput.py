"""RoBERTa-medium MLM training throughput on CPU, fp32 vs bf16 autocast: one printed line.

    python benchmarks/roberta_throughput.py [--batch-size 32] [--length 40] [--steps 3] [--layers 8]

Random piece ids (BPEmb-sized vocabulary, V = 25000) in sentence-length batches, the same loss function as
``strae train-roberta`` (vocabulary projection only at masked positions), AdamW step included. The first step is a
warm-up and is not timed. Peak RSS is the process's maximum resident set size so far (it only grows).
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from baselines.roberta.data import collate, mask_for_mlm
from baselines.roberta.model import RobertaShape, build_mlm_model
from baselines.roberta.train import mlm_loss


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(precision: str, args: argparse.Namespace) -> tuple[float, float, float]:
    torch.manual_seed(0)
    shape = RobertaShape(n_pieces=args.vocab, num_hidden_layers=args.layers)
    model = build_mlm_model(shape).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    rng = np.random.default_rng(0)
    ids, attention = collate([rng.integers(0, args.vocab, args.length) for _ in range(args.batch_size)],
                             shape.special, args.length + 2)
    inputs, labels = mask_for_mlm(ids, shape.special, torch.Generator().manual_seed(0))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    elapsed = 0.0
    for step in range(args.steps + 1):
        start = time.perf_counter()
        with autocast:
            loss = mlm_loss(model, inputs, attention, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step > 0:
            elapsed += time.perf_counter() - start
    steps_per_s = args.steps / elapsed
    return steps_per_s, steps_per_s * int(attention.sum()), peak_rss_mib()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=40, help="pieces per sentence (English wiki mean is ~30)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=25000)
    args = parser.parse_args()
    parts = []
    for precision in ("fp32", "bf16"):
        steps_per_s, tokens_per_s, rss = measure(precision, args)
        parts.append(f"{precision}: {steps_per_s:.3f} steps/s {tokens_per_s:.0f} tokens/s peak_rss {rss:.0f} MiB")
    print(f"roberta-medium mlm cpu batch {args.batch_size}x{args.length + 2} threads {torch.get_num_threads()} | "
          + " | ".join(parts))


if __name__ == "__main__":
    main()
