"""Evaluation tasks as data: read ``config/tasks.yaml``, pick a language's tasks, load pair files.

A task is one (name, variant) entry of ``config/tasks.yaml``; its pair file(s) are registry names resolved
through the data layer (``strae.data.fetch.fetch``), so a checksum-verified copy under ``resources/data/`` is
always what gets scored.

A language block may also declare its evaluation sets inline (``languages.<lang>.eval_sets.<name>``: the file as a
registry name, local ``path`` or ``url`` + ``sha256``, its ``format``, level, split and score range); its
``eval.<variant>`` lists then name either kind, and both become the same :class:`Task` (an inline set has
``origin == "inline"`` and its file spec in ``source``), scored and recorded the same way.

File formats (``format`` of a task; :data:`FORMATS`), each read by one function with errors naming the file, line
and the expected columns:

- ``mirror_csv`` (default): the data mirror's converted CSV, header ``sent1,sent2,score`` or ``word1,word2,score``.
- ``semrel2024``: SemRel-2024 as published (``PairID,Text,Score``; ``Text`` holds the two sentences separated by a
  newline, the second often with a stray leading space).
- ``sts_tsv``: STS-style tab-separated lines ``score<TAB>sentence1<TAB>sentence2`` (no header, no quoting).
- ``stsb_tsv``: the STS Benchmark release's ``sts-{train,dev,test}.csv`` (tab-separated, no header: genre, file,
  year, id, score, sentence1, sentence2, and on a few lines trailing source fields, which are ignored).
- ``word_pairs``: word-pair lists ``word1 word2 score``, tab- or comma-separated, with or without a header line.

The published formats' texts get the corpus' own line normalisation (:func:`strae.data.segment.clean_line`: BOM
removed, whitespace runs collapsed, ends stripped), so eval text and training text are treated alike whatever the
script; the encoder's tokenizer then normalises both the same way (lowercase, every Unicode digit -> 0).
"""
from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from strae import paths

DEFAULT_TASKS_FILE = "config/tasks.yaml"

VARIANTS = ("paper", "official")
LEVELS = ("word", "sentence")
AGGREGATIONS = ("single", "pooled")
HEADERS = {"word": ["word1", "word2", "score"], "sentence": ["sent1", "sent2", "score"]}
DEFAULT_FORMAT = "mirror_csv"
# format -> (levels it can hold, the expected columns as error messages state them)
FORMATS: dict[str, tuple[tuple[str, ...], str]] = {
    "mirror_csv": (LEVELS, "header sent1,sent2,score (sentence level) or word1,word2,score (word level)"),
    "semrel2024": (("sentence",), "header PairID,Text,Score; Text = the two sentences separated by a newline"),
    "sts_tsv": (("sentence",), "score<TAB>sentence1<TAB>sentence2 (no header)"),
    "stsb_tsv": (("sentence",), "genre<TAB>file<TAB>year<TAB>id<TAB>score<TAB>sentence1<TAB>sentence2[<TAB>...] "
                                "(no header; the STS Benchmark release's sts-*.csv)"),
    "word_pairs": (("word",), "word1,word2,score or word1<TAB>word2<TAB>score (optional header line)"),
}
# keys of an inline eval set that say where its file is (strae.data.fetch.fetch_source); sha256 goes with them
FILE_KEYS = ("registry", "path", "url")


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
    format: str = DEFAULT_FORMAT
    # inline sets (languages.<lang>.eval_sets): "inline" and the file spec ({path|url|registry, sha256?});
    # catalogue tasks (config/tasks.yaml): "catalogue" and None (the file is `registry`)
    origin: str = "catalogue"
    source: dict[str, Any] | None = None

    @property
    def file_spec(self) -> str | dict[str, Any]:
        """What the resolver is given: a registry name, or an inline set's file spec."""
        if self.source is None:
            return self.registry
        return self.source["registry"] if "registry" in self.source else dict(self.source)

    @property
    def data_id(self) -> str:
        """The file's name in provenance (``data_files``): registry name, or an inline set's url / path."""
        spec = self.file_spec
        return spec if isinstance(spec, str) else str(spec.get("url") or spec.get("path"))


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
    def concatenate(parts: list[PairSet]) -> PairSet:
        return PairSet(
            left=[text for part in parts for text in part.left],
            right=[text for part in parts for text in part.right],
            gold=np.concatenate([part.gold for part in parts]) if parts else np.zeros(0),
            gold_text=([text for part in parts for text in part.gold_text]
                       if parts and all(part.gold_text is not None for part in parts) else None),
        )


class TaskCatalog:
    """All tasks of ``config/tasks.yaml``, addressable by (name, variant)."""

    def __init__(self, tasks: list[Task], source: str = DEFAULT_TASKS_FILE, meta: dict[str, Any] | None = None):
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


def _parse_task_entries(entry: dict[str, Any], where: str) -> list[Task]:
    """The Task of each variant of one schema-valid entry (workflow/schemas/tasks.schema.yaml); the format is checked
    against the level here (a pairing JSON Schema cannot name)."""
    variants = [entry["variant"]] if isinstance(entry["variant"], str) else list(entry["variant"])
    level, score_range = entry["level"], entry["score_range"]
    subsets = tuple(Subset(name=str(sub["name"]), registry=str(sub["registry"]), rows=sub.get("rows"))
                    for sub in entry.get("subsets") or [])
    file_format = check_format(entry.get("format"), level, f"{where} ({entry['name']}): format")
    return [
        Task(
            name=str(entry["name"]),
            variant=variant,
            language=str(entry["language"]),
            level=level,
            registry=str(entry["registry"]),
            split=str(entry["split"]),
            score_range=(float(score_range[0]), float(score_range[1])),
            aggregation=entry["aggregation"],
            rows=entry.get("rows"),
            subsets=subsets,
            pooling=entry.get("pooling"),
            note=entry.get("note"),
            format=file_format,
        )
        for variant in variants
    ]


def check_format(file_format: str | None, level: str, where: str) -> str:
    """A task's ``format`` (absent -> ``mirror_csv``), checked against the known formats and the task's level."""
    file_format = DEFAULT_FORMAT if file_format in (None, "") else str(file_format)
    if file_format not in FORMATS:
        raise SystemExit(f"{where}: unknown format {file_format!r}; known: {', '.join(FORMATS)}")
    if level not in FORMATS[file_format][0]:
        raise SystemExit(f"{where}: format {file_format} holds {'/'.join(FORMATS[file_format][0])}-level pairs, "
                         f"not {level}-level ones")
    return file_format


def inline_set_errors(spec: Any, where: str) -> list[str]:
    """Problems of one ``languages.<lang>.eval_sets.<name>`` entry (empty when it is usable)."""
    if not isinstance(spec, dict):
        return [f"{where}: expected a mapping (file, format, level, split, score_range)"]
    errors = []
    given = [key for key in FILE_KEYS if spec.get(key)]
    if len(given) != 1:
        errors.append(f"{where}: give exactly one of {', '.join(FILE_KEYS)} (the file), got {given or 'none'}")
    if spec.get("url") and not spec.get("sha256"):
        errors.append(f"{where}.sha256: a url needs the file's sha256 (downloads are always verified; "
                      "`sha256sum FILE` of the file as published)")
    for key in ("level", "split", "score_range"):
        if spec.get(key) in (None, ""):
            errors.append(f"{where}.{key}: missing")
    level = spec.get("level")
    if level is not None and level not in LEVELS:
        errors.append(f"{where}.level: {level!r} is not one of {', '.join(LEVELS)}")
    elif level is not None:
        try:
            check_format(spec.get("format"), level, f"{where}.format")
        except SystemExit as error:
            errors.append(str(error))
    score_range = spec.get("score_range")
    if score_range is not None and not (isinstance(score_range, (list, tuple)) and len(score_range) == 2):
        errors.append(f"{where}.score_range: must be [min, max], got {score_range!r}")
    if spec.get("aggregation", "single") != "single":
        errors.append(f"{where}.aggregation: inline sets are one file (single); declare pooled tasks with subsets "
                      "in config/tasks.yaml")
    return errors


def inline_task(name: str, spec: dict[str, Any], language: str, variant: str, where: str) -> Task:
    """The :class:`Task` of an inline eval set (``languages.<language>.eval_sets.<name>``), checked."""
    errors = inline_set_errors(spec, where)
    if errors:
        raise SystemExit("; ".join(errors))
    source = {key: spec[key] for key in (*FILE_KEYS, "sha256") if spec.get(key)}
    return Task(
        name=str(name), variant=variant, language=language, level=spec["level"],
        registry=str(source.get("registry", "")), split=str(spec["split"]),
        score_range=(float(spec["score_range"][0]), float(spec["score_range"][1])), aggregation="single",
        rows=spec.get("rows"), note=spec.get("note"), format=check_format(spec.get("format"), spec["level"], where),
        origin="inline", source=source,
    )


def read_task_list(path: str | Path, key: str,
                   error: type[Exception] = SystemExit) -> tuple[Path, dict[str, Any], list[Any]]:
    """(resolved path, whole document, the ``key:`` list) of a task file (config/tasks.yaml holds both the zero-shot
    ``tasks:`` and the SentEval ``senteval_tasks:``); ``error`` names the file when it or the list is missing."""
    from strae.data.registry import resolve_project_file
    from strae.schemas import load_sheet

    path = resolve_project_file(path)
    if not path.exists():
        raise error(f"{path}: task file not found (pass --tasks-file or run from the repository root)")
    document = load_sheet(path, "tasks", error)  # workflow/schemas/tasks.schema.yaml: errors name file and key
    entries = document.get(key)
    if not isinstance(entries, list):
        raise error(f"{path}: expected a top-level list `{key}:`")
    return path, document, entries


def tasks_file(config: dict[str, Any]) -> str:
    """The task catalogue a config names (``data.tasks``), else ``config/tasks.yaml``: zero-shot tasks and
    ``senteval_tasks:`` alike."""
    return str((config.get("data") or {}).get("tasks") or DEFAULT_TASKS_FILE)


def load_tasks(path: str | Path = DEFAULT_TASKS_FILE) -> TaskCatalog:
    """Parse ``config/tasks.yaml``, validated against workflow/schemas/tasks.schema.yaml (errors name the file and
    the key, e.g. ``tasks.3.level``)."""
    path, document, entries = read_task_list(path, "tasks")
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


def language_tasks(catalog: TaskCatalog, config: dict[str, Any], language: str, variant: str,
                   only: list[str] | None = None, config_path: str = "config") -> list[Task]:
    """The tasks ``languages.<language>.eval.<variant>`` names (or exactly ``only``): each name is an inline set of
    the block (``eval_sets``) or a catalogue task (config/tasks.yaml) declared for this language and variant."""
    names = list(only) if only else language_task_names(config, language, variant, config_path)
    block = (config.get("languages") or {}).get(language) or {}
    inline = block.get("eval_sets") or {}
    tasks = []
    for name in names:
        if name in inline:
            if name in catalog.names():
                raise SystemExit(f"{config_path}: languages.{language}.eval_sets.{name}: the name is also a task of "
                                 f"{catalog.source}; rename the inline set (one name per evaluation set)")
            tasks.append(inline_task(name, inline[name], language, variant,
                                     f"{config_path}: languages.{language}.eval_sets.{name}"))
            continue
        if name not in catalog.names(variant) and inline:
            raise SystemExit(f"{config_path}: languages.{language}.eval.{variant}: {name!r} is neither an inline set "
                             f"(eval_sets: {', '.join(inline)}) nor a task of {catalog.source}")
        task = catalog.get(name, variant)
        if task.language != language:
            raise SystemExit(f"{catalog.source}: task {task.name!r} is declared for language {task.language!r}, "
                             f"not {language!r}")
        tasks.append(task)
    return tasks


def language_task_files(config: dict[str, Any], language: str, variants: list[str] | None = None,
                        config_path: str = "config") -> list[tuple[Task, str | dict[str, Any]]]:
    """Every file the language's task lists ``eval.<variant>`` read (every variant it lists, or ``variants``), as
    (task, registry name or inline file spec) pairs: a pooled task's subset files too. What `strae fetch --language`
    places and `strae bundle` carries."""
    catalog = load_tasks(tasks_file(config))
    lists = ((config.get("languages") or {}).get(language) or {}).get("eval") or {}
    files: list[tuple[Task, str | dict[str, Any]]] = []
    for variant in variants if variants is not None else list(lists):
        if not lists.get(variant):
            continue
        for task in language_tasks(catalog, config, language, variant, config_path=config_path):
            files.append((task, task.file_spec))
            files.extend((task, subset.registry) for subset in task.subsets)
    return files


# ----------------------------------------------------------------------------------------------- file readers
class EvalFileError(SystemExit):
    """A malformed evaluation file; the message names the file, the line and the format's expected columns."""


def _file_error(path: Path, line_no: int | None, file_format: str, problem: str) -> EvalFileError:
    where = f"{path}:{line_no}" if line_no is not None else str(path)
    return EvalFileError(f"{where}: {problem}; format {file_format} expects {FORMATS[file_format][1]}")


def _checked_rows(path: Path, reader, file_format: str):
    """``reader``'s rows; the csv module's own errors (a quote opened and never closed swallows the rest of the file
    into one field, past csv's field size limit) are named with the line where the row began."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise _file_error(path, start, file_format, f"{error}: a quote opened on this line and never closed?") \
                from None
        yield row


def _gold(path: Path, line_no: int, file_format: str, text: str) -> tuple[float, str]:
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        raise _file_error(path, line_no, file_format, f"score {text!r} is not a number") from None
    if value != value:  # NaN
        raise _file_error(path, line_no, file_format, "score is NaN")
    if not math.isfinite(value):  # float() reads "inf" / "-Infinity": no rank or Pearson survives one
        raise _file_error(path, line_no, file_format, f"score {text!r} is infinite")
    return value, text


def _clean(path: Path, line_no: int, file_format: str, text: str, what: str) -> str:
    from strae.data.segment import clean_line

    cleaned = clean_line(text)
    if not cleaned:
        raise _file_error(path, line_no, file_format, f"{what} is empty")
    return cleaned


def _read_semrel2024(path: Path, handle) -> tuple[list, list, list, list]:
    fmt = "semrel2024"
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise _file_error(path, 1, fmt, "the file is empty")
    header = [h.strip().lstrip("\ufeff") for h in header]
    if header != ["PairID", "Text", "Score"]:
        raise _file_error(path, 1, fmt, f"header {header!r}")
    left, right, gold, gold_text = [], [], [], []
    line_no = reader.line_num
    for row in _checked_rows(path, reader, fmt):
        start, line_no = line_no + 1, reader.line_num  # Text spans two physical lines: report where the row starts
        if not row:
            continue
        if len(row) != 3:
            raise _file_error(path, start, fmt, f"{len(row)} fields")
        sentences = row[1].split("\n")
        if len(sentences) != 2:
            raise _file_error(path, start, fmt, f"pair {row[0]!r}: Text holds {len(sentences)} line(s), not 2 "
                              "sentences separated by one newline")
        left.append(_clean(path, start, fmt, sentences[0], "the first sentence"))
        right.append(_clean(path, start, fmt, sentences[1], "the second sentence"))
        value, text = _gold(path, start, fmt, row[2])
        gold.append(value)
        gold_text.append(text)
    return left, right, gold, gold_text


def _read_sts_tsv(path: Path, handle, fmt: str = "sts_tsv") -> tuple[list, list, list, list]:
    # (score, sentence1, sentence2) field positions and the field count each layout allows (no quoting: STS text
    # has unbalanced quotes, so lines are split on tabs, never parsed as CSV)
    positions, allowed = {"sts_tsv": ((0, 1, 2), lambda n: n == 3), "stsb_tsv": ((4, 5, 6), lambda n: n >= 7)}[fmt]
    left, right, gold, gold_text = [], [], [], []
    for line_no, line in enumerate(handle, start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if not allowed(len(fields)):
            raise _file_error(path, line_no, fmt, f"{len(fields)} tab-separated fields")
        value, text = _gold(path, line_no, fmt, fields[positions[0]])
        left.append(_clean(path, line_no, fmt, fields[positions[1]], "sentence1"))
        right.append(_clean(path, line_no, fmt, fields[positions[2]], "sentence2"))
        gold.append(value)
        gold_text.append(text)
    return left, right, gold, gold_text


def _read_word_pairs(path: Path, handle) -> tuple[list, list, list, list]:
    fmt = "word_pairs"
    left, right, gold, gold_text = [], [], [], []
    lines = [(n, line.rstrip("\r\n")) for n, line in enumerate(handle, start=1)]
    lines = [(n, line) for n, line in lines if line.strip()]
    if not lines:
        raise _file_error(path, None, fmt, "no pairs")
    delimiter = "\t" if "\t" in lines[0][1] else ","
    for index, (line_no, line) in enumerate(lines):
        fields = next(csv.reader([line], delimiter=delimiter))
        if len(fields) != 3:
            raise _file_error(path, line_no, fmt, f"{len(fields)} {'tab' if delimiter == chr(9) else 'comma'}-"
                              "separated fields")
        if index == 0:
            try:
                float(fields[2])
            except ValueError:
                continue  # a header line (its score column is a name)
        value, text = _gold(path, line_no, fmt, fields[2])
        left.append(_clean(path, line_no, fmt, fields[0], "word1"))
        right.append(_clean(path, line_no, fmt, fields[1], "word2"))
        gold.append(value)
        gold_text.append(text)
    return left, right, gold, gold_text


_READERS = {"semrel2024": _read_semrel2024, "sts_tsv": _read_sts_tsv,
            "stsb_tsv": lambda path, handle: _read_sts_tsv(path, handle, "stsb_tsv"), "word_pairs": _read_word_pairs}


def read_pairs(path: str | Path, level: str, expected_rows: int | None = None,
               file_format: str = DEFAULT_FORMAT) -> PairSet:
    """Read a pair file in ``file_format`` (:data:`FORMATS`); ``expected_rows`` is checked when given."""
    path = Path(path)
    file_format = check_format(file_format, level, str(path))
    read = _READERS.get(file_format) or (lambda path, handle: _read_mirror_csv(path, handle, level))
    # one path for every format: a file that is not UTF-8, has no pairs or a NaN score is named with its line
    with open(path, encoding="utf-8-sig", newline="") as handle:
        try:
            left, right, gold, gold_text = read(path, handle)
        except UnicodeDecodeError as error:
            raise _file_error(path, None, file_format, f"not UTF-8 ({error})") from None
    if not left:
        raise _file_error(path, None, file_format, "no pairs")
    if expected_rows is not None and len(left) != expected_rows:
        raise SystemExit(f"{path}: {len(left)} pairs, but the task declares rows: {expected_rows}")
    return PairSet(left, right, np.asarray(gold, dtype=np.float64), gold_text)


def _read_mirror_csv(path: Path, handle, level: str) -> tuple[list, list, list, list]:
    """The data mirror's CSV: a header naming the level's columns, then text,text,score rows."""
    reader = csv.reader(handle)
    header = next(reader, None)
    if header != HEADERS[level]:
        raise _file_error(path, 1, DEFAULT_FORMAT, f"header {header!r} does not match a {level}-level task "
                          f"(expected {','.join(HEADERS[level])})")
    left, right, gold, gold_text = [], [], [], []
    line_no = reader.line_num
    for row in _checked_rows(path, reader, DEFAULT_FORMAT):
        line_no, start = reader.line_num, line_no + 1  # a quoted field may span lines: report where it starts
        if len(row) != 3:
            raise _file_error(path, start, DEFAULT_FORMAT, f"{len(row)} fields, not 3")
        value, text = _gold(path, start, DEFAULT_FORMAT, row[2])
        # the text itself stays as the mirror wrote it (cleaning it here could change published scores); only a
        # field that cleaning would empty is refused, as the other formats' _clean refuses it
        for column, field in zip(HEADERS[level][:2], row[:2]):
            _clean(path, start, DEFAULT_FORMAT, field, column)
        gold.append(value)
        gold_text.append(text)
        left.append(row[0])
        right.append(row[1])
    return left, right, gold, gold_text


def resolve_data_file(name: str, resources_dir: str | Path = paths.DEFAULT_RESOURCES,
                      registry: Any = None) -> Path:
    """Registry name -> checksum-verified local path, via the data layer (resources -> mirror -> upstream)."""
    from strae.data.fetch import fetch

    return Path(fetch(name, resources_dir=resources_dir, registry=registry))


def make_resolver(
    resources_dir: str | Path = paths.DEFAULT_RESOURCES, registry_path: str | Path | None = None
) -> Callable[[str | dict[str, Any]], Path]:
    """A ``name or file spec -> path`` function that parses the registry once (not once per file).

    A registry name goes through ``fetch``; an inline set's file spec (``{path|url, sha256?}``) through
    ``fetch_source`` (a url is downloaded once into resources/data/external/ and checksum-verified)."""
    from strae.data.fetch import fetch_source
    from strae.data.registry import DEFAULT_REGISTRY, load_registry

    registry = load_registry(registry_path or DEFAULT_REGISTRY)

    def resolve(spec: str | dict[str, Any]) -> Path:
        if isinstance(spec, dict):
            return Path(fetch_source(spec, resources_dir=resources_dir, registry=registry))
        return resolve_data_file(spec, resources_dir=resources_dir, registry=registry)

    return resolve
