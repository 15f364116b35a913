"""Determinism, resume and the cost of determinism of `strae train-roberta` / `strae train-simcse` themselves on a
device: ONE printed line.

    python benchmarks/roberta_checks.py --device cuda --data-dir resources/tokenized/en \
        --tokenizer resources/tokenizers/en.model [--steps 300] [--simcse-steps 100] [-- TRAIN-ROBERTA ARGS]

``benchmarks/roberta_graphs_check.py`` checks the graphed MLM *step* (repeatable on an H100, 2026-11-26); this checks
the *trainers* (batching, masking, the step loop, checkpoints, CUDA graph re-capture after a resume), each run
through its ``main`` in this process:

(a) ``determinism``: the MLM run (``--steps`` steps, seed ``--seed``) twice; every tensor of the two ``model.pt``
    compared: ``identical`` or ``differs`` with the max abs diff.
(b) ``sigterm``: a third run sent SIGTERM during step ``--interrupt-at`` (what a chunk's time limit does): it must
    stop after that step with a checkpoint (exit 143) and, rerun, end on the first run's weights.
(c) ``cost``: a fourth run with ``--nondeterministic``: its steps/s against the first run's (train.json
    ``timings.steps_per_s``), and whether its weights differ from the first run's.
(d) ``simcse`` (``--simcse-steps`` > 0): SimCSE from the first run's weights twice (``--dev-every 0``: no dev
    file needed): ``identical`` or ``differs``.
The line also gives the first runs' recorded ``provenance.determinism``, torch and the device. Without
``--data-dir`` a tiny corpus is made in the work folder (as ``cuda_checks.py`` does). Exit status 1 when a check
fails.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import torch

from baselines.roberta import simcse as simcse_trainer
from baselines.roberta import train as mlm_trainer
from strae.runtime import describe_device, resolve_device


def _sibling(name: str):
    """Another benchmark script as a module, loaded by its path (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the tiny corpus and the weight comparison of cuda_checks.py, `strae train`'s counterpart of these checks
_CUDA_CHECKS = _sibling("cuda_checks")
make_tiny_corpus, one_line, split_at_dashes, timed, verdict, weights = (
    _CUDA_CHECKS.make_tiny_corpus, _CUDA_CHECKS.one_line, _CUDA_CHECKS.split_at_dashes, _CUDA_CHECKS.timed,
    _CUDA_CHECKS.verdict, _CUDA_CHECKS.weights)


def mlm_argv(args: argparse.Namespace, out: Path, *extra: str) -> list[str]:
    return ["--lang", args.lang, "--seed", str(args.seed), "--out", str(out), "--data-dir", str(args.data_dir),
            "--tokenizer", str(args.tokenizer), "--steps", str(args.steps), "--batch-size", str(args.batch_size),
            "--checkpoint-every-steps", str(args.steps), "--log-every", "10", "--device", args.device,
            *args.train_args, *extra]


def simcse_argv(args: argparse.Namespace, init: Path, out: Path) -> list[str]:
    return ["--init", str(init), "--seed", str(args.seed), "--out", str(out), "--steps", str(args.simcse_steps),
            "--dev-every", "0", "--checkpoint-every-steps", str(args.simcse_steps), "--log-every", "10",
            "--device", args.device, *args.simcse_args]


def run(main, argv: list[str]) -> None:
    status = main(argv)
    if status != 0:
        raise RuntimeError(f"exited with status {status}")


def steps_per_s(run_dir: Path) -> float:
    return float(json.loads((run_dir / "train.json").read_text())["timings"]["steps_per_s"])


def check_determinism(args: argparse.Namespace, work: Path) -> str:
    run(mlm_trainer.main, mlm_argv(args, work / "first"))
    # --perturb: the second run is not the same run, so the check must report a difference (tests)
    second = mlm_argv(args, work / "second")
    if args.perturb:
        second[second.index("--seed") + 1] = str(args.seed + 1)
    run(mlm_trainer.main, second)
    return verdict("determinism", weights(work / "first"), weights(work / "second"))


def check_sigterm(args: argparse.Namespace, work: Path) -> str:
    """SIGTERM sent from inside step ``--interrupt-at`` (0-based): the trainer finishes that step, checkpoints there
    and exits 143; the same command again resumes to the end."""
    argv = mlm_argv(args, work / "sigterm")
    real_step = mlm_trainer.mlm_step

    def signalling_step(*arguments, **keywords):
        forward_backward = real_step(*arguments, **keywords)

        def step(index: int):
            if index == args.interrupt_at:
                os.kill(os.getpid(), signal.SIGTERM)
            return forward_backward(index)
        return step

    mlm_trainer.mlm_step = signalling_step
    try:
        status = mlm_trainer.main(argv)
    finally:
        mlm_trainer.mlm_step = real_step
    if status != 128 + signal.SIGTERM:
        return f"sigterm=not_stopped sigterm_status={status}"
    saved = torch.load(work / "sigterm" / mlm_trainer.CHECKPOINT_FILE, map_location="cpu", weights_only=False)
    if saved["step"] != args.interrupt_at + 1:
        return f"sigterm=wrong_checkpoint sigterm_checkpoint_step={saved['step']}"
    try:
        run(mlm_trainer.main, argv)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the line reports the crash
        return f"sigterm=crashed sigterm_error={one_line(error)!r}"
    return verdict("sigterm", weights(work / "first"), weights(work / "sigterm"))


def check_cost(args: argparse.Namespace, work: Path) -> str:
    run(mlm_trainer.main, mlm_argv(args, work / "nondeterministic", "--nondeterministic"))
    deterministic, free = steps_per_s(work / "first"), steps_per_s(work / "nondeterministic")
    same = verdict("nondeterministic_vs_first", weights(work / "first"), weights(work / "nondeterministic"))
    return (f"cost_steps_per_s_deterministic={deterministic:.2f} cost_steps_per_s_nondeterministic={free:.2f} "
            f"cost_ratio={deterministic / free:.3f} {same}")


def check_simcse(args: argparse.Namespace, work: Path) -> str:
    if args.simcse_steps <= 0:
        return "simcse=skipped"
    run(simcse_trainer.main, simcse_argv(args, work / "first", work / "simcse_first"))
    run(simcse_trainer.main, simcse_argv(args, work / "first", work / "simcse_second"))
    return verdict("simcse", weights(work / "simcse_first"), weights(work / "simcse_second"))


def recorded(run_dir: Path) -> str:
    path = run_dir / "train.json"
    if not path.exists():
        return "missing"
    block = json.loads(path.read_text()).get("provenance", {}).get("determinism")
    return json.dumps(block, separators=(",", ":"), sort_keys=True).replace(" ", "_")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv, train_args = split_at_dashes(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--data-dir", type=Path, default=None, help="tokenised corpus (default: a tiny one made here)")
    parser.add_argument("--tokenizer", type=Path, default=None, help="its tokenizer model (needed with --data-dir)")
    parser.add_argument("--lang", default="en", help="only a label in the run records")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300, help="MLM optimizer steps per run")
    parser.add_argument("--interrupt-at", type=int, default=None, help="step of the SIGTERM (default: half)")
    parser.add_argument("--simcse-steps", type=int, default=100, help="SimCSE steps per run (0: skip that check)")
    parser.add_argument("--simcse-arg", dest="simcse_args", action="append", default=[],
                        help="one argument for every train-simcse call (repeat; e.g. --simcse-arg=--batch-size=16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny-sentences", type=int, default=2048, help="train sentences of the tiny corpus")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the runs here (default: a temp folder)")
    parser.add_argument("--perturb", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.train_args = train_args
    args.interrupt_at = args.steps // 2 if args.interrupt_at is None else args.interrupt_at
    if (args.data_dir is None) != (args.tokenizer is None):
        parser.error("--data-dir and --tokenizer go together")
    if not 0 <= args.interrupt_at < args.steps - 1:
        parser.error("need 0 <= --interrupt-at < --steps - 1 (steps left to resume)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    args.device = str(device)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="strae-roberta-checks-"))
    data = "tiny" if args.data_dir is None else "corpus"
    names = ("determinism", "sigterm", "cost", "simcse")
    results = {name: (f"{name}=not_run", 0.0) for name in names}
    try:
        if args.data_dir is None:
            args.data_dir, args.tokenizer = make_tiny_corpus(work / "tiny", args.tiny_sentences)
        results["determinism"] = timed(check_determinism, args, work)
        results["sigterm"] = timed(check_sigterm, args, work)
        results["cost"] = timed(check_cost, args, work)
        results["simcse"] = timed(check_simcse, args, work)
    finally:
        parts = " ".join(f"{text} {name}_s={seconds:.1f}" for name, (text, seconds) in results.items())
        print(f"roberta_checks data={data} batch={args.batch_size} steps={args.steps} "
              f"interrupt_at={args.interrupt_at} simcse_steps={args.simcse_steps} {parts} "
              f"provenance.determinism={recorded(work / 'first')} "
              f"torch={torch.__version__} device={describe_device(device).replace(' ', '_')}", flush=True)
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    texts = [results[name][0] for name in names]
    passed = (texts[0] == "determinism=identical" and texts[1] == "sigterm=identical"
              and "crashed" not in texts[2] and texts[3] in ("simcse=identical", "simcse=skipped"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
