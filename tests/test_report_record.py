"""strae record: a reproduction record from results/, with every cell's Δ, and the README block generated from it."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from strae import plan
from strae.report import record as rec
from strae.report.tables import CELL_COLUMNS


def _cells(rows):
    frame = pd.DataFrame([{**{c: "" for c in CELL_COLUMNS}, **row} for row in rows], columns=CELL_COLUMNS)
    for column in ("mean", "std", "paper_mean", "paper_std"):
        frame[column] = pd.to_numeric(frame[column].replace("", math.nan))
    return frame


def _hand_made(results):
    """These tests' tables are hand-made cells, not renderings of their scores.csv: record them unchecked (a tables
    file with no table keys; test_record_refuses_tables_older_than_the_scores checks real renderings)."""
    return ["--tables", str(results.parent / "no_tables.yaml")]


@pytest.fixture()
def results(tmp_path):
    (tmp_path / "no_tables.yaml").write_text("tables: {}\n")
    root = tmp_path / "results"
    (root / "banyan").mkdir(parents=True)
    from strae.evaluate import aggregate as agg

    (root / "scores.csv").write_text(",".join(agg.COLUMNS) + "\n")
    run = root / "runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0"
    run.mkdir(parents=True)
    (run / "train.json").write_text(json.dumps({"status": "completed", "provenance": {"device": "cuda (H100)"}}))
    (run / "checkpoint.pt").write_bytes(b"x" * 10)
    _cells([
        # within: |0.5| <= max(0.001, 1.0)
        dict(table="banyan_table1", row="Banyan", column="STS-12", status="ok", mean=51.7, std=0.2, n_seeds=4,
             paper_mean=51.2, paper_std=0.001, n_failed=0),
        # outside: |-3| > max(2.0, 1.0)
        dict(table="banyan_table1", row="Banyan", column="STS-13", status="ok", mean=66.1, std=0.3, n_seeds=4,
             paper_mean=69.1, paper_std=2.0, n_failed=1),
        # within thanks to the paper's own spread: |1.5| <= 2.0
        dict(table="banyan_table1", row="Banyan", column="STS-14", status="ok", mean=64.7, std=0.3, n_seeds=4,
             paper_mean=63.2, paper_std=2.0, n_failed=0),
        # within max(std, 1.0) but not within the paper's std: |0.8| > 0.5; one seed, so no ± of its own
        dict(table="banyan_table1", row="Banyan", column="STS-15", status="ok", mean=70.0, std=0.0, n_seeds=1,
             paper_mean=69.2, paper_std=0.5, n_failed=0),
        dict(table="banyan_table1", row="Self-StrAE", column="STS-12", status="not run", n_seeds=0, n_failed=0,
             paper_mean=31.98, paper_std=0.58),
    ]).to_csv(root / "banyan/table1.csv", index=False)
    _cells([
        # printed "≈10M": within its printed precision (±500000), far outside ±1.0
        dict(table="banyan_table6", row="RoBERTa (M)", column="Params", status="ok", mean=10400000.0, n_seeds=0,
             n_failed=0, paper_mean=10000000.0, paper_tolerance=500000.0, tasks="(parameter count)"),
        dict(table="banyan_table6", row="Banyan", column="Params", status="ok", mean=14.0, n_seeds=0, n_failed=0,
             paper_mean=14.0, tasks="(parameter count)"),
        dict(table="banyan_table6", row="Self-StrAE", column="Params", status="ok", mean=1074.0, n_seeds=0,
             n_failed=0, paper_mean=1072.0, tasks="(parameter count)"),
    ]).to_csv(root / "banyan/table6.csv", index=False)
    (root / "banyan/table1.md").write_text("| table |\n")
    return root


def test_record_copies_results_counts_cells_and_updates_the_readme(results, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Results\n{rec.README_BEGIN}\nold\n{rec.README_END}\n\n## Layout\n")
    out = tmp_path / "reproductions"
    training = results / "runs/en/banyan/ce_linear_entangled_k16_u16/seed2"  # a run training here now: left out
    training.mkdir(parents=True)
    (training / "train.json").write_text(json.dumps({"status": "running", "provenance": {"device": "cpu"}}))
    assert rec.main(["--name", "h100-test", "--results", str(results), *_hand_made(results),
                     "--out", str(out), "--readme", str(readme)]) == 0
    record = out / "h100-test"
    assert not (record / "runs/en/banyan/ce_linear_entangled_k16_u16").exists()
    assert (record / "scores.csv").exists() and (record / "banyan/table1.csv").exists()
    assert (record / "runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json").exists()
    assert not list(record.rglob("checkpoint.pt"))  # no checkpoints in a record
    manifest = json.loads((record / "manifest.json").read_text())
    counts = manifest["tables"][0]["counts"]
    assert (counts["with_paper_value"], counts["within"], counts["not_run"], counts["failed_seeds"]) == (4, 3, 1, 1)
    assert counts["within_std"] == 1  # STS-14; STS-12's +0.5 is outside the printed 0.001 taken as it stands
    counts = manifest["tables"][1]["counts"]  # Table 6: the ≈10M cell within its precision; 1074 vs 1072 is not
    assert manifest["tables"][1]["name"] == "banyan/table6" and (counts["with_paper_value"], counts["within"]) == (3, 2)
    assert counts["mean_abs_delta"] is None and counts["seeds"] is None  # parameter counts are not scores
    assert manifest["devices"] == ["cuda (H100)"] and manifest["n_runs"] == 1
    summary = (record / "summary.md").read_text()
    assert "| Banyan | STS-13 | 66.10 ± 0.30 | 4 | 69.10 ± 2.00 | -3.00 | no | no |" in summary
    assert "| Banyan | STS-15 | 70.00 | 1 | 69.20 ± 0.50 | +0.80 | no | yes |" in summary
    assert "| Banyan | STS-12 | 51.70 ± 0.20 | 4 | 51.20 ± 0.001 | +0.50 | no | yes |" in summary
    assert "| RoBERTa (M) | Params | 10400000.00 | 0 | ≈10000000.00 |" in summary  # printed "≈10M"
    text = readme.read_text()
    assert "old" not in text and "| [banyan/table1](" in text and text.endswith("## Layout\n")
    # cells with a paper value | within the paper's std | within max(std, 1.0) | mean |Δ| | seeds per cell | ...
    assert "| 4 | 1 | 3 | 1.45 | 1–4 | 1 | 1 |" in text and "1 run, commit" in text
    assert "| 3 | 2 | 2 | — | — | 0 | 0 |" in text  # Table 6: no mean |Δ| across parameter counts
    # records are immutable; a second one becomes the newest and the README follows it
    with pytest.raises(SystemExit, match="h100-test: exists; records are immutable"):
        rec.main(["--name", "h100-test", "--results", str(results), *_hand_made(results),
                  "--out", str(out), "--readme", str(readme)])
    rec.main(["--name", "h100-later", "--results", str(results), *_hand_made(results),
              "--out", str(out), "--no-readme"])
    assert rec.newest_record(out).name == "h100-later"
    rec.main(["--readme-only", "--out", str(out), "--readme", str(readme)])
    assert "[`reproductions/h100-later`](reproductions/h100-later/summary.md)" in readme.read_text()
    # a record made before the paper's own std was counted: the README counts it from the record's table CSVs
    later = out / "h100-later" / "manifest.json"
    manifest = json.loads(later.read_text())
    for entry in manifest["tables"]:
        del entry["counts"]["within_std"]
    later.write_text(json.dumps(manifest))
    rec.main(["--readme-only", "--out", str(out), "--readme", str(readme)])
    assert "| 4 | 1 | 3 | 1.45 | 1–4 | 1 | 1 |" in readme.read_text()


def test_missing_scores_or_markers_are_clear_errors(tmp_path, results):
    with pytest.raises(SystemExit, match="scores.csv: missing"):
        rec.build_record(tmp_path / "nothing", tmp_path / "out", "x")
    # an empty scores.csv, or one that is not `strae aggregate`'s, is refused before anything is frozen
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "scores.csv").write_text("")
    with pytest.raises(SystemExit, match=r"empty/scores\.csv: not a scores\.csv of `strae aggregate`"):
        rec.build_record(tmp_path / "empty", tmp_path / "out", "x")
    assert not (tmp_path / "out").exists()
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="no generated-results block"):
        rec.main(["--name", "y", "--results", str(results), *_hand_made(results),
                  "--out", str(tmp_path / "out"), "--readme", str(readme)])
    # a missing README is named before any record is written; a record that fails leaves no .partial folder
    with pytest.raises(SystemExit, match="no such README"):
        rec.main(["--name", "z", "--results", str(results), *_hand_made(results),
                  "--out", str(tmp_path / "out"), "--readme", str(tmp_path / "READ_ME.md")])
    assert not (tmp_path / "out" / "z").exists()
    (results / "runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json").write_text('{"status": "comp')
    with pytest.raises(SystemExit, match="train.json: not valid JSON"):
        rec.build_record(results, tmp_path / "out2", "w", tables_file=results.parent / "no_tables.yaml")
    assert list((tmp_path / "out2").iterdir()) == []


def _score_rows(language, seed, score, sha):
    from strae.evaluate.aggregate import COLUMNS
    base = {c: "" for c in COLUMNS}
    return [{**base, "schema_version": 3, "language": language, "model": "banyan",
             "setting": "ce_diagonal_entangled_k128_u2", "seed": seed, "status": "completed", "variant": "paper",
             "task": task, "level": "sentence", "score": score + i, "git_sha": sha}
            for i, task in enumerate(["a", "b"])]


def _earlier_record(tmp_path, out, records):
    """Record `cpu-old` under ``out``: Banyan seed-0 runs (language -> their train.json), af and en scores."""
    from strae.evaluate import aggregate as agg

    old_results = tmp_path / "old_results"
    for lang, record in records.items():
        run = old_results / f"runs/{lang}/banyan/ce_diagonal_entangled_k128_u2/seed0"
        run.mkdir(parents=True)
        (run / "train.json").write_text(json.dumps(record))
    agg.write_scores_csv(_score_rows("af", 0, 60.0, "old") + _score_rows("en", 0, 10.0, "old"),
                         old_results / "scores.csv")
    rec.main(["--name", "cpu-old", "--results", str(old_results), "--out", str(out), "--no-readme"])
    return out / "cpu-old"


def test_a_campaign_continues_from_an_earlier_record(results, tmp_path):
    """results/ is gone (another machine); the earlier record's evaluations and train.json carry into the next one,
    a re-measured evaluation replacing the carried one, and the record refuses to drop carried evaluations."""
    from strae.evaluate import aggregate as agg
    out = tmp_path / "reproductions"
    # the earlier record also has en seed0 (re-measured below: the new train.json and rows win)
    old = _earlier_record(tmp_path, out, {"af": {"status": "completed", "provenance": {"device": "cpu:2cores"}},
                                          "en": {"status": "running", "provenance": {"device": "cpu:2cores"}}})

    # the new machine measured en seed0 only; its scores.csv does not (yet) carry the old record's rows
    agg.write_scores_csv(_score_rows("en", 0, 50.0, "new"), results / "scores.csv")
    with pytest.raises(SystemExit, match="lacks 1 evaluation"):
        rec.main(["--name", "gpu-new", "--results", str(results), *_hand_made(results),
                  "--out", str(out), "--no-readme",
                  "--carry", str(old)])
    with pytest.raises(SystemExit, match="not a record"):
        rec.main(["--name", "gpu-new", "--results", str(results), *_hand_made(results),
                  "--out", str(out), "--carry", str(tmp_path)])
    assert not (out / "gpu-new").exists()

    # strae aggregate --carry: the measured rows first, then the old record's for evaluations not measured here
    new_json_rows = _score_rows("en", 0, 50.0, "new")
    merged = agg.with_carried(new_json_rows, [old / "scores.csv"])
    assert [(r["language"], r["git_sha"]) for r in merged] == [("en", "new")] * 2 + [("af", "old")] * 2
    # and says which carried evaluations the JSONs given replace (a retrained run's would replace the record's run)
    new_json_rows = [{**row, "source_json": "results/eval/x.json", "device": "cpu:2cores:1threads"}
                     for row in new_json_rows]
    replaced: list[str] = []
    agg.with_carried(new_json_rows, [old / "scores.csv"], replaced)
    assert replaced == [
        f"en banyan ce_diagonal_entangled_k128_u2 seed 0 (paper): {old / 'scores.csv'}'s rows (evaluated at old) "
        "replaced by results/eval/x.json (at new on cpu:2cores:1threads)"]
    replaced = []
    agg.with_carried([row for row in new_json_rows if row["language"] == "xx"], [old / "scores.csv"], replaced)
    assert replaced == []
    agg.write_scores_csv(merged, results / "scores.csv")
    readme = tmp_path / "README.md"
    readme.write_text(f"{rec.README_BEGIN}\n{rec.README_END}\n")
    rec.main(["--name", "gpu-new", "--results", str(results), *_hand_made(results),
              "--out", str(out), "--readme", str(readme),
              "--carry", str(old)])
    new = out / "gpu-new"
    assert (new / "runs/af/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json").exists()
    en = json.loads((new / "runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json").read_text())
    assert en["status"] == "completed"  # results/ wins over the carried record
    manifest = json.loads((new / "manifest.json").read_text())
    assert manifest["n_runs"] == 2 and manifest["devices"] == ["cpu:2cores", "cuda (H100)"]
    assert [c["name"] for c in manifest["carried"]] == ["cpu-old"]
    assert "runs carried from `cpu-old`" in readme.read_text()
    scores = pd.read_csv(new / "scores.csv")
    assert sorted(scores.groupby("language")["git_sha"].first().items()) == [("af", "old"), ("en", "new")]


def test_a_restarted_run_whose_scores_are_carried_keeps_the_carried_train_json(results, tmp_path, capsys):
    """results/ holds a newer train.json of a run (restarted, not evaluated again) while scores.csv holds the carried
    record's evaluation of it: the record pairs those scores with the carried train.json, not the newer one; a run
    evaluated again in results/ takes its own train.json."""
    from strae.evaluate import aggregate as agg
    out = tmp_path / "reproductions"
    old = _earlier_record(tmp_path, out, {lang: {"status": "completed", "provenance": {"device": "old box"}}
                                          for lang in ("af", "en")})
    # results/: af restarted (its new train.json, its evaluation not made again); en trained and evaluated again
    af = results / "runs/af/banyan/ce_diagonal_entangled_k128_u2/seed0"
    af.mkdir(parents=True)
    (af / "train.json").write_text(json.dumps({"status": "completed", "provenance": {"device": "new box"}}))
    agg.write_scores_csv(agg.with_carried(_score_rows("en", 0, 50.0, "new"), [old / "scores.csv"]),
                         results / "scores.csv")
    shutil.rmtree(results / "runs/en")
    en = results / "runs/en/banyan/ce_diagonal_entangled_k128_u2/seed0"
    en.mkdir(parents=True)
    (en / "train.json").write_text(json.dumps({"status": "completed", "provenance": {"device": "new box"}}))
    rec.main(["--name", "new", "--results", str(results), *_hand_made(results), "--out", str(out), "--no-readme",
              "--carry", str(old)])
    device = {lang: json.loads((out / f"new/runs/{lang}/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json")
                               .read_text())["provenance"]["device"] for lang in ("af", "en")}
    assert device == {"af": "old box", "en": "new box"}
    # af's paper evaluation carried, its official one measured here from the restarted run: results/' train.json,
    # and the mix is said
    official = [{**row, "variant": "official", "git_sha": "new"} for row in _score_rows("af", 0, 70.0, "new")]
    rows = agg.with_carried(official, [old / "scores.csv"])
    agg.write_scores_csv(rows, results / "scores.csv")
    capsys.readouterr()
    rec.main(["--name", "mixed", "--results", str(results), *_hand_made(results), "--out", str(out), "--no-readme",
              "--carry", str(old)])
    assert json.loads((out / "mixed/runs/af/banyan/ce_diagonal_entangled_k128_u2/seed0/train.json")
                      .read_text())["provenance"]["device"] == "new box"
    assert "some of its evaluations are carried from" in capsys.readouterr().err


def test_carrying_a_file_that_is_not_a_scores_csv_names_it(tmp_path):
    from strae.evaluate import aggregate as agg
    bad = tmp_path / "table1.csv"
    bad.write_text("table,row,column,mean\nx,y,z,1\n")
    with pytest.raises(SystemExit, match="table1.csv: not a scores.csv of `strae aggregate` .no column language"):
        agg.main(["--out", str(tmp_path / "scores.csv"), "--carry", str(bad)])
    with pytest.raises(SystemExit, match="no such scores.csv"):
        agg.main(["--out", str(tmp_path / "scores.csv"), "--carry", str(tmp_path / "missing.csv")])
    assert not (tmp_path / "scores.csv").exists()


def test_every_committed_record_can_be_carried():
    """Each committed record's scores.csv reads as a carried scores.csv (older records lack later columns)."""
    from pathlib import Path

    from strae.evaluate import aggregate as agg
    root = Path(__file__).resolve().parents[1] / "reproductions"
    files = sorted(root.glob("*/scores.csv"))
    assert files
    for path in files:
        rows = agg.read_carried(path)
        assert rows and all(row["language"] and row["model"] for row in rows), path


def test_record_refuses_tables_older_than_the_scores(tmp_path):
    """A committed record's real scores: tables rendered from them record; after scores.csv changes (a carried
    evaluation, a finished seed) the old tables are refused, naming the cell, until rendered again."""
    from pathlib import Path

    from strae.report import tables as report
    repo = Path(__file__).resolve().parents[1]
    source = repo / "reproductions/cpu-2core-en-glove-2026-11-24"
    results = tmp_path / "results"
    results.mkdir()
    scores = pd.read_csv(source / "scores.csv", dtype=str, keep_default_na=False)
    scores.to_csv(results / "scores.csv", index=False)
    render = ["tables", "--scores", str(results / "scores.csv"), "--results", str(results),
              "--tables", str(repo / "config/tables.yaml"), "--paper-dir", str(repo / "paper_tables")]
    assert report.main(render) == 0
    common = ["--results", str(results), "--out", str(tmp_path / "out"), "--no-readme",
              "--tables", str(repo / "config/tables.yaml"), "--paper-dir", str(repo / "paper_tables")]
    # the multi-view paper's tables (its own scores.csv, its own records) are neither checked nor recorded here
    (results / "multiview").mkdir()
    for name in ("table1.csv", "table1.md"):
        shutil.copy2(repo / "reproductions/multiview-cpu-2026-11-28" / name, results / "multiview" / name)
    # ... nor their runs (results/runs/<lang>/multiview_*/...)
    mv_run = results / "runs/en/multiview_ctl/ctl_h1000_e300/seed0"
    mv_run.mkdir(parents=True)
    shutil.copy2(repo / "reproductions/multiview-cpu-2026-11-28/runs/multiview_ctl/seed0/train.json", mv_run)
    assert rec.main(["--name", "as-rendered", *common]) == 0
    assert not (tmp_path / "out/as-rendered/multiview").exists()
    assert not list((tmp_path / "out/as-rendered").rglob("multiview_ctl"))
    assert json.loads((tmp_path / "out/as-rendered/manifest.json").read_text())["n_runs"] == len(
        list((tmp_path / "out/as-rendered/runs").rglob("train.json")))

    glove = (scores["model"] == "glove") & (scores["task"] == "sts12") & (scores["seed"] == "0")
    scores.loc[glove, "score"] = "99.0"  # a re-measured evaluation
    scores.to_csv(results / "scores.csv", index=False)
    with pytest.raises(SystemExit, match=r"table3.csv: not what .* renders now — row 'GloVe' column 'STS-12'"):
        rec.main(["--name", "stale", *common])
    assert not (tmp_path / "out/stale").exists()
    assert report.main(render) == 0
    assert rec.main(["--name", "rendered-again", *common]) == 0
    # a failed seed added later (e.g. carried) leaves every mean and n as they were; the table must still be fresh
    failed = scores[(scores["model"] == "glove") & (scores["seed"] == "0")].copy()
    failed["seed"], failed["status"], failed["score"] = "9", "failed", ""
    failed["source_json"] = failed["source_json"].str.replace("seed0", "seed9")
    pd.concat([scores, failed]).to_csv(results / "scores.csv", index=False)
    with pytest.raises(SystemExit, match=r"table3.csv: not what .* renders now — row 'GloVe'.*n_failed 0 vs 1"):
        rec.main(["--name", "stale-failed", *common])


def test_record_accepts_tables_with_another_languages_half(tmp_path):
    """SemEval Table 3 puts Afrikaans and Spanish columns side by side: an Afrikaans row's Spanish cells are "n/a",
    which pandas would read back as missing. A record whose scores fill that row (real H100 scores) records, and the
    check still compares those cells."""
    from pathlib import Path

    from strae.report import tables as report
    repo = Path(__file__).resolve().parents[1]
    results = tmp_path / "results"
    results.mkdir()
    scores = pd.read_csv(repo / "reproductions/h100-2026-11-26-2/scores.csv", dtype=str, keep_default_na=False)
    scores = scores[(scores["language"] == "af") & (scores["model"] == "selfstrae")]
    assert len(scores) == 16
    scores.to_csv(results / "scores.csv", index=False)
    render = ["tables", "--scores", str(results / "scores.csv"), "--results", str(results),
              "--tables", str(repo / "config/tables.yaml"), "--paper-dir", str(repo / "paper_tables")]
    assert report.main(render) == 0
    assert "n/a" in (results / "table3.csv").read_text()
    common = ["--results", str(results), "--out", str(tmp_path / "out"), "--no-readme",
              "--tables", str(repo / "config/tables.yaml"), "--paper-dir", str(repo / "paper_tables")]
    assert rec.main(["--name", "af", *common]) == 0
    counts, _ = rec.cell_summary(tmp_path / "out/af/table3.csv")
    assert (counts["reproduced"], counts["with_paper_value"]) == (4, 4)
    manifest = json.loads((tmp_path / "out/af/manifest.json").read_text())
    # named by its paper, not "table3" beside banyan/table3
    assert [t["name"] for t in manifest["tables"]] == ["selfstrae/table3"]
    table = (results / "table3.csv").read_text().replace("n/a", "not run", 1)  # a cell changed by hand
    (results / "table3.csv").write_text(table)
    with pytest.raises(SystemExit, match=r"table3.csv: not what .* renders now — row 'Afrikaans' column 'ESP"):
        rec.main(["--name", "edited", *common])


# ------------------------------------------------------------------------------- what is left (strae record --todo)
def _todo_record(tmp_path, runs, name="gpu-test"):
    """A record whose scores.csv holds one evaluation row per (language, model, setting, seed[, eval_label]) of
    ``runs`` (the paper variant)."""
    record = tmp_path / "reproductions" / name
    record.mkdir(parents=True)
    pd.DataFrame([dict(language=run[0], model=run[1], setting=run[2], seed=run[3], variant="paper",
                       eval_label=run[4] if len(run) > 4 else "", task="sts12", score=50.0)
                  for run in runs]).to_csv(record / "scores.csv", index=False)
    (record / "manifest.json").write_text(json.dumps({"name": "gpu-test", "created": "2026-11-27T00:00:00+00:00"}))
    return record


def _paper_config():
    from strae.io import project_root

    root = project_root()
    return root / "config" / "config.yaml", root / "config" / "tables.yaml"


def test_todo_lists_each_tables_runs_less_the_records(tmp_path, capsys):
    config_path, tables_path = _paper_config()
    config = rec.load_config(config_path)
    tables = rec.report.load_tables(tables_path)
    done = [("en", "selfstrae", "ceco_linear_sentential_k128_u2", seed) for seed in (0, 1)]
    record = _todo_record(tmp_path, done + [("en", "glove", "words_w10_d256", 0),
                                            ("en", "glove", "words_w10_d256", 0, "stopword_rm")])
    rows = {row["key"]: row for row in rec.remaining(record, config, tables)}
    # SemEval Table 2: the 5-point k x u grid, 4 seeds; two of its runs are in the record
    table2 = rows["selfstrae_table2"]
    assert table2["target"] == "results/table2.csv" and len(table2["runs"]) == 20 and len(table2["left"]) == 18
    assert not any("k128_u2/seed0." in target or "k128_u2/seed1." in target for target in table2["targets"])
    assert sum("k128_u2/seed2." in target for target in table2["targets"]) == 1
    # targets seed by seed: the four settings without a run get their seed 0 first, then every seed 1 still missing
    first = [target.split("/")[-2:] for target in table2["targets"][:5]]
    assert [seed for _, seed in first] == ["seed0.paper.json"] * 4 + ["seed1.paper.json"]
    assert len({setting for setting, _ in first[:4]}) == 4 and all("k128_u2" not in setting for setting, _ in first)
    # the same runs count for every table that reads them (SemEval Table 4 shares the 128 x 2 runs)
    assert len(rows["selfstrae_table4"]["runs"]) - len(rows["selfstrae_table4"]["left"]) == 2
    # GloVe is off in the paper config, and its rows still count; its plain and stop-word evaluations are one run
    table3 = rows["banyan_table3"]
    glove = [run for run in table3["runs"] if run.model == "glove"]
    assert len(glove) == 4 and [run.seed for run in table3["left"] if run.model == "glove"] == [1, 2, 3]
    assert "glove" in rec.disabled_baselines(config) and "selfstrae" not in rec.disabled_baselines(config)
    assert "multiview_table1" not in rows and "banyan_table6" not in rows  # no runs of the config's experiments
    # per evaluation: a run whose plain evaluation is recorded but not its stop-word one is left, with that target
    plain_only = _todo_record(tmp_path / "other", [("en", "glove", "words_w10_d256", 0)], name="plain-only")
    table3 = {row["key"]: row for row in rec.remaining(plain_only, config, tables)}["banyan_table3"]
    assert [run.seed for run in table3["left"] if run.model == "glove"] == [0, 1, 2, 3]
    glove_seed0 = [t for t in table3["targets"] if "/glove/" in t and "/seed0." in t]
    assert glove_seed0 == ["results/eval/en/glove/words_w10_d256@stopword_rm/seed0.paper.json"]
    # without a record every run is left
    assert all(len(row["left"]) == len(row["runs"]) for row in rec.remaining(None, config, tables))
    # figures: one drawn from scores needs only them; a model-based one, its runs' weights (no record keeps them)
    (record / "figures").mkdir()
    (record / "figures" / "ku_curves.png").write_bytes(b"png")
    figures = {figure["key"]: figure for figure in rec.remaining_figures(record, config, tables)}
    assert figures["ku_curves"]["in_record"] and figures["ku_curves"]["from_scores"]
    assert not figures["ku_curves"]["runs"] and "the scores" in rec.figure_needs(figures["ku_curves"])
    node_counts = figures["banyan_fig2_node_counts"]
    assert not node_counts["in_record"] and node_counts["target"] == "results/figures/banyan_fig2_node_counts.png"
    assert [(run.language, run.model, run.setting, run.seed) for run in node_counts["runs"]] == [
        ("en", "banyan", "ce_diagonal_entangled_k128_u2", 0)]
    geometry = figures["selfstrae_fig2_uniformity_alignment"]["runs"]  # SemEval Table 1's three objectives
    assert len(geometry) == 12 and {run.setting.split("_")[0] for run in geometry} == {"ce", "ceco", "contrastive"}
    assert "multiview_fig2_training_curve" not in figures  # drawn by `snakemake multiview`, in its own records
    # the CLI: one table's evaluation targets, one per line
    assert rec.main(["--todo", "--targets", "--table", "selfstrae_table2", "--out", str(record.parent),
                     "--config", str(config_path), "--tables", str(tables_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == table2["targets"] and len(printed) == 18
    assert rec.main(["--todo", "--out", str(record.parent), "--config", str(config_path),
                     "--tables", str(tables_path)]) == 0
    text = capsys.readouterr().out
    assert "results/table2.csv (Self-StrAE (SemEval-2024) Table 2): 20 runs, 2 in the record, 18 to train" in text
    assert "en glove words_w10_d256 (seeds 1–3; baselines.glove.enabled: false)" in text
    assert ("results/figures/banyan_fig2_node_counts.png: not in the record; drawing it takes its runs' weights, "
            "which records do not keep: en banyan ce_diagonal_entangled_k128_u2 (seed 0)") in text
    assert ('FIGURES="results/figures/banyan_fig2_node_counts.png results/figures/banyan_fig2_node_counts.pdf" bash '
            "tools/local_record.sh NEW reproductions/NEWEST` puts it in a record") in text
    assert "results/figures/ku_curves.png:" not in text  # in the record
    assert rec.main(["--todo", "--table", "banyan_table6", "--out", str(record.parent), "--config", str(config_path),
                     "--tables", str(tables_path)]) == 0
    assert "results/banyan/table6.csv: trains no run of" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no table selfstrae_table99"):
        rec.main(["--todo", "--table", "selfstrae_table99", "--out", str(record.parent),
                  "--config", str(config_path), "--tables", str(tables_path)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:  # --targets without --todo is a usage error
        rec.main(["--targets", "--out", str(record.parent)])
    assert usage.value.code == 2 and "--targets and --table go with --todo" in capsys.readouterr().err


def _timed_run(record, lang, model, setting, seed, device, seconds, status="completed", sittings=None):
    path = record / "runs" / lang / model / setting / f"seed{seed}"
    path.mkdir(parents=True)
    sessions = [{"device": sitting} for sitting in sittings or [device]]
    (path / "train.json").write_text(json.dumps({"status": status, "provenance": {"device": device},
                                                 "timings": {"train_seconds": seconds, "sessions": sessions}}))


def test_todo_says_how_long_the_runs_left_take_at_the_records_measured_times(tmp_path, capsys):
    config_path, tables_path = _paper_config()
    config = rec.load_config(config_path)
    tables = rec.report.load_tables(tables_path)
    k128, k8 = "ceco_linear_sentential_k128_u2", "ceco_linear_sentential_k8_u32"
    record = _todo_record(tmp_path, [("en", "selfstrae", k128, seed) for seed in (0, 1)]
                          + [("en", "selfstrae", k8, 0)])
    _timed_run(record, "en", "selfstrae", k128, 0, "cuda:NVIDIA H200", 500.0)
    _timed_run(record, "en", "selfstrae", k128, 1, "cuda:NVIDIA H100 80GB HBM3", 700.0)
    _timed_run(record, "en", "selfstrae", k8, 0, "cuda:NVIDIA H200", 1200.0)
    _timed_run(record, "en", "selfstrae", k8, 1, "cuda:NVIDIA H200", 9000.0, status="failed")  # says nothing
    _timed_run(record, "en", "selfstrae", k8, 2, "cuda:NVIDIA H200", 9000.0,
               sittings=["cpu:2cores:1threads", "cuda:NVIDIA H200"])  # its time is neither device's
    _timed_run(record, "af", "selfstrae", k8, 0, "cuda:NVIDIA H200", 50.0)  # another language: another corpus
    _timed_run(record, "en", "banyan", "ce_diagonal_entangled_k128_u2", 0, "cpu:2cores:1threads", 36000.0)
    _timed_run(record, "en", "banyan", "ce_diagonal_entangled_k128_u2", 1, "cuda:NVIDIA H200", 300.0)
    rows = {row["key"]: row for row in rec.remaining(record, config, tables)}
    left = rows["selfstrae_table2"]["left"]
    assert len(left) == 17
    times, devices = rec.training_times(record)
    assert devices == {"gpu": {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}, "cpu": {"CPU"}}
    # k8 u32's three seeds left at that setting's own time (1200 s); the other English runs at their setting's
    # median (k128 u2: 500 and 700), else the median of every timed English Self-StrAE CECO run (500, 700, 1200: 700)
    k8_left = sum(run.setting == k8 for run in left)
    k128_left = sum(run.setting == k128 for run in left)
    assert (k8_left, k128_left) == (3, 2)
    expected = k8_left * 1200.0 + k128_left * 600.0 + (len(left) - k8_left - k128_left) * 700.0
    assert rec.time_estimate(left, times, "gpu") == (expected, [])
    assert rec.time_estimate(left, times, "cpu") == (0.0, left)
    text = rec.time_text(record, left)
    assert text == (f"~{expected / 3600:.1f} h on the record's GPUs (NVIDIA H100 80GB HBM3, NVIDIA H200)"), text
    banyan = rows["banyan_table9"]["left"]
    text = rec.time_text(record, left + banyan)
    assert f"~{(expected + len(banyan) * 300) / 3600:.1f} h on the record's GPUs" in text, text
    assert (f"~{len(banyan) * 10:.0f} h on the record's CPUs for {len(banyan)} of them (not 17 en selfstrae ceco: the "
            "record has no time of such a run there)") in text, text
    # the fallback stays within the objective: the record times only CECO Self-StrAE runs and CE Banyan runs, so
    # Self-StrAE Table 1's CE and contrastive runs and Banyan Table 1's contrastive runs have no time (a contrastive
    # step costs ~3x a CE step), while its CECO runs take the CECO median
    objectives = rows["selfstrae_table1"]["left"]
    seconds, untimed = rec.time_estimate(objectives, times, "gpu")
    assert {plan.parse_setting(run.setting)["objective"] for run in untimed} == {"ce", "contrastive"}
    assert seconds == 700.0 * (len(objectives) - len(untimed)) > 0
    banyan = [run for run in rows["banyan_table1"]["left"] if run.model == "banyan"]
    contrastive = [run for run in banyan if plan.parse_setting(run.setting)["objective"] == "contrastive"]
    assert contrastive and len(contrastive) < len(banyan)  # the CE runs beside them are timed
    assert rec.time_estimate(banyan, times, "cpu") == (36000.0 * (len(banyan) - len(contrastive)), contrastive)
    assert f"not {len(contrastive)} en banyan contrastive" in rec.time_text(record, banyan)
    # a baseline's setting (not of the grid form) has no objective to fall back to: only its own setting's time
    glove = plan.Run("en", "glove", "words_w10_d256", 0)
    assert rec._time_keys("en", "glove", "words_w10_d256") == (("en", "glove", "words_w10_d256"),) * 2
    assert rec.time_estimate([glove], times, "cpu") == (0.0, [glove])
    _timed_run(record, "en", "glove", "words_w10_d256", 1, "cpu:2cores:1threads", 900.0)
    times, _ = rec.training_times(record)
    assert rec.time_estimate([glove], times, "cpu") == (900.0, [])
    assert rec.time_text(None, left) == "" and rec.time_text(record, []) == ""
    assert rec.main(["--todo", "--out", str(record.parent), "--config", str(config_path),
                     "--tables", str(tables_path)]) == 0
    assert "# training them one after another (the median train_seconds" in capsys.readouterr().out
    block = rec.todo_block(record, config, tables, "config/config.yaml")
    assert "evaluations not counted, runs that shared their machine included): ~" in block.splitlines()[0]


def test_the_readme_todo_block_is_regenerated_only_where_its_markers_are(tmp_path):
    config_path, tables_path = _paper_config()
    record = _todo_record(tmp_path, [("en", "banyan", "ce_diagonal_entangled_k128_u2", seed) for seed in range(4)])
    manifest = json.loads((record / "manifest.json").read_text())
    manifest.update(devices=["cuda:NVIDIA H200"], n_runs=4, git_sha="0" * 40, tables=[])
    (record / "manifest.json").write_text(json.dumps(manifest))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{rec.README_BEGIN}\n{rec.README_END}\n\n### Left\n{rec.TODO_BEGIN}\nstale\n"
                      f"{rec.TODO_END}\n\n## Layout\n")
    args = ["--readme-only", "--out", str(record.parent), "--readme", str(readme), "--config", str(config_path),
            "--tables", str(tables_path)]
    assert rec.main(args) == 0
    text = readme.read_text()
    assert "stale" not in text and text.endswith(f"{rec.TODO_END}\n\n## Layout\n")
    assert "Against `gpu-test`, for `" in text and "runs still to train**" in text
    assert "| `results/banyan/table1.csv` (Banyan Table 1) | 24 | 4 | 20 |" in text
    assert "| `results/figures/banyan_fig2_node_counts.png` | no | its runs' weights" in text
    # a README without the todo markers is left as it was outside the results block
    plain = tmp_path / "PLAIN.md"
    plain.write_text(f"# y\n{rec.README_BEGIN}\n{rec.README_END}\ntail\n")
    assert rec.main([*args[:3], "--readme", str(plain), *args[5:]]) == 0
    assert plain.read_text().endswith(f"{rec.README_END}\ntail\n") and "Against" not in plain.read_text()


def test_the_readmes_generated_blocks_are_current():
    """README.md's results and remaining-runs blocks are what `strae record --readme-only` writes from the newest
    committed record, config/config.yaml and config/tables.yaml (regenerate them after changing any of these)."""
    from strae.io import project_root

    root = project_root()
    record = rec.newest_record(root / "reproductions")
    text = (root / "README.md").read_text(encoding="utf-8")
    config_path, tables_path = _paper_config()

    def block(begin, end):
        return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")

    hint = "run `strae record --readme-only` and commit README.md"
    assert block(rec.README_BEGIN, rec.README_END) == rec.headline(record, root), hint
    multiview = rec.newest_multiview_record(root / "reproductions")
    if multiview is not None:
        assert block(rec.MULTIVIEW_BEGIN, rec.MULTIVIEW_END) == rec.multiview_block(multiview, root), hint
    todo = rec.todo_block(record, rec.load_config(config_path), rec.report.load_tables(tables_path),
                          "config/config.yaml")
    assert block(rec.TODO_BEGIN, rec.TODO_END) == todo, hint


def test_todo_reads_a_config_overlay_merged_over_the_base(tmp_path):
    config_path, tables_path = _paper_config()
    quick = config_path.parent / "quick.yaml"
    merged = rec.load_config([config_path, quick])
    assert merged["scale"]["seeds"] == [0, 1] and "models" in merged  # the overlay's values over the base's keys
    rows = {row["key"]: row for row in rec.remaining(None, merged, rec.report.load_tables(tables_path))}
    assert len(rows["selfstrae_table2"]["runs"]) == 10  # 5 k x u points, the overlay's 2 seeds
    assert "banyan_table9" not in rows  # disabled by the overlay: no runs, no row
    with pytest.raises(SystemExit, match="not a valid workflow config.*goes after the base file"):
        rec.load_config([quick])
    assert rec.config_label([config_path, quick]).endswith("config.yaml + " + quick.as_posix())


def test_the_multiview_block_is_the_newest_multiview_records_table1(tmp_path):
    """The README's multi-view table comes from the multi-view record evaluated last (never from a Self-StrAE/Banyan
    record, which has a manifest.json): each trained row with its seeds, the paper's row and the Δ to it."""
    from strae.io import project_root

    root = project_root() / "reproductions"
    out = tmp_path / "reproductions"
    shutil.copytree(root / "multiview-cpu-2026-11-28", out / "multiview-cpu-2026-11-28")
    shutil.copytree(root / "multiview-cpu-2026-11-23", out / "multiview-cpu-2026-11-23")
    assert rec.newest_multiview_record(out).name == "multiview-cpu-2026-11-28"
    block = rec.multiview_block(out / "multiview-cpu-2026-11-28", tmp_path)
    lines = block.splitlines()
    assert "129,767 sentences" in lines[0] and "8 runs" in lines[0]
    assert lines[4].startswith("| Contrastive Tree, paper | 64.0 | 72.8 |")
    assert lines[5].startswith("| Contrastive Tree, here (n = 4) | 56.95 ± 0.61 | 65.88 ± 1.18 |")
    assert lines[6].startswith("| Δ (here − paper) | -7.05 | -6.92 |")
    assert lines[-1].startswith("| random-token floor, here (n = 1) | 62.23 |")
    # a missing cell, a failed seed, no parse meta: said, not crashed on
    table = out / "multiview-cpu-2026-11-28/table1.csv"
    frame = pd.read_csv(table, keep_default_na=False, na_values=[""])
    ctl = frame["model"] == "multiview_ctl"
    frame.loc[ctl & (frame["column"] == "CR"), "n_failed"] = 1
    frame = frame[~((frame["model"] == "multiview_cl") & (frame["column"] == "MR"))]
    frame.to_csv(table, index=False)
    (out / "multiview-cpu-2026-11-28/parse_meta.json").unlink()
    edited = rec.multiview_block(out / "multiview-cpu-2026-11-28", tmp_path).splitlines()
    assert "parse unknown" in edited[0]
    assert edited[5].startswith("| Contrastive Tree, here (n = 4, 1 failed) |")
    assert edited[7].startswith("| Contrastive LSTM (CL), here (n = 4) | — | 65.64 ± 0.84 |")
    # a main record (manifest.json) is never taken; nor a directory without the tool's layout (the 11-23 time box)
    (out / "multiview-cpu-2026-11-28" / "manifest.json").write_text("{}")
    assert rec.newest_multiview_record(out) is None


def test_a_figure_older_than_the_scores_is_refused(results, tmp_path):
    """A figure drawn before scores.csv was rewritten (strae aggregate --carry) shows older numbers than the
    record's tables: refused with the command that redraws it; redrawn (newer), it is recorded."""
    import os

    tables = tmp_path / "figures_only.yaml"
    tables.write_text("tables: {}\nfigures:\n  ku_curves: {kind: ku_curves, from_scores: true}\n"
                      "  node_counts: {kind: node_counts}\n")
    figures = results / "figures"
    figures.mkdir()
    written = (results / "scores.csv").stat().st_mtime
    for name in ("ku_curves.png", "node_counts.png"):  # both drawn a minute before scores.csv was written
        (figures / name).write_bytes(b"png")
        os.utime(figures / name, (written - 60, written - 60))
    with pytest.raises(SystemExit, match="ku_curves.png drawn before .*scores.csv was last written"):
        rec.build_record(results, tmp_path / "out", "stale", tables_file=tables)
    assert not (tmp_path / "out" / "stale").exists()
    # redrawn from the scores: recorded; a figure drawn from measurements (no scores read) is not compared
    os.utime(figures / "ku_curves.png", (written + 1, written + 1))
    record = rec.build_record(results, tmp_path / "out", "fresh", tables_file=tables)
    assert (record / "figures" / "ku_curves.png").read_bytes() == b"png"
    assert (record / "figures" / "node_counts.png").exists()


def test_a_parameter_count_printed_in_both_halves_counts_once_and_halves_name_every_cell(tmp_path):
    """SemEval Table 2 prints `# Params` in its mean and best-seed halves: one measurement, one counted cell (the
    2026-11-28 record counted 5 counts as 10 of its 24 cells); the summary's half column comes from the whole
    table, so a table of which one half has run still names it."""
    source = Path(__file__).resolve().parents[1] / "reproductions/cpu-2core-2026-11-28-2/table2.csv"
    cells = rec.read_rendered(source)
    counts, comparable = rec.cell_summary(source, cells)
    params = comparable[comparable["column"] == "# Params"]
    assert len(params) == 5 and set(params["half"]) == {"mean"}
    scored = comparable[comparable["column"] != "# Params"]
    assert counts["with_paper_value"] == len(scored) + 5 and set(scored["half"]) == {"mean", "best_seed"}
    # Banyan Table 1: only the Banyan half has runs; its cells still carry their half in the summary
    table1 = source.parent / "banyan/table1.csv"
    cells = rec.read_rendered(table1)
    counts, comparable = rec.cell_summary(table1, cells)
    assert comparable["half"].nunique() == 1 and rec._has_halves(cells)
    rec.write_summary(tmp_path, [("banyan/table1", counts, comparable, rec._has_halves(cells))])
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| half | row | column |" in summary and "| Banyan | ++ CE loss | STS-12 |" in summary


def test_a_best_seed_cell_says_so_in_the_summary_and_the_headline():
    """A cell that shows its best seed (SemEval Table 3; Table 2's second half) reads "best of 4 (seed 2)", not a
    bare 4 that passes for a mean over four seeds; the headline's seeds column says which."""
    import pandas as pd

    best = pd.Series({"n_seeds": 4.0, "aggregate": "best_seed", "best_seed": 2.0})
    assert rec._cell_seeds(best) == "best of 4 (seed 2)"
    assert rec._cell_seeds(pd.Series({"n_seeds": 3.0, "aggregate": "mean", "best_seed": 1.0})) == "3"
    scored = pd.DataFrame({"n_seeds": [4.0, 4.0], "aggregate": ["best_seed", "best_seed"]})
    assert rec._seed_range(scored) == "best of 4"
    assert rec._seed_range(scored.assign(aggregate=["mean", "best_seed"], n_seeds=[1.0, 1.0])) == "1 (mean; best of 1)"
    assert rec._seed_range(scored.assign(aggregate=["mean", "mean"], n_seeds=[3.0, 4.0])) == "3–4"
