"""Progress of a campaign trained in time-boxed chunks (tools/campaign_chunk.sh): snapshots, summary, archive.

A chunk's training is cut off by a time limit; what it leaves is each unfinished run's ``checkpoint.pt``. In the
chunk's tail these commands turn that into results a reader can take away:

    python -m strae.report.progress snapshot --deadline-s 60 [--jobs 4]
        every unfinished run (checkpoint.pt, no encoder.json, not failed): its checkpoint exported with the run's own
        `strae train` flags (strae.plan.train_flags, as the workflow builds them) to
        results/snapshots/<lang>/<model>/<setting>/seed<N>/step<STEP>, evaluated (the paper variant's task list) to
        ...step<STEP>.paper.json; a step already evaluated is skipped, so calling it again costs nothing. Once
        evaluated, the snapshot's model.pt is deleted (a campaign leaves one per run per chunk; its scores, train.json
        and encoder.json stay): --keep-weights keeps it
    python -m strae.report.progress summary
        one line per run directory: status, epoch/step of the planned epochs, latest sentence-task average, and
        for an unfinished run the training left at its last rate (progress.json): what the next call needs
    python -m strae.report.progress eta --within S [--eval-s 30]
        exit 0 when every run training now (a fresh progress.json, no completion mark) will end, evaluation
        included, within S seconds at its recent rate; 1 otherwise. One line per run. What campaign_chunk.sh asks
        before cutting a chunk's training off: a run a few steps from its end finishes instead
    python -m strae.report.progress unevaluated TARGET...
        the TARGETs (evaluation JSONs, paper variant) whose run has finished training (encoder.json, train.json
        status completed) but whose evaluation does not exist: one a chunk's stop cut off while it was being
        evaluated, which campaign_chunk.sh evaluates in its tail (a lent box's weights do not outlive it)
    python -m strae.report.progress archive OUT.tar.xz [--extra FILE]...
        every train.json and evaluation JSON, scores and tables under results/, the last lines of each log

The flags come from the config the workflow last ran with (results/config.effective.yaml), so a snapshot's
checkpoint fingerprint matches the run's; nothing here names a model or language.
"""
from __future__ import annotations

import argparse
import io
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from strae import paths, plan
from strae.data.registry import load_config  # the project's one reader of a config file
from strae.io import atomic_path, read_json
from strae.runs import CHECKPOINT_FILE, ENCODER_MANIFEST, MODEL_FILE, PROGRESS_FILE, TRAIN_JSON, ProgressFile, RunRecord

VARIANT = "paper"  # the variant the campaign's targets evaluate (results/eval/.../seed<N>.paper.json)
SNAPSHOTS = "snapshots"
LOG_TAIL_LINES = 50
MIN_JOB_S = 5  # a job started with less time than this left cannot finish: reported as skipped instead
EXPORT_TRIES = 3  # exports of a checkpoint that keeps changing under them before giving up for this chunk
LIVE_S = 60.0  # a progress.json not rewritten for this long (trainers rewrite it every 10 s) has no trainer
# a train.json `running` written this recently, without a live progress.json, is a trainer still starting (loading,
# compiling kernels: its first progress.json comes 10 s after its first step); older, a stopped run's leftover
STARTING_S = 900.0


# ------------------------------------------------------------------------------------------------ runs
def run_dirs(results: Path) -> list[tuple[plan.Run, Path]]:
    """Every run directory under results/runs (results/runs/<lang>/<model>/<setting>/seed<N>)."""
    found = []
    # the run-directory layout of strae.paths.run_dir, every part a wildcard
    for path in sorted(Path(results).glob(str(paths.run_dir("*", "*", "*", "*", results="")))):
        lang, model, setting = path.parts[-4:-1]
        seed = path.name.removeprefix("seed")
        if path.is_dir() and seed.isdigit():
            found.append((plan.Run(lang, model, setting, int(seed)), path))
    return found


def label(run: plan.Run) -> str:
    return f"{run.language}/{run.model}/{run.setting}/seed{run.seed}"


def recorded_status(path: Path) -> str | None:
    record = RunRecord.from_disk(path)
    return record.status if record is not None else None


def unfinished(path: Path) -> bool:
    """Training started and has not ended: a checkpoint, no completion mark, not recorded as failed."""
    return ((path / CHECKPOINT_FILE).exists() and not (path / ENCODER_MANIFEST).exists()
            and recorded_status(path) != "failed")


def checkpoint_progress(path: Path) -> dict[str, Any]:
    """Where a checkpoint stands (epochs done, batches into the next, global step), its tensors left unread."""
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    return {key: saved[key] for key in ("epoch", "batch_in_epoch", "global_step")}


def snapshot_dir(results: Path, run: plan.Run, step: int) -> Path:
    return paths.snapshot_dir(run.language, run.model, run.setting, run.seed, step, results)


def snapshot_scores(dest: Path) -> Path:
    return dest.with_name(f"{dest.name}.{VARIANT}.json")


def planned_epochs(config: dict[str, Any], run: plan.Run) -> int | None:
    """The epochs the run's recipe asks for (config overrides applied), as `strae train` resolves them."""
    recipe = plan.run_recipe(config, run)
    return recipe.epochs if recipe is not None else None


# -------------------------------------------------------------------------------------------- commands
def strae_command(*args: str) -> list[str]:
    """The `strae` CLI of this interpreter (the workflow's `strae` on PATH is the same entry point)."""
    return [sys.executable, "-m", "strae.cli", *args]


def export_command(config: dict[str, Any], run: plan.Run, path: Path, dest: Path) -> list[str]:
    """The train rule's command (workflow/rules/train.smk) for this run, exporting its checkpoint instead."""
    resources = config["data"]["resources_dir"]
    flags = shlex.split(plan.train_flags(config, run.model, run.setting, run.language))
    return strae_command(
        "train", *flags, "--lang", run.language, "--seed", str(run.seed), "--setting", run.setting,
        "--data-dir", str(paths.tokenized_dir(run.language, resources)),
        "--tokenizer", str(paths.tokenizer_model(run.language, resources)),
        "--out", str(path), "--export-checkpoint", str(dest))


def evaluate_command(config: dict[str, Any], config_path: Path, run: plan.Run, dest: Path) -> list[str]:
    """The evaluate rule's command (workflow/rules/evaluate.smk) for an exported snapshot."""
    tasks = ",".join(config["languages"][run.language]["eval"][VARIANT])
    return strae_command(
        "evaluate", "--model", str(dest), "--lang", run.language, "--variant", VARIANT, "--tasks", tasks,
        "--config", str(config_path), "--device", str(config["scale"].get("device", "auto")),
        "--out", str(snapshot_scores(dest)))


def run_logged(command: list[str], log: Path, deadline: float, env: dict[str, str]) -> str | None:
    """Run ``command`` until ``deadline`` (time.monotonic()); None when it succeeded, else why not."""
    left = deadline - time.monotonic()
    if left < MIN_JOB_S:
        return f"skipped: {left:.0f} s left"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as handle:
        handle.write(shlex.join(command) + "\n")
        handle.flush()
        try:
            rc = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, timeout=left).returncode
        except subprocess.TimeoutExpired:
            return f"timed out after {left:.0f} s (see {log})"
    return None if rc == 0 else f"exit status {rc} (see {log})"


# ------------------------------------------------------------------------------------------- snapshot
def snapshot_run(config: dict[str, Any], config_path: Path, run: plan.Run, path: Path, results: Path,
                 logs: Path, deadline: float, keep_weights: bool = False) -> str:
    """Export and evaluate one unfinished run's checkpoint; one line saying what happened.

    A trainer that is still stopping (SIGTERM at a chunk's cut: it finishes its step, then checkpoints) can rewrite
    the checkpoint while it is exported; the export then carries another step than its folder's name. That export
    is thrown away and the newer checkpoint exported instead, up to EXPORT_TRIES times.
    """
    # one thread per job: several evaluations share the machine's cores (the workflow's eval_threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(config["scale"].get("eval_threads", 1)))
    for _ in range(EXPORT_TRIES):
        step = checkpoint_progress(path / CHECKPOINT_FILE)["global_step"]
        dest = snapshot_dir(results, run, step)
        if snapshot_scores(dest).exists():
            return f"{label(run)} step {step}: already evaluated ({snapshot_scores(dest)})"
        log = logs / SNAPSHOTS / dest.relative_to(Path(results) / SNAPSHOTS)
        if (dest / ENCODER_MANIFEST).exists():  # encoder.json is written last: a cut-off export is redone
            break
        failed = run_logged(export_command(config, run, path, dest), log.with_name(f"{dest.name}.export.log"),
                            deadline, env)
        if failed:
            return f"{label(run)} step {step}: export FAILED, {failed}"
        exported = read_json(dest / TRAIN_JSON)["snapshot"]["global_step"]
        if exported == step:
            break
        shutil.rmtree(dest)  # labelled with a step it does not hold
        moved = f"{label(run)} step {step}: checkpoint changed to step {exported} during the export"
    else:
        return f"{moved} {EXPORT_TRIES} times (a trainer still running?); try again"
    failed = run_logged(evaluate_command(config, config_path, run, dest),
                        log.with_name(f"{dest.name}.{VARIANT}.log"), deadline, env)
    if failed:
        return f"{label(run)} step {step}: evaluation FAILED, {failed}"
    if not keep_weights:  # the step's scores are what the snapshot is for; the run's own checkpoint moves on
        (dest / MODEL_FILE).unlink(missing_ok=True)
    return f"{label(run)} step {step}: evaluated -> {snapshot_scores(dest)}"


def snapshot_all(results: Path, logs: Path, config_path: Path, deadline_s: float, jobs: int,
                 keep_weights: bool = False) -> list[str]:
    """Snapshot every unfinished run (``jobs`` at once) before ``deadline_s`` seconds from now."""
    deadline = time.monotonic() + deadline_s
    todo = [(run, path) for run, path in run_dirs(results) if unfinished(path)]
    if not todo:
        return ["no unfinished run"]
    if not config_path.exists():
        return [f"{config_path} missing (has the workflow run here?): no snapshot"]
    config = load_config(config_path)

    def one(item: tuple[plan.Run, Path]) -> str:
        run, path = item
        if run.model not in config["models"]:
            return f"{label(run)}: not a model of config `models:`, no snapshot"
        try:
            return snapshot_run(config, config_path, run, path, results, logs, deadline, keep_weights)
        except Exception as error:  # one run's broken file must not cost the others their snapshot
            return f"{label(run)}: snapshot FAILED, {type(error).__name__}: {error}"

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, todo))


# -------------------------------------------------------------------------------------------- summary
def sentence_average(scores_path: Path) -> tuple[float, int] | None:
    """Mean score over an evaluation's sentence-level tasks (the STS-style ones) and how many there were."""
    tasks = read_json(scores_path).get("tasks") or {}
    scores = [task["score"] for task in tasks.values()
              if task.get("level") == "sentence" and isinstance(task.get("score"), (int, float))
              and math.isfinite(task["score"])]
    return (sum(scores) / len(scores), len(scores)) if scores else None


def latest_snapshot(results: Path, run: plan.Run) -> tuple[int, Path] | None:
    """(step, scores file) of the run's most advanced evaluated snapshot."""
    folder = snapshot_dir(results, run, 0).parent
    found = [(int(p.name.removeprefix("step").removesuffix(f".{VARIANT}.json")), p)
             for p in folder.glob(f"step*.{VARIANT}.json")]
    return max(found) if found else None


def position(epoch: int, batch: int, step: int, planned: int | None) -> str:
    """``epoch E/PLANNED (+B batches) step S``: epochs done, batches into the next one, optimizer steps."""
    of = f"/{planned}" if planned else ""
    extra = f" (+{batch} batches)" if batch else ""
    return f"epoch {epoch}{of}{extra} step {step}"


def average_text(scores_path: Path, where: str) -> str:
    average = sentence_average(scores_path) if scores_path.exists() else None
    if average is None:
        return "not evaluated"
    return f"STS avg {average[0]:.2f} ({average[1]} sentence tasks, {where})"


def summary_line(results: Path, config: dict[str, Any] | None, run: plan.Run, path: Path) -> str:
    """``lang/model/setting/seedN  status  epoch E/15 step S  STS avg X (...)``, and a warning when a Triton engine
    fell back to torch (:func:`engine_fallbacks`)."""
    return _summary_line(results, config, run, path) + engine_fallbacks(path)


def _summary_line(results: Path, config: dict[str, Any] | None, run: plan.Run, path: Path) -> str:
    planned = planned_epochs(config, run) if config else None
    status = recorded_status(path)
    if unfinished(path):
        progress = checkpoint_progress(path / CHECKPOINT_FILE)
        where = position(progress["epoch"], progress["batch_in_epoch"], progress["global_step"], planned)
        latest = latest_snapshot(results, run)
        scores = average_text(latest[1], f"snapshot step {latest[0]}") if latest else "no snapshot evaluated"
        return f"{label(run)}  running  {where}  {scores}{time_left_text(path, progress['global_step'])}"
    if status in (None, "running"):  # killed before its first checkpoint (train.json may be gone or "running")
        return f"{label(run)}  started  no checkpoint yet"
    history = read_json(path / TRAIN_JSON).get("history") or []
    step = history[-1]["global_step"] if history else 0
    where = position(len(history), 0, step, planned)
    scores = average_text(paths.eval_json(run.language, run.model, run.setting, run.seed, VARIANT, results=results),
                          "final")
    return f"{label(run)}  {status}  {where}  {scores}"


def engine_fallbacks(path: Path) -> str:
    """``  WARNING: the Triton <engine> fell back to torch (<reason>)`` for each Triton engine of the run's train.json
    (written when training starts) that failed its first-use check, else nothing: such a run is correct but on a
    GPU ~2-25x slower, which a time-boxed chunk has to know at once (strae train also says so in its log)."""
    from strae.models.fused import fell_back  # torch only when asked (as checkpoint_progress)

    try:
        provenance = read_json(path / TRAIN_JSON).get("provenance") or {}
    except (OSError, ValueError):
        return ""
    choices = {"induction": provenance.get("induction_kernel"),
               "levels": (provenance.get("propagation") or {}).get("levels")}
    return "".join(f"  WARNING: the Triton {engine} fell back to torch ({choice['reason']})"
                   for engine, choice in choices.items() if fell_back(choice))


def read_progress(path: Path) -> tuple[int, int, float, float]:
    """A run directory's progress.json as (global_step, total_steps, steps_per_second, updated_unix); OSError,
    ValueError, KeyError or TypeError when it is missing or unreadable (half-written, an older layout)."""
    progress = read_json(path / PROGRESS_FILE)
    return (int(progress["global_step"]), int(progress["total_steps"]), float(progress["steps_per_second"]),
            float(progress["updated_unix"]))


def time_left_text(path: Path, step: int) -> str:
    """``  ~N s of training left at R steps/s`` from the run's progress.json (its last rate; what the next call's
    time limit needs), or nothing when there is no usable one."""
    try:
        _, total, rate, _ = read_progress(path)
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    left = total - step
    if rate <= 0 or left < 0:
        return ""
    return f"  ~{left / rate:.0f} s of training left ({left} steps at {rate:.1f} steps/s)"


def summary(results: Path, config_path: Path) -> list[str]:
    config = load_config(config_path) if config_path.exists() else None
    lines = []
    for run, path in run_dirs(results):
        try:
            lines.append(summary_line(results, config, run, path))
        except Exception as error:  # a half-written file still gets its line
            lines.append(f"{label(run)}  unreadable  {type(error).__name__}: {error}")
    return lines or ["no run directory under " + str(paths.runs_root(results))]


# ------------------------------------------------------------------------------------------------ eta
def finish_estimates(results: Path, eval_s: float, now: float | None = None) -> list[tuple[str, float]]:
    """(line, seconds until done) for every run training now: its progress.json rewritten within LIVE_S, no
    completion mark, not failed. Seconds = the steps left at the rate of its last interval (less those made at
    that rate since the file was written, up to ProgressFile.every_s of them), plus ``eval_s`` for the evaluation
    job that follows; infinite when the file cannot say (no rate yet, unreadable)."""
    now = time.time() if now is None else now
    estimates = []
    for run, path in run_dirs(results):
        status = recorded_status(path)
        if (path / ENCODER_MANIFEST).exists() or status == "failed":
            continue
        if status == "running" and _starting(path, now):
            # no rate to judge by (loading, compiling kernels): never let a chunk skip its cut for it
            estimates.append((f"{label(run)}  starting (no progress of this sitting yet)", math.inf))
            continue
        if not (path / PROGRESS_FILE).exists():
            continue
        try:
            step, total, rate, updated = read_progress(path)
        except (OSError, ValueError, KeyError, TypeError) as error:
            estimates.append((f"{label(run)}  progress unreadable ({type(error).__name__}: {error})", math.inf))
            continue
        if now - updated > LIVE_S:
            continue  # stopped earlier (a previous chunk): nothing is training it now
        # the file is rewritten every ProgressFile.every_s: the steps made since it was written are counted at its
        # rate, not left to make (read as written, a run ending in 5 s read as up to 10 s more, enough to cut it).
        # At most every_s of them: a file older than that belongs to a trainer that stalled (an epoch's dev
        # evaluation, a checkpoint) or died, which made no steps meanwhile
        since = min(max(now - updated, 0.0), ProgressFile.every_s)
        train_s = max(total - step - rate * since, 0) / rate if rate > 0 else math.inf
        estimates.append((f"{label(run)}  step {step}/{total} at {rate:.1f} steps/s ({now - updated:.0f} s ago): "
                          f"ends in ~{train_s:.0f} s + {eval_s:.0f} s evaluation", train_s + eval_s))
    return estimates


def _starting(path: Path, now: float) -> bool:
    """A trainer started within STARTING_S (its train.json, written as it starts) that has written no progress.json
    since (the first comes 10 s after its first step; a resumed run's is the previous sitting's until then). A
    train.json rewritten at an epoch's end is followed by a progress.json within ~10 s: that gap is not "starting"."""
    written = (path / TRAIN_JSON).stat().st_mtime
    if now - written > STARTING_S:
        return False
    progress = path / PROGRESS_FILE
    return not progress.exists() or progress.stat().st_mtime < written - 3 * ProgressFile.every_s


def eta(results: Path, within_s: float, eval_s: float) -> tuple[bool, list[str]]:
    """(every run training now ends within ``within_s`` seconds, one line per run)."""
    estimates = finish_estimates(results, eval_s)
    if not estimates:
        return True, ["no run is training now"]
    return all(seconds <= within_s for _, seconds in estimates), [line for line, _ in estimates]


# ------------------------------------------------------------------------------------------ unevaluated
def unevaluated(results: Path, targets: list[str]) -> list[str]:
    """The ``targets`` (as given) that are a finished run's missing paper-variant evaluation JSON."""
    wanted = {os.path.abspath(target): target for target in targets}
    found = []
    for run, path in run_dirs(results):
        scores = paths.eval_json(run.language, run.model, run.setting, run.seed, VARIANT, results=results)
        target = wanted.get(os.path.abspath(scores))
        if target is not None and not scores.exists() and (path / ENCODER_MANIFEST).exists() \
                and recorded_status(path) == "completed":
            found.append(target)
    return found


# -------------------------------------------------------------------------------------------- archive
def archive_files(results: Path) -> list[Path]:
    """What a chunk brings back of results/: records, evaluations, training curves, scores and tables (never
    weights). A train.json inside a run's directory (a training-curve point's snapshot record) is the run's
    business, not a record of its own: left out."""
    results = Path(results)
    patterns = ["**/train.json", "eval/**/*.json", f"{SNAPSHOTS}/**/*.{VARIANT}.json", "curves/**/*.json",
                "scores*.csv", "scores/*.csv", "table*", "*/table*", "config.effective.yaml"]
    found = {path for pattern in patterns for path in results.glob(pattern) if path.is_file()}
    return sorted(path for path in found if not (path.name == TRAIN_JSON and _inside_a_run(path.parent, results)))


def _inside_a_run(directory: Path, results: Path) -> bool:
    """Whether a directory above ``directory`` (below ``results``) holds a run's train.json."""
    return any((parent / TRAIN_JSON).is_file() for parent in directory.parents if parent.is_relative_to(results)
               and parent != results)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> bytes:
    """The last ``lines`` lines; progress bars' carriage-return updates count as lines (each is one)."""
    text = path.read_bytes().replace(b"\r", b"\n")
    return b"\n".join(text.splitlines()[-lines:]) + b"\n"


def write_archive(dest: Path, results: Path, logs: Path, extras: list[Path]) -> int:
    """ONE .tar.xz (written atomically); returns how many members it holds."""
    members = 0
    with atomic_path(dest, suffix=".tar.xz") as tmp, tarfile.open(tmp, "w:xz") as tar:
        for path in archive_files(results):
            tar.add(path, arcname=str(path))
            members += 1
        for path in (p for p in extras if p.is_file()):  # beside results/ and logs/ in the archive
            tar.add(path, arcname=path.name)
            members += 1
        for log in sorted(Path(logs).glob("**/*.log")):
            data = log_tail(log)
            info = tarfile.TarInfo(f"{log}.tail")
            info.size, info.mtime = len(data), int(log.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
            members += 1
    return members


# ------------------------------------------------------------------------------------------------ CLI
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m strae.report.progress", description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=Path(paths.DEFAULT_RESULTS))
    parser.add_argument("--logs", type=Path, default=Path("logs"))
    parser.add_argument("--config", type=Path, default=None, help="default: RESULTS/config.effective.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="export and evaluate every unfinished run's checkpoint")
    snap.add_argument("--deadline-s", type=float, required=True, help="seconds from now every job must end by")
    snap.add_argument("--jobs", type=int, default=4, help="runs exported and evaluated at once")
    snap.add_argument("--keep-weights", action="store_true",
                      help="keep each evaluated snapshot's model.pt (default: deleted once its scores are written)")
    sub.add_parser("summary", help="one line per run directory")
    ends = sub.add_parser("eta", help="exit 0 when every run training now ends (evaluated) within --within seconds")
    ends.add_argument("--within", type=float, required=True, help="seconds from now")
    ends.add_argument("--eval-s", type=float, default=30.0, help="seconds the evaluation after training takes")
    pending = sub.add_parser("unevaluated", help="the targets that are a finished run's missing evaluation")
    pending.add_argument("targets", nargs="*", help="evaluation JSONs (paper variant)")
    arch = sub.add_parser("archive", help="write the chunk's results as one .tar.xz")
    arch.add_argument("out", type=Path)
    arch.add_argument("--extra", type=Path, action="append", default=[], help="another file to include")
    return parser


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config_path = args.config or paths.effective_config(args.results)
    if args.command == "snapshot":
        lines = snapshot_all(args.results, args.logs, config_path, args.deadline_s, args.jobs, args.keep_weights)
    elif args.command == "summary":
        lines = summary(args.results, config_path)
    elif args.command == "unevaluated":
        for target in unevaluated(args.results, args.targets):
            print(target, flush=True)
        return 0
    elif args.command == "eta":
        in_time, lines = eta(args.results, args.within, args.eval_s)
        print("\n".join(lines), flush=True)
        return 0 if in_time else 1
    else:
        # the chunk's `timeout` stops a slow archive with SIGTERM, whose default action skips atomic_path's cleanup:
        # a half-written temp file would then sit beside the archive in $OUT and come back with it
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        count = write_archive(args.out, args.results, args.logs, args.extra)
        lines = [f"{args.out}: {count} files, {args.out.stat().st_size / 2**20:.2f} MiB"]
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
