"""Several training runs sharing one device: aggregate tokens/s of N concurrent copies of train_throughput.py.

    python benchmarks/concurrent_throughput.py --runs 1,4,8 [--timeout S] [--log-dir DIR] -- \
        --model banyan --device cuda --induction-kernel triton --batch-size 512 --steps 20 --split-steps 0

For each N of ``--runs``, N copies of ``benchmarks/train_throughput.py`` start at once with the arguments after
``--`` (copy i adds ``--seed SEED_BASE+i`` and, unless given, ``--threads`` = cores // N) and begin their timed steps
together (after their warm-up, at a file barrier), so their timed windows overlap. ONE line: per N,
``aggregate_tokens/s`` = the copies' timed tokens / the longest timed window (the rate of the group, not the sum of
the copies' own rates, which counts the tail where the faster ones have stopped competing), ``slowest_tokens/s``,
and the device the copies report. ``--beside "ARGS"`` (train_throughput arguments, shell-quoted) also measures one
copy of that other command alone, then, for each N, the N copies with it beside them at once: whether a run of one
model can share the card with another's (a Banyan run beside a Self-StrAE run) without slowing it past a lease;
``main_tokens/s`` is the N copies' aggregate over their own longest window, ``beside_tokens/s`` the other's own rate
(over its own window: the part of it that outlasts the others' ran alone), ``aggregate_tokens/s`` the group's. Give
``--threads`` in both argument lists: by default a copy takes cores // copies, fewer beside the other command.
A copy that fails or times out puts ``FAILED`` and its stderr tail in the line
(the others of that N are stopped) and the exit status is 1; no rate is ever made up. On SIGTERM (a caller's
``timeout``) the line is printed with the groups measured so far.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "train_throughput.py"
FIELD = re.compile(r"(\S+?)=(\S+)")


class Stopped(BaseException):
    """SIGTERM (e.g. the `timeout` of tools/gpu_measure.sh): print the groups measured so far, then stop."""


def stop(signum, frame) -> None:
    raise Stopped


def child_command(passthrough: list[str], index: int, n_runs: int, seed_base: int, threads: int,
                  barrier: Path) -> list[str]:
    command = [sys.executable, str(SCRIPT), *passthrough, "--seed", str(seed_base + index),
               "--barrier", str(barrier), "--barrier-count", str(n_runs)]
    if "--threads" not in passthrough:
        command += ["--threads", str(threads)]
    return command


def tail(text: str, limit: int = 600) -> str:
    return " ⏎ ".join(line for line in text[-limit:].splitlines() if line.strip())


def run_group(passthroughs: list[list[str]], label: str,
              args: argparse.Namespace) -> tuple[list[dict], str | None]:
    """Start one copy per entry of ``passthroughs`` at once (train_throughput arguments each); (each copy's parsed
    fields, None) or ([], why the group failed). ``label`` names the group's logs."""
    n_runs = len(passthroughs)
    threads = max(1, (os.cpu_count() or 1) // n_runs)
    with tempfile.TemporaryDirectory(prefix="strae-concurrent-") as folder:
        barrier, logs = Path(folder) / "barrier", Path(folder)
        barrier.mkdir()
        # files, not pipes: a copy blocked on a full pipe would hold every other copy at the barrier
        streams = [(open(logs / f"{i}.out", "w+"), open(logs / f"{i}.err", "w+")) for i in range(n_runs)]
        children = []
        try:
            for i, (out, err) in enumerate(streams):
                command = child_command(passthroughs[i], i, n_runs, args.seed_base, threads, barrier)
                children.append(subprocess.Popen(command, stdout=out, stderr=err, text=True))
            failure = wait_all(children, args.timeout)
        finally:
            for child in children:  # a failed copy would leave the rest waiting at the barrier: stop them
                if child.poll() is None:
                    child.kill()
                    child.wait()
        outputs = [(read_back(out), read_back(err)) for out, err in streams]
    if args.log_dir:
        write_logs(args.log_dir, label, outputs)
    if failure is not None:
        index, why = failure
        return [], f"copy {index} {why}: {tail(outputs[index][1])}"
    try:
        return [parse_line(stdout, index) for index, (stdout, _) in enumerate(outputs)], None
    except ValueError as error:
        return [], str(error)


def read_back(stream) -> str:
    with stream:
        stream.seek(0)
        return stream.read()


def wait_all(children: list[subprocess.Popen], timeout: float) -> tuple[int, str] | None:
    """None when every copy exited 0; else (the first failed copy, why) as soon as one fails or time is up."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [child.poll() for child in children]
        failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            return failed[0], f"rc={codes[failed[0]]}"
        if all(code == 0 for code in codes):
            return None
        if time.monotonic() > deadline:
            return codes.index(None), f"timed out after {timeout:.0f} s"
        time.sleep(0.1)


def parse_line(stdout: str, index: int) -> dict:
    lines = [line for line in stdout.splitlines() if "tokens/s=" in line]
    fields = dict(FIELD.findall(lines[0])) if len(lines) == 1 else {}
    if "tokens/s" not in fields or "timed_s" not in fields:
        raise ValueError(f"copy {index} printed no line with tokens/s= and timed_s=: {tail(stdout)!r}")
    return {"tokens/s": float(fields["tokens/s"].replace(",", "")), "timed_s": float(fields["timed_s"]),
            "device": fields.get("device", "?"), "induction_kernel": fields.get("induction_kernel", "?"),
            "model": fields.get("model", "?")}


def write_logs(directory: Path, label: str, outputs: list) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, output in enumerate(outputs):
        (directory / f"concurrent-{label}-copy{index}.log").write_text(output[0] + output[1])


def aggregate(copies: list[dict]) -> float:
    """The copies' timed tokens over the longest of their timed windows (the group's rate)."""
    return sum(copy["tokens/s"] * copy["timed_s"] for copy in copies) / max(copy["timed_s"] for copy in copies)


def summary(n_runs: int, copies: list[dict]) -> str:
    slowest = min(copy["tokens/s"] for copy in copies)
    return f"N={n_runs} aggregate_tokens/s={aggregate(copies):,.0f} slowest_tokens/s={slowest:,.0f}"


def beside_summary(n_runs: int, copies: list[dict]) -> str:
    """N main copies and the beside copy (last) together: each side's rate, and the group's."""
    main, beside = copies[:-1], copies[-1]
    return (f"N={n_runs}+beside main_tokens/s={aggregate(main):,.0f} beside_tokens/s={beside['tokens/s']:,.0f} "
            f"aggregate_tokens/s={aggregate(copies):,.0f}")


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="1,4,8", help="comma-separated numbers of concurrent copies")
    parser.add_argument("--seed-base", type=int, default=0, help="copy i runs with --seed SEED_BASE+i")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for one group of copies")
    parser.add_argument("--log-dir", type=Path, default=None, help="write each copy's stdout+stderr here")
    parser.add_argument("--beside", default=None, metavar="ARGS",
                        help="train_throughput arguments (one shell-quoted string) of another command: measured "
                             "alone, then one copy beside each group of N")
    args = parser.parse_args(argv)
    try:
        args.beside = shlex.split(args.beside) if args.beside is not None else None
    except ValueError as error:
        parser.error(f"--beside: {error}")
    if args.beside is not None and (not args.beside or "--seed" in args.beside):
        parser.error("--beside: give the other command's train_throughput arguments, without --seed")
    try:
        args.runs = [int(n) for n in args.runs.split(",")]
    except ValueError:
        parser.error(f"--runs {args.runs}: expected comma-separated integers, e.g. 1,4,8")
    if any(n < 1 for n in args.runs):
        parser.error(f"--runs {args.runs}: each number of copies must be >= 1")
    if "--seed" in passthrough:
        parser.error("--seed after --: each copy gets its own (--seed-base)")
    return args, passthrough


def groups(args: argparse.Namespace, passthrough: list[str]) -> list[tuple[str, str, list[list[str]]]]:
    """(name in the line, log label, each copy's arguments) of every group, in the order they run: the other
    command alone first (--beside), then each N alone and, with --beside, N with it."""
    out = [("beside alone", "beside", [args.beside])] if args.beside else []
    for n_runs in args.runs:
        out.append((f"N={n_runs}", f"N{n_runs}", [passthrough] * n_runs))
        if args.beside:
            out.append((f"N={n_runs}+beside", f"N{n_runs}-beside", [passthrough] * n_runs + [args.beside]))
    return out


def main(argv: list[str] | None = None) -> int:
    args, passthrough = parse_args(argv)
    parts, devices, kernels, models, failed = [], set(), set(), set(), False
    signal.signal(signal.SIGTERM, stop)
    for name, label, passthroughs in groups(args, passthrough):
        try:
            copies, failure = run_group(passthroughs, label, args)
        except Stopped:
            parts.append(f"{name} STOPPED by SIGTERM (the caller's time limit)")
            failed = True
            break
        if failure:
            parts.append(f"{name} FAILED {failure}")
            failed = True
            continue
        if name == "beside alone":
            parts.append(f"beside alone tokens/s={copies[0]['tokens/s']:,.0f}")
        elif name.endswith("+beside"):
            parts.append(beside_summary(len(passthroughs) - 1, copies))
        else:
            parts.append(summary(len(passthroughs), copies))
        devices.update(copy["device"] for copy in copies)
        kernels.update(copy["induction_kernel"] for copy in copies)
        models.update(copy["model"] for copy in copies)
    print(f"concurrent model={','.join(sorted(models)) or '?'} induction_kernel={','.join(sorted(kernels)) or '?'} "
          f"device={','.join(sorted(devices)) or '?'} | " + " | ".join(parts), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
