"""strae.paths: the one home of every file location (resources_dir-relative and results-relative)."""
from __future__ import annotations

from pathlib import Path

import pytest

from strae import paths, plan


def test_resources_paths_follow_the_given_root():
    root = Path("/data/strae-res")
    assert paths.corpus_dir("xx", root) == root / "corpora" / "xx"
    assert paths.corpus_file("xx", "dev", root) == root / "corpora" / "xx" / "dev.txt"
    assert paths.corpus_meta("xx", root) == root / "corpora" / "xx" / "meta.json"
    assert paths.tokenizer_model("xx", root) == root / "tokenizers" / "xx.model"
    assert paths.tokenized_dir("xx", root) == root / "tokenized" / "xx"
    assert paths.tokenized_file("xx", "train", "offsets.npy", root) == root / "tokenized" / "xx" / "train.offsets.npy"
    assert paths.data_file("eval/word/a.csv", root) == root / "data" / "eval" / "word" / "a.csv"
    assert paths.language_files_manifest("xx", "evaluation", root) == root / "data" / "fetched" / "xx.evaluation.json"
    assert paths.parses_dir("xx", "p20_sall", root) == root / "parses" / "xx" / "p20_sall"
    with pytest.raises(ValueError, match="tokenized file suffix"):
        paths.tokenized_file("xx", "train", "npy", root)


def test_the_default_root_and_the_configs_resources_dir():
    assert paths.tokenizer_model("xx") == Path("resources/tokenizers/xx.model")
    assert paths.resources_dir(None) == Path("resources")
    assert paths.resources_dir({"data": {"registry": "r.yaml"}}) == Path("resources")
    assert paths.resources_dir({"data": {"resources_dir": "/scratch/r"}}) == Path("/scratch/r")


def test_results_paths_match_the_run_plan_and_the_contract():
    run = plan.Run("xx", "banyan", "ce_diagonal_entangled_k128_u2", 3)
    assert run.run_dir == "results/runs/xx/banyan/ce_diagonal_entangled_k128_u2/seed3"
    assert paths.train_record("xx", "banyan", run.setting, 3) == Path(run.run_dir) / "train.json"
    assert run.eval_json("paper") == "results/eval/xx/banyan/ce_diagonal_entangled_k128_u2/seed3.paper.json"
    assert run.eval_json("paper", "stopword_rm").endswith("/ce_diagonal_entangled_k128_u2@stopword_rm/seed3.paper.json")
    assert paths.measurement_json("param_counts") == Path("results/measure/param_counts.json")
    assert paths.scores_csv() == Path("results/scores.csv")
    assert paths.figure_file("ku_curves", "pdf") == Path("results/figures/ku_curves.pdf")


def test_table_files_keep_the_targets_users_type():
    assert paths.table_file("selfstrae_table2", "csv") == Path("results/table2.csv")
    assert paths.table_file("banyan_table9", "md") == Path("results/banyan/table9.md")
    assert paths.table_file("multiview_table1", "csv") == Path("results/multiview/table1.csv")
    assert paths.split_table_key("banyan_table10") == ("banyan", "10")
    with pytest.raises(ValueError, match="expected <paper>_table<N>"):
        paths.split_table_key("banyan")


def test_wildcard_patterns_are_the_same_functions():
    """The workflow builds its input/output patterns by calling the functions on `{wildcard}` strings."""
    assert str(paths.tokenized_file("{lang}", "dev", "ids.npy", "R")) == "R/tokenized/{lang}/dev.ids.npy"
    assert str(paths.eval_json("{lang}", "{model}", "{setting}{option}", "{seed}", "{variant}")) == \
        "results/eval/{lang}/{model}/{setting}{option}/seed{seed}.{variant}.json"
    assert str(paths.table_path("{table_dir}", "{n}", "csv")) == "results/{table_dir}table{n}.csv"
