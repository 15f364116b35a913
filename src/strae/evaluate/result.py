"""The evaluation result: one typed record written by `strae evaluate` (zero-shot and ``--suite senteval``) and read
by `strae aggregate` and the reports. The layout is documented in docs/CONTRACTS.md "Evaluation".

``EvalResult.to_disk(path)`` writes it atomically; ``EvalResult.from_disk(path)`` reads any readable schema version
and migrates it in memory (``schema_version`` keeps the version the file had; scores.csv reports it).

Schema history:
- 1: tasks ``{score, n_pairs, n_oov, ...}``;
- 2: per task ``scores`` (named metrics, strae.evaluate.metrics) and ``headline_metric``; top-level ``metrics``;
- 3: top-level ``evaluation: {label, options}``: the evaluation setting, i.e. the encoder options chosen for this
  evaluation (``stopwords=remove``) and their short label (the config's name for them, ``stopword_rm``; null for
  the run's plain evaluation). Files before 3 are read with the label of the directory they were written to: the
  workflow writes an option's results to ``SETTING@LABEL/``, which is how reports told them apart before labels
  were recorded; their ``options`` are null (not recorded; ``provenance.encoder_options`` has what the encoder got).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strae.io import read_json, write_json

EVAL_SCHEMA_VERSION = 3  # bump when the layout of evaluation JSON / scores.csv changes (history above)
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
# Encoder options that never change a vector (where it runs): not part of the evaluation setting.
RUNTIME_OPTIONS = ("device",)


def options_label(options: dict[str, Any]) -> str | None:
    """``key-value_key-value`` of the options that define an evaluation (sorted; runtime options left out), or None
    for none: the label of an option set the config does not name, and the `@` suffix of `strae evaluate`'s
    default output path."""
    chosen = sorted((key, value) for key, value in options.items() if key not in RUNTIME_OPTIONS)
    return "_".join(f"{key}-{value}" for key, value in chosen) or None


def table_setting(setting: str | None, label: str | None) -> str | None:
    """What report selectors (config/tables.yaml ``setting``) match: ``SETTING`` or ``SETTING@LABEL``.

    scores.csv rows of older records may already carry the label in their setting (see ``run_setting``); the label
    is not repeated then."""
    if not label or setting is None or setting.endswith(f"@{label}"):
        return setting
    return f"{setting}@{label}"


def run_setting(setting: str | None, label: str | None) -> str | None:
    """The run's own setting: ``setting`` without a trailing ``@LABEL`` of the evaluation's label. Evaluations of
    GloVe with stop-word removal written before 2026-11-25 named the option in the run's setting too
    (``SETTING@stopword_rm``); readers normalise them, so a run's plain and labelled evaluations share one setting
    and a re-measured evaluation replaces a carried one."""
    if label and setting is not None and setting.endswith(f"@{label}"):
        return setting[: -len(label) - 1]
    return setting


@dataclass(frozen=True)
class EvalSetting:
    """How the encoder was set up for this evaluation (beyond the run itself)."""

    label: str | None = None  # short name ("stopword_rm"); None = the run's plain evaluation
    options: dict[str, Any] | None = field(default_factory=dict)  # None: not recorded (schema < 3)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "options": None if self.options is None else dict(self.options)}

    @classmethod
    def from_dict(cls, block: dict[str, Any]) -> EvalSetting:
        return cls(label=block.get("label"), options=block.get("options"))

    @classmethod
    def legacy(cls, source: str | Path | None) -> EvalSetting:
        """The setting of a file written before schema 3: the label of its ``SETTING@LABEL/`` directory."""
        directory = Path(source).parent.name if source else ""
        label = directory.partition("@")[2]
        return cls(label=label or None, options=None)


@dataclass
class TaskResult:
    """One task's (or one subset's) scores. The typed fields are what readers use; ``details`` keeps how the task
    was scored (files and checksums, protocol, regularisation, timings, ...) as the writer recorded it."""

    score: float | None  # the headline (zero-shot: Spearman x 100; SentEval: accuracy / Pearson x 100)
    n_pairs: int | None = None
    n_oov: int | None = None
    level: str | None = None  # word | sentence (absent in a subset)
    split: str | None = None
    reason: str | None = None  # why score is None
    scores: dict[str, float | None] = field(default_factory=dict)  # named metrics (zero-shot, schema >= 2)
    subsets: dict[str, TaskResult] | None = None  # None in a subset's own record
    details: dict[str, Any] = field(default_factory=dict)

    _TYPED = ("score", "n_pairs", "n_oov", "level", "split", "reason")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in ("level", "split") if getattr(self, key) is not None}
        out.update(self.details)
        out.update(score=self.score, n_pairs=self.n_pairs, n_oov=self.n_oov)
        if self.reason is not None:
            out["reason"] = self.reason
        if self.scores:
            out["scores"] = dict(self.scores)
        if self.subsets is not None:
            out["subsets"] = {name: subset.to_dict() for name, subset in self.subsets.items()}
        return out

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> TaskResult:
        details = dict(record)
        typed = {key: details.pop(key) for key in cls._TYPED if key in details}
        scores = dict(details.pop("scores", None) or {})
        subsets = details.pop("subsets", None)
        if subsets is not None:
            subsets = {name: cls.from_dict(sub) for name, sub in subsets.items()}
        return cls(**typed, scores=scores, subsets=subsets, details=details)


def _is_score(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _check_scores(record: dict[str, Any], where: str) -> None:
    """A task's ``score``, its named ``scores`` and its subsets' must be numbers or null (NaN is a float): a string
    would reach scores.csv as text and the tables as a missing cell."""
    bad = [key for key in ("score", "n_pairs", "n_oov") if not _is_score(record.get(key))]
    bad += [f"scores.{key}" for key, value in (record.get("scores") or {}).items() if not _is_score(value)]
    if bad:
        raise SystemExit(f"{where}: {', '.join(bad)} not a number or null; not an evaluation JSON `strae evaluate` "
                         "wrote (edited by hand?)")
    for name, subset in (record.get("subsets") or {}).items():
        if not isinstance(subset, dict):
            raise SystemExit(f"{where}.subsets.{name}: not an object")
        _check_scores(subset, f"{where}.subsets.{name}")


@dataclass
class EvalResult:
    """One encoder evaluated on one language's tasks of one variant (or suite)."""

    variant: str  # paper | official | senteval
    language: str
    run: dict[str, Any]  # the encoder's run_info(): language, model, setting, seed, status, failure_reason, ...
    encoder: dict[str, Any]  # the encoder's describe()
    tasks: dict[str, TaskResult]
    planned_tasks: list[str]  # what was (or, for a failed run, would have been) scored
    provenance: dict[str, Any]
    evaluation: EvalSetting = field(default_factory=EvalSetting)
    metrics: dict[str, str] | None = None  # definitions of the named metrics in tasks' `scores`
    suite: str | None = None  # "senteval" for the linear-probe suite
    schema_version: int = EVAL_SCHEMA_VERSION  # the version the file had (written back as the current one)

    @property
    def failed(self) -> bool:
        return self.run.get("status") == "failed"

    @property
    def table_setting(self) -> str | None:
        return table_setting(self.run.get("setting"), self.evaluation.label)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": EVAL_SCHEMA_VERSION}
        if self.suite is not None:
            out["suite"] = self.suite
        out.update(variant=self.variant, language=self.language, run=dict(self.run),
                   evaluation=self.evaluation.to_dict(), encoder=dict(self.encoder),
                   planned_tasks=list(self.planned_tasks))
        if self.metrics is not None:
            out["metrics"] = dict(self.metrics)
        out["tasks"] = {name: task.to_dict() for name, task in self.tasks.items()}
        out["provenance"] = dict(self.provenance)
        return out

    @classmethod
    def from_dict(cls, document: dict[str, Any], source: str | Path | None = None) -> EvalResult:
        """``source``: the file it came from (error messages; the label of files before schema 3)."""
        where = source or "evaluation JSON"
        if not isinstance(document, dict):
            raise SystemExit(f"{where}: not an evaluation JSON (a {type(document).__name__}, not an object)")
        if "variant" not in document or not isinstance(document.get("tasks"), dict):
            # a run's train.json has a schema_version too
            raise SystemExit(f"{where}: not an evaluation JSON (no `variant` and `tasks`; a run's train.json?); "
                             "pass what `strae evaluate` wrote")
        bad = [name for name, record in document["tasks"].items() if not isinstance(record, dict)]
        if bad:
            raise SystemExit(f"{where}: tasks {bad[:3]} are not objects; not an evaluation JSON `strae evaluate` wrote")
        for name, record in document["tasks"].items():
            _check_scores(record, f"{where}: tasks.{name}")
        version = document.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise SystemExit(f"{where}: schema_version {version!r} is not one of "
                             f"{list(READABLE_SCHEMA_VERSIONS)}; re-run `strae evaluate`")
        evaluation = document.get("evaluation")
        setting = EvalSetting.from_dict(evaluation) if evaluation is not None else EvalSetting.legacy(source)
        run = dict(document.get("run") or {})
        if "setting" in run:
            run["setting"] = run_setting(run["setting"], setting.label)
        return cls(
            variant=document.get("variant"), language=document.get("language"),
            run=run, encoder=dict(document.get("encoder") or {}),
            tasks={name: TaskResult.from_dict(record) for name, record in (document.get("tasks") or {}).items()},
            planned_tasks=list(document.get("planned_tasks") or []),
            provenance=dict(document.get("provenance") or {}),
            evaluation=setting,
            metrics=document.get("metrics"), suite=document.get("suite"), schema_version=version,
        )

    def to_disk(self, path: str | Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def from_disk(cls, path: str | Path) -> EvalResult:
        path = Path(path)
        if not path.exists():
            raise SystemExit(f"{path}: evaluation JSON not found")
        return cls.from_dict(read_json(path), source=path)
