"""Evaluation tasks as data: read ``config/tasks.yaml``, pick a language's tasks, load pair files.

A task is one (name, variant) entry of ``config/tasks.yaml``; its pair file(s) are registry names resolved
through the data layer (``strae.data.fetch.fetch``), so a checksum-verified copy under ``resources/data/`` is
always what gets scored. Pair files are CSV with a header ``sent1,sent2,score`` or ``word1,word2,score``.
"""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

VARIANTS = ("paper", "official")
LEVELS = ("word", "sentence")
AGGREGATIONS = ("single", "pooled")
HEADERS = {"word": ["word1", "word2", "score"], "sentence": ["sent1", "sent2", "score"]}


@dataclasses.dataclass(frozen=True)
class Subset:
    """A part of a pooled task scored on its own as well (e.g. STS12 MSRpar)."""

    name: str
    registry: str
    rows: int | None = None


@dataclasses.dataclass(frozen=True)
class Task:
    """One (task name, variant) entry of ``config/tasks.yaml``."""

    name: str
    variant: str
    language: str
    level: str
    registry: str
    split: str
    score_range: tuple[float, float]
    aggregation: str
    rows: int | None = None
    subsets: tuple[Subset, ...] = ()
    pooling: str | None = None
    note: str | None = None


@dataclasses.dataclass
class PairSet:
    """Pairs of texts with gold scores, in file order."""

    left: list[str]
    right: list[str]
    gold: np.ndarray  # float64, shape (n,)
    # the gold scores as written in the file (surrounding whitespace removed): the papers' lexical protocol ranks
    # these strings (strae.evaluate.metrics.SPEARMAN_REFERENCE_STRINGS); None for pairs not read from a file
    gold_text: list[str] | None = None

    def __len__(self) -> int:
        return len(self.left)

    @staticmethod
    def concatenate(parts: list["PairSet"]) -> "PairSet":
        return PairSet(
            left=[text for part in parts for text in part.left],
            right=[text for part in parts for text in part.right],
            gold=np.concatenate([part.gold for part in parts]) if parts else np.zeros(0),
            gold_text=([text for part in parts for text in part.gold_text]
                       if parts and all(part.gold_text is not None for part in parts) else None),
        )


class TaskCatalog:
    """All tasks of ``config/tasks.yaml``, addressable by (name, variant)."""

    def __init__(self, tasks: list[Task], source: str = "config/tasks.yaml", meta: dict[str, Any] | None = None):
        self.source = source
        self.meta = meta or {}
        self._tasks: dict[tuple[str, str], Task] = {}
        for task in tasks:
            key = (task.name, task.variant)
            if key in self._tasks:
                raise SystemExit(f"{source}: task {task.name!r} is declared twice for variant {task.variant!r}")
            self._tasks[key] = task

    def __iter__(self):
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)

    def names(self, variant: str | None = None) -> list[str]:
        return sorted({t.name for t in self._tasks.values() if variant is None or t.variant == variant})

    def get(self, name: str, variant: str) -> Task:
        if variant not in VARIANTS:
            raise SystemExit(f"--variant {variant}: must be one of {', '.join(VARIANTS)}")
        try:
            return self._tasks[(name, variant)]
        except KeyError:
            known = ", ".join(self.names(variant)) or "(none)"
            raise SystemExit(
                f"{self.source}: no task {name!r} for variant {variant!r}; declared for {variant}: {known}"
            ) from None


def _require(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry or entry[key] in (None, ""):
        raise SystemExit(f"{where}: missing required key {key!r}")
    return entry[key]


def _parse_task_entries(entry: dict[str, Any], where: str) -> list[Task]:
    name = _require(entry, "name", where)
    where = f"{where} ({name})"
    variants = _require(entry, "variant", where)
    variants = [variants] if isinstance(variants, str) else list(variants)
    for variant in variants:
        if variant not in VARIANTS:
            raise SystemExit(f"{where}: variant {variant!r} is not one of {VARIANTS}")
    level = _require(entry, "level", where)
    if level not in LEVELS:
        raise SystemExit(f"{where}: level {level!r} is not one of {LEVELS}")
    aggregation = _require(entry, "aggregation", where)
    if aggregation not in AGGREGATIONS:
        raise SystemExit(f"{where}: aggregation {aggregation!r} is not one of {AGGREGATIONS}")
    score_range = _require(entry, "score_range", where)
    if not (isinstance(score_range, (list, tuple)) and len(score_range) == 2):
        raise SystemExit(f"{where}: score_range must be [min, max], got {score_range!r}")
    subsets = []
    for i, sub in enumerate(entry.get("subsets") or []):
        sub_where = f"{where} subsets[{i}]"
        subsets.append(
            Subset(name=str(_require(sub, "name", sub_where)), registry=str(_require(sub, "registry", sub_where)),
                   rows=sub.get("rows"))
        )
    if subsets and aggregation != "pooled":
        raise SystemExit(f"{where}: subsets are only meaningful with aggregation: pooled")
    return [
        Task(
            name=str(name),
            variant=variant,
            language=str(_require(entry, "language", where)),
            level=level,
            registry=str(_require(entry, "registry", where)),
            split=str(_require(entry, "split", where)),
            score_range=(float(score_range[0]), float(score_range[1])),
            aggregation=aggregation,
            rows=entry.get("rows"),
            subsets=tuple(subsets),
            pooling=entry.get("pooling"),
            note=entry.get("note"),
        )
        for variant in variants
    ]


def load_tasks(path: str | Path = "config/tasks.yaml") -> TaskCatalog:
    """Parse and validate ``config/tasks.yaml`` (clear errors naming the file and entry)."""
    from strae.data.registry import resolve_project_file

    path = resolve_project_file(path)
    if not path.exists():
        raise SystemExit(f"{path}: task file not found (pass --tasks-file or run from the repository root)")
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = document.get("tasks")
    if not isinstance(entries, list):
        raise SystemExit(f"{path}: expected a top-level list `tasks:`")
    tasks: list[Task] = []
    for i, entry in enumerate(entries):
        tasks.extend(_parse_task_entries(entry, f"{path}: tasks[{i}]"))
    meta = {k: v for k, v in document.items() if k != "tasks"}
    return TaskCatalog(tasks, source=str(path), meta=meta)


def language_task_names(config: dict[str, Any], language: str, variant: str, config_path: str = "config") -> list[str]:
    """Task names from ``languages.<language>.eval.<variant>`` of the main config."""
    languages = config.get("languages") or {}
    if language not in languages:
        raise SystemExit(
            f"{config_path}: no language block {language!r} under `languages:`; "
            f"known: {', '.join(languages) or '(none)'}"
        )
    names = ((languages[language] or {}).get("eval") or {}).get(variant)
    if not names:
        raise SystemExit(f"{config_path}: languages.{language}.eval.{variant} is missing or empty")
    return list(names)


def read_pairs(path: str | Path, level: str, expected_rows: int | None = None) -> PairSet:
    """Read a pair CSV (RFC 4180, UTF-8, header checked against ``level``)."""
    path = Path(path)
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != HEADERS[level]:
            raise SystemExit(
                f"{path}: header {header!r} does not match a {level}-level task (expected {HEADERS[level]})"
            )
        left, right, gold, gold_text = [], [], [], []
        for line_no, row in enumerate(reader, start=2):
            if len(row) != 3:
                raise SystemExit(f"{path}:{line_no}: expected 3 fields, got {len(row)}")
            try:
                gold.append(float(row[2]))
            except ValueError:
                raise SystemExit(f"{path}:{line_no}: score {row[2]!r} is not a number") from None
            gold_text.append(row[2].strip())
            left.append(row[0])
            right.append(row[1])
    if expected_rows is not None and len(left) != expected_rows:
        raise SystemExit(f"{path}: {len(left)} pairs, but config/tasks.yaml declares rows: {expected_rows}")
    return PairSet(left, right, np.asarray(gold, dtype=np.float64), gold_text)


def resolve_data_file(name: str, resources_dir: str | Path = "resources", registry: Any = None) -> Path:
    """Registry name -> checksum-verified local path, via the data layer (resources -> mirror -> upstream)."""
    from strae.data.fetch import fetch

    return Path(fetch(name, resources_dir=resources_dir, registry=registry))


def make_resolver(
    resources_dir: str | Path = "resources", registry_path: str | Path | None = None
) -> Callable[[str], Path]:
    """A ``name -> path`` function that parses the registry once (not once per file)."""
    from strae.data.registry import DEFAULT_REGISTRY, load_registry

    registry = load_registry(registry_path or DEFAULT_REGISTRY)
    return lambda name: resolve_data_file(name, resources_dir=resources_dir, registry=registry)
