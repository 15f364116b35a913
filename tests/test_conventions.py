"""Conventions a user meets first: one logging setup (--quiet/--verbose) for every command, `strae evaluate`
without --out, LICENSE + data licences, config/README.md."""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from strae import cli
from strae.data.registry import load_registry
from strae.evaluate import harness
from strae.io import write_json
from test_evaluate_harness import synthetic  # noqa: F401 - fixture

REPO_ROOT = Path(__file__).resolve().parents[1]
STRAE = Path(sys.executable).with_name("strae")


@pytest.fixture
def restore_logging(monkeypatch):
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    from tqdm import std

    init = std.tqdm.__dict__["__init__"]
    yield
    std.tqdm.__init__ = init
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    os.environ.pop("TQDM_DISABLE", None)


@pytest.mark.parametrize("argv, level, bars_off", [
    (["--quiet", "fetch"], logging.WARNING, True),
    (["-q", "fetch"], logging.WARNING, True),
    (["--verbose", "fetch"], logging.DEBUG, False),
    (["fetch"], logging.INFO, False),
])
def test_global_verbosity_configures_root_logger_and_tqdm(argv, level, bars_off, restore_logging, monkeypatch):
    seen = {}

    def fake_main(rest):
        from tqdm.auto import tqdm

        seen["level"] = logging.getLogger().level
        seen["rest"] = rest
        seen["bars_off"] = tqdm(range(1)).disable
        # a module's own basicConfig must not override the global choice
        logging.basicConfig(level=logging.INFO)
        seen["after_module_setup"] = logging.getLogger().level
        return 0

    import strae.data.fetch as fetch_module

    monkeypatch.setattr(fetch_module, "main", fake_main)
    assert cli.main(argv + ["eval/word/simlex999"]) == 0
    assert seen == {"level": level, "rest": ["eval/word/simlex999"], "bars_off": bars_off, "after_module_setup": level}


@pytest.mark.parametrize("argv", [["--help"], ["record", "--todo", "--targets"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(argv):
    """`strae record --todo --targets | head -1` (README, docs): the reader closes the pipe after one line; strae
    must end with status 0 and no traceback, whether its output was flushed before (long) or at exit (short)."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: every write hits a closed pipe
    try:
        proc = subprocess.run([sys.executable, "-m", "strae.cli", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=REPO_ROOT, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_quiet_and_verbose_together_is_an_error():
    with pytest.raises(SystemExit, match="contradict"):
        cli.main(["--quiet", "--verbose", "fetch"])


def test_usage_lists_the_global_options(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--quiet" in out and "--verbose" in out


def test_quiet_silences_info_messages_of_a_real_command(mirror, tmp_path):
    def run(*flags):
        return subprocess.run([str(STRAE), *flags, "fetch", "eval/word/wordsim353_sim", "--resources-dir",
                               str(tmp_path / f"res{len(flags)}")], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, STRAE_DATA_MIRROR=str(mirror)))

    loud, quiet = run(), run("--quiet")
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr + quiet.stderr
    assert "INFO" in loud.stderr and "copying from mirror" in loud.stderr
    assert "INFO" not in quiet.stderr and quiet.stdout.strip().endswith("wordsim353_sim.csv")


# ------------------------------------------------------------------------------------- evaluate --out default
def test_evaluate_without_out_writes_the_workflow_path_for_a_run_dir(synthetic, tmp_path, monkeypatch):  # noqa: F811
    run_dir = tmp_path / "somewhere" / "seed3"
    write_json(run_dir / "train.json", {"status": "failed", "failure_reason": "loss became NaN",
                                        "run": {"language": "xx", "model": "selfstrae", "setting": "ce_k4_u2",
                                                "seed": 3}})
    monkeypatch.chdir(tmp_path)
    assert harness.main(["--model", str(run_dir), "--lang", "xx", "--variant", "paper",
                         "--config", synthetic["config"], "--quiet"]) == 0
    written = tmp_path / "results/eval/xx/selfstrae/ce_k4_u2/seed3.paper.json"
    assert json.loads(written.read_text())["run"]["seed"] == 3


def test_default_out_path_for_builtin_and_options():
    assert harness.default_out_path("random-token", "en", "official", {}) == \
        Path("results/eval/en/random-token.official.json")
    assert harness.default_out_path("random-token", "en", "paper", {"stopwords": "remove", "device": "cpu"}) == \
        Path("results/eval/en/random-token@stopwords-remove.paper.json")


# ------------------------------------------------------------------------------------------- licences, docs
def test_the_code_sha_is_read_when_a_command_starts_and_kept(monkeypatch):
    """A result written long after its command started (a 40-minute evaluation, a training session) names the commit
    the command started on, not one made meanwhile: git_sha() is read once, and `strae` reads it before a command."""
    from strae import cli, io

    monkeypatch.setattr(io, "_CODE_SHA", [])
    answers = iter(["started-on", "committed-meanwhile"])
    monkeypatch.setattr(io, "_read_git_sha", lambda: next(answers))
    with pytest.raises(SystemExit):  # argparse's --help: the command reads nothing more, but it did start
        cli.main(["evaluate", "--help"])
    assert io._CODE_SHA == ["started-on"]  # read by the command's start, not by the asserts below
    assert io.git_sha() == "started-on" and io.git_sha() == "started-on"


def test_a_git_status_that_fails_leaves_the_sha_unchecked_not_clean(monkeypatch):
    import subprocess
    import types

    from strae import io

    def run(command, **_):  # rev-parse answers; status fails with no output (as with an unreadable index)
        failed = "status" in command
        return types.SimpleNamespace(returncode=128 if failed else 0, stdout="" if failed else "abc123\n")

    monkeypatch.setattr(subprocess, "run", run)
    assert io._read_git_sha() == "abc123-unchecked"


def test_every_records_scripts_parse():
    """A record's scripts (measure.sh, compare.py, ...) are how its numbers are made again: each must at least parse
    (bash -n, Python's compiler), so a record is never committed with a script that cannot run."""
    import subprocess

    shell = sorted((REPO_ROOT / "reproductions").rglob("*.sh"))
    python = sorted((REPO_ROOT / "reproductions").rglob("*.py"))
    assert shell and python
    for script in shell:
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{script.relative_to(REPO_ROOT)}: {result.stderr.strip()}"
    for script in python:  # a SyntaxError names the file and line
        compile(script.read_text(encoding="utf-8"), str(script), "exec")


def test_license_is_mit_as_pyproject_says():
    import tomllib

    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["license"] == "MIT"
    assert "DATA_LICENSES.md" in text  # the code licence points at the data licences, which differ


def test_data_licences_list_every_registry_entry_with_its_licence():
    from strae.data.registry import licence_markdown

    text = (REPO_ROOT / "DATA_LICENSES.md").read_text(encoding="utf-8")
    assert text == licence_markdown(load_registry(REPO_ROOT / "config" / "registry.yaml")), (
        "DATA_LICENSES.md is out of date; regenerate it (see strae.data.registry.licence_markdown)")
    rows = dict(re.findall(r"^\| `([^`]+)` \| [^|]+ \| ([^|]+) \|", text, re.M))
    registry = load_registry(REPO_ROOT / "config" / "registry.yaml")
    assert set(rows) == set(registry), sorted(set(rows) ^ set(registry))
    for name, entry in registry.items():
        assert rows[name].strip() == entry.license.replace("|", "/"), name


def test_config_readme_describes_every_top_level_key():
    import yaml

    readme = (REPO_ROOT / "config" / "README.md").read_text(encoding="utf-8")
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text(encoding="utf-8"))
    missing = [key for key in config if f"`{key}`" not in readme]
    assert not missing, f"config/README.md does not describe: {missing}"
    for name in ("config.yaml", "quick.yaml", "registry.yaml", "tasks.yaml", "tables.yaml"):
        assert name in readme


def test_the_workflow_imports_neither_torch_nor_scipy_stats():
    """Every snakemake call (a dry run, a `--summary`) imports the modules the rule files import at their top; torch
    (~2 s) or scipy.stats (~1 s) among them would be paid by each, and by every test that runs snakemake. The
    rule files' top-level imports are read from the files themselves, so a new one is checked too."""
    files = [REPO_ROOT / "Snakefile", *sorted((REPO_ROOT / "workflow/rules").glob("*.smk"))]
    imports = [line for path in files for line in path.read_text().splitlines()
               if re.match(r"(from \S+ )?import ", line) and not line.startswith("from snakemake")]
    assert any("strae" in line for line in imports), imports  # the pattern still finds them
    probe = "\n".join([*imports, "import sys", "print(sorted({'torch', 'scipy.stats'} & set(sys.modules)))"])
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", imports
