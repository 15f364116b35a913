"""The data sheets' JSON Schemas: the shipped sheets are valid, errors name the file and the key, every property
is described, the registry is parsed once, and table rows must name runs the config declares."""
from __future__ import annotations

import copy

import pytest
import yaml

from strae import plan, schemas
from strae.data import registry as registry_module
from strae.evaluate.senteval import load_senteval_tasks
from strae.evaluate.tasks import load_tasks
from strae.report.tables import load_tables

SHEETS = {"tasks": "config/tasks.yaml", "tables": "config/tables.yaml", "registry": "config/registry.yaml"}


@pytest.mark.parametrize("name", sorted(SHEETS))
def test_shipped_sheets_are_valid(repo_root, name):
    document = yaml.safe_load((repo_root / SHEETS[name]).read_text())
    assert schemas.schema_errors(document, name) == []


@pytest.mark.parametrize("name", ["config", *sorted(SHEETS)])
def test_every_schema_property_is_described(repo_root, name):
    schema = yaml.safe_load((repo_root / f"workflow/schemas/{name}.schema.yaml").read_text())
    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, sub in (node.get("properties") or {}).items():
                if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub:
                    missing.append(f"{where}.{key}")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(schema, name)
    assert missing == []


def _write(tmp_path, name, document):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_task_sheet_errors_name_the_file_and_key(repo_root, tmp_path):
    document = yaml.safe_load((repo_root / "config/tasks.yaml").read_text())
    bad = copy.deepcopy(document)
    bad["tasks"][0]["level"] = "paragraph"
    bad["tasks"][1]["aggregation"] = "single"
    bad["tasks"][1]["subsets"] = [{"name": "a", "registry": "eval/x"}]
    del bad["tasks"][2]["split"]
    bad["senteval_tasks"][0]["protocol"] = "loo"
    path = _write(tmp_path, "tasks", bad)
    with pytest.raises(SystemExit) as raised:
        load_tasks(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: does not match workflow/schemas/tasks.schema.yaml")
    assert "tasks.0.level: 'paragraph' is not one of ['word', 'sentence']" in message
    assert "tasks.1.aggregation: 'pooled' was expected" in message
    assert "tasks.2: 'split' is a required property" in message
    assert "senteval_tasks.0.protocol: 'loo' is not one of" in message
    with pytest.raises(SystemExit, match="senteval_tasks.0.protocol"):
        load_senteval_tasks(path)
    # the level/format pairing is checked in code, naming the entry
    bad = copy.deepcopy(document)
    bad["tasks"][0]["format"] = "semrel2024"
    with pytest.raises(SystemExit, match=r"tasks\[0\] \(simlex\): format: format semrel2024 holds sentence-level"):
        load_tasks(_write(tmp_path, "tasks2", bad))


def test_tables_sheet_errors_name_the_file_and_key(repo_root, tmp_path):
    document = yaml.safe_load((repo_root / "config/tables.yaml").read_text())
    document["tables"]["selfstrae_table1"]["rows"][0]["seting"] = "x"
    document["tables"]["banyan_table1"]["columns"]["Score"]["metric"] = "pearson"
    document["tables"]["table_of_contents"] = document["tables"]["banyan_table1"]
    document["figures"]["ku_curves"]["kind"] = "pie"
    path = _write(tmp_path, "tables", document)
    with pytest.raises(SystemExit) as raised:
        load_tables(path)
    message = str(raised.value)
    assert "tables.selfstrae_table1.rows.0: Additional properties are not allowed ('seting' was unexpected)" in message
    assert "tables.banyan_table1.columns.Score.metric: 'pearson' is not one of" in message
    assert "'table_of_contents' does not match" in message
    assert "figures.ku_curves.kind: 'pie' is not one of" in message


def test_registry_errors_name_the_entry_and_the_registry_is_parsed_once(repo_root, tmp_path, monkeypatch):
    path = _write(tmp_path, "registry", {"eval/x/y": {"path": "eval/x/y.csv", "sha256": "ab", "kind": "evals",
                                                       "language": "xx", "source": {}}})
    with pytest.raises(registry_module.RegistryError) as raised:
        registry_module.load_registry(path)
    assert "eval/x/y: 'license' is a required property" in str(raised.value)
    assert "eval/x/y.kind: 'evals' is not one of" in str(raised.value)
    parses = []
    real = schemas.load_sheet
    monkeypatch.setattr(schemas, "load_sheet", lambda *a, **k: parses.append(a) or real(*a, **k))
    registry_module._parse_registry.cache_clear()
    first = registry_module.load_registry(repo_root / "config/registry.yaml")
    second = registry_module.load_registry(repo_root / "config/registry.yaml")
    assert len(parses) == 1 and first == second and first is not second


def test_table_run_check_names_the_row_and_spares_disabled_runs(repo_root):
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text())
    tables = load_tables(repo_root / "config/tables.yaml")
    assert plan.table_run_errors(config, tables, plan.SCORE_TABLE_PAPERS) == []
    for experiment in config["experiments"].values():
        experiment["enabled"] = False  # declared but off (config/quick.yaml): "not run" by choice
    assert plan.table_run_errors(config, tables, plan.SCORE_TABLE_PAPERS) == []
    tables = copy.deepcopy(tables)
    tables["tables"]["banyan_table3"]["rows"][1]["setting"] = "words_w10_d256@stopwords"
    errors = plan.table_run_errors(config, tables, plan.SCORE_TABLE_PAPERS)
    assert len(errors) == 1 and errors[0].startswith(
        "config/tables.yaml: tables.banyan_table3.rows.1 (+ stopword rm): run glove/words_w10_d256@stopwords")


def test_a_config_a_command_reads_alone_is_checked_for_typos_and_types(tmp_path):
    """`strae prepare-corpus/tokenizer/tokenize-corpus/fetch/evaluate --config FILE` read FILE without the Snakefile's
    check: a misspelt key or a wrong type is named at once; a file holding only what the command reads passes."""
    import yaml

    from strae.data.registry import load_config
    from strae.evaluate import harness

    partial = tmp_path / "partial.yaml"
    partial.write_text(yaml.safe_dump({"data": {"min_subword_tokens": 4}, "languages": {"xx": {"segmenter": "en"}}}))
    assert load_config(partial)["data"]["min_subword_tokens"] == 4
    for bad, message in (({"data": {"min_subword_tokens": "four"}}, "data.min_subword_tokens: 'four' is not of type"),
                         ({"languages": {"xx": {"pretokenise": "treebank"}}}, "'pretokenise' was unexpected"),
                         # a misspelt pin would leave the authors' corpus unpinned, silently
                         ({"languages": {"xx": {"paper_source": {"corpus": [
                             {"hf_dataset": "o/c", "revison": "abc"}]}}}}, "'revison' was unexpected"),
                         ({"languages": {"xx": {"tokenizer": {"kind": "bpemb", "vocab_sise": 25000}}}},
                          "'vocab_sise' was unexpected")):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        with pytest.raises(SystemExit, match=message):
            load_config(path)
        with pytest.raises(SystemExit, match=message):
            harness.main(["--model", "random-token", "--lang", "xx", "--variant", "paper", "--config", str(path),
                          "--out", str(tmp_path / "x.json")])
    (tmp_path / "broken.yaml").write_text("data: [unclosed\n")
    with pytest.raises(SystemExit, match="broken.yaml: not valid YAML"):
        load_config(tmp_path / "broken.yaml")
