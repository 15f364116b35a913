"""Run directories: their layout, the ``train.json`` record, checkpoints, the lock, and exports.

Every trainer (``strae train`` and the baselines) writes its run directory through this module, and every
encoder's ``run_info()`` reads ``train.json`` through it, so the record has one schema in one place.

Layout of a run directory (baselines add their own files beside these, e.g. GloVe's ``vectors.bin``):
``checkpoint.pt`` (resumable state, during training), ``best.pt`` (the lowest-dev-loss epoch-end weights so far,
when the recipe keeps those), ``model.pt`` (final weights), ``tokenizer.model`` (copy),
``train.json`` (this module's :class:`RunRecord`), ``encoder.json`` (written last: the run is usable),
``progress.json`` (:class:`ProgressFile`, while a trainer runs).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from strae.io import atomic_path, git_sha, read_json, sha256_file, write_json

TRAIN_JSON = "train.json"
MODEL_FILE = "model.pt"
CHECKPOINT_FILE = "checkpoint.pt"
BEST_WEIGHTS_FILE = "best.pt"  # the lowest-dev-loss epoch-end weights so far (recipe final_weights)
TOKENIZER_FILE = "tokenizer.model"
ENCODER_MANIFEST = "encoder.json"
LOCK_FILE = ".train.lock"
# Where a running trainer stands, rewritten every few seconds (global_step, total_steps, steps_per_second,
# updated_unix): what tools/campaign_chunk.sh reads to let runs that are about to end finish inside its time limit
PROGRESS_FILE = "progress.json"

# 3: one record for every trainer. Older files keep the same top-level layout (schema_version, status,
# failure_reason, run, config, history, timings, provenance + trainer blocks), so they read as they are:
#   1 - strae train before recipes (the recipe values sat in config.model; no `recipe` block) and every
#       baseline trainer (GloVe, RoBERTa / SimCSE, multi-view);
#   2 - strae train with its `recipe` block.
SCHEMA_VERSION = 3
READABLE_SCHEMAS = (1, 2, 3)

# train.json keys with a field of their own; every other top-level key is a trainer block (RunRecord.blocks)
_RUN_KEYS = ("language", "model", "setting", "seed")
_FIELDS = ("schema_version", "status", "failure_reason", "run", "config", "history", "timings", "provenance")


class TrainingFailed(Exception):
    """A run diverged or collapsed; the message is the failure reason written to train.json."""


@dataclass
class RunRecord:
    """``train.json``: what a run is (labels), how it went (status, history, timings) and how it was made.

    ``config`` is the trainer's own settings; ``blocks`` holds the trainer-specific top-level sections (``data``,
    ``recipe``, ``parameters``, ``snapshot``, ``summary``, ``parser``, ``stopped_reason``), written as they are.
    """

    language: str | None = None
    model: str | None = None
    setting: str | None = None
    seed: int | None = None
    status: str = "running"
    failure_reason: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    blocks: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "status": self.status, "failure_reason": self.failure_reason,
            "run": {key: getattr(self, key) for key in _RUN_KEYS},
            "config": self.config, "history": self.history, "timings": self.timings, "provenance": self.provenance,
            **self.blocks,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = TRAIN_JSON) -> RunRecord:
        """A record of any readable schema. A record without a status predates statuses: it was a finished run."""
        if not isinstance(record, dict) or not isinstance(record.get("run") or {}, dict):
            raise SystemExit(f"{source}: not a train.json (its top level, or its `run`, is not a mapping); a "
                             "hand-edited file? Train the run again or restore the file")
        version = record.get("schema_version", 1)
        if version not in READABLE_SCHEMAS:
            raise SystemExit(f"{source}: schema_version {version} is not one this strae reads "
                             f"({', '.join(map(str, READABLE_SCHEMAS))}); update strae")
        run = record.get("run") or {}
        return cls(**{key: run.get(key) for key in _RUN_KEYS}, status=record.get("status") or "completed",
                   failure_reason=record.get("failure_reason"), config=record.get("config") or {},
                   history=record.get("history") or [], timings=record.get("timings") or {},
                   provenance=record.get("provenance") or {},
                   blocks={k: v for k, v in record.items() if k not in _FIELDS}, schema_version=SCHEMA_VERSION)

    def to_disk(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / TRAIN_JSON, self.to_dict())

    @classmethod
    def from_disk(cls, run_dir: Path) -> RunRecord | None:
        """The run directory's record, or None when it has no train.json."""
        path = Path(run_dir) / TRAIN_JSON
        return cls.from_dict(read_json(path), str(path)) if path.exists() else None

    def run_info(self, setting_suffix: str | None = None, fallback: dict[str, Any] | None = None) -> dict[str, Any]:
        """The labels an evaluation JSON copies (``Encoder.run_info``). ``setting_suffix``: an encoder option that
        makes a distinct table row (``SETTING@SUFFIX``); ``fallback``: labels for a record that lacks them."""
        labels = {key: getattr(self, key) if getattr(self, key) is not None else (fallback or {}).get(key)
                  for key in _RUN_KEYS}
        if setting_suffix and labels["setting"]:
            labels["setting"] = f"{labels['setting']}@{setting_suffix}"
        return {**labels, "status": self.status, "failure_reason": self.failure_reason,
                # how it was trained, so tables can say so: the recipe, any overrides (e.g. the quick profile's
                # bf16) and which source the language's corpus came from (the authors' or the mirror's substitute)
                "recipe": self.recipe_label(), "recipe_overrides": self.overrides_label(),
                "corpus_source": (self.blocks.get("data") or {}).get("corpus_source")}

    def recipe_label(self) -> str | None:
        recipe = self.blocks.get("recipe")
        return recipe.get("name") if isinstance(recipe, dict) else None

    def overrides_label(self) -> str | None:
        """`key=value;...` of the recipe values a run overrode ("" when none; None for runs without a recipe)."""
        recipe = self.blocks.get("recipe")
        if not isinstance(recipe, dict):
            return None
        return ";".join(f"{key}={entry['value']}" for key, entry in sorted((recipe.get("overrides") or {}).items()))

    def fail(self, run_dir: Path, reason: str, record_failure: bool, stream: TextIO | None = None) -> int:
        """Record the run as failed; the exit code: 0 with ``--record-failure`` (the workflow reports the failed
        seed in the tables instead of stopping), else 1."""
        self.status, self.failure_reason = "failed", reason
        self.to_disk(run_dir)
        print(f"{run_dir}: training failed: {reason}", file=stream or sys.stderr, flush=True)
        return 0 if record_failure else 1


# -------------------------------------------------------------------------------------------- checkpoints
@dataclass
class Sessions:
    """One entry per process that trained a run (train.json ``timings.sessions``, kept in checkpoint.pt): a resumed
    run's ``provenance`` names only the last process' commit and device, so every earlier one is kept here.

    Entry: ``{started, start_step, device, git_sha, ended?, end_step?, stopped_by?, lost_after_checkpoint?}``;
    ``ended``/``end_step`` are absent while the session runs. A process that died after a checkpoint is closed by
    the next one at that checkpoint's step (``lost_after_checkpoint``: what it did later is lost); a checkpoint from
    before sessions were recorded starts the list with ``{start_step: 0, end_step, unrecorded: true}``."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_checkpoint(cls, saved: list[dict[str, Any]] | None, step: int) -> Sessions:
        entries = [dict(entry) for entry in saved] if saved else [
            {"start_step": 0, "end_step": step, "unrecorded": True}]
        if "end_step" not in entries[-1]:
            entries[-1].update(end_step=step, lost_after_checkpoint=True)
        return cls(entries)

    def open(self, step: int, device: str, **extra: Any) -> dict[str, Any]:
        """Start this process' session; ``extra``: the trainer's own fields (e.g. its engine's hash).
        ``cpu_isa``: torch's CPU kernels in this process (``AVX512``, ``AVX2``, ...): a run resumed on a CPU whose
        kernels differ continues on another trajectory (reproductions/senteval-blas-kernels-cpu-2026-11-30)."""
        import torch

        previous = next((entry for entry in reversed(self.entries) if entry.get("device")), None)
        session = {"started": round(time.time(), 1), "start_step": step, "device": device, "git_sha": git_sha(),
                   "cpu_isa": torch.backends.cpu.get_cpu_capability(), **extra}
        # sessions before 2026-11-30 recorded no ISA: compared by threads / card only
        with_isa = previous is not None and bool(previous.get("cpu_isa"))
        if previous is not None and _kernels(previous, with_isa) != _kernels(session, with_isa):
            # a SLURM job resubmitted onto another node type, a run moved between machines: valid, but no longer
            # the run one machine would have made, and nothing else would say so
            logging.getLogger(__name__).warning(
                "resumed at step %d on %s (torch %s kernels); the run's previous session ran on %s (%s): from here "
                "on other kernels round its steps, so it will not repeat bitwise a run made on either alone "
                "(train.json's timings.sessions name both)", step, device, session["cpu_isa"],
                previous["device"], previous.get("cpu_isa") or "kernels not recorded")
        self.entries.append(session)
        return session

    def resume_report(self, headline: str, more: Iterable[str] = ()) -> str:
        """What a resumed trainer prints first: ``headline``, then a line per earlier session and per ``more`` line
        (e.g. its earlier epochs), indented."""
        return "\n".join([f"{headline}; so far (train.json has it all):", *self.history_lines(),
                          *(f"  {line}" for line in more)])

    def history_lines(self) -> list[str]:
        """The earlier sessions, one line each, for a resumed trainer to print first: the workflow's log of a job
        (``> {log}``) is rewritten by every session, so without them it would show only the last one's output."""
        lines = []
        for number, entry in enumerate(self.entries, 1):
            steps = f"steps {entry.get('start_step', 0):,}→{entry['end_step']:,}" if "end_step" in entry else \
                f"from step {entry.get('start_step', 0):,}"
            if entry.get("unrecorded"):
                lines.append(f"  session {number}: {steps} (before sessions were recorded)")
                continue
            started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry["started"])) if "started" in entry else "?"
            lost = "died after its last checkpoint (its later steps were redone)"
            how = (f"stopped by {entry['stopped_by']}" if entry.get("stopped_by") else
                   lost if entry.get("lost_after_checkpoint") else "ended" if "end_step" in entry else "open")
            sha = str(entry.get("git_sha") or "?")[:10]
            lines.append(f"  session {number}: {steps}, started {started} on {entry.get('device', '?')} at {sha}; "
                         f"{how}")
        return lines

    def close(self, step: int, stopped_by: str | None = None) -> None:
        """End the open session at ``step`` (``stopped_by``: SIGTERM, SIGINT, max_minutes, failure); a closed one
        stays as it was (the last step's checkpoint closes it before the run's end is written)."""
        session = self.entries[-1] if self.entries else None
        if session is None or "end_step" in session:
            return
        session.update(ended=round(time.time(), 1), end_step=step)
        if stopped_by:
            session["stopped_by"] = stopped_by


def _kernels(session: dict[str, Any], with_isa: bool) -> tuple[Any, ...]:
    """What decides a session's rounding: on a CPU torch's thread count and (``with_isa``) vector ISA (the core count
    does not matter), on a GPU the card."""
    device = str(session["device"])
    if not device.startswith("cpu:"):
        return (device,)
    return ("cpu", device.rsplit(":", 1)[-1], session.get("cpu_isa") if with_isa else None)


class ProgressFile:
    """A running trainer's ``progress.json``: ``{global_step, total_steps, steps_per_second, updated_unix}``,
    rewritten every ``every_s`` seconds of training (~0.2 ms a write), the rate over the last interval. The first
    mark is taken at the session's first :meth:`update` (after its first step), so start-up (imports, kernel
    compiles) never enters the rate. ``python -m strae.report.progress eta`` reads it."""

    every_s = 10.0

    def __init__(self, run_dir: Path, total_steps: int):
        self.path, self.total_steps = Path(run_dir) / PROGRESS_FILE, total_steps
        self.mark: tuple[float, int] | None = None  # (monotonic time, step) of the last write or the first update

    def update(self, step: int) -> None:
        now, mark = time.monotonic(), self.mark
        if mark is not None and now - mark[0] < self.every_s:
            return
        self.mark = (now, step)
        if mark is not None:
            write_json(self.path, {"global_step": step, "total_steps": self.total_steps,
                                   "steps_per_second": (step - mark[1]) / (now - mark[0]),
                                   "updated_unix": time.time()})


STALE_TEMP_S = 600.0  # a checkpoint temp file older than this was left by a killed writer


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """``state`` to ``path`` atomically and on disk before the rename (a host crash right after must not leave a
    truncated checkpoint under the real name); a temp file an earlier writer of the same file left when it was
    killed mid-write (~150 MB for a checkpoint with Adam's state) is removed first."""
    import torch

    for stale in Path(path).parent.glob(f".{Path(path).name}.*.pt.tmp"):
        # older than any write takes (a checkpoint is ~0.4 s): a concurrent writer's own temp file is left alone
        with contextlib.suppress(FileNotFoundError):
            if time.time() - stale.stat().st_mtime > STALE_TEMP_S:
                stale.unlink()
    with atomic_path(path, suffix=".pt") as tmp:
        with open(tmp, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())


def load_checkpoint(path: Path, remedy: str = "delete it to start over") -> dict[str, Any]:
    """A checkpoint, loaded to the CPU whatever device wrote it: the RNG states inside must stay CPU ByteTensors
    (torch.set_rng_state refuses CUDA tensors), and load_state_dict moves weights and optimizer state to the
    model's device anyway. ``remedy``: what the error for an unreadable file tells the user to do."""
    return _torch_load(path, path, remedy)


def _torch_load(source: Any, path: Path, remedy: str) -> dict[str, Any]:
    import torch

    # Our own file with numpy/python RNG states inside: a full (trusted) unpickle is needed.
    try:
        return torch.load(source, map_location="cpu", weights_only=False)
    except Exception as error:  # any unreadable file is the same user-facing problem
        raise SystemExit(f"{path}: unreadable checkpoint ({error}); {remedy}") from error


def checkpoint_to_export(run_dir: Path, remedy: str = "has this run started?") -> tuple[dict[str, Any], str, Path]:
    """The checkpoint ``--export-checkpoint`` turns into a loadable run directory (an error when there is none):
    its state, the sha256 of the very bytes that state was loaded from (the trainer may replace the file while an
    export reads it: hashing the file apart from loading it could name another checkpoint), and its path."""
    path = Path(run_dir) / CHECKPOINT_FILE
    if not path.exists():
        raise SystemExit(f"{path}: no checkpoint to export ({remedy})")
    # one open file, hashed then loaded: save_checkpoint replaces checkpoint.pt by a rename, never in place, so this
    # handle reads one version whatever lands at the path meanwhile (and no second copy of it is held in memory)
    with open(path, "rb") as handle:
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        digest = digest.hexdigest()
        handle.seek(0)
        state = _torch_load(handle, path, "is the run's disk full, or was it killed mid-write?")
    return state, digest, path


def snapshot_block(checkpoint: Path, sha256: str, command: str, **position: Any) -> dict[str, Any]:
    """train.json's ``snapshot`` block of an exported mid-training state (its status stays 'running');
    ``sha256``: the checkpoint's bytes the export loaded (:func:`checkpoint_to_export`)."""
    return {"source": str(checkpoint.resolve()), "source_sha256": sha256, **position,
            "note": f"mid-training export ({command} --export-checkpoint); not a finished run"}


# ----------------------------------------------------------------------------------------------- outputs
def load_weights_file(path: Path, weights_only: bool = True) -> Any:
    """A run's ``model.pt`` on the CPU; a truncated or foreign file is named (a user-facing problem, not a
    traceback). ``weights_only=False`` only for the project's own files that carry Python objects."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as error:  # noqa: BLE001 - whatever torch raises for a bad file, the remedy is the same
        raise SystemExit(f"{path}: cannot load ({str(error).splitlines()[0] if str(error) else error!r}); the "
                         "run's weights are damaged or not a run's: train the run again") from error


def save_weights(run_dir: Path, payload: dict[str, Any]) -> None:
    """``model.pt``: the final weights (and whatever the trainer's loader needs beside them)."""
    save_checkpoint(Path(run_dir) / MODEL_FILE, payload)


def copy_tokenizer(tokenizer: Path, run_dir: Path, sha256: str | None = None) -> None:
    """The run's own copy of its tokenizer (kept when it already is that file: ``sha256`` given and equal)."""
    dest = Path(run_dir) / TOKENIZER_FILE
    if sha256 is not None and dest.exists() and sha256_file(dest) == sha256:
        return
    with atomic_path(dest) as tmp:
        shutil.copyfile(tokenizer, tmp)


def invalidate_outputs(run_dir: Path) -> None:
    """A run that (re)starts training is not usable until it finishes: drop the completion mark first."""
    for name in (ENCODER_MANIFEST, MODEL_FILE):
        (Path(run_dir) / name).unlink(missing_ok=True)


def lock_run_dir(run_dir: Path, command: str):
    """Two trainers writing one run directory would interleave checkpoints: refuse the second one. The lock
    lasts as long as the returned handle (the caller keeps it until training ends)."""
    from strae.runtime import try_lock  # (imports torch: not at module level, for the light report tools)

    try:
        handle = try_lock(Path(run_dir) / LOCK_FILE, "w")
    except OSError as error:  # e.g. a filesystem without locks
        raise SystemExit(f"{run_dir}: cannot lock {LOCK_FILE} ({error}); run directories need a local filesystem "
                         "with flock") from None
    if handle is None:
        raise SystemExit(f"{run_dir}: another `{command}` process is training this run directory")
    return handle
