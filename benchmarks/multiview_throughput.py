"""Training throughput of the multi-view paper's models (``strae train-multiview``): ONE printed line per model.

    python benchmarks/multiview_throughput.py [--models ctl,cl] [--device auto|cpu|cuda] [--batch-size 100]
        [--steps 10] [--warmup 2] [--parses resources/parses/en/p450_sall] [--threads N]

Each step is the trainer's own (``baselines.multiview.train.train_step``: the batch of consecutive sentences built
from their dependency parses, the contrastive loss of the two views, backward, gradient clipping at 5.0, Adam), on
the paper's shapes (hidden 1000, embeddings 300, vocabulary 20k; ``--hidden`` etc. for a tiny CPU check). Sentences
come from a parse directory of ``strae parse-corpus`` (``--parses``: real trees, in corpus order) or, without one,
synthetic sentences: lengths log-normal (median 24, clipped to 3..64; the trainer keeps 1..64), Zipfian words, and a
random projective dependency tree per sentence (each word's head lies towards the root, a geometric(0.15) number of
words away, the root at most). Calibrated on the first 3,000 kept sentences of ELTeC's 450-paragraph parse: mean
length 26.0 (synthetic 26.4), Tree-LSTM levels 5.9 a sentence (5.9) and 14.1 a batch of 100 (13.4). ``levels`` in the
line is the mean number of Tree-LSTM levels per batch (the view's sequential depth, what bounds its speed on a GPU).
Kernels are chosen as the trainer chooses them (``configure_determinism``: deterministic on CUDA unless
``--nondeterministic``; ``deterministic=`` in the line), and the vocabulary has its full ``--vocab-size`` rows (the
embedding tables and Adam's state the trainer carries). The first ``--warmup`` steps are not timed; on CUDA every
timed step ends with a synchronisation. The line gives
sentences/s, tokens/s, s/step, peak memory (CUDA max allocated, or the process's peak RSS), the device, and
``full_eltec_steps_min``: the minutes ELTeC's whole parse (5,855 steps of 100 sentences) would take at that rate.
"""
from __future__ import annotations

import argparse
import math
import resource
import time
from pathlib import Path

import numpy as np
import torch

from baselines.multiview.data import ParsedCorpus, Vocabulary, load_parsed
from baselines.multiview.model import MultiviewConfig, MultiviewModel, node_levels
from baselines.multiview.train import Job, Progress, train_step
from strae.runtime import configure_determinism, describe_device, resolve_device


def synthetic_corpus(n_sentences: int, vocab_size: int, seed: int = 0) -> ParsedCorpus:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size + 1)
    probs = (1.0 / ranks) / np.sum(1.0 / ranks)
    lengths = np.clip(np.round(rng.lognormal(np.log(24), 0.5, n_sentences)), 3, 64).astype(int)
    tokens, heads = [], []
    for n in lengths:
        tokens.append([f"w{i}" for i in rng.choice(vocab_size, size=n, p=probs)])
        root = int(rng.integers(n))
        # each head lies towards the root (never past it): no cycles; the geometric step sets the trees' depth
        steps = np.minimum(rng.geometric(0.15, size=n), np.abs(root - np.arange(n)))
        heads.append([-1 if i == root else int(i + steps[i] if i < root else i - steps[i]) for i in range(n)])
    books = np.zeros(n_sentences, dtype=np.int64)  # one book: every neighbour is a context pair
    return ParsedCorpus(tokens, heads, books, np.arange(n_sentences, dtype=np.int64), n_sentences, 0)


def corpus_for(args: argparse.Namespace) -> tuple[ParsedCorpus, Vocabulary, str]:
    """The timed sentences and the vocabulary: the parse's most frequent words (as the trainer builds it), or for
    synthetic text every one of the --vocab-size words."""
    n_sentences = (args.steps + args.warmup) * args.batch_size
    if args.parses:
        parsed = load_parsed(args.parses, 64)
        if len(parsed) < n_sentences:
            raise SystemExit(f"{args.parses}: {len(parsed)} sentences, fewer than the {n_sentences} asked for")
        vocab = Vocabulary.build(parsed.tokens, args.vocab_size, lowercase=True)
        return ParsedCorpus(parsed.tokens[:n_sentences], parsed.heads[:n_sentences], parsed.books[:n_sentences],
                            parsed.positions[:n_sentences], n_sentences, 0), vocab, str(args.parses)
    vocab = Vocabulary([f"w{i}" for i in range(args.vocab_size)], lowercase=True)
    return synthetic_corpus(n_sentences, args.vocab_size), vocab, "synthetic"


def measure(model_name: str, corpus: ParsedCorpus, vocab: Vocabulary, args: argparse.Namespace,
            device: torch.device) -> dict:
    torch.manual_seed(0)
    config = MultiviewConfig(model=model_name, vocab_size=len(vocab.tokens), embedding_dim=args.embedding_dim,
                             hidden=args.hidden)
    model = MultiviewModel(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    job_args = argparse.Namespace(batch_size=args.batch_size, clip_grad_norm=5.0, out=None, own_view="excluded")
    job = Job(job_args, {}, corpus, vocab, config, model, optimizer, device, total_steps=args.steps + args.warmup,
              batches_per_epoch=math.ceil(len(corpus) / args.batch_size), data_stats={}, started=0.0)
    progress = Progress()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    elapsed = 0.0
    for step in range(args.steps + args.warmup):
        started = time.perf_counter()
        train_step(job, progress)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= args.warmup:
            elapsed += time.perf_counter() - started
    timed = range(args.warmup * args.batch_size, min((args.steps + args.warmup) * args.batch_size, len(corpus)))
    tokens = sum(len(corpus.tokens[i]) for i in timed)
    levels = [int(max(node_levels(np.asarray(corpus.heads[i])).max() for i in range(s, s + args.batch_size))) + 1
              for s in range(args.warmup * args.batch_size, len(corpus), args.batch_size)]
    peak = (torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
    return {"sentences_per_s": len(timed) / elapsed, "tokens_per_s": tokens / elapsed,
            "s_per_step": elapsed / args.steps, "levels": float(np.mean(levels)), "peak_gb": peak,
            "loss": next((h["loss"] for h in reversed(progress.history) if "loss" in h), float("nan"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="ctl,cl", help="comma-separated: ctl (BiLSTM vs Tree-LSTM), cl (two BiLSTMs)")
    p.add_argument("--device", default="auto")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--parses", type=Path, default=None, help="a strae parse-corpus directory (default: synthetic)")
    p.add_argument("--vocab-size", type=int, default=20000)
    p.add_argument("--embedding-dim", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--nondeterministic", action="store_true", help="torch's default kernels on CUDA")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    deterministic = configure_determinism(device, not args.nondeterministic).get("deterministic")
    corpus, vocab, source = corpus_for(args)
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        r = measure(name, corpus, vocab, args, device)
        print(f"multiview_throughput model={name} data={source} batch={args.batch_size} steps={args.steps} "
              f"sentences/s={r['sentences_per_s']:,.0f} tokens/s={r['tokens_per_s']:,.0f} "
              f"s/step={r['s_per_step']:.4f} levels={r['levels']:.1f} peak_gb={r['peak_gb']:.2f} "
              f"full_eltec_steps_min={5855 * r['s_per_step'] / 60:.1f} loss={r['loss']:.3f} "
              f"hidden={args.hidden} vocab={len(vocab.tokens)} deterministic={deterministic} "
              f"torch={torch.__version__} device={describe_device(device)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
