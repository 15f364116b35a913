"""STYLE: languages are data. No Python file under src/ or baselines/ may name a configured language.

String constants (not docstrings or comments) are split into words; a word equal to a language code from
config/config.yaml or config/registry.yaml fails the test, and so does a language's English name anywhere in
code outside docstrings/comments (identifiers included).
"""
from __future__ import annotations

import ast
import re

import yaml

LANGUAGE_NAMES = {  # English names of the languages strae ships blocks or eval files for
    "english", "spanish", "afrikaans", "amharic", "hindi", "dutch",
}


def _codes(repo_root) -> set[str]:
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text(encoding="utf-8"))
    registry = yaml.safe_load((repo_root / "config/registry.yaml").read_text(encoding="utf-8"))
    codes = set(config["languages"]) | {b.get("segmenter") for b in config["languages"].values()}
    codes |= {e["language"] for e in registry.values()}
    # SemRel's three-letter codes as they appear in file names (eng_train, esp_dev, ...)
    codes |= {name.rsplit("/", 1)[-1].split("_")[0] for name in registry if name.startswith("eval/semrel/")}
    return {c for c in codes if c}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    ids.add(id(stmt.value))
    return ids


def test_no_language_names_in_code(repo_root):
    codes = _codes(repo_root)
    offenders = []
    files = sorted((repo_root / "src").rglob("*.py")) + sorted((repo_root / "baselines").rglob("*.py"))
    assert files
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError:
            continue  # a file mid-edit; its own tests report the syntax error
        skip = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                words = set(re.findall(r"[A-Za-z]+", node.value))
                hits = (words & codes) | {w for w in words if w.lower() in LANGUAGE_NAMES}
                if hits:
                    offenders.append(f"{path.relative_to(repo_root)}:{node.lineno}: {sorted(hits)} in {node.value!r}")
            elif isinstance(node, ast.Name) and node.id.lower() in LANGUAGE_NAMES:
                offenders.append(f"{path.relative_to(repo_root)}:{node.lineno}: identifier {node.id}")
    assert not offenders, "languages named in code (move them to config/config.yaml):\n" + "\n".join(offenders)
