"""``strae evaluate --suite senteval --curve``: a run's SentEval scores along its training (the multi-view paper's
Figure 2: SICK-E and SICK-R "computed every hour during the training phase").

    strae evaluate --suite senteval --curve --model RUN --lang L --tasks SICK-E,SICK-R --out CURVE.json

The run must have kept its curve (``strae train-multiview --curve-every N``): ``train.json``'s ``curve`` block lists
the points (step, training sentences read by then, folder), the last one the finished run itself. Each point is
scored like any run (``strae.evaluate.senteval.evaluate``: same tasks, classifier and folds) and the curve JSON keeps
every point's whole evaluation beside its step, sentences and training seconds. The x axis is sentences, not hours:
the paper's hours were its GPU's (4.6M sentences in 33 h, ~139k an hour); the seconds are kept too.

Points are scored one after the other and the file so far is kept beside the output (``OUT.partial``): a stopped
evaluation continues from it, taking a point again only when its weights, tasks or protocol changed.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strae.io import provenance, read_json, sha256_file, sha256_json, write_json

KIND = "training_curve"
SCHEMA_VERSION = 1


def curve_points(run_dir: str | Path, finished_only: bool = True) -> tuple[list[dict[str, Any]], bool]:
    """The run's curve points in step order (``step``, ``sentences_trained``, ``train_seconds``, ``final``, ``path``:
    the folder to load) and whether the run has finished. Refused, naming what to do, for a run that kept no curve
    or lost a point; an unfinished run only when ``finished_only`` (else: its points so far, without the last)."""
    from strae.runs import ENCODER_MANIFEST, RunRecord

    run_dir = Path(run_dir)
    record = RunRecord.from_disk(run_dir)
    finished = (record is not None and record.status == "completed"
                and (run_dir / ENCODER_MANIFEST).exists())
    if record is None or (finished_only and not finished):
        raise SystemExit(f"{run_dir}: not a finished run (train.json status completed and encoder.json); a curve "
                         "is scored after training")
    block = record.blocks.get("curve")
    if not block:
        raise SystemExit(f"{run_dir / 'train.json'}: no `curve` block: the run kept no curve (only `strae "
                         "train-multiview --curve-every N` keeps one; the workflow: multiview.curve). Train it in a "
                         "new run directory, or delete this one to train it again")
    # train.json is written at the run's checkpoints, each after that step's point: every point up to its step is
    # on disk (a point past it may be, too)
    reached = record.timings.get("steps") or 0
    points, missing = [], []
    for point in block["points"]:
        path = run_dir / point["dir"]
        if not (path / ENCODER_MANIFEST).exists():
            if point["step"] <= reached:
                missing.append(point["step"])
            continue
        try:
            snapshot = read_json(path / "train.json").get("snapshot") or {}
        except FileNotFoundError:  # a point being rewritten by the trainer (a resumed run) as this reads
            continue
        if snapshot.get("global_step") != point["step"]:
            raise SystemExit(f"{path}: holds step {snapshot.get('global_step')}, train.json's curve says "
                             f"{point['step']}; delete the run directory to train it again")
        points.append({"step": point["step"], "sentences_trained": point["sentences_trained"],
                       "train_seconds": snapshot.get("train_seconds"), "final": False, "path": path})
    if missing:
        raise SystemExit(f"{run_dir}: the curve's points at steps {missing} are missing (the run was begun without "
                         "--curve-every, or they were deleted); delete the run directory to train it again")
    if finished:
        final = block["final"]
        points.append({"step": final["step"], "sentences_trained": final["sentences_trained"],
                       "train_seconds": record.timings.get("train_seconds"), "final": True, "path": run_dir})
    return points, finished


def _kept(partial: Path, protocol: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The points a stopped evaluation of the same protocol scored (``OUT.partial``), by step; nothing when it is
    unreadable or was made otherwise."""
    if not partial.exists():
        return {}
    try:
        document = read_json(partial)
        if document.get("protocol") != protocol:
            return {}
        return {point["step"]: point for point in document["points"]}
    except (SystemExit, KeyError, TypeError, ValueError):
        return {}


def evaluate_curve(run_dir: str | Path, language: str, tasks: Sequence[str] | None, out: str | Path, *,
                   config_path: str = "config/config.yaml", progress: bool = True, while_training: bool = False,
                   **options: Any) -> dict[str, Any] | None:
    """Score every point of the run's curve on ``tasks`` (None: the suite's default tasks of ``language``;
    ``options``: those of ``senteval.evaluate``), writing ``out`` (and ``out.partial`` as it goes, removed at the
    end). Returns the curve document. ``while_training``: a run still training has its points so far scored into
    ``out.partial`` only (None returned; as the paper's points were "computed every hour during the training
    phase"); the same command after the run has finished scores the rest and writes ``out``."""
    import json

    from strae.data.registry import load_config
    from strae.evaluate import senteval
    from strae.evaluate.tasks import tasks_file
    from strae.runs import RunRecord

    record = RunRecord.from_disk(run_dir)
    if record is not None and record.status == "failed":
        # as every evaluation of a failed run: recorded without scores (the workflow's tables and figures go on)
        document = {"schema_version": SCHEMA_VERSION, "kind": KIND, "suite": senteval.SUITE, "language": language,
                    "tasks": list(tasks) if tasks else None, "run": record.run_info(), "points": [],
                    "provenance": provenance(command=sys.argv, run_dir=str(run_dir), config=str(config_path))}
        write_json(out, document)
        print(f"{run_dir}: the run failed ({record.failure_reason}); recorded without points")
        return document
    points, finished = curve_points(run_dir, finished_only=not while_training)
    partial = Path(f"{out}.partial")
    # what a kept point must share with this evaluation besides its weights: the tasks, the options that change a
    # score (not the device, fit jobs or batch size) and the config and task definitions (which resolve what the
    # options leave open: classifier, folds, the task files)
    kept_options = {k: v for k, v in options.items() if k not in ("jobs", "batch_size", "encoder_options")}
    kept_options["encoder_options"] = {k: v for k, v in (options.get("encoder_options") or {}).items()
                                       if k != "device"}
    config = load_config(config_path)
    protocol = {"tasks": list(tasks) if tasks else None,
                "options": json.loads(json.dumps(kept_options, sort_keys=True, default=str)),
                # the parsed config, keys sorted: the same settings rewritten in another key order (the workflow's
                # effective config after an overlay is merged in) keep the points scored before
                "config_sha256": sha256_json(config),
                "tasks_file_sha256": sha256_file(options.get("tasks_path") or tasks_file(config))}
    kept = _kept(partial, protocol)
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": KIND, "suite": senteval.SUITE,
                                "language": language, "tasks": None, "protocol": protocol, "run": None,
                                "points": []}
    for number, point in enumerate(points, 1):
        try:
            weights = sha256_file(point["path"] / "model.pt")
        except FileNotFoundError as error:
            if finished:
                raise SystemExit(f"{point['path'] / 'model.pt'}: missing; delete the run directory to train it "
                                 "again") from error
            # a point the trainer is writing again (a resumed run) as this reads: left to the next command
            print(f"step {point['step']}: being rewritten; left to the next command", flush=True)
            continue
        previous = kept.get(point["step"])
        reused = previous is not None and previous["evaluation"]["encoder"].get("weights_sha256") == weights
        if reused:
            result = previous["evaluation"]
        else:
            result = senteval.evaluate(str(point["path"]), language, config_path=config_path, only=tasks or None,
                                       progress=progress, **options).to_dict()
        scores = {name: task["score"] for name, task in result["tasks"].items()}
        document["tasks"] = document["tasks"] or result["planned_tasks"]
        document["points"].append({key: point[key] for key in ("step", "sentences_trained", "train_seconds",
                                                                "final")}
                                  | {"scores": scores, "evaluation": result})
        # the run's labels (a point's status is running; the finished run's, last, is what the curve keeps)
        document["run"] = result["run"]
        print(f"[{number}/{len(points)}] step {point['step']} ({point['sentences_trained']} sentences"
              + (", scored before" if reused else "") + "): "
              + ", ".join(f"{name} {score:.2f}" for name, score in scores.items() if score is not None), flush=True)
        write_json(partial, document)
    if not finished:
        print(f"{run_dir}: still training; {len(points)} points scored into {partial}. The same command after the "
              f"run has finished scores the rest and writes {out}", flush=True)
        return None
    document["provenance"] = provenance(command=sys.argv, run_dir=str(run_dir), config=str(config_path))
    write_json(out, document)
    partial.unlink(missing_ok=True)
    return document


def load_curve(path: str | Path) -> dict[str, Any]:
    """A curve JSON ``evaluate_curve`` wrote; anything else is refused naming the file."""
    document = read_json(path)
    if not isinstance(document, dict) or document.get("kind") != KIND or not isinstance(document.get("points"), list):
        raise SystemExit(f"{path}: not a training-curve JSON (`strae evaluate --suite senteval --curve` writes one)")
    if document.get("schema_version") != SCHEMA_VERSION:
        raise SystemExit(f"{path}: schema_version {document.get('schema_version')!r}, not {SCHEMA_VERSION}; score "
                         "the curve again")
    return document
