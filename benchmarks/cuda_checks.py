"""Determinism and resume of `strae train` on a device: ONE printed line.

    python benchmarks/cuda_checks.py --device cuda --data-dir resources/tokenized/en \
        --tokenizer resources/tokenizers/en.model [--model banyan] [--batch-size 512] [--steps 60] [-- TRAIN ARGS]

(a) determinism: the same short run (``--steps`` optimizer steps, same seed) trained twice; every weight tensor of
the two ``model.pt`` files compared: ``determinism=identical`` or ``determinism=differs`` with the max abs diff.
(b) resume: a third run stopped by an exception after step ``--interrupt-at`` (a checkpoint every
``--checkpoint-every-steps`` steps before it, so the work since the last one is lost), then resumed by the same call;
its final weights against the first run's: ``resume=identical``, ``resume=differs`` with the max abs diff, or
``resume=crashed`` with the error. (c) sigterm: a fourth run sent SIGTERM after step ``--interrupt-at`` (what a
chunk's time limit does): it must stop after the step it is in with a checkpoint there (exit 143) and, rerun, end
with the first run's weights: ``sigterm=identical`` (or ``differs`` / ``crashed`` / ``not_stopped``). Every run
goes through ``strae.train.train`` (the entry point of ``strae train``) in this process, the interruption through
its ``step_callback`` hook, as tests/test_train.py does.

Without ``--data-dir`` a tiny corpus (a SentencePiece model and a few hundred random sentences) is made in the work
folder. The line also gives each part's seconds, torch, the device and the first run's recorded
``provenance.determinism``, ``provenance.induction_kernel`` and ``provenance.propagation`` (train.json). Arguments
after ``--`` go to every ``strae train`` call (e.g. ``-- --induction-kernel torch``). Exit status 1 when a check
fails. On SIGTERM (a caller's ``timeout``) the line is printed with the part that did not finish as
``stopped(SIGTERM)``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch

from strae import train as trainer
from strae.runtime import describe_device, resolve_device

WORDS = ("the a cat dog sat on mat ran over hill big small red green house tree bird sang under river bank stone "
         "quick slow happy sad old new man woman child ate fish bread milk").split()


class Stopped(BaseException):
    """SIGTERM (e.g. the `timeout` of tools/gpu_measure.sh): print the line with the parts that finished."""


def stop(signum, frame) -> None:
    raise Stopped


class Interrupt(Exception):
    """Raised from the step callback: a kill after a step, the way tests/test_train.py simulates one."""


def make_tiny_corpus(root: Path, n_train: int, n_dev: int = 64, seed: int = 0) -> tuple[Path, Path]:
    """A SentencePiece model and its tokenised train/dev splits under ``root``; returns (data_dir, tokenizer)."""
    from strae.data.tokenized import tokenize_corpus
    from strae.data.tokenizer import train_sentencepiece

    rng = random.Random(seed)
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        lines = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) for _ in range(n))
        (corpus / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = root / "tok.model"
    train_sentencepiece(corpus / "train.txt", tokenizer, requested_vocab=100, threads=1)
    tokenize_corpus(corpus, tokenizer, root / "tokenized")
    return root / "tokenized", tokenizer


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "model.pt", map_location="cpu", weights_only=True)["state_dict"]


def compare(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[str, float, int]:
    """('identical' | 'differs', max abs diff over every tensor, number of tensors not bitwise equal)."""
    if a.keys() != b.keys():
        raise ValueError(f"the runs' weights have different tensors: {sorted(a.keys() ^ b.keys())}")
    differing = [name for name in a if not torch.equal(a[name], b[name])]
    worst = max((float((a[n].double() - b[n].double()).abs().max()) for n in differing), default=0.0)
    return ("differs" if differing else "identical"), worst, len(differing)


def verdict(name: str, a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> str:
    status, worst, n_differing = compare(a, b)
    if status == "identical":
        return f"{name}=identical"
    return f"{name}=differs {name}_max_abs_diff={worst:.3e} {name}_tensors_differing={n_differing}/{len(a)}"


def one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".replace("\n", " ")
    return text[:300]


def run_args(args: argparse.Namespace, out: Path, seed: int) -> list[str]:
    return ["--model", args.model, "--lang", args.lang, "--seed", str(seed), "--out", str(out),
            "--data-dir", str(args.data_dir), "--tokenizer", str(args.tokenizer), "--batch-size", str(args.batch_size),
            "--epochs", "1000", "--max-steps", str(args.steps),
            "--checkpoint-every-steps", str(args.checkpoint_every_steps),
            "--dev-max-sentences", str(args.dev_sentences), "--collapse-sentences", str(args.dev_sentences),
            "--device", args.device, "--progress-interval", "60", *args.train_args]


def train(argv: list[str], step_callback=None) -> None:
    status = trainer.train(argv, step_callback=step_callback)
    if status == 128 + signal.SIGTERM:  # the caller's timeout: strae train checkpointed and stopped
        raise Stopped
    if status != 0:
        raise RuntimeError(f"strae train exited with status {status}")


def check_determinism(args: argparse.Namespace, work: Path) -> str:
    train(run_args(args, work / "first", args.seed))
    # --perturb: the second run is not the same run, so the check must report a difference (tests)
    train(run_args(args, work / "second", args.seed + (1 if args.perturb else 0)))
    return verdict("determinism", weights(work / "first"), weights(work / "second"))


def check_resume(args: argparse.Namespace, work: Path) -> str:
    argv = run_args(args, work / "resumed", args.seed)

    def stop(global_step: int) -> None:
        if global_step == args.interrupt_at:
            raise Interrupt(f"simulated kill after step {global_step}")

    try:
        train(argv, step_callback=stop)
    except Interrupt:
        pass
    else:
        return f"resume=not_interrupted(--interrupt-at {args.interrupt_at} not reached before --steps {args.steps})"
    checkpoint = work / "resumed" / trainer.CHECKPOINT_FILE
    if args.perturb:  # a resume that does not restore the saved state exactly must be reported (tests)
        perturb(checkpoint)
    try:
        train(argv)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the line reports the crash (e.g. RNG state on load)
        return f"resume=crashed resume_error={one_line(error)!r}"
    return verdict("resume", weights(work / "first"), weights(work / "resumed"))


def perturb(checkpoint: Path) -> None:
    """--perturb: shift one saved weight, so the resumed run cannot match (the checks must say so)."""
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    next(t for t in saved["model"].values() if t.is_floating_point()).add_(1e-3)
    torch.save(saved, checkpoint)


def check_sigterm(args: argparse.Namespace, work: Path) -> str:
    argv = run_args(args, work / "sigterm", args.seed)

    def send(global_step: int) -> None:
        if global_step == args.interrupt_at:
            os.kill(os.getpid(), signal.SIGTERM)

    status = trainer.train(argv, step_callback=send)
    if status != 128 + signal.SIGTERM:
        return f"sigterm=not_stopped sigterm_status={status}"
    saved = torch.load(work / "sigterm" / trainer.CHECKPOINT_FILE, map_location="cpu", weights_only=False)
    if saved["global_step"] != args.interrupt_at + 1:  # the step after the signal's, not an earlier checkpoint
        return f"sigterm=wrong_checkpoint sigterm_checkpoint_step={saved['global_step']}"
    if args.perturb:  # as in check_resume: an inexact state must be reported (tests)
        perturb(work / "sigterm" / trainer.CHECKPOINT_FILE)
    try:
        train(argv)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the line reports the crash
        return f"sigterm=crashed sigterm_error={one_line(error)!r}"
    return verdict("sigterm", weights(work / "first"), weights(work / "sigterm"))


def recorded(run_dir: Path) -> str:
    """The first run's provenance.determinism (JSON, no spaces) and provenance.induction_kernel (used, requested,
    and the reason quoted: it has spaces)."""
    path = run_dir / "train.json"
    if not path.exists():
        return "provenance=missing"
    block = json.loads(path.read_text()).get("provenance", {})
    kernel = block.get("induction_kernel") or {}
    return (f"provenance.determinism={json.dumps(block.get('determinism'), separators=(',', ':'), sort_keys=True)} "
            f"provenance.induction_kernel={kernel.get('used')} "
            f"provenance.induction_kernel.requested={kernel.get('requested')} "
            f"provenance.induction_kernel.reason={str(kernel.get('reason')).replace(chr(10), ' ')!r} "
            f"provenance.propagation={_propagation(block.get('propagation'))}")


def _propagation(record) -> str:
    """mode/levels engine (e.g. handwritten/triton) of a train.json's provenance.propagation ('-' before it existed)."""
    if not isinstance(record, dict):
        return "-"
    tail = f"(tail={record['level_tail_nodes']})" if "level_tail_nodes" in record else ""
    return f"{record.get('mode')}/{(record.get('levels') or {}).get('used')}{tail}"


def split_at_dashes(argv: list[str] | None) -> tuple[list[str], list[str]]:
    """(this script's arguments, those after ``--``, which go to every trainer call)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return argv, []
    return argv[:argv.index("--")], argv[argv.index("--") + 1:]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv, train_args = split_at_dashes(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", choices=("banyan", "selfstrae"), default="banyan")
    parser.add_argument("--data-dir", type=Path, default=None, help="tokenised corpus (default: a tiny one made here)")
    parser.add_argument("--tokenizer", type=Path, default=None, help="its tokenizer model (needed with --data-dir)")
    parser.add_argument("--lang", default="en", help="only a label in the run records")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per run")
    parser.add_argument("--checkpoint-every-steps", "--checkpoint-every", dest="checkpoint_every_steps", type=int,
                        default=None, help="default: a third of --steps")
    parser.add_argument("--interrupt-at", type=int, default=None,
                        help="step after which the resume run is killed (default: half of --steps)")
    parser.add_argument("--dev-sentences", type=int, default=256, help="dev sentences of each epoch-end evaluation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tiny-sentences", type=int, default=2048, help="train sentences of the tiny corpus")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the runs here (default: a temp folder)")
    parser.add_argument("--level-tail", type=int, default=None, metavar="NODES",
                        help="the Triton levels' shared narrow-top launch for every run here (models/propagation.py "
                        "LEVEL_TAIL_NODES and LINEAR_LEVEL_TAIL_NODES, both set; default: the engine's)")
    parser.add_argument("--perturb", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.train_args = train_args
    args.checkpoint_every_steps = args.checkpoint_every_steps or args.steps // 3
    args.interrupt_at = args.interrupt_at or args.steps // 2
    if (args.data_dir is None) != (args.tokenizer is None):
        parser.error("--data-dir and --tokenizer go together")
    if not 0 < args.checkpoint_every_steps < args.interrupt_at < args.steps:
        parser.error("need 0 < --checkpoint-every-steps < --interrupt-at < --steps (a checkpoint before the kill)")
    return args


def timed(check, *arguments) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        result = check(*arguments)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - a failing part must not hide the other's result
        name = check.__name__.removeprefix("check_")
        result = f"{name}=crashed {name}_error={one_line(error)!r}"
    return result, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.level_tail is None:
        return run_checks(args)
    from strae.models import propagation  # an engine constant, not a training option: set for these runs only
    with propagation.level_tails(args.level_tail):
        return run_checks(args)


def run_checks(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    args.device = str(device)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="strae-cuda-checks-"))
    data = "tiny" if args.data_dir is None else "corpus"
    results = {name: (f"{name}=stopped(SIGTERM)", 0.0) for name in ("determinism", "resume", "sigterm")}
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        if args.data_dir is None:
            args.data_dir, args.tokenizer = make_tiny_corpus(work / "tiny", args.tiny_sentences)
        results["determinism"] = timed(check_determinism, args, work)
        results["resume"] = timed(check_resume, args, work)
        results["sigterm"] = timed(check_sigterm, args, work)
    except Stopped:
        pass  # the line below says which part did not finish
    finally:
        signal.signal(signal.SIGTERM, previous)
        (determinism, determinism_s), (resume, resume_s) = results["determinism"], results["resume"]
        sigterm, sigterm_s = results["sigterm"]
        print(f"cuda_checks model={args.model} data={data} batch={args.batch_size} steps={args.steps} "
              f"interrupt_at={args.interrupt_at} checkpoint_every_steps={args.checkpoint_every_steps} {determinism} "
              f"determinism_s={determinism_s:.1f} {resume} resume_s={resume_s:.1f} {sigterm} "
              f"sigterm_s={sigterm_s:.1f} {recorded(work / 'first')} "
              f"torch={torch.__version__} device={describe_device(device).replace(' ', '_')}", flush=True)
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    passed = (determinism, resume, sigterm) == ("determinism=identical", "resume=identical", "sigterm=identical")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
