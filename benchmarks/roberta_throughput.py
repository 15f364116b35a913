"""RoBERTa-medium MLM training throughput, padded vs packed batches, on whatever device runs it: one printed line.

    python benchmarks/roberta_throughput.py [--device auto|cpu|cuda] [--batch-size 32] [--steps 3]
        [--data-dir resources/tokenized/en] [--shape table6] [--precision auto] [--attention sdpa]
        [--cuda-graphs off,on] [--warmup 1]

Each step is what ``strae train-roberta`` does: ``--batch-size`` sentences masked on the padded layout, laid out
padded to the longest (``none``) or packed several to a row of ``--max-length`` ids with block-diagonal attention
(``sentences``), the loss with the vocabulary projection only at masked positions, backward, gradient clipping and
an AdamW step. Sentences come from a tokenised corpus (``--data-dir``: real lengths) or, without one, random pieces
with lengths from a fixed log-normal (median 26, clipped to 4..126; English Wikipedia's mean is ~30). The first
``--warmup`` steps are not timed. ``--cuda-graphs on`` (CUDA) replays each step's forward and backward as CUDA graphs
over rows padded to shape buckets (``baselines/roberta/graphs.py``, labelled ``+graphs``; a bucket's first step
captures it, so give enough warm-up steps). tokens/s counts real tokens (``<s>``/``</s>`` included, padding not);
``ids/token`` is the ids the model actually processed per real token (1.0 = no padding; bucket padding included).
Peak memory: CUDA's max allocated, or the process's peak RSS on CPU (it only grows across the modes).
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from baselines.roberta.data import collate, mask_for_mlm, pack, padded_rows
from baselines.roberta.graphs import GraphedMlm, to_bucket
from baselines.roberta.model import SHAPES, RobertaShape, build_mlm_model
from baselines.roberta.train import autocast_context, mlm_token_losses
from strae.runtime import describe_device, resolve_device


def batches(args: argparse.Namespace, n_pieces: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(0)
    if args.data_dir:
        from strae.data.tokenized import TokenizedCorpus

        corpus = TokenizedCorpus(args.data_dir, "train")
        return [[np.asarray(corpus[int(i)]) for i in rng.integers(0, len(corpus), args.batch_size)]
                for _ in range(args.steps + args.warmup)]
    lengths = np.clip(np.round(rng.lognormal(np.log(26), 0.6, (args.steps + args.warmup, args.batch_size))), 4, 126)
    return [[rng.integers(0, n_pieces, int(n)) for n in row] for row in lengths]


def measure(packing: str, graphs: str, args: argparse.Namespace, device: torch.device,
            data: list) -> tuple[float, float, float, float]:
    torch.manual_seed(0)
    dims = {**SHAPES[args.shape], **({"num_hidden_layers": args.layers} if args.layers else {})}
    shape = RobertaShape(n_pieces=args.vocab, max_position_embeddings=max(514, args.max_length), **dims)
    model = build_mlm_model(shape, attention=args.attention).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    autocast, precision = autocast_context(device, args.precision)
    special = shape.special
    graphed = GraphedMlm(model, device, precision) if graphs == "on" else None
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    elapsed, tokens, ids_seen = 0.0, 0, 0
    for step, sentences in enumerate(data):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        ids, attention = collate(sentences, special, args.max_length)
        inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(step))
        if packing == "sentences":
            rows = pack(inputs, labels, special, args.max_length)
        else:
            rows = padded_rows(inputs, labels, special)
        n_predicted = int((labels != -100).sum())
        optimizer.zero_grad(set_to_none=True)
        ids_processed = int(rows.inputs.numel())
        if graphed is not None:
            ids_processed = 0
        for chunk in rows.chunks(args.grad_accumulation):
            if graphed is not None:
                bucketed = to_bucket(chunk, special.pad, n_predicted, args.max_length)
                ids_processed += int(bucketed.inputs.numel())
                graphed.loss(bucketed).backward()
                continue
            with autocast():
                losses, _ = mlm_token_losses(model, chunk.to(device))
            (losses.sum() / n_predicted).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= args.warmup:
            elapsed += time.perf_counter() - start
            tokens += int(attention.sum())
            ids_seen += ids_processed
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    timed = len(data) - args.warmup
    return timed / elapsed, tokens / elapsed, ids_seen / tokens, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per step")
    parser.add_argument("--max-length", type=int, default=128, help="ids per sentence and per packed row")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after the warm-up steps)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed first steps (with --cuda-graphs on, enough for the buckets' captures)")
    parser.add_argument("--cuda-graphs", default="off",
                        help="comma-separated: off, on (CUDA graphs per shape bucket, baselines/roberta/graphs.py)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="table6")
    parser.add_argument("--layers", type=int, default=None, help="override the shape's layer count")
    parser.add_argument("--precision", default="auto", help="auto | fp32 | bf16")
    parser.add_argument("--attention", default="sdpa", help="sdpa | eager")
    parser.add_argument("--grad-accumulation", type=int, default=1)
    parser.add_argument("--packing", default="none,sentences", help="comma-separated: none, sentences")
    parser.add_argument("--data-dir", default=None, help="tokenised corpus for real sentence lengths")
    parser.add_argument("--vocab", type=int, default=25000)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    _, precision = autocast_context(device, args.precision)
    data = batches(args, args.vocab)
    parts = []
    for graphs in args.cuda_graphs.split(","):
        for packing in args.packing.split(","):
            steps_per_s, tokens_per_s, ids_per_token, peak = measure(packing, graphs, args, device, data)
            label = packing if graphs == "off" else f"{packing}+graphs"
            parts.append(f"{label}: {steps_per_s:.3f} steps/s {tokens_per_s:.0f} tokens/s ids/token "
                         f"{ids_per_token:.2f} peak {peak:.0f} MiB")
    source = "corpus" if args.data_dir else "synthetic lengths"
    print(f"roberta {args.shape} mlm {describe_device(device)} {precision} attention {args.attention} "
          f"batch {args.batch_size} sentences ({source}) max_len {args.max_length} accum {args.grad_accumulation} "
          f"torch {torch.__version__} | " + " | ".join(parts))


if __name__ == "__main__":
    main()
