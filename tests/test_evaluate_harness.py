"""The evaluation harness end to end: tasks.yaml, JSON layout, failed runs, aggregation, and the real suite."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from strae.encode import Encoder
from strae.evaluate import aggregate, harness, metrics
from strae.evaluate.result import EVAL_SCHEMA_VERSION
from strae.evaluate.tasks import load_tasks, read_pairs
from strae.io import write_json

ENGLISH_PAPER_COUNTS = {"simlex": 995, "wordsim_sim": 203, "wordsim_rel": 252, "sts12": 3108, "sts13": 1500,
                        "sts14": 3750, "sts15": 3000, "sts16": 1186, "stsb": 1379, "sickr": 4927, "semrel": 5500}
ENGLISH_OFFICIAL_COUNTS = {**ENGLISH_PAPER_COUNTS, "simlex": 999, "semrel": 2600}
OFFICIAL_SUBSET_COUNTS = {"sts12": 5, "sts13": 3, "sts14": 6, "sts15": 5, "sts16": 5}


# ------------------------------------------------------------------------------------------------- fixtures
class TableEncoder(Encoder):
    """Looks every text up in a table; unknown text -> NaN row (OOV)."""

    encoder_id = "table"

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    def _lookup(self, texts):
        return np.stack([self.table.get(t, np.full(2, np.nan)) for t in texts]).astype(np.float32)

    def encode_sentences(self, sentences, batch_size=256):
        return self._lookup(sentences)

    def encode_words(self, words, batch_size=1024):
        return self._lookup(words)

    def run_info(self):
        return {"model": "table", "setting": "fixed", "seed": 11, "status": "completed", "failure_reason": None}


def write_pairs(path: Path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture
def synthetic(tmp_path, monkeypatch):
    """A tiny project: config + tasks.yaml + pair files, and an encoder whose cosine is gold/5 (rho = 100)."""
    gold_a, gold_b = [0.5, 4.0, 2.0], [1.0, 3.0]
    words_gold = [1.0, 9.0, 5.0, 7.0]
    rows_a = [(f"a{i} left", f"a{i} right", g) for i, g in enumerate(gold_a)]
    rows_b = [(f"b{i} left", f"b{i} right", g) for i, g in enumerate(gold_b)]
    word_rows = [(f"w{i}", f"v{i}", g) for i, g in enumerate(words_gold)] + [("w9", "unknownword", 3.0)]
    data = tmp_path / "data"
    write_pairs(data / "sts" / "sub_a.csv", ["sent1", "sent2", "score"], rows_a)
    write_pairs(data / "sts" / "sub_b.csv", ["sent1", "sent2", "score"], rows_b)
    write_pairs(data / "sts_all.csv", ["sent1", "sent2", "score"], rows_a + rows_b)
    write_pairs(data / "words.csv", ["word1", "word2", "score"], word_rows)
    table = {}
    for left, right, g, scale in [(r[0], r[1], r[2], 5.0) for r in rows_a + rows_b] + \
                                 [(r[0], r[1], r[2], 10.0) for r in word_rows[:-1]]:
        angle = np.arccos(g / scale)
        table[left], table[right] = np.array([1.0, 0.0]), np.array([np.cos(angle), np.sin(angle)])
    table["w9"] = np.array([1.0, 0.0])
    tasks_yaml = {"tasks": [
        {"name": "toy_sts", "variant": ["paper", "official"], "language": "xx", "level": "sentence",
         "registry": "sts_all", "split": "test", "rows": 5, "score_range": [0, 5], "aggregation": "pooled",
         "subsets": [{"name": "A", "registry": "sts/sub_a", "rows": 3}, {"name": "B", "registry": "sts/sub_b"}]},
        {"name": "toy_words", "variant": "paper", "language": "xx", "level": "word", "registry": "words",
         "split": "test", "rows": 5, "score_range": [0, 10], "aggregation": "single"},
    ]}
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump(tasks_yaml))
    config = {"data": {"tasks": str(tmp_path / "tasks.yaml")},
              "languages": {"xx": {"eval": {"paper": ["toy_sts", "toy_words"], "official": ["toy_sts"]}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setattr(harness, "load_encoder", lambda spec, **options: TableEncoder(table))
    resolve = lambda name: data / f"{name}.csv"  # noqa: E731 - the data layer is tested on its own
    return {"dir": tmp_path, "config": str(tmp_path / "config.yaml"), "resolve": resolve, "table": table}


def run_synthetic(synthetic, variant="paper", **kwargs):
    return harness.evaluate("table", "xx", variant, config_path=synthetic["config"], resolve=synthetic["resolve"],
                            progress=False, **kwargs)


# ------------------------------------------------------------------------------------------------- synthetic
def test_gold_derived_encoder_scores_100_with_subsets_and_oov(synthetic):
    result = run_synthetic(synthetic)
    sts, words = result.tasks["toy_sts"], result.tasks["toy_words"]
    assert sts.score == pytest.approx(100.0) and sts.n_pairs == 5 and sts.details["aggregation"] == "pooled"
    assert set(sts.subsets) == {"A", "B"}
    assert sts.subsets["A"].n_pairs == 3 and sts.subsets["B"].score == pytest.approx(100.0)
    # the word pair with an unknown word is counted and dropped, not scored as 0
    assert (words.n_pairs, words.n_oov, words.details["n_scored"]) == (5, 1, 4)
    assert words.score == pytest.approx(100.0)


def test_json_has_contract_fields(synthetic):
    doc = run_synthetic(synthetic).to_dict()
    assert doc["schema_version"] == EVAL_SCHEMA_VERSION == 3 and doc["variant"] == "paper" and doc["language"] == "xx"
    assert doc["evaluation"] == {"label": None, "options": {}}  # no encoder options: the plain evaluation
    assert {"language", "model", "setting", "seed", "status", "failure_reason"} <= set(doc["run"])
    assert doc["run"]["seed"] == 11 and doc["run"]["status"] == "completed" and doc["run"]["language"] == "xx"
    assert doc["encoder"]["encoder_id"] == "table"
    for record in doc["tasks"].values():
        assert {"score", "n_pairs", "n_oov", "level", "split", "variant", "file", "sha256", "aggregation",
                "subsets"} <= set(record)
        assert re.fullmatch(r"[0-9a-f]{64}", record["sha256"])
    prov = doc["provenance"]
    assert {"strae_version", "git_sha", "seed", "device", "data_files", "tasks_file_sha256"} <= set(prov)
    assert set(prov["data_files"]) == {"sts_all", "sts/sub_a", "sts/sub_b", "words"}
    json.dumps(doc)  # serialisable as is


def test_word_tasks_carry_both_protocols_and_sts_the_subset_mean(synthetic, tmp_path):
    # the word file's gold strings as the reference reads them; "10.00" sorts between "1.0" and "5.0" as a string
    write_pairs(synthetic["dir"] / "data" / "words.csv", ["word1", "word2", "score"],
                [("w0", "v0", "1.0"), ("w1", "v1", "9.0"), ("w2", "v2", "5.0"), ("w3", "v3", "10.00"),
                 ("w9", "unknownword", "3.0")])
    synthetic["table"]["v3"] = np.array([1.0, 0.0])  # cosine 1.0: numerically a perfect predictor
    doc = run_synthetic(synthetic).to_dict()
    words = doc["tasks"]["toy_words"]
    assert words["score"] == pytest.approx(100.0) and words["scores"]["spearman"] == words["score"]
    # predictions rank [1, 3, 2, 4]; gold strings '1.0' < '10.00' < '5.0' < '9.0' rank [1, 4, 3, 2]:
    # sum d^2 = 6, rho = 1 - 36/60 = 0.4 (the OOV pair is dropped from both protocols)
    assert words["scores"]["spearman_reference_strings"] == pytest.approx(40.0)
    assert set(doc["metrics"]) == {"spearman", "spearman_reference_strings", "spearman_subset_mean"}
    sts = doc["tasks"]["toy_sts"]
    assert "spearman_reference_strings" not in sts["scores"]  # sentence level: numeric gold, as the reference
    assert sts["scores"]["spearman_subset_mean"] == pytest.approx(
        (sts["subsets"]["A"]["score"] + sts["subsets"]["B"]["score"]) / 2)

    out, path = tmp_path / "scores.csv", tmp_path / "ok.json"
    write_json(path, doc)
    assert aggregate.main(["--out", str(out), str(path)]) == 0
    with open(out, encoding="utf-8", newline="") as handle:
        rows = {(r["task"], r["subset"]): r for r in csv.DictReader(handle)}
    assert float(rows[("toy_words", "")]["spearman_reference_strings"]) == pytest.approx(40.0)
    assert float(rows[("toy_words", "")]["score"]) == pytest.approx(100.0)
    assert rows[("toy_words", "")]["spearman_subset_mean"] == ""
    assert float(rows[("toy_sts", "")]["spearman_subset_mean"]) == pytest.approx(100.0)
    assert rows[("toy_sts", "A")]["spearman_subset_mean"] == rows[("toy_sts", "")]["spearman_reference_strings"] == ""


def test_aggregate_still_reads_schema_1_json(synthetic, tmp_path):
    doc = run_synthetic(synthetic).to_dict()
    doc["schema_version"] = 1  # the layout before the named metrics (and the evaluation setting)
    doc.pop("metrics")
    doc.pop("evaluation")
    for record in doc["tasks"].values():
        for key in ("scores", "score_reasons", "headline_metric"):
            record.pop(key, None)
    write_json(tmp_path / "old.json", doc)
    rows = aggregate.aggregate([tmp_path / "old.json"])
    assert rows[0]["schema_version"] == 1 and rows[0]["score"] == pytest.approx(100.0)
    assert all(r["spearman_reference_strings"] == "" and r["spearman_subset_mean"] == "" for r in rows)
    doc["schema_version"] = 99
    write_json(tmp_path / "future.json", doc)
    with pytest.raises(SystemExit, match="schema_version 99"):
        aggregate.aggregate([tmp_path / "future.json"])


def test_only_selected_tasks_and_unknown_task_error(synthetic):
    result = run_synthetic(synthetic, only=["toy_words"])
    assert list(result.tasks) == ["toy_words"]
    with pytest.raises(SystemExit, match="no task 'toy_words' for variant 'official'"):
        run_synthetic(synthetic, variant="official", only=["toy_words"])
    with pytest.raises(SystemExit, match="no language block 'zz'"):
        harness.evaluate("table", "zz", "paper", config_path=synthetic["config"], resolve=synthetic["resolve"])


def test_constant_encoder_reports_undefined(synthetic, monkeypatch):
    class Constant(TableEncoder):
        def _lookup(self, texts):
            return np.ones((len(texts), 3), dtype=np.float32)

    monkeypatch.setattr(harness, "load_encoder", lambda spec, **options: Constant({}))
    for task in run_synthetic(synthetic).tasks.values():
        assert task.score is None and task.reason == metrics.UNDEFINED_CONSTANT


def test_an_overflowed_encoder_is_a_clear_error_naming_the_task(synthetic, monkeypatch):
    class Overflowing(TableEncoder):
        def _lookup(self, texts):
            return np.full((len(texts), 3), np.inf, dtype=np.float32)

    monkeypatch.setattr(harness, "load_encoder", lambda spec, **options: Overflowing({}))
    with pytest.raises(SystemExit, match=r"task \S+ \(\S+\): \d+ of \d+ embeddings hold an infinite value.*no scores"):
        run_synthetic(synthetic)


def test_pooled_file_must_equal_subset_concatenation(synthetic):
    data = synthetic["dir"] / "data"
    rows = list(csv.reader(open(data / "sts_all.csv", encoding="utf-8")))
    rows[1], rows[2] = rows[2], rows[1]  # reorder: same pairs, different file
    write_pairs(data / "sts_all.csv", rows[0], rows[1:])
    with pytest.raises(SystemExit, match="not the concatenation of its subset files"):
        run_synthetic(synthetic, only=["toy_sts"])


def test_read_pairs_checks_rows_and_header(tmp_path):
    path = tmp_path / "p.csv"
    write_pairs(path, ["sent1", "sent2", "score"], [("a, b", 'say "x"', "1.5")])
    pairs = read_pairs(path, "sentence", 1)
    assert pairs.left == ["a, b"] and pairs.right == ['say "x"'] and pairs.gold.tolist() == [1.5]
    with pytest.raises(SystemExit, match=r"p\.csv: 1 pairs, but .* rows: 2"):
        read_pairs(path, "sentence", 2)
    with pytest.raises(SystemExit, match="does not match a word-level task"):
        read_pairs(path, "word")


def test_failed_run_writes_status_failed_and_aggregates(synthetic, tmp_path):
    run_dir = tmp_path / "runs" / "seed3"
    write_json(run_dir / "train.json", {"status": "failed", "failure_reason": "loss became NaN at epoch 2",
                                        "run": {"language": "xx", "model": "selfstrae", "setting": "ce_k4_u2",
                                                "seed": 3},
                                        "recipe": {"name": "selfstrae", "values": {}, "overrides": {
                                            "loss_precision": {"value": "bf16", "recipe_value": "fp32",
                                                               "source": "--set"}}},
                                        "data": {"corpus_source": "paper_source"}})
    failed_json, ok_json = tmp_path / "failed.json", tmp_path / "ok.json"
    assert harness.main(["--model", str(run_dir), "--lang", "xx", "--variant", "paper", "--out", str(failed_json),
                         "--config", synthetic["config"], "--quiet"]) == 0
    failed = json.loads(failed_json.read_text())
    assert failed["tasks"] == {} and failed["run"]["status"] == "failed"
    assert failed["run"]["failure_reason"] == "loss became NaN at epoch 2" and failed["run"]["seed"] == 3
    run_synthetic(synthetic).to_disk(ok_json)

    out = tmp_path / "scores.csv"
    assert aggregate.main(["--out", str(out), str(ok_json), str(failed_json)]) == 0
    with open(out, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == aggregate.COLUMNS
        rows = list(reader)
    ok_rows = [r for r in rows if r["source_json"] == str(ok_json)]
    # toy_sts headline + 2 subsets + toy_words headline
    assert [(r["task"], r["subset"]) for r in ok_rows] == [("toy_sts", ""), ("toy_sts", "A"), ("toy_sts", "B"),
                                                           ("toy_words", "")]
    assert float(ok_rows[0]["score"]) == pytest.approx(100.0) and ok_rows[3]["n_oov"] == "1"
    assert ok_rows[0]["seed"] == "11" and ok_rows[0]["status"] == "completed"
    failed_rows = [r for r in rows if r["source_json"] == str(failed_json)]
    assert [r["task"] for r in failed_rows] == ["toy_sts", "toy_words"]
    assert all(r["status"] == "failed" and r["score"] == "" and r["model"] == "selfstrae" for r in failed_rows)
    # how the failed seed was trained, as for a finished run's rows
    assert {(r["recipe"], r["recipe_overrides"], r["corpus_source"]) for r in failed_rows} == {
        ("selfstrae", "loss_precision=bf16", "paper_source")}


def test_run_dir_without_encoder_or_failure_is_an_error(tmp_path, synthetic, monkeypatch):
    from strae.encode import load_encoder

    monkeypatch.setattr(harness, "load_encoder", load_encoder)
    write_json(tmp_path / "r" / "train.json", {"status": "running"})
    with pytest.raises(SystemExit, match="encoder.json does not exist .*train.json says status running: the training "
                                         "is under way or was stopped") as caught:
        harness.evaluate(str(tmp_path / "r"), "xx", "paper", config_path=synthetic["config"],
                         resolve=synthetic["resolve"])
    assert "delete that train.json" in str(caught.value) and "no checkpoint.pt yet: it starts over" in str(caught.value)
    # no train.json at all: the plain question
    with pytest.raises(SystemExit, match=r"encoder.json does not exist \(is the training run finished\?\)"):
        harness.evaluate(str(tmp_path / "empty"), "xx", "paper", config_path=synthetic["config"],
                         resolve=synthetic["resolve"])


# ------------------------------------------------------------------------------------------------- tasks.yaml
def test_task_catalog_covers_every_configured_language(repo_root):
    catalog = load_tasks(repo_root / "config" / "tasks.yaml")
    config = yaml.safe_load((repo_root / "config" / "config.yaml").read_text())
    registry = yaml.safe_load((repo_root / "config" / "registry.yaml").read_text())
    for language, block in config["languages"].items():
        for variant, names in block["eval"].items():
            for name in names:
                task = catalog.get(name, variant)
                assert task.language == language, (name, variant)
    for task in catalog:
        for name, rows in [(task.registry, task.rows)] + [(s.registry, s.rows) for s in task.subsets]:
            assert name in registry, f"tasks.yaml {task.name}/{task.variant}: {name} not in config/registry.yaml"
            if registry[name].get("rows") is not None:
                assert registry[name]["rows"] == rows, name
        if task.subsets:
            assert sum(s.rows for s in task.subsets) == task.rows
    # the papers' SemRel is the train split; the official one is the test split; explicit names for both
    assert catalog.get("semrel", "paper").split == "train" and catalog.get("semrel", "official").split == "test"
    for variant in ("paper", "official"):
        assert catalog.get("semrel_paper", variant).rows == 5500
        assert catalog.get("semrel_test", variant).rows == 2600


# ------------------------------------------------------------------------------------------------- real data
@pytest.mark.mirror
@pytest.mark.parametrize("variant,counts", [("paper", ENGLISH_PAPER_COUNTS), ("official", ENGLISH_OFFICIAL_COUNTS)])
def test_random_token_full_english_suite(mirror, monkeypatch, tmp_path, repo_root, variant, counts):
    monkeypatch.setenv("STRAE_DATA_MIRROR", str(mirror))
    monkeypatch.chdir(repo_root)
    out = tmp_path / f"en.{variant}.json"
    assert harness.main(["--model", "random-token", "--lang", "en", "--variant", variant, "--out", str(out),
                         "--resources-dir", str(tmp_path / "resources"), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert {name: t["n_pairs"] for name, t in doc["tasks"].items()} == counts
    assert all(t["n_oov"] == 0 for t in doc["tasks"].values())
    for name, n_subsets in OFFICIAL_SUBSET_COUNTS.items():
        subsets = doc["tasks"][name]["subsets"]
        assert len(subsets) == (n_subsets if variant == "official" else 0)
        assert sum(s["n_pairs"] for s in subsets.values()) in (0, counts[name])
    # lexical overlap alone correlates with sentence similarity; unrelated words' random vectors do not
    for name in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel"):
        assert 20.0 < doc["tasks"][name]["score"] < 80.0, (name, doc["tasks"][name]["score"])
    for name in ("simlex", "wordsim_sim", "wordsim_rel"):
        assert abs(doc["tasks"][name]["score"]) < 15.0, (name, doc["tasks"][name]["score"])
        assert abs(doc["tasks"][name]["scores"]["spearman_reference_strings"]) < 15.0
    for name, record in doc["tasks"].items():
        expected = {"spearman"} | ({"spearman_reference_strings"} if record["level"] == "word" else set()) | \
            ({"spearman_subset_mean"} if record["subsets"] else set())
        assert set(record["scores"]) == expected, name
        if record["subsets"]:
            subset_scores = [s["score"] for s in record["subsets"].values()]
            assert record["scores"]["spearman_subset_mean"] == pytest.approx(np.mean(subset_scores))


@pytest.mark.mirror
def test_random_token_every_other_configured_language(mirror, monkeypatch, tmp_path, repo_root):
    """Every non-English task list resolves, reads with its declared row count, and scores above chance (sets of
    100 pairs or more)."""
    monkeypatch.setenv("STRAE_DATA_MIRROR", str(mirror))
    monkeypatch.chdir(repo_root)
    config = yaml.safe_load((repo_root / "config" / "config.yaml").read_text())
    catalog = load_tasks(repo_root / "config" / "tasks.yaml")
    languages = [lang for lang, block in config["languages"].items()
                 if set(block["eval"]["paper"]) != set(ENGLISH_PAPER_COUNTS)]
    assert languages
    for language in languages:
        result = harness.evaluate("random-token", language, "paper", resources_dir=str(tmp_path / "resources"),
                                  progress=False)
        for name, task in result.tasks.items():
            assert task.n_pairs == catalog.get(name, "paper").rows
            assert task.score is not None, (language, name)
            if task.n_pairs >= 100:  # a Spearman over 20 pairs (a pilot set) is chance-level noise for this floor
                assert task.score > 10.0, (language, name, task.score)


def test_the_mirror_csv_reader_names_bad_files_like_the_other_formats(tmp_path):
    """The default format (the mirror's CSV, and an inline set's `path:` without a format) refuses a header-only
    file, a NaN score and a file that is not UTF-8, naming file and line (it used to score 0 pairs as null, take
    NaN, or raise a UnicodeDecodeError)."""
    from strae.evaluate.tasks import EvalFileError, read_pairs

    header = "sent1,sent2,score\n"
    cases = {"empty.csv": (header, r"empty\.csv: no pairs"),
             "nan.csv": (header + "a b,c d,nan\n", "nan.csv:2: score is NaN"),
             "latin.csv": (header + "caf\xe9,b,1\n", r"latin\.csv: not UTF-8")}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(EvalFileError, match=message):
            read_pairs(path, "sentence")
    (tmp_path / "ok.csv").write_text(header + "a b,c d,0.5\n", encoding="utf-8")
    assert read_pairs(tmp_path / "ok.csv", "sentence").gold_text == ["0.5"]


def test_every_format_refuses_an_infinite_score_and_the_mirror_csv_an_empty_text(tmp_path):
    """float() reads "inf" and "-Infinity": such a gold score is refused like NaN, in every format (one _gold). The
    mirror's CSV refuses an empty or blank text field as the other formats do ("... is empty"), naming the row's
    first line; its texts are otherwise kept as written."""
    from strae.evaluate.tasks import EvalFileError

    cases = {
        ("inf.csv", "mirror_csv", "sentence"): ("sent1,sent2,score\na b,c d,1\na b,c d,inf\n",
                                                r"inf\.csv:3: score 'inf' is infinite"),
        ("neg.tsv", "sts_tsv", "sentence"): ("1\ta\tb\n-Infinity\ta\tb\n",
                                             r"neg\.tsv:2: score '-Infinity' is infinite"),
        ("w.csv", "word_pairs", "word"): ("cat,dog,1e999\n", r"w\.csv:1: score '1e999' is infinite"),
        ("empty1.csv", "mirror_csv", "sentence"): ("sent1,sent2,score\na b,c d,1\n,c d,2\n",
                                                   r"empty1\.csv:3: sent1 is empty"),
        ("blank2.csv", "mirror_csv", "word"): ("word1,word2,score\ncat,\"  \",2\n", r"blank2\.csv:2: word2 is empty"),
    }
    for (name, file_format, level), (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(EvalFileError, match=message):
            read_pairs(path, level, file_format=file_format)
    (tmp_path / "kept.csv").write_text("sent1,sent2,score\n a  b,c d,-2.5\n", encoding="utf-8")
    pairs = read_pairs(tmp_path / "kept.csv", "sentence")
    assert pairs.left == [" a  b"] and pairs.gold.tolist() == [-2.5]
