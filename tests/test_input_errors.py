"""Bad input a user can hit is an error naming the file (and line or key), not a bare traceback from Python or a
library: each case here was met as one (a read-only audit, 2026-11-30) and fails on the code before it."""
from __future__ import annotations

import json

import pytest

from strae.io import text_lines
from strae.yamlio import read_yaml

LATIN1 = "café".encode("latin-1")


def test_a_config_key_given_twice_is_refused_naming_both_lines(tmp_path):
    """yaml.safe_load keeps the last of two `data:` blocks and drops the first without a word."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("data:\n  tokens_per_language: 1000\nscale:\n  device: cpu\ndata:\n  dev_sentences: 5\n")
    with pytest.raises(SystemExit, match=r"overlay.yaml:5: key 'data' given twice \(first on line 1\)"):
        read_yaml(overlay)
    anchors = tmp_path / "anchors.yaml"  # a merge key's values may be overridden: not a duplicate
    anchors.write_text("base: &b {p: 1, q: 2}\nderived:\n  <<: *b\n  p: 5\n")
    assert read_yaml(anchors)["derived"] == {"p": 5, "q": 2}
    # ... also when a merge reaches a mapping before it is built (whose own merge then overrides a key)
    anchors.write_text("base: &base {k: 0, j: 0}\nx:\n  inner: &in\n    <<: *base\n    k: 1\ny:\n  <<: *in\n")
    assert read_yaml(anchors)["y"] == {"k": 1, "j": 0}
    anchors.write_text("b: &b {q: 1}\nc:\n  <<: *b\n  z: 1\n  z: 2\n")  # a duplicate after a merge still is one
    with pytest.raises(SystemExit, match="anchors.yaml:5: key 'z' given twice"):
        read_yaml(anchors)


def test_config_files_are_read_as_snakemake_reads_them_json_first(tmp_path):
    from strae.yamlio import read_config_file

    tabs = tmp_path / "overlay.json"  # tab-indented JSON is not YAML
    tabs.write_text('{\n\t"scale": {\n\t\t"device": "cpu"\n\t}\n}\n')
    assert read_config_file(tabs) == {"scale": {"device": "cpu"}}
    tabs.write_text('{"scale": {"device": "cpu"}, "scale": {}}')
    with pytest.raises(SystemExit, match="overlay.json: key 'scale' given twice in one object"):
        read_config_file(tabs)


def test_config_and_sheet_files_that_are_not_utf8_are_named(tmp_path):
    from strae.data.registry import RegistryError, read_config_layer
    from strae.schemas import SheetError, load_sheet

    config = tmp_path / "config.yaml"
    config.write_bytes(b"data:\n  resources_dir: resources  # " + LATIN1 + b"\n")
    with pytest.raises(RegistryError, match="config.yaml: not a UTF-8 text file"):
        read_config_layer(config)
    with pytest.raises(SheetError, match="config.yaml: not a UTF-8 text file"):
        load_sheet(config, "config")


def test_an_encoder_option_that_is_not_yaml_names_the_flag_and_the_config_key():
    from strae.evaluate.harness import parse_encoder_option
    from strae.plan import _stopword_errors

    with pytest.raises(SystemExit, match=r"--encoder-option 'stopwords=\[remove': the value is not YAML"):
        parse_encoder_option("stopwords=[remove")
    errors = _stopword_errors({}, "glove", {"languages": ["en"], "eval_options": {"rm": ["stopwords=[remove"]}})
    assert len(errors) == 1 and errors[0].startswith("baselines.glove.eval_options.rm: --encoder-option")


def test_a_pair_file_with_a_quote_never_closed_names_the_line(tmp_path):
    """The quote swallows the rest of a large file into one field, past csv's field size limit."""
    from strae.evaluate.tasks import EvalFileError, read_pairs

    rows = ["sent1,sent2,score", '"a cat sat,a dog ran,1.0'] + [f"words {i},more words {i},2.5" for i in range(9000)]
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(EvalFileError, match=r"pairs.csv:2: .*a quote opened on this line and never closed"):
        read_pairs(path, "sentence")


def test_a_paper_table_with_an_unquoted_comma_or_a_typo_is_named(tmp_path):
    from strae.report.tables import load_paper_table

    header = "row,column,mean,std,note\n"
    table = tmp_path / "table1.csv"
    table.write_text(header + "Banyan,STS-12,51.2,0.1,\nBanyan,STS-13,3l.98,,\n")
    with pytest.raises(SystemExit, match=r"table1.csv:3: mean '3l.98' is not a number"):
        load_paper_table(table)
    table.write_text(header + "Banyan,STS-12,51.2,0.1,from Table 1, left\n")
    with pytest.raises(SystemExit, match=r"table1.csv:2: 6 fields where the header has 5 \(a comma inside an"):
        load_paper_table(table)
    table.write_text(header + "Banyan,STS-12,≈51.2,,\n")  # approximate and std not published: both fine
    cell = load_paper_table(table)[("", "Banyan", "STS-12")]
    assert cell["mean"] == 51.2 and cell["std"] != cell["std"]


def test_senteval_files_in_another_encoding_and_unknown_encodings_are_named(tmp_path):
    from strae.evaluate.senteval import SentevalError, _lines, load_senteval_tasks

    data = tmp_path / "rt-polarity.neg"
    data.write_bytes(b"fine\n" + LATIN1 + b"\n")
    with pytest.raises(SentevalError, match="rt-polarity.neg: not utf-8 text"):
        _lines(data, "utf-8")
    assert _lines(data, "latin-1") == ["fine", "café"]
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks: []\nsenteval_tasks:\n  - {language: en, name: MR, reader: binary, protocol: inner_kfold, "
                     "encoding: latin-9x, folds: 10, files: {neg: a, pos: b}}\n")
    with pytest.raises(SentevalError, match=r"senteval_tasks\[0\] \(MR\): encoding 'latin-9x'"):
        load_senteval_tasks(tasks)


def test_a_corpus_that_is_not_utf8_is_named_with_the_line_it_breaks_after(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_bytes(b"one\r\ntwo\n" + LATIN1 + b"\n")
    with pytest.raises(SystemExit, match=r"train.txt:3: not UTF-8 text \(invalid continuation byte\)"):
        list(text_lines(corpus))
    corpus.write_bytes(b"a\rb\r\xff bad\rc\r")  # lines as text mode splits them (a CR alone ends one)
    with pytest.raises(SystemExit, match=r"train.txt:3: not UTF-8 text"):
        list(text_lines(corpus))
    corpus.write_bytes(b"one\r\ntwo\rthree\n")  # exactly what open(..., encoding="utf-8") yields
    assert list(text_lines(corpus)) == ["one\n", "two\n", "three\n"]

    from baselines.roberta.data import load_corpus

    corpus.write_bytes(b"one\n" + LATIN1 + b"\n")
    with pytest.raises(SystemExit, match="train.txt:2: not UTF-8 text"):
        load_corpus(None, corpus, tokenizer=None)


def test_a_bundle_whose_manifest_was_cut_short_is_named(tmp_path):
    from strae.bundle import MANIFEST, SCHEMA_VERSION, unpack

    (tmp_path / MANIFEST).write_text('{"schema_version": ' + str(SCHEMA_VERSION) + ', "resou')
    with pytest.raises(SystemExit, match=f"{MANIFEST}: not valid JSON"):
        unpack(tmp_path, tmp_path / "resources", "config/registry.yaml")
    (tmp_path / MANIFEST).write_text(json.dumps({"schema_version": SCHEMA_VERSION, "resources": []}))
    with pytest.raises(SystemExit, match="no standins, eval list; the bundle is damaged"):
        unpack(tmp_path, tmp_path / "resources", "config/registry.yaml")


def test_a_scores_csv_resaved_in_another_encoding_is_named(tmp_path):
    from strae.evaluate.aggregate import KEY_COLUMNS, check_scores_csv, read_carried

    scores = tmp_path / "scores.csv"
    scores.write_bytes((",".join(KEY_COLUMNS) + "\n").encode() + b"en,banyan," + LATIN1 + b",0,paper,sts12,,50\n")
    for read in (check_scores_csv, read_carried):
        with pytest.raises(SystemExit, match="scores.csv: not a UTF-8 CSV"):
            read(scores)


def test_a_train_json_of_the_wrong_shape_is_named(tmp_path):
    from strae.runs import RunRecord

    (tmp_path / "train.json").write_text(json.dumps({"status": "failed", "run": "en/selfstrae/x/0"}))
    with pytest.raises(SystemExit, match="train.json: not a train.json"):
        RunRecord.from_disk(tmp_path)


def test_a_multiview_corpus_that_is_not_utf8_is_named(tmp_path):
    from baselines.multiview.parse import read_books

    corpus = tmp_path / "books.txt"
    corpus.write_bytes(b"a paragraph\n" + LATIN1 + b"\n")
    with pytest.raises(SystemExit, match="books.txt: not UTF-8 text"):
        read_books(corpus)


def test_an_unreadable_recipes_file_is_one_config_error_not_one_per_model(tmp_path, monkeypatch):
    from strae import plan, recipes
    from tests.test_workflow import paper_config

    broken = tmp_path / "recipes.yaml"
    broken.write_text("recipes:\n  banyan: {lr: 1}\n  banyan: {lr: 2}\n")
    load = recipes._load
    monkeypatch.setattr(recipes, "_load", lambda path: load(str(broken)))
    errors = [e for e in plan.check_config(paper_config()) if "recipes.yaml" in e]
    assert errors == [f"recipes: {broken}:3: key 'banyan' given twice (first on line 2): the later value would "
                      "silently replace the earlier one; merge the two"]
