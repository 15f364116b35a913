"""strae.report.tables: cells come only from scores.csv; failed seeds are counted, never averaged; no invented
values."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from strae.report import tables as report

TABLES = {
    "tables": {
        "demo_table": {
            "title": "demo",
            "paper_file": "demo.csv",
            "language": "xx",
            "model": "selfstrae",
            "halves": {"mean": {"aggregate": "mean"}, "best_seed": {"aggregate": "best_seed"}},
            "columns": {
                "Word": {"task": "word_task"},
                "Sent": {"task": "sent_task"},
                "Score": {"mean_of": ["word_task", "sent_task"]},
                "Held out": {"unavailable": "gold not public"},
                "# Params": {"param_count": True},
            },
            "rows": [
                {"label": "A", "setting": "ceco_linear_sentential_k2_u2"},
                {"label": "B", "setting": "ce_linear_sentential_k4_u1"},
                {"label": "Ext", "external": "someone 2024"},
            ],
        }
    }
}


def _row(seed, task, score, status="completed", setting="ceco_linear_sentential_k2_u2"):
    return {
        "schema_version": 1, "language": "xx", "model": "selfstrae", "setting": setting, "seed": seed,
        "status": status, "failure_reason": "" if status != "failed" else "nan loss", "variant": "paper",
        "task": task, "subset": "", "level": "word", "score": score, "n_pairs": 10, "n_oov": 0,
        "split": "test", "encoder_id": "x", "git_sha": "x", "device": "cpu",
        "source_json": f"results/eval/xx/selfstrae/{setting}/seed{seed}.paper.json",
    }


@pytest.fixture()
def scores(tmp_path):
    rows = [
        _row(0, "word_task", 10.0), _row(0, "sent_task", 30.0),
        _row(1, "word_task", 20.0), _row(1, "sent_task", 50.0),
        _row(2, "word_task", None, status="failed"), _row(2, "sent_task", None, status="failed"),
        # a per-subset row must not leak into the headline score
        {**_row(1, "sent_task", 99.0), "subset": "sub1"},
    ]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    paper = tmp_path / "demo.csv"
    paper.write_text("row,column,mean,std,note,half\nA,Word,12.0,1.0,,mean\nA,Word,25.0,,,best_seed\n")
    return path


def test_mean_std_failed_and_paper_delta(scores, tmp_path):
    cells = report.build_table("demo_table", TABLES, report.load_scores(scores), tmp_path,
                               {("selfstrae", "ceco_linear_sentential_k2_u2"): 22})
    cell = cells[(cells.half == "mean") & (cells.row == "A") & (cells.column == "Word")].iloc[0]
    assert cell.status == "ok" and cell.n_seeds == 2 and cell.n_failed == 1
    assert cell["mean"] == pytest.approx(15.0) and cell["std"] == pytest.approx(5.0)
    assert cell.paper_mean == 12.0 and cell.delta == pytest.approx(3.0)
    score = cells[(cells.half == "mean") & (cells.row == "A") & (cells.column == "Score")].iloc[0]
    assert score["mean"] == pytest.approx((20.0 + 35.0) / 2)  # per-seed mean over tasks, then over seeds
    sent = cells[(cells.half == "mean") & (cells.row == "A") & (cells.column == "Sent")].iloc[0]
    assert sent["mean"] == pytest.approx(40.0)  # the subset row (99) is ignored


def test_best_seed_half_uses_one_seed_per_row(scores, tmp_path):
    cells = report.build_table("demo_table", TABLES, report.load_scores(scores), tmp_path, {})
    best = cells[(cells.half == "best_seed") & (cells.row == "A")].set_index("column")
    assert best.loc["Word", "mean"] == 20.0 and best.loc["Sent", "mean"] == 50.0
    assert best.loc["Word", "best_seed"] == 1 and best.loc["Word", "delta"] == pytest.approx(-5.0)


def test_never_invents_values(scores, tmp_path):
    cells = report.build_table("demo_table", TABLES, report.load_scores(scores), tmp_path, {})
    missing = cells[(cells.row == "B")]
    assert set(missing.loc[missing.column != "Held out", "status"]) == {"not run"}
    assert missing["mean"].isna().all()
    assert set(cells.loc[cells.row == "Ext", "status"]) == {"external"}
    assert set(cells.loc[cells.column == "Held out", "status"]) - {"external"} == {"unavailable"}
    params = cells[(cells.row == "A") & (cells.column == "# Params")]
    assert set(params.status) == {"not run"}  # no parameter-count file given
    markdown = report.to_markdown(cells, "demo")
    assert "not run" in markdown and "1 failed" in markdown and "paper 12.00 ± 1.00" in markdown


def test_a_column_that_needs_more_than_the_default_run_says_so_where_it_has_no_scores(scores, tmp_path):
    """The multi-view Table 2's columns (SentEval probing files, in no mirror) name what scores them."""
    tables = {"tables": {"demo_table": {**TABLES["tables"]["demo_table"], "columns": {
        "Word": {"task": "word_task", "needs": "the word files"}, "Probe": {"task": "probe_task", "needs": "probes"}}}}}
    cells = report.build_table("demo_table", tables, report.load_scores(scores), tmp_path, {})
    a = cells[(cells.row == "A") & (cells.half == "mean")].set_index("column")
    assert a.loc["Word", "status"] == "ok" and a.loc["Word", "note"] == ""  # scored: no note
    assert (a.loc["Probe", "status"], a.loc["Probe", "note"]) == ("not run", "needs probes")
    markdown = report.to_markdown(cells, "demo")
    assert "- `Probe`: needs probes\n" in markdown
    assert "- `Word`: needs the word files\n" in markdown  # row B has no scores at all
    # the reasons of the default table's empty columns are listed too, each once
    default = report.to_markdown(report.build_table("demo_table", TABLES, report.load_scores(scores), tmp_path, {}),
                                 "demo")
    assert default.count("- `Held out`: gold not public") == 1 and "model not built" not in default


def test_all_seeds_failed_is_reported(tmp_path):
    rows = [_row(s, t, None, status="failed") for s in (0, 1) for t in ("word_task", "sent_task")]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cells = report.build_table("demo_table", TABLES, report.load_scores(path), tmp_path, {})
    cell = cells[(cells.half == "mean") & (cells.row == "A") & (cells.column == "Word")].iloc[0]
    assert cell.status == "failed" and cell.n_failed == 2 and math.isnan(cell["mean"])


def test_unknown_table_names_the_key(scores, tmp_path):
    with pytest.raises(SystemExit, match="no table 'nope'"):
        report.build_table("nope", TABLES, report.load_scores(scores), tmp_path, {})


def test_declared_tables_match_paper_labels(repo_root):
    """Every paper cell of a declared table has a row and column in config/tables.yaml (labels are the papers')."""
    tables = yaml.safe_load((repo_root / "config/tables.yaml").read_text())
    for name, table in tables["tables"].items():
        paper = report.load_paper_table(repo_root / "paper_tables" / table["paper_file"])
        if not paper:
            continue  # not transcribed yet
        rows = {r["label"] for r in table["rows"]}
        columns = set(table["columns"])
        for _half, row, column in paper:
            if table.get("transpose"):
                row, column = column, row
            assert row in rows, f"{name}: paper row {row!r} has no row in config/tables.yaml"
            assert column in columns, f"{name}: paper column {column!r} not declared"


LEX_TABLES = {"tables": {"lex": {
    "title": "lexical", "paper_file": "lex.csv", "language": "xx", "model": "selfstrae",
    "columns": {
        "Word": {"task": "word_task", "metric": "spearman_reference_strings", "beside": "spearman"},
        "Score": {"mean_of": ["word_task", "word_task2"], "metric": "spearman_reference_strings",
                  "beside": "spearman"},
        "STS": {"task": "sts_task", "metric": "spearman_subset_mean", "beside": "spearman"},
    },
    "rows": [{"label": "A", "setting": "ceco_linear_sentential_k2_u2"}],
}}}


def _lex_scores(tmp_path, with_metrics=True):
    rows = []
    for seed, (numeric, reference) in enumerate([(40.0, 30.0), (44.0, 34.0)]):
        rows += [
            {**_row(seed, "word_task", numeric), "spearman_reference_strings": reference, "spearman_subset_mean": None},
            {**_row(seed, "word_task2", numeric + 10), "spearman_reference_strings": reference + 10,
             "spearman_subset_mean": None},
            {**_row(seed, "sts_task", 60.0), "level": "sentence", "spearman_reference_strings": None,
             "spearman_subset_mean": 50.0},
        ]
    frame = pd.DataFrame(rows)
    if not with_metrics:  # a scores.csv made from schema-1 evaluation JSONs
        frame = frame.drop(columns=["spearman_reference_strings", "spearman_subset_mean"])
    path = tmp_path / "scores.csv"
    frame.to_csv(path, index=False)
    (tmp_path / "lex.csv").write_text("row,column,mean,std,note\nA,Word,33.0,,\n")
    return report.load_scores(path)


def test_lexical_cells_compare_the_paper_with_the_reference_protocol(tmp_path):
    cells = report.build_table("lex", LEX_TABLES, _lex_scores(tmp_path), tmp_path).set_index("column")
    word = cells.loc["Word"]
    assert word.metric == "spearman_reference_strings" and word["mean"] == pytest.approx(32.0)
    assert word.delta == pytest.approx(-1.0)  # against the paper: the reference protocol
    assert word.beside_metric == "spearman" and word.beside_mean == pytest.approx(42.0)
    assert word.beside_std == pytest.approx(2.0)
    assert cells.loc["Score", "mean"] == pytest.approx(37.0) and cells.loc["Score", "beside_mean"] == 47.0
    assert cells.loc["STS", "mean"] == 50.0 and cells.loc["STS", "beside_mean"] == 60.0
    markdown = report.to_markdown(cells.reset_index(), "lexical")
    assert "32.00 ± 2.00 (n=2) [ref. strings] · numeric 42.00 ± 2.00 · paper 33.00 · Δ -1.00" in markdown
    assert "[subset mean] · numeric 60.00" in markdown
    assert "ranks predictions and gold as strings" in markdown and "SentEval's mean" in markdown


def test_scores_without_the_reference_protocol_fall_back_labelled(tmp_path):
    cells = report.build_table("lex", LEX_TABLES, _lex_scores(tmp_path, with_metrics=False), tmp_path)
    word = cells.set_index("column").loc["Word"]
    assert word.status == "ok" and word.metric == "spearman" and word["mean"] == pytest.approx(42.0)
    assert "schema 1" in word.note and word.beside_metric == "spearman_reference_strings"
    assert "42.00 ± 2.00 (n=2) [numeric] · ref. strings n/a · paper 33.00" in report.format_cell(word)


def test_unknown_metric_names_the_key(tmp_path):
    bad = {"tables": {"lex": {**LEX_TABLES["tables"]["lex"], "columns": {"Word": {"task": "word_task",
                                                                                  "metric": "kendall"}}}}}
    with pytest.raises(SystemExit, match="unknown metric 'kendall'"):
        report.build_table("lex", bad, _lex_scores(tmp_path), tmp_path)


def test_tables_say_how_their_runs_were_trained():
    """Recipe overrides (the quick profile's bf16) and the corpus source reach the table from each run's record."""
    import pandas as pd

    from strae.report.tables import training_notes

    cells = pd.DataFrame([{"status": "ok", "language": "en", "model": "banyan", "setting": "s1"},
                          {"status": "not run", "language": "en", "model": "banyan", "setting": "s2"}])
    scores = pd.DataFrame([
        {"language": "en", "model": "banyan", "setting": "s1", "recipe": "banyan",
         "recipe_overrides": "epochs=1;loss_precision=bf16", "corpus_source": "corpus"},
        {"language": "en", "model": "banyan", "setting": "s2", "recipe": "strae_0_1", "recipe_overrides": "x=1",
         "corpus_source": "paper_source"},
    ])
    notes = "\n".join(training_notes(cells, scores))
    assert "`epochs=1;loss_precision=bf16`" in notes and "`corpus`" in notes and "`banyan`" in notes
    assert "x=1" not in notes and "strae_0_1" not in notes  # only runs that fill a cell
    assert "banyan `corpus`" in notes and "the offline mirror's substitute" in notes
    # a model whose records name no corpus source (GloVe before 2026-11-29) is not credited with another's
    both = pd.concat([cells, pd.DataFrame([{"status": "ok", "language": "en", "model": "glove", "setting": "g"}])])
    glove = pd.DataFrame([{"language": "en", "model": "glove", "setting": "g", "recipe": "", "recipe_overrides": "",
                           "corpus_source": ""}])
    notes = "\n".join(training_notes(both, pd.concat([scores, glove])))
    assert "banyan `corpus`; glove not recorded" in notes
    assert training_notes(cells, scores.drop(columns=["recipe"])) == []  # older scores.csv: nothing claimed
    # a row of a labelled evaluation (`SETTING@LABEL`, e.g. GloVe's stop-word removal) reads its run's record too
    labelled = cells.assign(setting=["s1@stopword_rm", "s2"])
    scores["eval_setting"] = ["s1@stopword_rm", "s2"]
    assert training_notes(labelled, scores) == training_notes(cells, scores.assign(eval_setting=["s1", "s2"]))
    assert "`epochs=1;loss_precision=bf16`" in "\n".join(training_notes(labelled, scores))


def _synthetic_scores(config, tasks_of) -> pd.DataFrame:
    """A scores.csv row per (evaluation JSON the config plans, task), as `strae aggregate` writes them: seeded
    random scores, one seed of some runs failed, `source_json` naming the JSON."""
    import numpy as np

    from strae import plan
    from strae.evaluate.aggregate import COLUMNS

    rng = np.random.default_rng(0)
    variants = config["scale"]["eval_variants"]
    rows = []
    for run, option in plan.evaluations(config):
        failed = run.seed == 1 and rng.random() < 0.3
        for variant in variants:
            for task in tasks_of(run.language, variant):
                rows.append({**{column: "" for column in COLUMNS}, "schema_version": 3, "language": run.language,
                             "model": run.model, "setting": run.setting, "seed": run.seed,
                             "status": "failed" if failed else "completed", "variant": variant, "task": task,
                             "score": "" if failed else float(rng.uniform(-10, 80)), "eval_label": option or "",
                             "recipe": run.model, "source_json": run.eval_json(variant, option)})
    return pd.DataFrame(rows, columns=COLUMNS)


def test_a_table_from_its_own_scores_equals_the_table_from_every_score(repo_root, tmp_path):
    """What the workflow's `table` rule reads (results/scores/<table>.csv: only strae.plan.table_eval_targets'
    JSONs) gives the same table, cell for cell, as results/scores.csv of every run, for every score table."""
    from strae import plan

    config = yaml.safe_load((repo_root / "config/config.yaml").read_text())
    for spec in config["baselines"].values():  # their rows (SETTING@OPTION included) read scores too
        spec["enabled"] = True
    tables = report.load_tables(repo_root / "config/tables.yaml")
    task_names = {task for table in tables["tables"].values() for column in table["columns"].values()
                  for task in report._column_tasks(column)}

    def tasks_of(language, variant):
        # the language's tasks plus every task a table names: a cell's task then never decides the outcome
        return sorted(set(config["languages"][language]["eval"].get(variant) or []) | task_names)

    full = _synthetic_scores(config, tasks_of)
    full.to_csv(tmp_path / "scores.csv", index=False)
    everything = report.load_scores(tmp_path / "scores.csv")
    compared = 0
    for key in tables["tables"]:
        if key.rpartition("_table")[0] not in plan.SCORE_TABLE_PAPERS:
            continue
        targets = set(plan.table_eval_targets(config, tables, key))
        own_path = tmp_path / f"{key}.csv"
        full[full["source_json"].isin(targets)].to_csv(own_path, index=False)
        own = report.load_scores(own_path)
        assert len(own) < len(everything), key  # the table's own scores are a strict subset
        expanded = report.with_language_entries(tables, key, config)
        from_all = report.build_table(key, expanded, everything, repo_root / "paper_tables")
        from_own = report.build_table(key, expanded, own, repo_root / "paper_tables")
        pd.testing.assert_frame_equal(from_own, from_all, obj=key)
        assert report.training_notes(from_own, own) == report.training_notes(from_all, everything)
        compared += int((from_all["status"] == "ok").sum())
    assert compared > 100  # the comparison covered measured cells, not only "not run" ones


def test_a_table_whose_runs_are_all_disabled_reads_not_run(repo_root, tmp_path):
    """No evaluation JSON (config/quick.yaml disables the table's experiment): `strae aggregate` writes a
    header-only scores file and every cell that reads a run says "not run"."""
    from strae.evaluate import aggregate

    path = tmp_path / "scores" / "selfstrae_table3.csv"
    assert aggregate.main(["--out", str(path)]) == 0
    tables = report.load_tables(repo_root / "config/tables.yaml")
    cells = report.build_table("selfstrae_table3", tables, report.load_scores(path), repo_root / "paper_tables")
    assert set(cells["status"]) == {"not run", "n/a", "unavailable"}


def test_best_seed_of_a_language_row_ignores_the_other_languages_columns(tmp_path):
    """A two-language best-of-seeds table (SemEval Table 3's shape): each row's seed is chosen on its own language's
    columns only. Here seed 1 is the best `yy` run by far, and seed 0 the best `xx` run: xx must report seed 0."""
    table = {"tables": {"two_languages": {
        "title": "two languages", "model": "selfstrae", "setting": "ceco_linear_sentential_k2_u2",
        "aggregate": "best_seed",
        "columns": {"X task": {"language": "xx", "task": "word_task"},
                    "Y task": {"language": "yy", "task": "word_task"}},
        "rows": [{"label": "X", "language": "xx"}, {"label": "Y", "language": "yy"}]}}}
    rows = [_row(0, "word_task", 30.0), _row(1, "word_task", 20.0),
            {**_row(0, "word_task", 10.0), "language": "yy"}, {**_row(1, "word_task", 90.0), "language": "yy"}]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cells = report.build_table("two_languages", table, report.load_scores(path), tmp_path, {}).set_index(
        ["row", "column"])
    assert cells.loc[("X", "X task"), "best_seed"] == 0 and cells.loc[("X", "X task"), "mean"] == 30.0
    assert cells.loc[("Y", "Y task"), "best_seed"] == 1 and cells.loc[("Y", "Y task"), "mean"] == 90.0
    assert cells.loc[("X", "Y task"), "status"] == "n/a"


def _param_counts(path, counts):
    from strae.io import write_json
    from strae.report.measure import PARAM_COUNTS

    write_json(path, {"schema_version": 1, "measurement": PARAM_COUNTS, "kind": PARAM_COUNTS, "status": "ok",
                      "counts": [{"model": m, "setting": s, "non_embedding_parameters": n} for m, s, n in counts]})
    return path


def test_report_tables_renders_each_table_its_scores_reach_as_the_table_command_does(repo_root, tmp_path):
    """`strae report tables` (a record after runs made outside a table target): exactly the tables with a measured
    cell, each at its results/ path and identical to `strae report table`'s; a table of parameter counts is kept,
    a scores table whose only measured cells are counts is not."""
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text())
    tables = report.load_tables(repo_root / "config/tables.yaml")
    task_names = {task for table in tables["tables"].values() for column in table["columns"].values()
                  for task in report._column_tasks(column)}
    full = _synthetic_scores(config, lambda language, variant: sorted(task_names))
    one_run = full[(full["language"] == "en") & (full["model"] == "banyan")
                   & (full["setting"] == "ce_diagonal_entangled_k128_u2")]
    assert len(one_run)
    one_run.to_csv(tmp_path / "scores.csv", index=False)
    counts = _param_counts(tmp_path / "param_counts.json", [("banyan", "ce_diagonal_entangled_k128_u2", 14),
                                                            ("selfstrae", "ceco_linear_sentential_k8_u32", 9)])
    common = ["--tables", str(repo_root / "config/tables.yaml"), "--scores", str(tmp_path / "scores.csv"),
              "--paper-dir", str(repo_root / "paper_tables"), "--param-counts", str(counts)]
    results = tmp_path / "results"
    assert report.main(["tables", *common, "--results", str(results)]) == 0
    written = sorted(str(p.relative_to(results)) for p in results.rglob("*.md"))
    # the tables reading the run (Banyan 1-4, 9: k128 u2) and the counts-only Table 6; not SemEval Table 2, whose
    # measured cell would only be a parameter count beside its scores
    assert written == [f"banyan/table{n}.md" for n in (1, 2, 3, 4, 6, 9)]
    single = tmp_path / "single"
    assert report.main(["table", "--table", "banyan_table3", *common, "--out-csv", str(single / "t.csv"),
                        "--out-md", str(single / "t.md")]) == 0
    assert (single / "t.csv").read_text() == (results / "banyan/table3.csv").read_text()
    assert (single / "t.md").read_text() == (results / "banyan/table3.md").read_text()


def test_report_tables_with_nothing_measured_is_a_clear_error(tmp_path, repo_root):
    from strae.evaluate import aggregate

    assert aggregate.main(["--out", str(tmp_path / "scores.csv")]) == 0  # header only: no evaluation yet
    with pytest.raises(SystemExit, match="no table of .* has a measured cell"):
        report.main(["tables", "--tables", str(repo_root / "config/tables.yaml"), "--scores",
                     str(tmp_path / "scores.csv"), "--results", str(tmp_path / "results")])
    assert not (tmp_path / "results").exists()


def test_an_approximate_paper_value_is_marked_and_carries_its_precision(repo_root):
    """Banyan Table 6 prints RoBERTa (M) as ≈10M: the cell carries paper_tolerance (the printed precision, which
    `strae record` matches within) and the Markdown marks the paper value approximate; exact counts carry none."""
    tables = report.load_tables(repo_root / "config/tables.yaml")
    counts = {("banyan", "ce_diagonal_entangled_k128_u2"): 14, ("roberta", "medium_mlm"): 10521088}
    cells = report.build_table("banyan_table6", tables, pd.DataFrame(columns=["language", "model", "setting"]),
                               repo_root / "paper_tables", counts).set_index("row")
    assert cells.loc["RoBERTa (M)", "paper_tolerance"] == 500000 and math.isnan(cells.loc["Banyan", "paper_tolerance"])
    markdown = report.to_markdown(cells.reset_index(), "t")
    assert "10521088 · paper ≈10000000 · Δ +521088.00" in markdown and "14 · paper 14 · Δ +0.00" in markdown


def test_misspelt_report_inputs_are_named_not_rendered_as_n_a(scores, tmp_path):
    """`strae report`: a --paper-dir or --config that does not exist, or a --scores file
    that is not a scores.csv, stops with the flag or file named (a misspelt paper dir rendered every paper value
    n/a)."""
    tables_file = tmp_path / "tables.yaml"
    tables_file.write_text(yaml.safe_dump(TABLES))
    common = ["table", "--table", "demo_table", "--tables", str(tables_file), "--out-csv", str(tmp_path / "t.csv"),
              "--out-md", str(tmp_path / "t.md")]
    for flag in ("--paper-dir", "--config"):
        with pytest.raises(SystemExit, match=f"{flag} {tmp_path / 'typo'}: not found"):
            report.main([*common, "--scores", str(scores), flag, str(tmp_path / "typo")])
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit, match="other.csv: not a scores.csv of `strae aggregate` \\(no column language"):
        report.load_scores(other)
    assert not (tmp_path / "t.csv").exists()
    # a scores.csv cut short: its last row has fewer fields than the header (pandas would fill them blank and the
    # cell would read as measured); refused naming the file and line
    text = scores.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[:text.rindex("\n", 0, len(text) - 1) + 1] + text.splitlines()[-1].split(",", 3)[0])
    with pytest.raises(SystemExit, match=rf"cut.csv:{len(text.splitlines())}: 1 fields where the header has"):
        report.load_scores(cut)
    # an output that cannot be written is refused before either file is written (none left alone)
    (tmp_path / "afile").write_text("x")
    for csv_out, md_out, message in ((tmp_path / "t.csv", tmp_path / "afile" / "t.md", "--out-md .*afile is a file"),
                                     (tmp_path / "afile" / "t.csv", tmp_path / "t.md", "--out-csv .*afile is a file")):
        with pytest.raises(SystemExit, match=message):
            report.write_table(pd.DataFrame({"row": ["A"]}), "# t\n", csv_out, md_out)
        assert not (tmp_path / "t.csv").exists() and not (tmp_path / "t.md").exists()


def test_best_seed_chosen_on_the_select_on_columns_never_on_a_test_column(tmp_path):
    """SemEval Table 3's submitted systems were chosen before the test labels were public: `select_on` names the
    columns the seed is chosen on. Seed 1 is far better on the test set, seed 0 on the dev set: seed 0 is reported
    (both columns from it), and without `select_on` the mean over both would pick seed 1."""
    table = {"title": "dev-selected", "model": "selfstrae", "setting": "ceco_linear_sentential_k2_u2",
             "language": "xx", "aggregate": "best_seed", "select_on": ["Dev"],
             "columns": {"Dev": {"task": "dev_task"}, "Test": {"task": "test_task"}},
             "rows": [{"label": "X"}]}
    rows = [_row(0, "dev_task", 40.0), _row(1, "dev_task", 35.0), _row(0, "test_task", 20.0),
            _row(1, "test_task", 60.0)]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    scores = report.load_scores(path)
    cells = report.build_table("t", {"tables": {"t": table}}, scores, tmp_path, {}).set_index("column")
    assert list(cells["best_seed"]) == [0, 0] and list(cells["mean"]) == [40.0, 20.0]
    unselected = {**table, "select_on": None}
    cells = report.build_table("t", {"tables": {"t": unselected}}, scores, tmp_path, {}).set_index("column")
    assert list(cells["best_seed"]) == [1, 1]
    with pytest.raises(SystemExit, match=r"tables.t.select_on names no column of the table: \['Devv'\]"):
        report.build_table("t", {"tables": {"t": {**table, "select_on": ["Devv"]}}}, scores, tmp_path, {})


def test_best_seed_is_never_a_seed_without_a_column_other_seeds_have(tmp_path):
    """A seed with no row for a column has no entry there: ranked on its other columns alone it could win and leave
    that column without a seed. Seed 3 has only column A (the best A); seeds 0 and 1 have both: seed 1 is chosen."""
    table = {"title": "t", "model": "selfstrae", "setting": "ceco_linear_sentential_k2_u2", "language": "xx",
             "aggregate": "best_seed", "columns": {"A": {"task": "a"}, "B": {"task": "b"}}, "rows": [{"label": "X"}]}
    rows = [_row(0, "a", 10.0), _row(0, "b", 10.0), _row(1, "a", 20.0), _row(1, "b", 20.0), _row(3, "a", 90.0)]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    scores = report.load_scores(path)
    cells = report.build_table("t", {"tables": {"t": table}}, scores, tmp_path, {}).set_index("column")
    assert list(cells["best_seed"]) == [1, 1] and list(cells["mean"]) == [20.0, 20.0]


def test_a_seed_without_every_task_of_a_cell_is_named_not_silently_dropped(tmp_path):
    """Seeds 0-1 have both tasks of the Score cell, seed 2 only one: the per-task cell counts 3 seeds, the Score
    cell 2, and says which seed it left out (the Markdown too), so its n is not read as every seed there is."""
    table = {"title": "t", "model": "selfstrae", "setting": "ceco_linear_sentential_k2_u2", "language": "xx",
             "columns": {"A": {"task": "a"}, "Score": {"mean_of": ["a", "b"]}}, "rows": [{"label": "X"}]}
    rows = [_row(0, "a", 10.0), _row(0, "b", 10.0), _row(1, "a", 20.0), _row(1, "b", 20.0), _row(2, "a", 30.0)]
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cells = report.build_table("t", {"tables": {"t": table}}, report.load_scores(path), tmp_path, {})
    by_column = cells.set_index("column")
    assert by_column.loc["A", "n_seeds"] == 3 and by_column.loc["Score", "n_seeds"] == 2
    assert "seed 2 lacks a task of this cell" in by_column.loc["Score", "note"]
    assert "seed 2" not in str(by_column.loc["A", "note"])
    assert "(n=2) (seed 2 lacks a task of this cell: left out of it)" in report.to_markdown(cells, "t")


def test_multiview_rows_read_the_setting_the_config_trains(repo_root, tmp_path):
    """config/quick.yaml trains the multi-view CTL at hidden 64 / embeddings 32 (ctl_h64_e32), the paper's table rows
    name ctl_h1000_e300: given the config, a row reads the config's setting and the table says so; without it, the
    row reads the paper's setting (here: not run). A model the config does not train keeps its row's setting."""
    from strae.report.record import load_config

    config = load_config([repo_root / "config/config.yaml", repo_root / "config/quick.yaml"])
    scores = pd.read_csv(repo_root / "reproductions/multiview-cpu-2026-11-28/scores.csv", low_memory=False)
    scores = scores[scores["model"] == "multiview_ctl"].copy()
    for column in ("setting", "eval_setting"):
        if column in scores:
            scores[column] = scores[column].astype(str).str.replace("ctl_h1000_e300", "ctl_h64_e32")
    path = tmp_path / "scores.csv"
    scores.to_csv(path, index=False)
    tables = report.load_tables(repo_root / "config/tables.yaml")
    frame = report.load_scores(path)

    def ctl_cells(config_given):
        cells, markdown = report.render("multiview_table1", tables, config_given, frame, repo_root / "paper_tables", {})
        ctl = cells[cells["row"] == "Contrastive Tree"]
        return ctl, cells[cells["row"] == "Contrastive LSTM (CL)"], markdown

    ctl, cl, markdown = ctl_cells(config)
    assert len(ctl) and (ctl["status"] == "ok").all() and set(ctl["setting"]) == {"ctl_h64_e32"}
    assert "Row `Contrastive Tree` reads multiview_ctl/ctl_h64_e32" in markdown and "ctl_h1000_e300" in markdown
    assert (cl["status"] == "not run").all() and set(cl["setting"]) == {"cl_h1000_e300"}  # quick trains no CL
    ctl, _, markdown = ctl_cells(None)
    assert (ctl["status"] == "not run").all() and "reads multiview_ctl" not in markdown
    # the paper config trains the paper's sizes: the rows as declared, no note
    _, _, markdown = ctl_cells(load_config(repo_root / "config/config.yaml"))
    assert "reads multiview_" not in markdown


def test_the_floor_row_becomes_one_row_per_configured_width():
    """multiview.senteval.random_token: a list = one floor row per width (``model`` = 2 x hidden, duplicates once),
    with a note; ``true`` (the committed records' configs) = the row as declared; ``false`` = no floor run."""
    from baselines.multiview import floor_dims

    tables = {"tables": {"t": {"title": "t", "columns": {"MR": {"task": "MR"}}, "rows": [
        {"label": "CTL", "model": "multiview_ctl", "setting": "ctl_h1000_e300"},
        {"label": "random-token floor", "model": "random-token", "setting": "dim256", "per_floor_width": True}]}}}

    def config(chosen, hidden=1000):
        return {"multiview": {"enabled": True, "models": ["ctl"], "train": {"hidden": hidden},
                              "senteval": {"random_token": chosen}}}

    assert floor_dims(config(True)) == [256] and floor_dims(config(False)) == [] and floor_dims({}) == [256]
    assert floor_dims(config([256, "model", 2000])) == [256, 2000]
    assert floor_dims(config(["model", 64], hidden=64)) == [128, 64]
    expanded, notes = report.with_config_settings(tables, "t", config([256, "model"]))
    rows = expanded["tables"]["t"]["rows"]
    assert [(r["label"], r["setting"]) for r in rows] == [
        ("CTL", "ctl_h1000_e300"), ("random-token floor (256-d)", "dim256"), ("random-token floor (2000-d)", "dim2000")]
    assert notes and "(256, 2000)" in notes[0]
    for chosen in (True, False):
        same, notes = report.with_config_settings(tables, "t", config(chosen))
        assert same["tables"]["t"]["rows"] == tables["tables"]["t"]["rows"] and notes == []
