"""GloVe training throughput (co-occurrence pairs per second) on synthetic Zipf-distributed pairs.

    python benchmarks/glove_throughput.py [--vocab 62837] [--dim 256] [--batch-size 4096] [--batches 8]

Prints wall-clock and per-CPU-second rates, so numbers from a shared machine can be compared. The
English run (10M tokens, 62,837 words, 28.3M non-zero pairs) needs 15 x 28.3M pair updates.
"""
from __future__ import annotations

import argparse
import time

import torch

from baselines.glove.model import GloveModel, RowOptimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=62837)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    model = GloveModel(args.vocab, args.dim, generator=generator)
    optimizer = RowOptimizer([model.word.data, model.context.data], args.optimizer, lr=1e-3)
    n = args.batch_size * (args.batches + 1)
    # rank ~ u^3 puts most mass on frequent words, roughly like real co-occurrence rows
    rows = (torch.rand(n, generator=generator) ** 3 * args.vocab).long()
    cols = (torch.rand(n, generator=generator) ** 3 * args.vocab).long()
    log_counts, weights = torch.rand(n, generator=generator), torch.rand(n, generator=generator)
    for i in range(args.batches + 1):
        if i == 1:  # the first batch warms up allocations
            wall, cpu = time.perf_counter(), time.process_time()
        sl = slice(i * args.batch_size, (i + 1) * args.batch_size)
        order = torch.argsort(rows[sl])
        r, c = rows[sl][order], cols[sl][order]
        _, grad_word, grad_context = model.loss_and_gradients(r, c, log_counts[sl][order], weights[sl][order])
        optimizer.begin_step()
        optimizer.step(0, r, grad_word, rows_sorted=True)
        optimizer.step(1, c, grad_context)
    pairs = args.batch_size * args.batches
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"vocab {args.vocab} dim {args.dim} batch {args.batch_size} threads {args.threads}: "
          f"{pairs / wall:,.0f} pairs/s wall, {pairs / cpu:,.0f} pairs/s per CPU-second")


if __name__ == "__main__":
    main()
