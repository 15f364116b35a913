"""Registry + fetch: resolution order, checksum errors, atomic placement, unknown names, the real mirror."""
from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

from strae.data import fetch as fetch_mod
from strae.data.fetch import ChecksumError, FetchError, fetch, fetch_source
from strae.data.registry import RegistryEntry, load_registry

CONTENT = b"word1,word2,score\ncat,dog,7.5\n"


def _entry(name="eval/toy/pairs", path="eval/toy/pairs.csv", content=CONTENT, source=None):
    return RegistryEntry(name=name, path=path, sha256=hashlib.sha256(content).hexdigest(), kind="eval",
                         language="xx", license="test", source=source or {}, rows=1)


def _leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if p.is_file()] if directory.exists() else []


@pytest.fixture
def toy(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "eval/toy").mkdir(parents=True)
    (mirror / "eval/toy/pairs.csv").write_bytes(CONTENT)
    upstream = tmp_path / "upstream" / "pairs.csv"
    upstream.parent.mkdir()
    upstream.write_bytes(CONTENT)
    entry = _entry(source={"url": upstream.as_uri()})
    return {"mirror": mirror, "resources": tmp_path / "resources", "registry": {entry.name: entry},
            "entry": entry, "upstream": upstream}


def test_mirror_is_used_before_upstream_and_resources_before_mirror(toy, monkeypatch):
    downloads = []
    real_download = fetch_mod._download
    monkeypatch.setattr(fetch_mod, "_download", lambda url, tmp: downloads.append(url) or real_download(url, tmp))
    placed = fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])
    assert placed == toy["resources"] / "data/eval/toy/pairs.csv"
    assert placed.read_bytes() == CONTENT
    assert downloads == []  # the mirror had it

    # resources/ wins now: with the mirror and upstream gone, fetch still succeeds without any copy
    (toy["mirror"] / "eval/toy/pairs.csv").unlink()
    toy["upstream"].unlink()
    assert fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"],
                 registry=toy["registry"]) == placed
    assert downloads == []


def test_upstream_used_when_mirror_lacks_file(toy, monkeypatch):
    (toy["mirror"] / "eval/toy/pairs.csv").unlink()
    downloads = []
    real_download = fetch_mod._download
    monkeypatch.setattr(fetch_mod, "_download", lambda url, tmp: downloads.append(url) or real_download(url, tmp))
    placed = fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])
    assert downloads == [toy["upstream"].as_uri()]
    assert placed.read_bytes() == CONTENT


def test_checksum_mismatch_in_mirror_is_an_error_and_writes_nothing(toy):
    (toy["mirror"] / "eval/toy/pairs.csv").write_bytes(CONTENT + b"tampered,row,1\n")
    with pytest.raises(ChecksumError) as err:
        fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])
    message = str(err.value)
    assert "eval/toy/pairs" in message and "does not match the registry" in message
    assert _leftovers(toy["resources"]) == []


def test_corrupt_file_in_resources_is_reported_not_used(toy):
    target = toy["resources"] / "data/eval/toy/pairs.csv"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"garbage")
    with pytest.raises(ChecksumError, match="delete the file"):
        fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])


def test_missing_everywhere_without_network_names_the_file_and_the_fix(toy):
    (toy["mirror"] / "eval/toy/pairs.csv").unlink()
    entry = _entry(source={"url": "http://127.0.0.1:9/pairs.csv"})  # port 9: connection refused at once
    with pytest.raises(FetchError) as err:
        fetch(entry.name, resources_dir=toy["resources"], mirror=toy["mirror"], registry={entry.name: entry})
    message = str(err.value)
    assert "eval/toy/pairs.csv" in message and "STRAE_DATA_MIRROR" in message
    assert _leftovers(toy["resources"]) == []


def test_converted_upstream_is_not_downloaded(toy, monkeypatch):
    (toy["mirror"] / "eval/toy/pairs.csv").unlink()
    entry = _entry(source={"url": toy["upstream"].as_uri(), "transform": "tab-separated -> CSV"})
    monkeypatch.setattr(fetch_mod, "_download", lambda url, tmp: pytest.fail("must not download"))
    with pytest.raises(FetchError, match="needs a conversion"):
        fetch(entry.name, resources_dir=toy["resources"], mirror=toy["mirror"], registry={entry.name: entry})


def test_interrupted_copy_leaves_no_file_that_looks_complete(toy, monkeypatch):
    def half_then_crash(src_handle, dst_path):
        dst_path.write_bytes(src_handle.read(5))
        raise KeyboardInterrupt  # e.g. Ctrl-C or a kill in the middle of the copy

    monkeypatch.setattr(fetch_mod, "_copy_hashing", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        fetch("eval/toy/pairs", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])
    assert _leftovers(toy["resources"]) == []  # neither the final name nor the temp file


def test_unknown_name_is_one_clear_error(toy):
    with pytest.raises(FetchError, match="unknown data name"):
        fetch("eval/toy/nope", resources_dir=toy["resources"], mirror=toy["mirror"], registry=toy["registry"])


def test_fetch_source_local_path_and_url(tmp_path):
    local = tmp_path / "corpus.txt"
    local.write_text("one line\n", encoding="utf-8")
    assert fetch_source({"path": str(local)}, resources_dir=tmp_path / "res") == local
    with pytest.raises(ChecksumError):
        fetch_source({"path": str(local), "sha256": "0" * 64}, resources_dir=tmp_path / "res")
    sha = hashlib.sha256(local.read_bytes()).hexdigest()
    placed = fetch_source({"url": local.as_uri(), "sha256": sha}, resources_dir=tmp_path / "res")
    assert placed.read_bytes() == local.read_bytes() and placed.is_relative_to(tmp_path / "res" / "data")
    with pytest.raises(FetchError, match="add sha256"):
        fetch_source({"url": local.as_uri()}, resources_dir=tmp_path / "res")


# ---- the real registry against the real mirror --------------------------------------------------------------

DOCUMENTED_ROWS = {  # from the issue / the mirror's README and PROVENANCE (data rows, header excluded)
    "eval/sts/sts12_test": 3108, "eval/sts/sts13_test": 1500, "eval/sts/sts14_test": 3750,
    "eval/sts/sts15_test": 3000, "eval/sts/sts16_test": 1186, "eval/stsb/stsb_test": 1379,
    "eval/sick/sick_test": 4927, "eval/word/simlex999": 999, "eval/word/wordsim353_sim": 203,
    "eval/word/wordsim353_rel": 252, "eval/paper_variant/simlex_995": 995, "eval/semrel/eng_train": 5500,
    "eval/semrel/eng_test": 2600, "eval/semrel/eng_dev": 250, "eval/semrel/esp_dev": 140,
    "eval/semrel/esp_train": 1562, "eval/semrel/afr_test": 375, "eval/semrel/amh_test": 171,
    "eval/semrel/hin_test": 968, "eval/paper_variant/sts12_test": 3108, "eval/paper_variant/sick_test": 4927,
    "eval/stsb_multi_mt/stsb_es_test": 1379, "eval/stsb_multi_mt/stsb_nl_dev": 1500,
}


@pytest.fixture(scope="module")
def registry(repo_root):
    return load_registry(repo_root / "config/registry.yaml")


def test_registry_covers_every_mirror_file_with_its_checksum(registry, mirror):
    sums = {}
    for line in (mirror / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split(None, 1)
        sums[path.strip().removeprefix("./")] = digest
    data_files = {p: d for p, d in sums.items() if not p.endswith(".md")}
    by_path = {e.path: e for e in registry.values() if e.sha256}
    assert set(by_path) == set(data_files)
    # the entries without a sha256 are the files no mirror has (identified by their git blob id, fetched upstream)
    elsewhere = [e for e in registry.values() if not e.sha256]
    assert all(e.git_blob_sha1 and e.source.get("url") and e.path not in data_files for e in elsewhere), elsewhere
    for path, digest in data_files.items():
        entry = by_path[path]
        assert entry.sha256 == digest, path
        assert entry.source and (entry.source.get("url") or entry.source.get("hf_dataset")), path
        assert entry.license and entry.language, path
        # NAME = path without its extension(s), dots inside the name kept; files that differ only by their
        # extension (SentEval's rt-polarity.pos / .neg) keep the whole path as NAME
        assert entry.name == path or (path.startswith(entry.name + ".") and "/" not in path[len(entry.name):]), path


@pytest.mark.mirror
def test_every_eval_file_has_its_documented_row_count(registry, mirror):
    evals = {n: e for n, e in registry.items() if e.kind == "eval"}
    assert set(DOCUMENTED_ROWS) <= set(evals)
    for name, entry in evals.items():
        with open(mirror / entry.path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        assert rows[0] == list(entry.columns), name
        assert all(len(r) == 3 for r in rows[1:]), name
        assert len(rows) - 1 == entry.rows, name
        if name in DOCUMENTED_ROWS:
            assert entry.rows == DOCUMENTED_ROWS[name], name


@pytest.mark.mirror
def test_fetch_real_file_from_mirror(registry, mirror, tmp_path):
    placed = fetch("eval/word/wordsim353_sim", resources_dir=tmp_path, mirror=mirror, registry=registry)
    assert placed == tmp_path / "data/eval/word/wordsim353_sim.csv"
    assert placed.read_bytes() == (mirror / "eval/word/wordsim353_sim.csv").read_bytes()


def test_fetch_cli_unknown_name_exits_with_message(repo_root, capsys):
    with pytest.raises(SystemExit) as err:
        fetch_mod.main(["eval/word/does_not_exist", "--registry", str(repo_root / "config/registry.yaml")])
    assert "eval/word/does_not_exist" in str(err.value.code)


def test_fetch_all_places_what_it_can_and_lists_the_rest(toy, tmp_path, capsys):
    """`strae fetch --all` with only a mirror: the probing-style entry (no mirror copy, upstream unreachable) is
    listed at the end with exit 1; every other file is still placed."""
    import yaml

    registry = {
        "eval/toy/pairs": {"path": "eval/toy/pairs.csv", "sha256": toy["entry"].sha256, "kind": "eval",
                           "language": "xx", "license": "test", "source": {"url": "http://127.0.0.1:9/pairs.csv"}},
        "eval/toy/probe": {"path": "eval/toy/probe.txt", "git_blob_sha1": "2" * 40, "kind": "eval_raw",
                           "language": "xx", "license": "test", "source": {"url": "http://127.0.0.1:9/probe.txt"}},
    }
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(registry), encoding="utf-8")
    common = ["--registry", str(path), "--mirror", str(toy["mirror"]), "--resources-dir", str(toy["resources"])]
    assert fetch_mod.main(["--all"] + common) == 1
    out, err = capsys.readouterr()
    assert (toy["resources"] / "data/eval/toy/pairs.csv").read_bytes() == CONTENT
    assert "1 of 2 files could not be placed" in err and "eval/toy/probe" in err and "eval/toy/pairs" not in err
    # a file named on its own still fails at once
    with pytest.raises(FetchError, match="eval/toy/probe"):
        fetch_mod.main(["eval/toy/probe"] + common)


def test_fetch_all_brings_every_file_a_languages_runs_read(repo_root, mirror, tmp_path, monkeypatch):
    """`snakemake fetch_all` (`strae fetch --language`) places, besides corpus and tokenizer, every file a language's
    runs read, so an air-gapped copy of resources/ evaluates without a network: the evaluation sets of the variants
    the workflow scores (pooled tasks' subset files too), and for the multi-view paper's language its book corpus,
    parser wheel and SentEval transfer files (probing files only when Table 2 is asked for); inline sets keep their
    file spec. The two parts are the two fetch rules' (evaluation jobs wait for the first)."""
    import json

    import yaml

    from strae.data.registry import load_config
    from strae.evaluate.senteval import SentevalError, load_senteval_tasks
    from strae.evaluate.tasks import language_tasks, load_tasks

    monkeypatch.chdir(repo_root)
    config = load_config("config/config.yaml")
    files = fetch_mod.language_files("en", config)
    catalog = load_tasks("config/tasks.yaml")
    assert config["scale"]["eval_variants"] == ["paper"]
    for task in language_tasks(catalog, config, "en", "paper"):
        assert task.data_id in files and all(s.registry in files for s in task.subsets), task.name
    official = {task.data_id for task in language_tasks(catalog, config, "en", "official")}
    assert official - files.keys()  # the official files are fetched only when that variant is scored
    config["scale"]["eval_variants"] = ["paper", "official"]
    assert official <= fetch_mod.language_files("en", config).keys()
    config["scale"]["eval_variants"] = ["paper"]
    del config["scale"]["eval_variants"]  # strae.plan's default, [paper]: the bundle and the box's fetch job agree
    assert fetch_mod.language_files("en", config) == files
    config["multiview"]["senteval"]["probing"] = True  # each part is its own fetch job: probing files block no other
    parts = [fetch_mod.language_files("en", config, part=part).keys() for part in fetch_mod.FILE_PARTS]
    assert set().union(*parts) == fetch_mod.language_files("en", config).keys() and sum(map(len, parts)) == len(
        set().union(*parts))
    config["multiview"]["senteval"]["probing"] = False
    multiview = config["multiview"]
    assert multiview["corpora"]["en"]["registry"] in files and multiview["parsers"]["en"]["wheel"] in files
    senteval = load_senteval_tasks("config/tasks.yaml")
    transfer = {name for task in senteval.values() if task.group == "transfer" for name in task.files.values()}
    probing = {name for task in senteval.values() if task.group == "probing" for name in task.files.values()}
    assert transfer <= files.keys() and not probing & files.keys()
    # the configured transfer tasks, exactly as `strae evaluate --suite senteval` picks them; a bad name is refused
    multiview["senteval"]["tasks"] = ["MR"]
    assert transfer & fetch_mod.language_files("en", config).keys() == set(senteval["MR"].files.values())
    multiview["senteval"]["tasks"] = ["MR", "NOSUCH"]
    with pytest.raises(SentevalError, match=r"config/tasks\.yaml: unknown SentEval task\(s\) \['NOSUCH'\]"):
        fetch_mod.language_files("en", config)
    # a second multi-view language: its corpus and parser, but none of the (English) SentEval tasks' files
    multiview["senteval"]["tasks"] = ["MR", "TREC"]
    multiview["languages"] = ["en", "af"]
    multiview["corpora"]["af"], multiview["parsers"]["af"] = {"registry": "corpora/xx_books"}, {"wheel": "packages/xx"}
    second = fetch_mod.language_files("af", config, part="multiview")
    assert second == {"corpora/xx_books": "corpora/xx_books", "packages/xx": "packages/xx"}
    del multiview["senteval"]["tasks"]  # none configured: every transfer task of the language
    assert transfer <= fetch_mod.language_files("en", config).keys()
    config["multiview"]["senteval"]["probing"] = True
    assert probing <= fetch_mod.language_files("en", config).keys()
    config["multiview"]["enabled"] = False
    assert not (transfer | probing) & fetch_mod.language_files("en", config).keys()
    # SimCSE's training reads STS-B dev (its checkpoint selection): placed with the evaluation sets of the languages
    # it trains, so an offline copy of resources/ (fetch_all) has it
    assert fetch_mod.SIMCSE_DEV_SET not in fetch_mod.language_files("en", config)
    config["baselines"]["roberta_simcse"]["enabled"] = True
    assert fetch_mod.SIMCSE_DEV_SET in fetch_mod.language_files("en", config, part="evaluation")
    assert fetch_mod.SIMCSE_DEV_SET not in fetch_mod.language_files("am", config)  # not one of its languages
    config["baselines"]["roberta_simcse"]["enabled"] = False
    inline = {"path": "somewhere/mine.csv", "format": "semrel2024", "level": "sentence", "split": "test",
              "score_range": [0, 1]}
    config["languages"]["am"] = {**config["languages"]["am"], "eval_sets": {"mine": inline},
                                 "eval": {"paper": ["semrel_amh_test", "mine"]}}
    assert fetch_mod.language_files("am", config) == {"eval/semrel/amh_test": "eval/semrel/amh_test",
                                                       "somewhere/mine.csv": {"path": inline["path"]}}

    # placed from the mirror, checksummed, listed in the manifest the rule writes
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(load_config("config/config.yaml")))
    manifest = tmp_path / "manifest.json"
    assert fetch_mod.main(["--language", "af", "--config", str(tmp_path / "config.yaml"), "--resources-dir",
                           str(tmp_path / "resources"), "--manifest", str(manifest)]) == 0
    placed = json.loads(manifest.read_text())["af"]
    assert set(placed) == set(fetch_mod.language_files("af", config)) and len(placed) == 5
    for entry in placed.values():
        assert Path(entry["file"]).is_relative_to(tmp_path / "resources")
        assert hashlib.sha256(Path(entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
