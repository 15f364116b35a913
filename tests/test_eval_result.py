"""strae.evaluate.result: the one evaluation record. Files written before it (schema 2 fixture, the committed schema-1
reproductions) still read to the same scores.csv rows and the same tables; the evaluation setting's label is data
(config eval_options), recorded in the JSON, a scores.csv column, and what tables select on."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from strae.evaluate import aggregate, harness
from strae.evaluate.result import EVAL_SCHEMA_VERSION, EvalResult, EvalSetting, run_setting, table_setting
from strae.report import tables
from test_evaluate_harness import run_synthetic, synthetic  # noqa: F401 - fixture

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "eval_schema2"  # written by the schema-2 writer (make_fixture.py)
OLD_JSONS = sorted(str(p.relative_to(FIXTURE)) for p in (FIXTURE / "eval").rglob("*.json"))


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _build_table(scores: Path, out: Path) -> tuple[bytes, bytes]:
    assert tables.main(["table", "--table", "fixture_table1", "--tables", str(FIXTURE / "tables.yaml"),
                        "--scores", str(scores), "--paper-dir", str(FIXTURE), "--out-csv", str(out / "table.csv"),
                        "--out-md", str(out / "table.md")]) == 0
    return (out / "table.csv").read_bytes(), (out / "table.md").read_bytes()


@pytest.fixture
def in_fixture(monkeypatch):
    monkeypatch.chdir(FIXTURE)  # source_json paths as the schema-2 aggregator saw them
    return FIXTURE


# ------------------------------------------------------------------------------------------------- old files
def test_schema_2_files_read_with_the_label_of_their_directory(in_fixture):
    assert len(OLD_JSONS) == 5
    for name in OLD_JSONS:
        result = EvalResult.from_disk(name)
        assert result.schema_version == 2
        expected = "stopword_rm" if "@stopword_rm/" in name else None
        assert result.evaluation == EvalSetting(label=expected, options=None)
        assert result.table_setting == str(Path(name).parent.name)
    failed = EvalResult.from_disk("eval/xx/glove/words_w10_d256/seed2.paper.json")
    assert failed.failed and failed.tasks == {} and failed.planned_tasks == ["toy_sts", "toy_words"]


def test_schema_2_round_trip_keeps_every_field(in_fixture):
    for name in OLD_JSONS:
        original = json.loads(Path(name).read_text())
        written = EvalResult.from_disk(name).to_dict()
        assert written.pop("schema_version") == EVAL_SCHEMA_VERSION and original.pop("schema_version") == 2
        label = EvalResult.from_disk(name).evaluation.label
        assert written.pop("evaluation")["label"] == label
        # the one change: a labelled evaluation's run setting no longer repeats its label (result.run_setting)
        assert written["run"]["setting"] == run_setting(original["run"]["setting"], label) == "words_w10_d256"
        original["run"]["setting"] = written["run"]["setting"]
        assert written == original, name  # nothing else lost or changed (key order aside)
        again = EvalResult.from_dict(EvalResult.from_disk(name).to_dict())
        assert again.tasks == EvalResult.from_disk(name).tasks and again.run == original["run"]


def test_schema_2_files_aggregate_to_the_rows_the_old_aggregator_wrote(in_fixture, tmp_path):
    out = tmp_path / "scores.csv"
    assert aggregate.main(["--out", str(out), *OLD_JSONS]) == 0
    old, new = _csv_rows(FIXTURE / "scores.csv"), _csv_rows(out)
    key = lambda row: (row["source_json"], row["task"], row["subset"])  # noqa: E731
    assert sorted(map(key, old)) == sorted(map(key, new))
    new_by_key = {key(row): row for row in new}
    for row in old:  # the same rows, but a labelled evaluation's setting is the run's own (result.run_setting)
        expected = {**row, "setting": row["setting"].removesuffix("@stopword_rm")}
        assert {column: new_by_key[key(row)][column] for column in row} == expected
    assert {(r["setting"], r["eval_label"]) for r in new} == {("words_w10_d256", ""),
                                                             ("words_w10_d256", "stopword_rm")}


def test_tables_are_identical_from_old_scores_new_scores_and_labels_without_directories(in_fixture, tmp_path):
    expected = ((FIXTURE / "table.csv").read_bytes(), (FIXTURE / "table.md").read_bytes())
    (tmp_path / "old").mkdir()
    assert _build_table(FIXTURE / "scores.csv", tmp_path / "old") == expected  # scores.csv without eval_label

    (tmp_path / "new").mkdir()
    aggregate.main(["--out", str(tmp_path / "new" / "scores.csv"), *OLD_JSONS])
    assert _build_table(tmp_path / "new" / "scores.csv", tmp_path / "new") == expected

    # the label alone selects the row: run settings without the option, files in one flat directory
    flat = tmp_path / "flat"
    for i, name in enumerate(OLD_JSONS):
        result = EvalResult.from_disk(name)
        if result.evaluation.label:
            result.run["setting"] = result.run["setting"].removesuffix(f"@{result.evaluation.label}")
        result.to_disk(flat / f"{i}.json")
    aggregate.main(["--out", str(flat / "scores.csv"), *sorted(str(p) for p in flat.glob("*.json"))])
    assert {r["setting"] for r in _csv_rows(flat / "scores.csv")} == {"words_w10_d256"}
    assert _build_table(flat / "scores.csv", flat) == expected


def test_committed_schema_1_reproduction_aggregates_to_its_committed_scores(tmp_path):
    record = REPO_ROOT / "reproductions" / "multiview-cpu-2026-11-23"
    jsons = sorted((record / "eval").glob("*.json"))
    assert {EvalResult.from_disk(p).schema_version for p in jsons} == {1}
    committed = _csv_rows(record / "scores.csv")  # written by the aggregator of that time, from the same JSONs
    columns = [c for c in committed[0] if c != "source_json"]
    rows = aggregate.aggregate(jsons)
    as_text = lambda row: tuple("" if row[c] is None else str(row[c]) for c in columns)  # noqa: E731
    assert sorted(as_text(r) for r in rows) == sorted(tuple(r[c] for c in columns) for r in committed)


def test_future_schema_is_refused_naming_the_file(tmp_path):
    document = json.loads((FIXTURE / OLD_JSONS[0]).read_text())
    document["schema_version"] = EVAL_SCHEMA_VERSION + 1
    (tmp_path / "future.json").write_text(json.dumps(document))
    with pytest.raises(SystemExit, match=r"future\.json: schema_version 4 is not one of \[1, 2, 3\]"):
        EvalResult.from_disk(tmp_path / "future.json")


def test_aggregate_refuses_a_snapshots_evaluation_and_two_files_of_one_evaluation(tmp_path):
    """A mid-training snapshot's evaluation (its run still `running`) would be averaged like a finished run's; two
    JSONs of one evaluation would leave a table to keep one of them silently."""
    source = FIXTURE / OLD_JSONS[0]
    (tmp_path / "copy.json").write_bytes(source.read_bytes())
    with pytest.raises(SystemExit, match=r"copy\.json and .*: two evaluations of "):
        aggregate.aggregate([source, tmp_path / "copy.json"])
    document = json.loads(source.read_text())
    document["run"]["status"] = "running"
    (tmp_path / "snapshot.json").write_text(json.dumps(document))
    with pytest.raises(SystemExit, match=r"snapshot\.json: the evaluation of a run still training"):
        aggregate.aggregate([tmp_path / "snapshot.json"])
    assert aggregate.aggregate([source])  # one file of one evaluation: rows


def test_a_score_that_is_not_a_number_is_refused_naming_the_task(tmp_path):
    """A hand-edited score (text) would reach scores.csv as text and the tables as a missing cell."""
    source = FIXTURE / OLD_JSONS[0]
    document = json.loads(source.read_text())
    name = next(iter(document["tasks"]))
    document["tasks"][name]["score"] = "high"
    (tmp_path / "edited.json").write_text(json.dumps(document))
    with pytest.raises(SystemExit, match=rf"edited\.json: tasks\.{re.escape(name)}: score not a number or null"):
        aggregate.aggregate([tmp_path / "edited.json"])


# ------------------------------------------------------------------------------------------------- labels
def test_table_setting_adds_the_label_once():
    assert table_setting("words_w10_d256", None) == "words_w10_d256"
    assert table_setting("words_w10_d256", "stopword_rm") == "words_w10_d256@stopword_rm"
    assert table_setting("words_w10_d256@stopword_rm", "stopword_rm") == "words_w10_d256@stopword_rm"


def test_run_setting_drops_only_the_evaluations_own_label():
    assert run_setting("words_w10_d256@stopword_rm", "stopword_rm") == "words_w10_d256"
    assert run_setting("words_w10_d256", "stopword_rm") == "words_w10_d256"
    assert run_setting("ctl@tree", None) == "ctl@tree"  # a run whose setting names a view keeps it
    assert run_setting("words_w10_d256@stopword_rm", "stopword_rm_iso") == "words_w10_d256@stopword_rm"
    assert run_setting(None, "stopword_rm") is None


def test_a_remeasured_labelled_evaluation_replaces_the_carried_one(in_fixture, tmp_path):
    """An old record's scores.csv named the label in the run's setting; carried beside the same evaluation measured
    now (the run's own setting + label), the carried rows give way instead of doubling the seed."""
    old_rows = _csv_rows(FIXTURE / "scores.csv")
    old_rows = [{**row, "eval_label": "stopword_rm" if row["setting"].endswith("@stopword_rm") else ""}
                for row in old_rows]
    carried = tmp_path / "carried.csv"
    with open(carried, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(old_rows[0]))
        writer.writeheader()
        writer.writerows(old_rows)
    measured = aggregate.aggregate([name for name in OLD_JSONS if "@stopword_rm/" in name])
    merged = aggregate.with_carried(measured, [carried])
    labelled = [row for row in merged if row["eval_label"] == "stopword_rm"]
    assert {row["setting"] for row in merged} == {"words_w10_d256"}
    assert sorted(row["source_json"] for row in labelled) == sorted(row["source_json"] for row in measured)


def test_label_is_the_configs_name_for_the_options(synthetic, tmp_path, monkeypatch):  # noqa: F811
    import yaml

    config = yaml.safe_load(Path(synthetic["config"]).read_text())
    config["baselines"] = {"glove": {"eval_options": {"plain": [], "wide": ["dim=8", "pooling=max"]}}}
    Path(synthetic["config"]).write_text(yaml.safe_dump(config))
    synthetic_encoder = harness.load_encoder

    def as_a_glove_run(spec, **options):  # the labels live under a baseline's key (the config schema's baselines)
        encoder = synthetic_encoder(spec, **options)
        info = encoder.run_info()
        encoder.run_info = lambda: {**info, "model": "glove"}
        return encoder

    monkeypatch.setattr(harness, "load_encoder", as_a_glove_run)
    named = run_synthetic(synthetic, encoder_options={"pooling": "max", "dim": 8, "device": "cpu"})
    assert named.evaluation == EvalSetting(label="wide", options={"pooling": "max", "dim": 8})
    unnamed = run_synthetic(synthetic, encoder_options={"pooling": "mean"})
    assert unnamed.evaluation == EvalSetting(label="pooling-mean", options={"pooling": "mean"})
    assert run_synthetic(synthetic, encoder_options={"device": "cpu"}).evaluation == EvalSetting()
    # written and aggregated: the scores.csv column the tables read
    named.to_disk(tmp_path / "named.json")
    rows = aggregate.aggregate([tmp_path / "named.json"])
    assert {r["eval_label"] for r in rows} == {"wide"} and {r["schema_version"] for r in rows} == {3}
    # the default output path keeps its own `@key-value` suffix (unchanged)
    assert harness.default_out_path("random-token", "xx", "paper", {"dim": 8, "device": "cpu"}).name == \
        "random-token@dim-8.paper.json"



def test_a_record_carrying_an_older_record_sees_its_labelled_evaluations(tmp_path):
    """strae record's carry check compares evaluation keys of the carried record's raw scores.csv with the new one's:
    the old spelling of a labelled evaluation's setting is the same evaluation."""
    old = {"language": "en", "model": "glove", "setting": "words_w10_d256@stopword_rm", "seed": "0",
           "variant": "paper", "eval_label": "stopword_rm"}
    assert aggregate.evaluation_key(old) == aggregate.evaluation_key({**old, "setting": "words_w10_d256"})
    assert aggregate.evaluation_key(old) != aggregate.evaluation_key({**old, "eval_label": ""})


def test_unreadable_or_foreign_json_is_named_not_a_traceback(tmp_path):
    """A truncated evaluation JSON, a run's train.json (it has a schema_version too) or a list given to `strae
    aggregate` stop with the file named, and no scores.csv is written; a truncated encoder.json likewise."""
    from strae.encode import load_encoder
    from strae.io import JSONFileError, read_json

    truncated = tmp_path / "truncated.json"
    truncated.write_text('{"schema_version": 3, "tasks": {"x')
    with pytest.raises(JSONFileError, match=r"truncated.json: not valid JSON \(line 1, column 33"):
        read_json(truncated)
    with pytest.raises(ValueError):  # what callers that tolerate a bad file catch
        read_json(truncated)
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"schema_version": 3, "status": "completed", "run": {"model": "cl", "seed": 0}}))
    listed = tmp_path / "listed.json"
    listed.write_text("[1, 2]")
    out = tmp_path / "scores.csv"
    for path, message in ((truncated, "not valid JSON"), (train, "a run's train.json"), (listed, "a list")):
        with pytest.raises(SystemExit, match=message):
            aggregate.main(["--out", str(out), str(path)])
        assert not out.exists()
    run = tmp_path / "run"
    run.mkdir()
    (run / "encoder.json").write_text('{"kind": "str')
    with pytest.raises(SystemExit, match="encoder.json: not valid JSON"):
        load_encoder(str(run))


def test_unwritable_outputs_are_refused_naming_the_flag_before_any_work(tmp_path):
    """aggregate's --out before any JSON is read; a trainer's run directory (io.make_output_dir) where a file is."""
    from strae.evaluate import aggregate
    from strae.io import make_output_dir

    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit, match=r"--out .*: is a directory"):
        aggregate.main(["--out", str(tmp_path), str(tmp_path / "not-read.json")])
    for out, message in ((tmp_path / "afile", "is a file, not a directory"),
                         (tmp_path / "afile" / "run", f"{tmp_path / 'afile'} is a file, not a directory")):
        with pytest.raises(SystemExit, match=rf"--out {out}: {message}"):
            make_output_dir(out)
    assert make_output_dir(tmp_path / "a" / "run").is_dir() and make_output_dir(tmp_path / "a" / "run").is_dir()


def test_an_unwritable_out_is_refused_before_the_evaluation_runs(tmp_path, monkeypatch):
    from strae.evaluate import senteval

    ran = []
    monkeypatch.setattr(harness, "evaluate", lambda *a, **k: ran.append(1))
    monkeypatch.setattr(senteval, "evaluate", lambda *a, **k: ran.append(1))
    (tmp_path / "afile").write_text("x")
    for out, message in ((tmp_path, "is a directory"), (tmp_path / "afile" / "x.json", "afile is a file")):
        with pytest.raises(SystemExit, match=message):
            harness.main(["--model", "random-token", "--lang", "en", "--variant", "paper", "--out", str(out)])
        with pytest.raises(SystemExit, match=message):
            harness.main(["--suite", "senteval", "--model", "random-token", "--lang", "en", "--out", str(out)])
    assert ran == []
