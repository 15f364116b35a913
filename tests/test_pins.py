"""The conda env files must mirror pyproject.toml's pins exactly (STYLE.md: two pin files that drift apart).

pyproject.toml is the one source of truth; environment.yml (GPU users) and workflow/envs/*.yaml (per-rule envs)
list the same packages at the same versions under `pip:`. These tests fail on a missing package, a different
version, an unpinned entry, or a package pinned in an env file but not in pyproject.toml.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
ENV_FILES = [REPO_ROOT / "environment.yml", *sorted((REPO_ROOT / "workflow" / "envs").glob("*.y*ml"))]
# A pip requirement line like "torch==2.13.0" (extras allowed); anything else under pip: must be an option line.
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(?P<version>[^\s;]+)$")


def normalize(name: str) -> str:
    """PEP 503 name normalisation, so PyYAML == pyyaml == py_yaml."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(requirements: list[str], where: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for requirement in requirements:
        match = PIN.match(requirement.strip())
        assert match, f"{where}: {requirement!r} is not pinned exactly (use name==version)"
        pins[normalize(match["name"])] = match["version"]
    return pins


def pyproject_pins() -> tuple[dict[str, str], dict[str, str]]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = parse_pins(project["dependencies"], "pyproject.toml [project.dependencies]")
    extras: dict[str, str] = {}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        extras.update(parse_pins(requirements, f"pyproject.toml [project.optional-dependencies.{extra}]"))
    return runtime, extras


def env_file_pins(path: Path) -> tuple[str | None, dict[str, str]]:
    """(conda python spec, pip pins) of a conda env file; option lines (-e ., --extra-index-url ...) are skipped."""
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(spec, dict) and "dependencies" in spec, f"{path}: no 'dependencies' list"
    python = None
    pip_lines: list[str] = []
    for dependency in spec["dependencies"]:
        if isinstance(dependency, dict):
            assert set(dependency) == {"pip"}, f"{path}: unexpected mapping {dependency!r} in dependencies"
            pip_lines.extend(str(line) for line in dependency["pip"])
        elif str(dependency).startswith("python"):
            python = str(dependency)
    requirements = [line for line in pip_lines if not line.lstrip().startswith("-")]
    return python, parse_pins(requirements, str(path.relative_to(REPO_ROOT)))


def test_env_files_exist():
    names = [path.relative_to(REPO_ROOT).as_posix() for path in ENV_FILES]
    assert "environment.yml" in names and any(name.startswith("workflow/envs/") for name in names), names


@pytest.mark.parametrize("env_file", ENV_FILES, ids=lambda path: path.relative_to(REPO_ROOT).as_posix())
def test_env_file_mirrors_pyproject(env_file: Path):
    runtime, extras = pyproject_pins()
    python, pins = env_file_pins(env_file)
    missing = sorted(set(runtime) - set(pins))
    assert not missing, f"{env_file.name}: pinned in pyproject.toml but missing here: {missing}"
    allowed = {**runtime, **extras}
    for name, version in pins.items():
        assert name in allowed, (
            f"{env_file.name}: {name}=={version} is not pinned in pyproject.toml (add it there first)")
        assert version == allowed[name], (
            f"{env_file.name}: {name}=={version} but pyproject.toml pins {name}=={allowed[name]}")
    # The interpreter: Python 3.11 (the version the project is developed and tested on), within requires-python.
    assert python is not None and re.fullmatch(r"python\s*=+\s*3\.11(\.\*|\.\d+)?", python), (
        f"{env_file.name}: expected a conda 'python=3.11' dependency, found {python!r}")


KERNELS_EXTRA = {"triton"}


def test_environment_yml_has_dev_extras_and_installs_project():
    """The top-level env is what a GPU user activates to run the tests, so it carries the dev pins and the project."""
    _, extras = pyproject_pins()
    _, pins = env_file_pins(REPO_ROOT / "environment.yml")
    # Except the kernels extra (triton for CPU installs): the env's CUDA torch brings the triton it was built with.
    expected = {name: version for name, version in extras.items() if name not in KERNELS_EXTRA}
    assert {name: pins.get(name) for name in expected} == expected
    assert not KERNELS_EXTRA & set(pins), "environment.yml: leave triton to the CUDA torch build"
    spec = yaml.safe_load((REPO_ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip_lines = next(dep["pip"] for dep in spec["dependencies"] if isinstance(dep, dict))
    assert "-e ." in [line.strip() for line in pip_lines]


def test_pin_parser_rejects_drift():
    """The checks above rely on parse_pins; make sure it refuses loose specs rather than silently passing them."""
    with pytest.raises(AssertionError):
        parse_pins(["torch>=2.0"], "example")
    with pytest.raises(AssertionError):
        parse_pins(["numpy"], "example")
    assert parse_pins(["PyYAML==6.0.3"], "example") == {"pyyaml": "6.0.3"}
