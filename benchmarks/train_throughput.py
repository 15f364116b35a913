"""Training throughput of the Self-StrAE / Banyan engine: prints ONE line (tokens/s, s/step, peak RSS).

    python benchmarks/train_throughput.py --model banyan --batch-size 512 [--steps 10]

Batches are real batches (random sentences of --data-dir, default resources/tokenized/en; ``data=`` names it) when
it exists, else synthetic Zipfian batches (~31 pieces per sentence, V = 25000). Each step is `strae train`'s own step
(``strae.train.training_step``: loss, the loss and metrics read back, backward, gradient norm and clipping when the
recipe clips, Adam update) under `strae train`'s determinism setting (deterministic kernels on CUDA unless
``--nondeterministic``; ``deterministic=`` in the line). The first ``--warmup`` steps are not timed.

The line also states the ceiling the exact objective puts on this machine: ``objective_gflop/step`` counts the
matrix products the loss cannot avoid, as the objective declares them (``Objective.gemm_shapes``; vocabulary CE
over the step's leaves: logits, d/dleaves, d/dW = 3 GEMMs of 2*N*E*V; contrastive over M rows: 3 GEMMs of
2*M*M*E), ``gemm_gflop/s`` is the rate this device sustains on those very shapes (measured here, same dtype and
threads), and ``bound_tokens/s`` is the throughput a step would reach if everything but those products were free.

The line ends with where a step's time goes (``split=induce/graph/forward/backward/optimizer`` in ms, each phase
timed around the engine's own calls; on CUDA each boundary synchronises, so the split slows the timed steps slightly
and is measured on separate steps), and on CUDA the kernel launches per step (torch profiler) and peak GPU memory.
``--induction-kernel torch|triton`` picks the engine of the no-grad induction (``models/fused.py``; default auto =
triton on CUDA); ``induction_kernel=`` in the line says which one ran. ``timed_s`` is the timed steps' wall time
(benchmarks/concurrent_throughput.py runs several copies and adds their tokens over the longest window).
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from strae import recipes
from strae.data.batching import pad_batch
from strae.models import propagation
from strae.models.config import ModelConfig
from strae.models.model import StraeModel
from strae.models.propagation import PROPAGATION_MODES
from strae.models.scatter import SCATTER_MODES
from strae.runtime import (
    bf16_autocast_supported,
    configure_determinism,
    configure_float32_matmul,
    describe_device,
    resolve_device,
)
from strae.train import training_step


def synthetic_batches(batch_size: int, vocab_size: int, rng: np.random.Generator):
    ranks = np.arange(1, vocab_size + 1)
    probs = 1.0 / ranks
    probs /= probs.sum()
    while True:
        lengths = np.clip(rng.poisson(31, size=batch_size), 4, 200)
        yield [rng.choice(vocab_size, size=int(n), p=probs) for n in lengths]


def corpus_batches(directory: Path, batch_size: int, rng: np.random.Generator):
    from strae.data.tokenized import TokenizedCorpus

    corpus = TokenizedCorpus(directory, "train")
    while True:
        yield [corpus[int(i)] for i in rng.integers(0, len(corpus), size=batch_size)]


def to_padded(sentences, pad_id: int):
    """A padded batch on the host, as `strae train` hands it to the model (which packs it there and sends the
    tokens to the device in one asynchronous copy)."""
    return pad_batch(sentences, pad_id)


def objective_gemm_shapes(model: StraeModel, ids: torch.Tensor, lengths: torch.Tensor) -> list[tuple[int, int, int]]:
    """(m, k, n) of every matrix product one step's exact objective needs, as the objective declares them."""
    with torch.no_grad():
        graph = model.graph(ids, lengths)
    return model.objective.gemm_shapes(graph, model.config.embedding_size, model.config.vocab_size)


def gemm_flop(shapes: list[tuple[int, int, int]]) -> float:
    return sum(2.0 * m * k * n for m, k, n in shapes)


def gemm_rate(shapes: list[tuple[int, int, int]], device: torch.device, dtype: torch.dtype) -> float:
    """FLOP/s this device sustains on ``shapes`` (one representative step's products, timed once after a warm-up)."""
    operands = [(torch.randn(m, k, device=device).to(dtype), torch.randn(k, n, device=device).to(dtype))
                for m, k, n in shapes]

    def run():
        for a, b in operands:
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()

    run()  # warm-up (allocator, kernels)
    start = time.perf_counter()
    run()
    return gemm_flop(shapes) / (time.perf_counter() - start)


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # Linux: kilobytes


class PhaseTimer:
    """Wall time per step phase: wraps the model's induce / build / propagate and times backward and the optimiser
    step from the loop. ``forward`` = everything in the loss that is not induction or graph building (message
    passing + objective)."""

    PHASES = ("induce", "graph", "forward", "backward", "optimizer")

    def __init__(self, model: StraeModel, device: torch.device) -> None:
        self.device, self.totals = device, {phase: 0.0 for phase in self.PHASES}
        self._nested = 0.0
        for method, phase in (("induce", "induce"), ("build", "graph")):
            original = getattr(model, method)
            setattr(model, method, self._wrap(original, phase))

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _wrap(self, function, phase: str):
        def timed(*args, **kwargs):
            self.sync()
            start = time.perf_counter()
            result = function(*args, **kwargs)
            self.sync()
            spent = time.perf_counter() - start
            self.totals[phase] += spent
            self._nested += spent
            return result
        return timed

    def step(self, model, optimizer, ids, lengths, clip: float) -> None:
        self.sync()
        self._nested = 0.0
        start = time.perf_counter()
        loss, _ = model.loss(ids, lengths)
        self.sync()
        after_forward = time.perf_counter()
        self.totals["forward"] += after_forward - start - self._nested
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.sync()
        after_backward = time.perf_counter()
        self.totals["backward"] += after_backward - after_forward
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        self.sync()
        self.totals["optimizer"] += time.perf_counter() - after_backward

    def line(self, steps: int) -> str:
        return "/".join(f"{1000 * self.totals[p] / steps:.0f}" for p in self.PHASES)


def write_torch_profile(path: Path, prof, n_steps: int, device: torch.device, stacks: bool = False) -> None:
    """The torch profiler's op table by own host time and, on CUDA, by own device time, with the device's busy time
    per step (the kernels' summed time: how much of a step the GPU works, against s/step). ``stacks`` (the profile
    recorded Python stacks): also the ops by call site, most calls first - which lines launch the many small ops."""
    averages = prof.key_averages()
    parts = [f"# {n_steps} steps on {device}\n", "## by own host time\n",
             averages.table(sort_by="self_cpu_time_total", row_limit=40)]
    if device.type == "cuda":
        busy_us = sum(event.self_device_time_total for event in averages if event.device_type.name == "CUDA")
        parts += [f"\n## by own device time; GPU kernels busy {busy_us / 1e3 / n_steps:.2f} ms per step\n",
                  averages.table(sort_by="self_device_time_total", row_limit=40)]
    if stacks:
        parts += [f"\n## by call site (Python stack, 5 frames), most calls first; divide by {n_steps} for per step\n",
                  prof.key_averages(group_by_stack_n=5).table(sort_by="count", row_limit=60, max_name_column_width=60)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts), encoding="utf-8")


def write_host_profile(path: Path, step, batches, device: torch.device) -> None:
    """cProfile over ``batches`` (the GPU synchronised at the end, inside the profile): the host's own time per
    Python function, top 45 by own time and top 30 by cumulative time, then every function of strae's own code by
    cumulative time (whatever its rank: on a busy machine torch's ops can push graph building out of the top 30), as
    text. The profiler's overhead inflates Python-heavy functions, so compare rows with each other, not with the
    unprofiled s/step."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for ids, lengths in batches:
        step(ids, lengths)
    if device.type == "cuda":
        torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    text.write(f"# {len(batches)} steps on {device}; host time by function (cProfile)\n")
    stats.sort_stats("tottime").print_stats(45)
    stats.sort_stats("cumulative").print_stats(30)
    text.write("# strae's own functions, by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(r"[/\\]strae[/\\]")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.getvalue(), encoding="utf-8")


class SyncSites:
    """Host syncs by where they happen: each one's Python call site (the innermost frames of this checkout), counted.
    ``torch.cuda.set_sync_debug_mode("warn")`` turns every synchronising CUDA call (``.item()``, ``.cpu()``, a
    device-to-host copy, ``nonzero``, ...) into a warning; the hook below sees each one as it is raised, with the
    Python stack that made the call (a sync inside autograd's backward surfaces at its ``backward()``)."""

    MARK = "synchronizing CUDA operation"  # c10/cuda: warn_or_error_on_sync's message

    def __init__(self, root: Path, depth: int = 4):
        self.root, self.depth = str(root), depth
        self.sites: dict[str, int] = {}

    def record(self, message: str, stack: list) -> bool:
        """Count one warning (True) when it is a sync warning; ``stack``: traceback.extract_stack()'s frames."""
        if self.MARK not in message:
            return False
        ours = [frame for frame in stack if frame.filename.startswith(self.root)]
        frames = list(reversed(ours[-self.depth:])) or list(reversed(stack[-self.depth:]))
        site = " <- ".join(f"{Path(frame.filename).name}:{frame.lineno}({frame.name})" for frame in frames)
        self.sites[site] = self.sites.get(site, 0) + 1
        return True

    def table(self, n_steps: int, device: torch.device) -> str:
        total = sum(self.sites.values())
        lines = [f"# {n_steps} steps on {device}: {total / max(n_steps, 1):.1f} host syncs per step "
                 "(torch.cuda.set_sync_debug_mode), by call site (innermost first)",
                 "per_step  count  site"]
        for site, count in sorted(self.sites.items(), key=lambda item: -item[1]):
            lines.append(f"{count / max(n_steps, 1):8.2f}  {count:5d}  {site}")
        return "\n".join(lines) + "\n"


def write_sync_report(path: Path, step, batches, device: torch.device) -> float:
    """Run ``batches`` with every host sync reported (CUDA only; elsewhere nothing synchronises) and write
    SyncSites' table to ``path``. Returns syncs per step."""
    import traceback
    import warnings

    sites = SyncSites(Path(__file__).resolve().parents[1])
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        passed_on = warnings.showwarning

        def hook(message, category, filename, lineno, file=None, line=None):
            if not sites.record(str(message), traceback.extract_stack()[:-1]):
                passed_on(message, category, filename, lineno, file, line)

        warnings.showwarning = hook
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            for ids, lengths in batches:
                step(ids, lengths)
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("default")
    if device.type == "cuda":
        torch.cuda.synchronize()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sites.table(len(batches), device), encoding="utf-8")
    return sum(sites.sites.values()) / max(len(batches), 1)


def kernel_launches_per_step(step, prepared, device: torch.device) -> float:
    """CUDA kernels launched per step (torch profiler's device-side kernel events), averaged over ``prepared``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for ids, lengths in prepared:
            step(ids, lengths)
        torch.cuda.synchronize()
    kernels = sum(1 for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA)
    return kernels / len(prepared)


def wait_for_siblings(directory: Path, count: int, timeout: float = 600.0) -> None:
    """Start the timed steps together with ``count - 1`` other copies (benchmarks/concurrent_throughput.py), so
    their timed windows overlap and the aggregate throughput is one of runs sharing the device."""
    (directory / f"ready.{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while len(list(directory.glob("ready.*"))) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"--barrier {directory}: {count} runs expected, fewer ready after {timeout:.0f} s")
        time.sleep(0.01)


def build_parser() -> argparse.ArgumentParser:
    """This benchmark's arguments (also the engine arguments of benchmarks/threaded_throughput.py)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["banyan", "selfstrae"], default="banyan")
    parser.add_argument("--objective", default=None, help="override the preset's objective")
    parser.add_argument("--structure", default=None)
    parser.add_argument("--functions", default=None, choices=("linear", "diagonal"),
                        help="override the preset's functions (Banyan Tables 7-8's cell: --functions linear --k 16 "
                        "--u 16)")
    parser.add_argument("--k", type=int, default=None, help="channels (default: the preset's; the campaign's "
                        "Self-StrAE runs are k128 u2, SemEval Table 2's grid k8..k256)")
    parser.add_argument("--u", type=int, default=None, help="channel size (default: the preset's)")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=Path("resources/tokenized/en"))
    parser.add_argument("--synthetic", action="store_true", help="use synthetic Zipfian batches even if data exists")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", type=Path, default=None, help="write a torch.profiler table to this file")
    parser.add_argument("--profile-stacks", action="store_true",
                        help="with --profile: record Python stacks and add the ops by call site (slows the host; "
                             "its own tables' host times are then inflated)")
    parser.add_argument("--host-profile", type=Path, default=None,
                        help="write a cProfile table of the timed steps' Python (by own time, then cumulative) to "
                             "this file: where a host-bound step's CPU time goes (numpy graph building, launches)")
    parser.add_argument("--sync-report", type=Path, default=None,
                        help="run the timed steps with every host sync reported (CUDA: torch.cuda."
                             "set_sync_debug_mode) and write them to this file, counted by Python call site")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split-steps", type=int, default=2, help="extra steps timed phase by phase (0 = skip)")
    parser.add_argument("--recipe", default=None, help="recipe (strae/recipes.yaml); default: the model's own")
    parser.add_argument("--set", dest="recipe_set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one recipe value, as `strae train --set` (e.g. loss_precision=bf16)")
    parser.add_argument("--induction-kernel", default="auto", choices=("auto", "torch", "triton"),
                        help="engine of the no-grad induction, as `strae train --induction-kernel` (compare torch "
                        "and triton on CUDA)")
    parser.add_argument("--scatter", default="index_add", choices=SCATTER_MODES,
                        help="as `strae train --scatter`: torch's index_add or host-presorted sums (models/scatter.py)")
    parser.add_argument("--propagation", default="auto", choices=PROPAGATION_MODES,
                        help="as `strae train --propagation`: autograd or the hand-derived backward "
                        "(models/propagation.py)")
    parser.add_argument("--level-tail", type=int, default=None, metavar="NODES",
                        help="the Triton levels: the narrow top levels (each <= NODES nodes) share one single-program "
                        "launch per pass (models/propagation.py LEVEL_TAIL_NODES and LINEAR_LEVEL_TAIL_NODES, both "
                        "set; 0 = a launch per level; default: the engine's)")
    parser.add_argument("--compare-level-tail", type=int, default=None, metavar="NODES",
                        help="after the timed steps, time the same batches again in alternating rounds with a "
                        "launch per level (tail 0) and with the <= NODES-node top levels in one launch: a paired "
                        "comparison in one process (the line's tail_compare_tokens/s=, best round of each)")
    parser.add_argument("--compare-fill", action="store_true",
                        help="after the timed steps, time the same batches again in alternating rounds with torch's "
                        "fill of fresh buffers on and off (deterministic mode only; runtime.FILL_UNINITIALIZED_MEMORY "
                        "= off is strae train's choice): the line's fill_compare_tokens/s=, best round of each")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="as `strae train --nondeterministic`: on CUDA, allow atomics-based kernels (default: "
                        "deterministic kernels, as strae train; compare the two to measure what determinism costs)")
    parser.add_argument("--barrier", type=Path, default=None, help=argparse.SUPPRESS)  # concurrent_throughput.py
    parser.add_argument("--barrier-count", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def build_model(args: argparse.Namespace, vocab_size: int, device: torch.device):
    """(config, recipe, model in training mode on ``device``) as the arguments say; seed torch first."""
    config = ModelConfig.preset(args.model, vocab_size=vocab_size, objective=args.objective,
                                structure=args.structure, functions=args.functions, k=args.k, u=args.u)
    overrides = [recipes.parse_set(item, f"--set {item}") for item in args.recipe_set]
    recipe = recipes.resolve(args.recipe or args.model, overrides).recipe
    model = StraeModel(config, recipe, induction_kernel=args.induction_kernel, scatter=args.scatter,
                       propagation=args.propagation).to(device).train()
    return config, recipe, model


def paired_rates(step, batches, device: torch.device, variants: dict, rounds: int = 3) -> dict:
    """Best tokens/s of ``rounds`` alternating rounds over ``batches`` per variant (``{label: set it up}``): the
    same process, batches and compiled kernels, so the comparison is paired (separate benchmark processes on the
    H100 box varied ~25 % between calls). The caller restores what the variants change."""
    n_tokens = sum(int(lengths.sum()) for _, lengths in batches)
    best: dict = {}
    for _ in range(rounds):
        for label, set_up in variants.items():
            set_up()
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for ids, lengths in batches:
                step(ids, lengths)
            if device.type == "cuda":
                torch.cuda.synchronize()
            best[label] = max(best.get(label, 0.0), n_tokens / (time.perf_counter() - start))
    return best


def compare_level_tails(step, batches, device: torch.device, tails: tuple[int, ...],
                        rounds: int = 3) -> dict[int, float]:
    """:func:`paired_rates` per tail value in ``tails`` (both engine constants set to it), restored after."""
    with propagation.level_tails(tails[0]):
        return paired_rates(step, batches, device, {tail: partial(propagation.set_level_tails, tail) for tail in tails},
                            rounds)


def compare_fill(step, batches, device: torch.device, rounds: int = 3) -> dict[str, float]:
    """:func:`paired_rates` with torch's fill of fresh buffers under deterministic mode on and off (what
    ``runtime.FILL_UNINITIALIZED_MEMORY`` decides for `strae train`), restored after."""
    saved = torch.utils.deterministic.fill_uninitialized_memory
    try:
        return paired_rates(step, batches, device, {label: partial(setattr, torch.utils.deterministic,
                                                                   "fill_uninitialized_memory", on)
                                                    for label, on in (("on", True), ("off", False))}, rounds)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = saved


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.level_tail is not None:  # an engine constant, not a training option: set for this process only
        propagation.set_level_tails(args.level_tail)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    # as `strae train`: deterministic kernels unless told otherwise (before the model touches the GPU), fp32
    # products in full fp32 (no TF32)
    determinism = configure_determinism(device, not args.nondeterministic)
    float32_matmul = configure_float32_matmul()
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    real = not args.synthetic and (args.data_dir / "train.json").exists()
    if real:
        from strae.data.tokenized import TokenizedCorpus
        vocab_size = TokenizedCorpus(args.data_dir, "train").vocab_size
        batches = corpus_batches(args.data_dir, args.batch_size, rng)
    else:
        vocab_size = 25000
        batches = synthetic_batches(args.batch_size, vocab_size, rng)
    config, recipe, model = build_model(args, vocab_size, device)
    try:
        kernel = model.kernel_choice(device)
    except ValueError as error:
        raise SystemExit(f"benchmarks/train_throughput.py: {error}") from error
    mode = model.propagation_mode(device)  # auto resolved: handwritten where the induction runs Triton
    levels = model.levels_choice(device)  # the handwritten passes' level engine (torch | triton | autograd)
    if levels.used == "torch" and "first-use check" in levels.reason:
        print(f"note: {levels.reason}", file=sys.stderr)
    if args.profile_stacks and device.type != "cuda" and (kernel.used == "triton" or levels.used == "triton"):
        raise SystemExit("benchmarks/train_throughput.py: --profile-stacks with Triton kernels on Triton's CPU "
                         "interpreter profiles every interpreted op with its stack (23 GB for one batch-4 step); "
                         "use --induction-kernel torch --propagation autograd on CPU, or a GPU")
    if kernel.used == "triton" and device.type != "cuda":
        print("note: the Triton induction runs on Triton's CPU interpreter here: a correctness path, not a speed "
              "path; these numbers say nothing about the kernel's speed on a GPU", file=sys.stderr)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr_for(config.objective))
    n_extra = args.split_steps
    prepared = [to_padded(next(batches), vocab_size) for _ in range(args.warmup + args.steps + n_extra)]
    extra = prepared[args.warmup + args.steps:]
    prepared = prepared[:args.warmup + args.steps]

    params = [p for p in model.parameters() if p.requires_grad]

    def step(ids, lengths):  # strae train's own step: its host syncs and finiteness checks included
        training_step(model, optimizer, params, recipe.clip_grad_norm, ids, lengths, "benchmark step")

    for ids, lengths in prepared[:args.warmup]:
        step(ids, lengths)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if args.barrier:
        wait_for_siblings(args.barrier, args.barrier_count)
    n_tokens = sum(int(lengths.sum()) for _, lengths in prepared[args.warmup:])
    start = time.perf_counter()
    cpu_start = time.process_time()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        # stacks reach the events only with the profiler's verbose experimental config (torch 2.11-2.13)
        stack_config = {"with_stack": True, "experimental_config": torch.profiler._ExperimentalConfig(verbose=True)}
        with profile(activities=activities, **(stack_config if args.profile_stacks else {})) as prof:
            for ids, lengths in prepared[args.warmup:]:
                step(ids, lengths)
        write_torch_profile(args.profile, prof, len(prepared) - args.warmup, device, stacks=args.profile_stacks)
    elif args.host_profile:
        write_host_profile(args.host_profile, step, prepared[args.warmup:], device)
    elif args.sync_report:
        syncs_per_step = write_sync_report(args.sync_report, step, prepared[args.warmup:], device)
    else:
        for ids, lengths in prepared[args.warmup:]:
            step(ids, lengths)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    # CPU seconds of this process: on a machine shared with other jobs, wall time overstates the cost.
    cpu_per_step = (time.process_time() - cpu_start) / args.steps
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    cuda_fields = f" syncs/step={syncs_per_step:.1f}" if args.sync_report else ""
    if device.type == "cuda" and extra:
        launches = kernel_launches_per_step(step, extra, device)
        cuda_fields += (f" kernels/step={launches:,.0f} "
                       f"peak_gpu_mem={torch.cuda.max_memory_allocated(device) / 2 ** 30:.2f}GB")
    compare = ""
    if args.compare_level_tail is not None:
        rates = compare_level_tails(step, prepared[args.warmup:], device, (0, args.compare_level_tail))
        compare = " tail_compare_tokens/s=" + "/".join(f"{tail}:{rate:,.0f}" for tail, rate in rates.items())
    if args.compare_fill:
        rates = compare_fill(step, prepared[args.warmup:], device)
        compare += " fill_compare_tokens/s=" + "/".join(f"{fill}:{rate:,.0f}" for fill, rate in rates.items())
    split = ""
    if extra:
        timer = PhaseTimer(model, device)
        for ids, lengths in extra:
            timer.step(model, optimizer, ids, lengths, recipe.clip_grad_norm)
        split = f" split_ms={timer.line(len(extra))}(induce/graph/forward/backward/optimizer)"
    step_shapes = [objective_gemm_shapes(model, ids, lengths) for ids, lengths in prepared[args.warmup:]]
    objective_flop = sum(gemm_flop(shapes) for shapes in step_shapes) / args.steps
    low_precision = recipe.loss_precision == "bf16" and bf16_autocast_supported(device)
    with model.objective.matmul_precision(device):  # tf32: the rate of TF32 products on CUDA
        rate = gemm_rate(step_shapes[0], device, torch.bfloat16 if low_precision else torch.float32)
    bound = n_tokens / args.steps / (objective_flop / rate)
    tail = propagation.level_tail_nodes(model.functions)
    fill = determinism.get("fill_uninitialized_memory")  # CUDA's deterministic mode only
    fill = "" if fill is None else f"(fill={'on' if fill else 'off'})"
    print(f"model={args.model} setting={config.setting_name()} recipe={recipe.name} "
          f"loss_precision={recipe.loss_precision} induction_dropout={recipe.induction_dropout} "
          f"induction_kernel={kernel.used} scatter={args.scatter} propagation={mode}"
          f"{'' if mode == 'autograd' else '/' + levels.used}"
          f"{'' if mode == 'autograd' or levels.used != 'triton' else f'(tail={tail})'} "
          f"deterministic={determinism['deterministic']}{fill} "
          f"float32_matmul={float32_matmul['used']}(found:{float32_matmul['found']}) "
          f"data={args.data_dir.name if real else 'synthetic'} "
          f"batch={args.batch_size} steps={args.steps} tokens/s={n_tokens / elapsed:,.0f} "
          f"s/step={elapsed / args.steps:.3f} timed_s={elapsed:.3f} cpu_s/step={cpu_per_step:.3f} "
          f"peak_rss={peak_rss_gb():.2f}GB "
          f"objective_gflop/step={objective_flop / 1e9:.0f} gemm_gflop/s={rate / 1e9:.0f} "
          f"bound_tokens/s={bound:,.0f}{split}{cuda_fields}{compare} torch={torch.__version__} "
          f"device={describe_device(device).replace(' ', '_')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
