"""The data registry (`config/registry.yaml`) and the language blocks of `config/config.yaml`.

A registry NAME is the mirror-relative path without its extension(s), e.g. ``eval/word/simlex999`` or
``corpora/am_enh_news_3.8M``. Each entry says where the file lives (in a mirror and under
``resources/data/``), its sha256, its upstream source, licence, language, kind and (eval CSVs) row count. A file that
is in no mirror and whose sha256 nobody could compute (SentEval's probing sets) is identified by its git blob id
(``git_blob_sha1``, what ``git hash-object`` prints) instead; every placement is verified against whichever it has.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strae.io import git_blob_sha1_file, project_root, sha256_file
from strae.yamlio import read_yaml

DEFAULT_REGISTRY = "config/registry.yaml"
DEFAULT_CONFIG = "config/config.yaml"
# eval = CSV pairs (strae.evaluate.tasks); eval_raw = a file in its source format with its own loader (SentEval);
# package = an installable wheel (the dependency parser)
KINDS = ("corpus", "eval", "tokenizer", "eval_raw", "package")


class RegistryError(SystemExit):
    """A registry/config problem the user can fix; the message names the file or key and what to do."""


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    path: str  # relative to the mirror and to resources/data/
    sha256: str | None  # None only for an entry identified by git_blob_sha1 (never in a mirror)
    kind: str
    language: str
    license: str
    source: dict[str, Any] = field(default_factory=dict)
    rows: int | None = None
    columns: tuple[str, ...] | None = None
    git_blob_sha1: str | None = None

    @property
    def checksum(self) -> tuple[str, str]:
        """(kind, expected value) that every placement of the file is verified against: its sha256 when known."""
        if self.sha256:
            return "sha256", self.sha256
        return "git blob sha1", str(self.git_blob_sha1)

    def file_checksum(self, path: str | Path) -> str:
        """The file's checksum of the entry's kind (compare with ``checksum[1]``)."""
        return sha256_file(path) if self.sha256 else git_blob_sha1_file(path)


def resolve_project_file(path: str | Path) -> Path:
    """A relative config path is looked up in the CWD first, then in the project root (editable install)."""
    path = Path(path)
    if path.is_absolute() or path.exists():
        return path
    candidate = project_root() / path
    return candidate if candidate.exists() else path


def load_registry(path: str | Path = DEFAULT_REGISTRY) -> dict[str, RegistryEntry]:
    """NAME -> entry, validated against workflow/schemas/registry.schema.yaml. Parsed once per process and file
    version (the workflow and every CLI that resolves several names share one parse); callers get their own dict."""
    resolved = resolve_project_file(path)
    if not resolved.exists():
        raise RegistryError(f"{path}: registry file not found; run from the repository root or pass --registry")
    stat = resolved.stat()
    return dict(_parse_registry(str(resolved.resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parse_registry(resolved: str, mtime_ns: int, size: int) -> dict[str, RegistryEntry]:
    """The parse behind load_registry, keyed by the file's identity and version (mtime, size)."""
    from strae.data.upstream import RECIPES
    from strae.schemas import load_sheet

    raw = load_sheet(resolved, "registry", RegistryError)
    entries: dict[str, RegistryEntry] = {}
    for name, item in raw.items():
        recipe = ((item["source"] or {}).get("derive") or {}).get("recipe")
        if recipe is not None and recipe not in RECIPES:
            raise RegistryError(f"{resolved}: entry {name!r} has source.derive.recipe {recipe!r}; "
                                f"use one of {sorted(RECIPES)}")
        if not item.get("sha256") and not item.get("git_blob_sha1"):
            raise RegistryError(f"{resolved}: entry {name!r} has neither sha256 nor git_blob_sha1; give its sha256")
        entries[name] = RegistryEntry(
            name=name,
            path=item["path"],
            sha256=item["sha256"].lower() if item.get("sha256") else None,
            git_blob_sha1=item["git_blob_sha1"].lower() if item.get("git_blob_sha1") else None,
            kind=item["kind"],
            language=item["language"],
            license=item["license"],
            source=dict(item["source"] or {}),
            rows=item.get("rows"),
            columns=tuple(item["columns"]) if item.get("columns") else None,
        )
    return entries


def read_config_layer(path: str | Path) -> dict[str, Any]:
    """One config file as written, unchecked: a base file or an overlay (``strae record`` merges them first)."""
    resolved = resolve_project_file(path)
    if not resolved.exists():
        raise RegistryError(f"{path}: config file not found; pass --config PATH")
    config = read_yaml(resolved, RegistryError) or {}
    if not isinstance(config, dict):
        raise RegistryError(f"{path}: not a config (its top level is not a mapping)")
    return config


def load_config(path: str | Path = DEFAULT_CONFIG) -> dict[str, Any]:
    """A config a command reads on its own (the workflow hands every command its merged, checked config), checked
    against workflow/schemas/config.schema.yaml for misspelt keys and wrong types, named here instead of met later
    as a traceback or a silent default. Missing keys are not errors here: a command's config may hold only what
    it reads (a language block and the data settings), and the command names a key it needs and lacks."""
    from strae.schemas import schema_errors

    config = read_config_layer(path)
    errors = [error for error in schema_errors(config, "config") if not error.endswith("is a required property")]
    if errors:
        shown = "; ".join(errors[:3]) + (f"; ... and {len(errors) - 3} more" if len(errors) > 3 else "")
        raise RegistryError(f"{path}: does not match workflow/schemas/config.schema.yaml ({shown})")
    return config


def language_block(config: dict[str, Any], lang: str, config_path: str | Path = DEFAULT_CONFIG) -> dict[str, Any]:
    languages = config.get("languages") or {}
    if lang not in languages:
        known = ", ".join(sorted(languages)) or "none"
        raise RegistryError(
            f"{config_path}: languages.{lang} is not defined (defined: {known}); add a language block for it"
        )
    return languages[lang]


def data_setting(config: dict[str, Any], key: str, config_path: str | Path = DEFAULT_CONFIG) -> Any:
    data = config.get("data") or {}
    if key not in data:
        raise RegistryError(f"{config_path}: data.{key} is missing; add it (see workflow/schemas/config.schema.yaml)."
                            " An overlay such as config/quick.yaml only changes the base config: give the merged one "
                            "(results/config.effective.yaml) or run the step through snakemake")
    return data[key]


def licence_markdown(registry: dict[str, RegistryEntry]) -> str:
    """DATA_LICENSES.md: every registered file with its licence and upstream (the code's MIT licence does not cover
    them). Regenerate with:

    python -c "from strae.data.registry import *; print(licence_markdown(load_registry()), end='')" > DATA_LICENSES.md
    """
    lines = [
        "# Data licences",
        "",
        "strae's code is MIT-licensed (`LICENSE`). The data files it fetches are not part of this repository and keep",
        "their own licences, listed here from `config/registry.yaml` "
        "(generated from it; a test keeps the two in step).",
        "Where the source states no licence, that is said; ask the dataset's authors before redistributing those.",
        "",
        "| name | kind | licence | upstream |",
        "|---|---|---|---|",
    ]
    for name in sorted(registry):
        entry = registry[name]
        source = entry.source
        upstream = source.get("repo") or source.get("hf_dataset") or source.get("url") or "not pinned"
        if source.get("commit"):
            upstream += f" @ {str(source['commit'])[:10]}"
        lines.append(f"| `{name}` | {entry.kind} | {entry.license.replace('|', '/')} | {upstream} |")
    return "\n".join(lines) + "\n"
