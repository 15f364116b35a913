"""`strae bundle` and tools/offline_unpack.sh: a synthetic language's prepared resources and evaluation files travel
to a fresh checkout ("the box") byte for byte, and the strae.paths functions find them there (CPU, offline).

The wheel step is left out (--no-wheels; it needs pip and an index); its planning is tested on a recorded
resolution, and the campaign's imports are checked against the packages the bundle carries or the box has.
"""
from __future__ import annotations

import ast
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from strae import bundle, paths
from strae.data.fetch import fetch, training_dev_sets
from strae.data.tokenized import TokenizedCorpus

REPO = Path(__file__).resolve().parents[1]
LANG = "xx"
# the checkout parts the box needs for unpacking (the tracked files travel with the bundle)
CHECKOUT = ["src", "config", "workflow", "tools", "pyproject.toml"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_tokenized(resources: Path) -> None:
    rng = np.random.default_rng(0)
    for split, n in (("train", 50), ("dev", 8)):
        lengths = rng.integers(4, 12, size=n)
        ids = rng.integers(0, 99, lengths.sum()).astype(np.int32)
        np.save(_mk(paths.tokenized_file(LANG, split, "ids.npy", resources)), ids)
        np.save(paths.tokenized_file(LANG, split, "offsets.npy", resources),
                np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        meta = {"vocab_size": 99, "pad_id": 99, "n_sentences": n, "n_tokens": int(lengths.sum())}
        paths.tokenized_file(LANG, split, "json", resources).write_text(json.dumps(meta), encoding="utf-8")


def _mk(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _prepare_machine(root: Path) -> dict[str, Path]:
    """A checkout with one prepared language, its registry/tasks sheets and a mirror holding its eval files."""
    resources = root / "resources"
    for split in paths.SPLITS:
        _mk(paths.corpus_file(LANG, split, resources)).write_text("a real sentence\n" * 20, encoding="utf-8")
    paths.corpus_meta(LANG, resources).write_text('{"corpus_source": "corpus"}', encoding="utf-8")
    _mk(paths.tokenizer_model(LANG, resources)).write_bytes(bytes(range(256)) * 40)
    paths.tokenizer_model(LANG, resources).with_suffix(".json").write_text('{"kind": "sentencepiece"}')
    # tokenised after the text, as on a real machine: Snakemake compares these mtimes on the box
    os.utime(paths.corpus_file(LANG, "train", resources), ns=(1_000_000_000_000_000_000,) * 2)
    _write_tokenized(resources)
    mirror = root / "mirror"
    files = {"eval/xx/words": "word1,word2,score\ncat,dog,3.5\n",
             "eval/xx/pooled": "sent1,sent2,score\na b,c d,1\ne f,g h,2\n",
             "eval/xx/pooled_a": "sent1,sent2,score\na b,c d,1\n", "eval/xx/pooled_b": "sent1,sent2,score\ne f,g h,2\n",
             "eval/xx/unused": "word1,word2,score\nx,y,1\n"}
    registry = {}
    for name, text in files.items():
        _mk(mirror / f"{name}.csv").write_text(text, encoding="utf-8")
        registry[name] = {"path": f"{name}.csv", "sha256": _sha(text.encode()), "kind": "eval", "language": LANG,
                          "license": "test", "source": {"url": "https://example.invalid/" + name}}
    tasks = {"tasks": [
        {"name": "words", "variant": "paper", "language": LANG, "level": "word", "registry": "eval/xx/words",
         "split": "test", "score_range": [0, 10], "aggregation": "single"},
        {"name": "pooled", "variant": "paper", "language": LANG, "level": "sentence", "registry": "eval/xx/pooled",
         "split": "test", "score_range": [0, 5], "aggregation": "pooled",
         "subsets": [{"name": "a", "registry": "eval/xx/pooled_a"}, {"name": "b", "registry": "eval/xx/pooled_b"}]},
        {"name": "unused", "variant": "official", "language": LANG, "level": "word", "registry": "eval/xx/unused",
         "split": "test", "score_range": [0, 10], "aggregation": "single"}]}
    config = {"data": {"resources_dir": "resources", "registry": "registry.yaml", "tasks": "tasks.yaml"},
              "languages": {LANG: {"eval": {"paper": ["words", "pooled"], "official": ["unused"]}}},
              "scale": {"seeds": [0], "eval_variants": ["paper"]},
              "experiments": {"one": {"model": "banyan", "languages": [LANG],
                                      "points": [{"objective": "ce", "functions": "diagonal",
                                                  "structure": "entangled", "k": 128, "u": 2}]},
                              "off": {"enabled": False, "model": "banyan", "languages": ["yy"], "points": []}}}
    for name, document in (("registry.yaml", registry), ("tasks.yaml", tasks), ("config.yaml", config)):
        (root / name).write_text(yaml.safe_dump(document), encoding="utf-8")
    return {"resources": resources, "mirror": mirror, "config": root / "config.yaml"}


def _write_bundle(root: Path, monkeypatch, *extra: str) -> int:
    monkeypatch.chdir(root)
    return bundle.main(["--config", "config.yaml", "--mirror", "mirror", "--no-wheels", *extra])


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "here"
    root.mkdir()
    _prepare_machine(root)
    assert _write_bundle(root, monkeypatch) == 0
    return root


def _stored_bytes(folder: Path, entry: dict) -> bytes:
    data = (folder / entry["stored"]).read_bytes()
    return lzma.decompress(data) if entry["mode"] == "xz" else data


def test_bundle_carries_the_campaign_files_byte_identical(here):
    out = here / "bundle"
    manifest = json.loads((out / bundle.MANIFEST).read_text())
    assert manifest["languages"] == [LANG]  # the enabled experiment's language; the disabled one's left out
    carried = {entry["path"] for entry in manifest["resources"]}
    expected = {paths.tokenized_file(LANG, s, x, "").as_posix() for s in paths.SPLITS for x in paths.TOKENIZED_SUFFIXES}
    expected |= {f"tokenizers/{LANG}.model", f"tokenizers/{LANG}.json", f"corpora/{LANG}/meta.json"}
    assert carried == expected
    for entry in manifest["resources"]:
        assert _stored_bytes(out, entry) == (here / "resources" / entry["path"]).read_bytes()
    assert (out / f"resources/tokenized/{LANG}/train.ids.npy.xz").exists()  # the big one compressed
    assert {e["path"] for e in manifest["standins"]} == {f"corpora/{LANG}/train.txt", f"corpora/{LANG}/dev.txt"}
    # the paper variant's files, pooled subsets included; the official-only file is not needed
    assert {e["name"] for e in manifest["eval"]} == {"eval/xx/words", "eval/xx/pooled", "eval/xx/pooled_a",
                                                      "eval/xx/pooled_b"}
    for entry in manifest["eval"]:
        assert entry["stored"].startswith(f"mirror/{entry['path']}")
        assert _stored_bytes(out, entry) == (here / "mirror" / entry["path"]).read_bytes()
    assert "wheels" not in manifest and not (out / "wheels").exists()
    assert manifest["sizes"]["total"] == bundle.folder_size(out) - (out / bundle.MANIFEST).stat().st_size


def test_env_sh_travels_in_the_bundle_and_finds_the_venv_beside_it(here, tmp_path):
    """A bundle copied over again after unpacking (a lending tool's carry) still has an env.sh that works."""
    env = {k: v for k, v in os.environ.items() if k not in ("STRAE_OFFLINE_VENV", "STRAE_DATA_MIRROR", "VIRTUAL_ENV")}
    source = f"source {here / 'bundle/env.sh'}"
    before = subprocess.run(["bash", "-c", f"{source} && echo sourced"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert before.returncode == 1 and "sourced" not in before.stdout
    assert "tools/offline_unpack.sh" in before.stderr and str(here / ".venv-offline") in before.stderr
    activate = here / ".venv-offline/bin/activate"  # what offline_unpack.sh's venv provides
    activate.parent.mkdir(parents=True)
    activate.write_text("export STRAE_TEST_VENV=active\n")
    after = subprocess.run(["bash", "-c", f'{source} && echo "$STRAE_TEST_VENV $STRAE_DATA_MIRROR $HF_HUB_OFFLINE"'],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == ["active", str(here / "bundle/mirror"), "1"]


def _box_from(here: Path, tmp_path: Path) -> Path:
    """A fresh checkout with the bundle copied in, as the box receives them."""
    box = tmp_path / "box"
    box.mkdir()
    for name in CHECKOUT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, box / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, box / name)
    for name in ("registry.yaml", "tasks.yaml"):
        shutil.copy2(here / name, box / name)
    shutil.copy2(here / "config.yaml", box / "config/config.yaml")  # the box's default config
    shutil.copytree(here / "bundle", box / "bundle")
    return box


def _run_unpack(box: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    # No wheels in this bundle: the fresh venv must see this interpreter's packages (yaml, jsonschema). When this
    # interpreter is itself a venv (as the H100 box's python3 was: /opt/torch/.venv), `venv --system-site-packages`
    # shows only the base Python's; the script's .pth file must make them visible, so no PYTHONPATH helps here.
    env = dict(os.environ, PYTHON=sys.executable, STRAE_OFFLINE_VENV=str(tmp_path / "venv"))
    env.pop("STRAE_DATA_MIRROR", None)
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(box / "tools/offline_unpack.sh"), "bundle"], cwd=box, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_unpack_restores_a_layout_strae_finds(here, tmp_path):
    box = _box_from(here, tmp_path)
    result = _run_unpack(box, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    src, dst = here / "resources", box / "resources"
    for split in paths.SPLITS:
        for suffix in paths.TOKENIZED_SUFFIXES:
            made = paths.tokenized_file(LANG, split, suffix, dst)
            original = paths.tokenized_file(LANG, split, suffix, src)
            assert made.read_bytes() == original.read_bytes()
            assert made.stat().st_mtime_ns == original.stat().st_mtime_ns
        text = paths.corpus_file(LANG, split, dst)  # an empty stand-in, dated like the original
        assert text.stat().st_size == 0
        assert text.stat().st_mtime_ns == paths.corpus_file(LANG, split, src).stat().st_mtime_ns
    corpus = TokenizedCorpus(paths.tokenized_dir(LANG, dst), "train")
    assert len(corpus) == 50 and np.array_equal(corpus[3], TokenizedCorpus(paths.tokenized_dir(LANG, src), "train")[3])
    assert paths.tokenizer_model(LANG, dst).read_bytes() == paths.tokenizer_model(LANG, src).read_bytes()
    for name in ("eval/xx/words", "eval/xx/pooled_b"):  # placed under resources/data: fetch needs no mirror now
        placed = fetch(name, resources_dir=dst, mirror=tmp_path / "nowhere", registry=box / "registry.yaml")
        assert placed == paths.data_file(f"{name}.csv", dst)
        assert placed.read_bytes() == (here / "mirror" / f"{name}.csv").read_bytes()
    env_sh = (box / "bundle/env.sh").read_text()
    assert f"STRAE_DATA_MIRROR=\"{box / 'bundle/mirror'}\"" in env_sh
    shim = subprocess.run([str(tmp_path / "venv/bin/strae"), "--version"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert shim.returncode == 0 and shim.stdout.strip()
    # the campaign runs on this interpreter's torch, wherever it lives (site-packages of a venv, a user site)
    import torch
    no_path = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    seen = subprocess.run([str(tmp_path / "venv/bin/python"), "-c", "import torch; print(torch.__file__)"],
                          capture_output=True, text=True, env=no_path)
    assert seen.returncode == 0 and seen.stdout.strip() == torch.__file__, seen.stderr

    again = _run_unpack(box, tmp_path)  # idempotent: everything found in place
    assert again.returncode == 0, again.stdout + again.stderr
    assert "present" in again.stdout and "restored" not in again.stdout


def test_unpack_names_a_python_this_box_lacks(here, tmp_path):
    # 2026-11-30's first call on an H200 set PYTHON to the bundling machine's pyenv path: bash's bare "No such
    # file or directory" from line 34 was all the call brought back
    box = _box_from(here, tmp_path)
    env = dict(os.environ, PYTHON=str(tmp_path / "elsewhere/python3.12"), STRAE_OFFLINE_VENV=str(tmp_path / "venv"))
    result = subprocess.run(["bash", str(box / "tools/offline_unpack.sh"), "bundle"], cwd=box, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"PYTHON={tmp_path / 'elsewhere/python3.12'}: cannot run it on this box" in result.stderr
    assert "leave PYTHON unset" in result.stderr
    assert not (tmp_path / "venv").exists()  # nothing made


def test_unpack_refuses_to_overwrite_a_different_file(here, tmp_path):
    resources = tmp_path / "res"
    changed = _mk(paths.tokenizer_model(LANG, resources))
    changed.write_bytes(b"another tokenizer")
    with pytest.raises(SystemExit, match="exists with other content"):
        bundle.unpack(here / "bundle", resources, str(here / "registry.yaml"))
    assert changed.read_bytes() == b"another tokenizer"


def test_over_the_limit_writes_no_manifest(here, monkeypatch):
    with pytest.raises(SystemExit, match="over the"):
        _write_bundle(here, monkeypatch, "--max-mib", "0.001")
    assert (here / "bundle/resources").exists() and not (here / "bundle" / bundle.MANIFEST).exists()
    with pytest.raises(SystemExit, match="incomplete"):
        bundle.unpack(here / "bundle", here / "elsewhere", "registry.yaml")


def test_missing_resources_are_named(here, monkeypatch):
    paths.tokenized_file(LANG, "dev", "ids.npy", here / "resources").unlink()
    with pytest.raises(SystemExit, match=f"tokenized/{LANG}/dev.ids.npy"):
        _write_bundle(here, monkeypatch)


def test_enabled_baselines_need_the_corpus_text(here, monkeypatch):
    config = yaml.safe_load((here / "config.yaml").read_text())
    config["baselines"] = {"glove": {"enabled": True, "languages": [LANG], "setting": "w", "seeds": [0]}}
    (here / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit, match="baselines.glove enabled.*--with-corpus-text"):
        _write_bundle(here, monkeypatch)
    assert _write_bundle(here, monkeypatch, "--with-corpus-text") == 0
    manifest = json.loads((here / "bundle" / bundle.MANIFEST).read_text())
    assert manifest["standins"] == []
    text = next(e for e in manifest["resources"] if e["path"] == f"corpora/{LANG}/train.txt")
    assert _stored_bytes(here / "bundle", text) == paths.corpus_file(LANG, "train", here / "resources").read_bytes()


def test_a_folder_that_is_not_a_bundle_is_kept(here, monkeypatch):
    (here / "mine").mkdir()
    (here / "mine/notes.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="not a strae bundle"):
        _write_bundle(here, monkeypatch, "--out", "mine")
    assert (here / "mine/notes.txt").read_text() == "keep me"


# ------------------------------------------------------------------------------------------------- wheels
def test_wheel_platforms_the_box_can_install():
    assert bundle._glibc_ok("nltk-3.10.4-py3-none-any.whl")
    assert bundle._glibc_ok("pyyaml-6.0.3-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    assert bundle._glibc_ok("numpy-2.5.5-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
    assert not bundle._glibc_ok("x-1.0-cp312-cp312-manylinux_2_34_x86_64.whl")
    assert not bundle._glibc_ok("x-1.0-cp312-cp312-macosx_11_0_arm64.whl")


def test_install_plan_holds_back_packages_whose_dependency_is_dropped(tmp_path):
    def item(name, version, requires):
        return {"metadata": {"name": name, "version": version, "requires_dist": requires}}

    items = [item("snakemake", "9.27.1", ["pulp<3.4,>=2.3.1", "pyyaml", "eido; extra == \"pep\""]),
             item("nltk", "3.10.4", ["click"]), item("PuLP", "3.3.2", []), item("click", "8.5.1", [])]
    plan = bundle._install_plan(items, ["snakemake==9.27.1", "nltk==3.10.4"], tmp_path, [], "3.12")
    assert plan["no_deps"] == ["snakemake==9.27.1"]
    assert (tmp_path / "requirements.txt").read_text().split() == ["nltk==3.10.4", "pyyaml"]
    assert (tmp_path / "no-deps.txt").read_text().split() == ["snakemake==9.27.1"]


def test_pins_come_from_pyproject():
    pins = bundle.pinned_requirements(list(bundle.CAMPAIGN_PACKAGES), REPO / "pyproject.toml")
    assert all(pin in _pyproject_dependencies() and "==" in pin for pin in pins)
    with pytest.raises(SystemExit, match="no pinned dependency"):
        bundle.pinned_requirements(["no-such-package"], REPO / "pyproject.toml")


def _pyproject_dependencies() -> list[str]:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


# The modules the box runs (strae train/evaluate/aggregate/report/measure/record/fetch/bundle and the workflow's
# own imports); everything they import, at module level or inside a function, must be carried or on the box.
CAMPAIGN_MODULES = ["strae.train", "strae.evaluate.harness", "strae.evaluate.aggregate", "strae.report.tables",
                    "strae.report.measure", "strae.report.record", "strae.data.fetch", "strae.bundle",
                    "strae.data.tokenized", "strae.plan"]
# imported by strae code the campaign never reaches, with where
NOT_ON_THE_PATH = {"matplotlib": "figures (strae figure; --extra-package matplotlib)",
                   "sklearn": "SentEval probes (multi-view paper)",
                   "threadpoolctl": "SentEval probes' fits side by side (scikit-learn's own dependency)",
                   "datasets": "HF fetch fallback (needs a network)",
                   "huggingface_hub": "HF fetch: the hub commit a paper_source is read at (needs a network)",
                   "sentence_transformers": "strae export", "baselines": "baselines (disabled in config.yaml)"}


def _imports(module: str) -> set[str]:
    path = REPO / "src" / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_campaign_imports_are_carried_or_on_the_box():
    from importlib.metadata import packages_distributions

    seen, todo, third_party = set(), list(CAMPAIGN_MODULES), set()
    while todo:
        module = todo.pop()
        if module in seen or not (REPO / "src" / module.replace(".", "/")).with_suffix(".py").exists() \
                and not (REPO / "src" / module.replace(".", "/") / "__init__.py").exists():
            continue
        seen.add(module)
        for name in _imports(module):
            top = name.split(".")[0]
            if top == "strae":
                todo.append(name)
            elif top not in sys.stdlib_module_names and top != "__future__":
                third_party.add(top)
    allowed = {bundle._canonical(p) for p in (*bundle.CAMPAIGN_PACKAGES, *bundle.BOX_PACKAGES)}
    distributions = packages_distributions()
    unknown = {top for top in third_party - set(NOT_ON_THE_PATH)
               if not {bundle._canonical(d) for d in distributions.get(top, [top])} & allowed}
    assert "nltk" in third_party and "sentencex" in third_party  # the scan sees function-level imports
    assert not unknown, f"imported on the campaign path but neither carried nor on the box: {unknown}"


def test_simcse_dev_set_travels_when_simcse_trains_there():
    # SimCSE's checkpoint selection reads STS-B dev during training: the offline box needs it beside the eval files
    spec = {"enabled": True, "languages": ["en"], "setting": "s", "init": "roberta"}
    assert training_dev_sets({"baselines": {"roberta_simcse": spec}}, ["en"]) == ["eval/stsb/stsb_dev"]
    assert training_dev_sets({"baselines": {"roberta_simcse": spec}}, ["es"]) == []
    assert training_dev_sets({"baselines": {"roberta_simcse": {**spec, "enabled": False}}}, ["en"]) == []


def test_default_limit_leaves_room_for_the_checkout(tmp_path):
    limit, why = bundle.default_max_mib(tmp_path)  # not a git checkout
    assert limit == bundle.DEFAULT_MAX_MIB and "not a git checkout" in why
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("bundle/\n")
    (repo / "big.bin").write_bytes(b"x" * 3 * 2**20)  # untracked, not ignored: it travels too
    (repo / "bundle").mkdir()
    (repo / "bundle" / "ignored.bin").write_bytes(b"x" * 2**20)  # the bundle itself is not the checkout's
    limit, why = bundle.default_max_mib(repo)
    assert abs(limit - (bundle.BOX_CARRY_MIB - 3.0 - 0.5)) < 0.01 and "checkout's 3.0 MiB" in why
    # a bundle written below the checkout's top (results/bundle) is measured against the whole checkout
    (repo / "results").mkdir()
    assert bundle.checkout_root(repo / "results") == repo.resolve() and bundle.checkout_root(tmp_path) == tmp_path
    assert bundle.default_max_mib(bundle.checkout_root(repo / "results"))[0] == limit
