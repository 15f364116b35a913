"""Several training runs in ONE process, one thread and one CUDA stream each: aggregate tokens/s (an experiment).

    python benchmarks/threaded_throughput.py --runs 1,2,4 -- --model banyan --device cuda --batch-size 512 --steps 20

Why: N separate processes sharing a GPU reached only 907k tokens/s for 8 Banyan copies (H200, 623k for one): the
card time-slices between processes, and each process's step is hundreds of small kernels. Inside one process,
kernels of different streams may run at the same time on the card, and torch releases the GIL while it dispatches
an op, so N threads stepping N models might overlap both the host work and the device work. Whether they do is what
this measures (the GIL still serialises the Python between ops, Triton's launcher among it).

For each N of ``--runs``: N models (seeds SEED_BASE+i, built one after the other), each with its own Adam and its
own pre-drawn batches (the arguments after ``--`` are ``train_throughput.py``'s: model, data, device, engine
switches), warm up one after the other (Triton compiles outside the threads), then step in N threads —
``strae.train.training_step``, each thread on its own CUDA stream — from a common barrier. ONE line: per N,
``aggregate_tokens/s`` = all threads' tokens / the longest timed window, ``slowest_tokens/s``. A failing thread puts
``FAILED`` and its error in the line and the exit status is 1. Throughput only: the threads share torch's global
generators (dropout masks, the induction's step seed), so their runs are not those of the same seeds run alone; a
threaded trainer would give each run its own generators. On CPU it runs too (torch threads = cores // N each), which
tests the plumbing; its numbers say nothing about a GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as single  # noqa: E402  (the sibling benchmark: its batches and argument names)

from strae.runtime import configure_determinism, configure_float32_matmul, describe_device, resolve_device  # noqa: E402
from strae.train import training_step  # noqa: E402


class Run:
    """One model, its optimizer and its batches; ``steps(batches)`` runs ``training_step`` on each."""

    def __init__(self, args: argparse.Namespace, seed: int, device: torch.device, vocab_size: int, real: bool):
        rng = np.random.default_rng(seed)
        batches = (single.corpus_batches(args.data_dir, args.batch_size, rng) if real
                   else single.synthetic_batches(args.batch_size, vocab_size, rng))
        self.batches = [single.to_padded(next(batches), vocab_size) for _ in range(args.warmup + args.steps)]
        self.warmup = args.warmup
        torch.manual_seed(seed)
        config, self.recipe, self.model = single.build_model(args, vocab_size, device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.recipe.lr_for(config.objective))
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.tokens = sum(int(lengths.sum()) for _, lengths in self.batches[self.warmup:])
        self.window = 0.0
        self.error: BaseException | None = None

    def steps(self, batches) -> None:
        for ids, lengths in batches:
            training_step(self.model, self.optimizer, self.params, self.recipe.clip_grad_norm, ids, lengths,
                          "threaded benchmark step")


def run_group(args: argparse.Namespace, n_runs: int, seed_base: int, device: torch.device, vocab_size: int,
              real: bool) -> str:
    runs = [Run(args, seed_base + i, device, vocab_size, real) for i in range(n_runs)]
    barrier = threading.Barrier(n_runs)
    # every run warms up here, one after the other: Triton's JIT compilation is not safe from several threads at once
    # (triton-lang/triton#5933; FlagGems#136 serialises it), its launches are (they release the GIL); so the threads
    # only ever launch compiled kernels
    for run in runs:
        run.steps(run.batches[:run.warmup])
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the warm-up ran on the default stream; each thread continues on its own

    def work(run: Run) -> None:
        stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                barrier.wait()
                start = time.perf_counter()
                run.steps(run.batches[run.warmup:])
                if stream is not None:
                    stream.synchronize()
                run.window = time.perf_counter() - start
        except BaseException as error:  # noqa: BLE001 - reported in the line, the others released
            run.error = error
            barrier.abort()

    threads = [threading.Thread(target=work, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [run.error for run in runs if run.error is not None and not isinstance(run.error,
                                                                                    threading.BrokenBarrierError)]
    if failed:
        return f"{n_runs}: FAILED {type(failed[0]).__name__}: {str(failed[0]).splitlines()[0][:300]}"
    window = max(run.window for run in runs)
    aggregate = sum(run.tokens for run in runs) / window
    slowest = min(run.tokens / run.window for run in runs)
    return (f"{n_runs}: aggregate_tokens/s={aggregate:,.0f} slowest_tokens/s={slowest:,.0f} "
            f"window_s={window:.3f}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, passthrough = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="1,2,4", help="comma-separated thread counts, one group each")
    parser.add_argument("--seed-base", type=int, default=0)
    args = parser.parse_args(own)
    engine = single.build_parser().parse_args(passthrough)
    device = resolve_device(engine.device)
    configure_determinism(device, not engine.nondeterministic)
    configure_float32_matmul()
    real = not engine.synthetic and (engine.data_dir / "train.json").exists()
    if real:
        from strae.data.tokenized import TokenizedCorpus
        vocab_size = TokenizedCorpus(engine.data_dir, "train").vocab_size
    else:
        vocab_size = 25000
    parts, status = [], 0
    for n_runs in (int(n) for n in args.runs.split(",")):
        if device.type == "cpu":
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // n_runs))
        part = run_group(engine, n_runs, args.seed_base, device, vocab_size, real)
        status |= "FAILED" in part
        parts.append(part)
    print(f"threaded model={engine.model} batch={engine.batch_size} steps={engine.steps} "
          f"data={engine.data_dir.name if real else 'synthetic'} deterministic={not engine.nondeterministic} "
          f"torch={torch.__version__} device={describe_device(device).replace(' ', '_')} | " + " | ".join(parts))
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
