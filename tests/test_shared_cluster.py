"""Shared clusters: outputs readable by the group (umask respected), `--sdm conda` installs strae, and parsing
the Snakefile writes no files."""
from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest
import yaml

from strae.io import atomic_open, write_json

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def umask():
    """Run the test under a given umask and restore the old one afterwards."""
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_atomic_writes_respect_the_umask(tmp_path, umask, mask):
    umask(mask)
    write_json(tmp_path / "out.json", {"a": 1})
    with atomic_open(tmp_path / "sub" / "out.txt", "w", encoding="utf-8") as handle:
        handle.write("x\n")
    for path in (tmp_path / "out.json", tmp_path / "sub" / "out.txt"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, oct(path.stat().st_mode)
    # the same mode a plain open() gives, which is what users of a shared results/ expect
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert stat.S_IMODE(plain.stat().st_mode) == stat.S_IMODE((tmp_path / "out.json").stat().st_mode)


def test_a_failed_atomic_write_leaves_no_file_and_no_directory_it_made(tmp_path):
    """A write that fails (a download cut off) removes its temporary file and the directories it created for it;
    a directory that existed, or that another file now holds, stays."""
    from strae.io import atomic_path

    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "kept" / "new" / "deeper" / "file.bin") as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("cut off")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "a" / "b" / "file.bin"):
            (tmp_path / "a" / "other.txt").write_text("another writer's")
            raise RuntimeError("cut off")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/other.txt", "kept"]


def test_an_atomic_write_makes_its_directory_again_when_another_writers_failure_removed_it(tmp_path, monkeypatch):
    """Two writers into a new directory: the one whose write failed removes the (empty) directory it made, between
    the other's mkdir and its temporary file; the other makes it again instead of failing."""
    import tempfile

    from strae import io

    real, removed = tempfile.mkstemp, []

    def racing(*args, dir, **kwargs):
        if not removed:  # the other writer's cleanup, once
            removed.append(Path(dir))
            Path(dir).rmdir()
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(io.tempfile, "mkstemp", racing)
    with io.atomic_path(tmp_path / "new" / "file.txt") as tmp:
        tmp.write_text("whole")
    assert removed == [tmp_path / "new"] and (tmp_path / "new" / "file.txt").read_text() == "whole"


def _pip_lines(env_file: Path) -> list[str]:
    spec = yaml.safe_load(env_file.read_text(encoding="utf-8"))
    return [str(line).strip() for dep in spec["dependencies"] if isinstance(dep, dict) for line in dep["pip"]]


def test_rule_env_installs_the_project_from_the_repository():
    """conda runs the pip section in the env file's directory; Snakemake creates rule envs from a copy of the file in
    <workdir>/.snakemake/conda/. From both directories the `-e` path must reach this repository's pyproject.toml."""
    env_file = REPO_ROOT / "workflow" / "envs" / "strae.yaml"
    editable = [line for line in _pip_lines(env_file) if line.startswith("-e ")]
    assert len(editable) == 1, f"{env_file}: expected one `-e <repo>` pip line, found {editable}"
    target = editable[0][3:].strip()
    assert not os.path.isabs(target), "an absolute path would only work on the machine that wrote it"
    for env_dir in (env_file.parent, REPO_ROOT / ".snakemake" / "conda"):
        root = (env_dir / target).resolve()
        pyproject = root / "pyproject.toml"
        assert pyproject.exists(), f"-e {target} from {env_dir} points at {root}, which has no pyproject.toml"
        assert tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"] == "strae"


def test_snakemake_conda_prefix_is_where_the_relative_path_assumes():
    """The rule env's `-e ../..` relies on Snakemake's default env directory being <workdir>/.snakemake/conda."""
    import inspect

    from snakemake.persistence import PersistenceBase as Persistence

    source = inspect.getsource(Persistence.__init__)
    assert 'os.path.abspath(".snakemake")' in source
    assert 'self.conda_env_path = os.path.join(self.path, "conda")' in source


def test_rules_use_the_env_that_installs_strae():
    text = "".join(path.read_text(encoding="utf-8") for path in (REPO_ROOT / "workflow" / "rules").glob("*.smk"))
    envs = {line.strip().strip('"') for line in text.splitlines() if line.strip().startswith('"../envs/')}
    assert envs == {"../envs/strae.yaml"}, envs


@pytest.mark.slow
def test_dry_run_writes_no_files(tmp_path):
    from test_workflow import copy_workdir, snakemake

    (tmp_path / "wd").mkdir()
    workdir = copy_workdir(tmp_path / "wd")
    before = {p.relative_to(workdir) for p in workdir.rglob("*") if ".snakemake" not in p.parts}
    result = snakemake(workdir, "-n", "--cores", "2", "results/table2.csv", "--configfile", "config/quick.yaml")
    assert result.returncode == 0, result.stderr + result.stdout
    after = {p.relative_to(workdir) for p in workdir.rglob("*") if ".snakemake" not in p.parts}
    assert after - before == set(), f"a dry-run wrote {sorted(map(str, after - before))}"
    assert not (workdir / "results" / "config.effective.yaml").exists()
