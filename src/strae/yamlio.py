"""YAML (and Snakemake's JSON-or-YAML config files) read strictly: safe_load's result, but a key given twice in one
mapping is an error naming both lines (safe_load keeps the later silently), and a file that is not UTF-8 or not YAML is
named. Its own module, importing nothing of strae: the model engine (strae.recipes) uses it and an export carries the
engine's closure (strae.export)."""
from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import yaml


def read_yaml(path: str | os.PathLike, error: type[BaseException] = SystemExit) -> Any:
    """A YAML file (config, overlay, data sheet, recipes, schema), refusing what yaml.safe_load lets through
    silently: a key given twice in one mapping (the later value would replace the earlier, e.g. a second ``data:``
    block dropping the first); a file that is not UTF-8 or not YAML is ``error`` naming the file (and line)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError as problem:
        raise error(f"{path}: not a UTF-8 text file ({problem})") from None
    except _DuplicateKey as problem:
        raise error(f"{path}:{problem}") from None
    except yaml.YAMLError as problem:
        raise error(f"{path}: not valid YAML ({problem})") from None


def read_config_file(path: str | os.PathLike, error: type[BaseException] = SystemExit) -> Any:
    """A config file as Snakemake reads ``--configfile``: JSON first, else YAML (tab-indented JSON is not YAML), a
    key given twice in one object refused in either."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle, object_pairs_hook=lambda pairs: _unique_pairs(pairs, path, error))
    except (json.JSONDecodeError, UnicodeDecodeError):  # not JSON (or not UTF-8: read_yaml names it)
        return read_yaml(path, error)


def _unique_pairs(pairs: list[tuple[str, Any]], path: str | os.PathLike, error: type[BaseException]) -> dict:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise error(f"{path}: key {twice[0]!r} given twice in one object: the later value would silently replace the "
                    "earlier one; merge the two")
    return dict(pairs)


class _DuplicateKey(yaml.YAMLError):
    """``LINE: message``."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load's loader, refusing a key given twice in one mapping. Checked in flatten_mapping, on each mapping's
    own keys before any ``<<: *anchor`` merge rewrites them (merged keys may be overridden; a merge can reach a
    mapping before it is built, so its keys are checked once, the first time it is met)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node):
        if id(node) not in self._checked:
            self._checked.add(id(node))
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag in ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"):
                    continue
                key = self.construct_object(key_node)
                with contextlib.suppress(TypeError):  # an unhashable key: safe_load's own error follows
                    if key in seen:
                        raise _DuplicateKey(f"{key_node.start_mark.line + 1}: key {key!r} given twice (first on line "
                                            f"{seen[key] + 1}): the later value would silently replace the earlier "
                                            "one; merge the two")
                    seen[key] = key_node.start_mark.line
        super().flatten_mapping(node)
