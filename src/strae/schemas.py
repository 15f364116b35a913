"""The data sheets' JSON Schemas (``workflow/schemas/<name>.schema.yaml``), applied where each sheet is loaded.

``config.yaml`` is validated by the Snakefile; ``tasks.yaml``, ``tables.yaml`` and ``registry.yaml`` by their
loaders through :func:`load_sheet`, so a CLI run by hand checks them exactly as the workflow does. An error names
the file and the key path (``config/tables.yaml: tables.selfstrae_table1.rows.0.setting: ...``).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from strae.io import project_root
from strae.yamlio import read_yaml

SCHEMA_DIR = Path("workflow") / "schemas"


class SheetError(SystemExit):
    """A data sheet that does not match its schema; the message names the file and every offending key."""


@functools.cache
def _validator(name: str):
    import jsonschema

    path = project_root() / SCHEMA_DIR / f"{name}.schema.yaml"
    schema = read_yaml(path, SheetError)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(document: Any, name: str) -> list[str]:
    """``key.path: message`` for every place ``document`` breaks schema ``name`` (empty when it is valid)."""
    errors = sorted(_validator(name).iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in error.absolute_path) or '(top level)'}: {error.message}" for error in errors]


def validate(document: Any, name: str, source: str | Path, error: type[SystemExit] = SheetError) -> Any:
    """``document`` unchanged, or ``error`` listing its schema errors under the file's name."""
    errors = schema_errors(document, name)
    if errors:
        shown = errors[:10] + ([f"... and {len(errors) - 10} more"] if len(errors) > 10 else [])
        raise error(f"{source}: does not match {SCHEMA_DIR / f'{name}.schema.yaml'}:\n  " + "\n  ".join(shown))
    return document


def load_sheet(path: str | Path, name: str, error: type[SystemExit] = SheetError) -> dict[str, Any]:
    """Read a YAML data sheet and validate it against schema ``name``; a missing file is an error naming it."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: file not found (run from the repository root or pass its path)")
    document = read_yaml(path, error)
    return validate(document if document is not None else {}, name, path, error)
