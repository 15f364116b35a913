"""Adding a language from one config block: inline eval sets, the published formats' readers and their errors,
BPEmb by language code (checksummed, offline fallback), a right-to-left uncased script end to end, report columns."""
from __future__ import annotations

import csv
import json
import math
import urllib.error

import numpy as np
import pandas as pd
import pytest
import yaml

from strae.data import fetch
from strae.data import tokenizer as tokenizer_module
from strae.data.fetch import ChecksumError
from strae.data.pretokenize import pretokenize
from strae.data.segment import iter_sentences
from strae.data.tokenized import tokenize_corpus
from strae.evaluate import harness
from strae.evaluate.tasks import FORMATS, read_pairs
from strae.io import sha256_file
from strae.report import tables as report

# Algerian Arabic as SemRel-2024 publishes it (Track A arq_test_with_labels.csv: PairID,Text,Score; the second
# sentence after a newline with a stray leading space), plus Arabic-Indic digits and a pair with doubled spaces.
SEMREL_ROWS = [
    ("ARQ-test-0001", "راسي يوجع بالصح ما رانيش حاب نرقد\n جوايه لحداش هكاك نرقد الوقت هداك هو", "0.69"),
    ("ARQ-test-0002", "راه قريب يغلق شهر ٣\n بابا بالخميس راح لتبسة", "0.41"),
    ("ARQ-test-0003", "مسا الخير سليمة\n مسا الخير  كريمة ", "0.81"),
]


def write_semrel(path, rows=SEMREL_ROWS, header=("PairID", "Text", "Score")):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


# ------------------------------------------------------------------------------------------------ readers
def test_semrel2024_as_published(tmp_path):
    pairs = read_pairs(write_semrel(tmp_path / "arq_test.csv"), "sentence", 3, file_format="semrel2024")
    assert pairs.left[0] == "راسي يوجع بالصح ما رانيش حاب نرقد"
    assert pairs.right[0] == "جوايه لحداش هكاك نرقد الوقت هداك هو"  # stray leading space gone
    assert pairs.right[2] == "مسا الخير كريمة"  # whitespace normalised like the corpus
    assert pairs.left[1].endswith("٣")  # digits untouched here: the tokenizer maps them, on both sides
    np.testing.assert_array_equal(pairs.gold, [0.69, 0.41, 0.81])
    assert pairs.gold_text == ["0.69", "0.41", "0.81"]


@pytest.mark.parametrize("rows, header, line, problem", [
    ([("P1", "only one sentence", "0.5")], ("PairID", "Text", "Score"), 2, "Text holds 1 line"),
    ([("P1", "a\n b", "0.5"), ("P2", "c\n d", "high")], ("PairID", "Text", "Score"), 4,
     "score 'high'"),
    ([("P1", "a\n b", "0.5", "x")], ("PairID", "Text", "Score"), 2, "4 fields"),
    ([("P1", "a", "b", "0.5")], ("sent1", "sent2", "score"), 1, "header"),
])
def test_malformed_semrel_names_file_line_and_columns(tmp_path, rows, header, line, problem):
    path = write_semrel(tmp_path / "bad.csv", rows, header)
    with pytest.raises(SystemExit) as error:
        read_pairs(path, "sentence", file_format="semrel2024")
    message = str(error.value)
    assert message.startswith(f"{path}:{line}: ") and problem in message
    assert FORMATS["semrel2024"][1] in message  # the expected columns


def test_sts_tsv_and_word_pairs(tmp_path):
    (tmp_path / "sts.tsv").write_text('4.2\tA man "plays\tA man  plays\n\n0\tx\ty\n', encoding="utf-8")
    pairs = read_pairs(tmp_path / "sts.tsv", "sentence", 2, file_format="sts_tsv")
    assert (pairs.left, pairs.right, list(pairs.gold)) == (['A man "plays', "x"], ["A man plays", "y"], [4.2, 0.0])
    # the STS Benchmark release layout, including a line with trailing source fields and an unbalanced quote
    (tmp_path / "sts-test.csv").write_text(
        "main-captions\tMSRvid\t2012test\t0001\t5.000\tA girl is styling her hair.\tA girl is brushing her hair.\n"
        'main-news\theadlines\t2013\t0002\t1.5\tHe said "no\tShe left\tsrc-a\tsrc-b\n', encoding="utf-8")
    pairs = read_pairs(tmp_path / "sts-test.csv", "sentence", 2, file_format="stsb_tsv")
    assert (pairs.right, list(pairs.gold)) == (["A girl is brushing her hair.", "She left"], [5.0, 1.5])
    assert pairs.left[1] == 'He said "no'
    (tmp_path / "sts-test.csv").write_text("main\tMSRvid\t2012\t1\t5.0\tonly one sentence\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"sts-test.csv:1: 6 tab-separated fields; format stsb_tsv expects genre"):
        read_pairs(tmp_path / "sts-test.csv", "sentence", file_format="stsb_tsv")
    for text in ("word1\tword2\tsim\ncat\tdog\t7.5\nsea\tsky\t2\n", "cat,dog,7.5\nsea,sky,2\n",
                 "w1,w2,score\ncat,dog,7.5\nsea,sky,2\n"):
        (tmp_path / "words.txt").write_text(text, encoding="utf-8")
        pairs = read_pairs(tmp_path / "words.txt", "word", 2, file_format="word_pairs")
        assert (pairs.left, pairs.right, list(pairs.gold)) == (["cat", "sea"], ["dog", "sky"], [7.5, 2.0])
    (tmp_path / "words.txt").write_text("cat\tdog\t7.5\nsea\tsky\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"words.txt:2: 2 tab-separated fields; format word_pairs expects"):
        read_pairs(tmp_path / "words.txt", "word", file_format="word_pairs")
    with pytest.raises(SystemExit, match="unknown format 'stsb'"):
        read_pairs(tmp_path / "words.txt", "word", file_format="stsb")
    with pytest.raises(SystemExit, match="format semrel2024 holds sentence-level pairs"):
        read_pairs(tmp_path / "words.txt", "word", file_format="semrel2024")


# ------------------------------------------------------------------------------------------------ inline = catalogue
class LengthEncoder:
    """Deterministic toy encoder: a text's vector is (length, number of spaces, 1)."""

    encoder_id = "length"

    def encode_sentences(self, texts, batch_size=None):
        return np.array([[len(t), t.count(" "), 1.0] for t in texts], dtype=np.float32)

    encode_words = encode_sentences

    def describe(self):
        return {"encoder_id": "length"}

    def run_info(self):
        return {"model": "length", "setting": "toy", "seed": 0, "status": "completed", "failure_reason": None}


def test_inline_set_scores_and_records_like_a_catalogue_task(tmp_path, monkeypatch):
    """The same pairs as a catalogue task (mirror CSV) and as an inline set (SemRel layout, url + sha256)."""
    semrel = write_semrel(tmp_path / "arq_test.csv")
    mirror_csv = tmp_path / "data" / "arq.csv"
    mirror_csv.parent.mkdir()
    with open(mirror_csv, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["sent1", "sent2", "score"])
        for _, text, score in SEMREL_ROWS:
            first, second = text.split("\n")
            writer.writerow([" ".join(first.split()), " ".join(second.split()), score])
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [
        {"name": "arq_catalogued", "variant": "paper", "language": "arq", "level": "sentence", "registry": "arq",
         "split": "test", "rows": 3, "score_range": [0, 1], "aggregation": "single"}]}))
    url = "https://example.invalid/Track%20A/arq/arq_test_with_labels.csv"
    config = {"data": {"tasks": str(tmp_path / "tasks.yaml"), "resources_dir": str(tmp_path / "resources")},
              "languages": {"arq": {
                  "eval_sets": {"arq_inline": {"url": url, "sha256": sha256_file(semrel), "format": "semrel2024",
                                               "level": "sentence", "split": "test", "score_range": [0, 1],
                                               "rows": 3}},
                  "eval": {"paper": ["arq_catalogued", "arq_inline"]}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    def download(got_url, tmp):  # the "network": serves the published file at its url
        assert got_url == url
        tmp.write_bytes(semrel.read_bytes())
        return sha256_file(tmp)

    monkeypatch.setattr(fetch, "_download", download)
    monkeypatch.setattr(harness, "load_encoder", lambda spec, **options: LengthEncoder())
    registry_path = tmp_path / "registry.yaml"
    registry_path.write_text(yaml.safe_dump({"arq": {
        "path": "arq.csv", "sha256": sha256_file(mirror_csv), "kind": "eval", "language": "arq",
        "license": "test", "source": {}}}))
    resolver = harness.make_resolver(tmp_path / "resources", registry_path)
    doc = harness.evaluate("length", "arq", "paper", config_path=str(tmp_path / "config.yaml"),
                           resolve=lambda spec: resolver(spec) if isinstance(spec, dict) else mirror_csv,
                           progress=False).to_dict()
    catalogued, inline = doc["tasks"]["arq_catalogued"], doc["tasks"]["arq_inline"]
    assert inline["score"] == catalogued["score"] and inline["n_pairs"] == catalogued["n_pairs"] == 3
    assert (inline["origin"], inline["format"], inline["data_id"]) == ("inline", "semrel2024", url)
    assert (catalogued["origin"], catalogued["format"], catalogued["registry"]) == ("catalogue", "mirror_csv", "arq")
    shared = {"level", "split", "variant", "language", "score_range", "aggregation", "headline_metric", "scores"}
    assert {k: inline[k] for k in shared} == {k: catalogued[k] for k in shared}
    assert doc["provenance"]["data_files"] == {"arq": catalogued["sha256"], url: sha256_file(semrel)}
    assert doc["planned_tasks"] == ["arq_catalogued", "arq_inline"]


def test_inline_name_must_not_shadow_a_catalogue_task():
    from strae.evaluate.tasks import Task, TaskCatalog, language_tasks

    catalog = TaskCatalog([Task("dup", "paper", "xx", "word", "r", "test", (0, 1), "single")])
    config = {"languages": {"xx": {"eval_sets": {"dup": {"path": "f", "level": "word", "split": "test",
                                                         "score_range": [0, 1]}},
                                   "eval": {"paper": ["dup"]}}}}
    with pytest.raises(SystemExit, match="eval_sets.dup: the name is also a task"):
        language_tasks(catalog, config, "xx", "paper")


# ----------------------------------------------------------------------------------------------- right-to-left, uncased
ARABIC_LETTERS = "ابتثجحخدذرزسشصضطظعغفقكلمنهويأىة"


def _arabic_paragraphs(n=400, seed=3):
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list(ARABIC_LETTERS), size=rng.integers(2, 6))) for _ in range(120)]
    paragraphs = []
    for _ in range(n):
        sentences = [" ".join(rng.choice(words, size=rng.integers(4, 9))) + rng.choice([".", "؟", "!"])
                     for _ in range(rng.integers(1, 4))]
        paragraphs.append(" ".join(sentences))
    return paragraphs


def test_right_to_left_uncased_script_round_trips(tmp_path):
    """Arabic script (right to left, no case, Arabic-Indic digits): paragraph-per-line text is segmented by the
    block's segmenter, pretokenised, tokenised by a model trained on it; eval text read from a published file
    reaches the tokenizer exactly as the corpus does."""
    paragraphs = _arabic_paragraphs()
    paragraphs[0] = "في عام ٢٠٢٤ بدأ السباق.  هل انتهى؟ نعم!"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    sentences = list(iter_sentences([corpus], "ar"))
    assert sentences[:3] == ["في عام ٢٠٢٤ بدأ السباق.", "هل انتهى؟", "نعم!"]
    assert len(sentences) > len(paragraphs)  # paragraphs were split into sentences
    assert all(pretokenize(s, "none") == s for s in sentences)
    segmented = tmp_path / "train.txt"
    segmented.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    record = tokenizer_module.train_sentencepiece(segmented, tmp_path / "ar.model", requested_vocab=300, threads=1)
    tokenizer = tokenizer_module.load_tokenizer(tmp_path / "ar.model", pretokenize="none")
    for sentence in sentences[:50]:
        assert sentence.lower() == sentence  # uncased: lowercasing is the identity
        assert tokenizer.decode(tokenizer.encode(sentence)) == tokenizer_module.normalize(sentence)
        assert tokenizer.unk_id not in tokenizer.encode(sentence)
    assert tokenizer.normalize(sentences[0]) == "في عام 0000 بدأ السباق."  # Arabic-Indic digits -> 0
    # treebank pretokenisation only re-spaces punctuation: every letter and digit survives, in order
    treebank = tokenizer_module.load_tokenizer(tmp_path / "ar.model", pretokenize="treebank")
    for sentence in sentences[:50]:
        assert pretokenize(sentence, "treebank").replace(" ", "") == sentence.replace(" ", "")
        expected = tokenizer_module.normalize(pretokenize(sentence, "treebank"))
        assert treebank.decode(treebank.encode(sentence)) == expected
    assert treebank.normalize(sentences[0]) == "في عام 0000 بدأ السباق ."
    assert record["alphabet_size"] >= len(ARABIC_LETTERS)
    # the same sentences as a published SemRel file: the eval side reaches the same ids
    path = write_semrel(tmp_path / "eval.csv", [("P1", f"  {sentences[0]}\n {sentences[1]}  ", "1")])
    pairs = read_pairs(path, "sentence", file_format="semrel2024")
    assert tokenizer.encode(pairs.left[0]) == tokenizer.encode(sentences[0])
    assert tokenizer.encode(pairs.right[0]) == tokenizer.encode(sentences[1])


# ------------------------------------------------------------------------------------------------ BPEmb by language
def _bpemb_config(tmp_path, sentences, **tokenizer):
    corpus_dir = tmp_path / "resources" / "corpora" / "xx"
    corpus_dir.mkdir(parents=True)
    (corpus_dir / "train.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    config = {"data": {"resources_dir": str(tmp_path / "resources"), "registry": "config/registry.yaml"},
              "languages": {"xx": {"tokenizer": {"kind": "bpemb", "language": "xx", "vocab_size": 300, **tokenizer},
                                   "corpus": [{"path": "x"}], "eval": {}}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_bpemb_by_language_offline_falls_back_to_sentencepiece(tmp_path, monkeypatch):
    def offline(url, tmp):
        assert url == "https://nlp.h-its.org/bpemb/xx/xx.wiki.bpe.vs300.model"
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(fetch, "_download", offline)
    monkeypatch.delenv(fetch.MIRROR_ENV, raising=False)
    sentences = [" ".join(p.split()[:8]) for p in _arabic_paragraphs(300)]
    config = _bpemb_config(tmp_path, sentences)
    record = tokenizer_module.build_tokenizer("xx", config, out=tmp_path / "xx.model")
    assert (record["kind"], record["requested_kind"], record["bpemb_language"]) == ("sentencepiece", "bpemb", "xx")
    assert "no network" in record["fallback_reason"] and record["requested_vocab_size"] == 300
    assert json.loads((tmp_path / "xx.json").read_text())["fallback_reason"] == record["fallback_reason"]
    # the tokenised corpus, and so every run's train.json `data` block, says which tokenizer it was and why
    meta = tokenize_corpus(tmp_path / "resources" / "corpora" / "xx", tmp_path / "xx.model", tmp_path / "tokenized",
                           splits=("train",))["train"]
    assert (meta["tokenizer_kind"], meta["tokenizer_requested_kind"]) == ("sentencepiece", "bpemb")
    assert meta["tokenizer_fallback_reason"] == record["fallback_reason"]
    config = _bpemb_config(tmp_path / "strict", sentences, fallback="none")
    with pytest.raises(SystemExit, match="BPEmb model tokenizers/xx.wiki.bpe.vs300.model"):
        tokenizer_module.build_tokenizer("xx", config, out=tmp_path / "strict.model")


def test_bpemb_by_language_is_checksummed(tmp_path, monkeypatch):
    sentences = [" ".join(p.split()[:8]) for p in _arabic_paragraphs(300)]
    (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    tokenizer_module.train_sentencepiece(tmp_path / "corpus.txt", tmp_path / "model.model", requested_vocab=300,
                                         threads=1)
    mirror = tmp_path / "mirror"
    (mirror / "tokenizers").mkdir(parents=True)
    model = mirror / "tokenizers" / "xx.wiki.bpe.vs300.model"
    model.write_bytes((tmp_path / "model.model").read_bytes())
    monkeypatch.setenv(fetch.MIRROR_ENV, str(mirror))
    monkeypatch.setattr(fetch, "_download", lambda url, tmp: pytest.fail("the mirror copy must be used"))
    config = _bpemb_config(tmp_path / "tofu", sentences)
    record = tokenizer_module.build_tokenizer("xx", config, out=tmp_path / "a.model")
    assert record["kind"] == "bpemb" and record["checksum"] == "trust on first use"
    assert record["sha256"] == sha256_file(model)
    placed = tmp_path / "tofu" / "resources" / "data" / "tokenizers" / "xx.wiki.bpe.vs300.model"
    assert (placed.parent / (placed.name + ".sha256")).read_text().strip() == sha256_file(model)
    placed.write_bytes(placed.read_bytes() + b"x")  # the file changed after its first use
    with pytest.raises(ChecksumError, match="differs from"):
        tokenizer_module.build_tokenizer("xx", config, out=tmp_path / "b.model")
    config = _bpemb_config(tmp_path / "pinned", sentences, sha256="0" * 64)
    with pytest.raises(ChecksumError):  # a wrong pinned sha256 never falls back
        tokenizer_module.build_tokenizer("xx", config, out=tmp_path / "c.model")
    assert not (tmp_path / "c.model").exists()


# ------------------------------------------------------------------------------------------------ report tables
def test_language_block_adds_a_table_column_with_no_paper_value(tmp_path):
    tables = {"tables": {"langs": {"title": "t", "paper_file": "langs.csv", "model": "banyan", "columns": {
        "Old": {"language": "aa", "task": "old_task"}}, "rows": [{"label": "Banyan", "setting": "s"}]}}}
    (tmp_path / "langs.csv").write_text("row,column,mean,std,note\nBanyan,Old,50.0,,\n")
    config = {"languages": {"aa": {}, "arq": {"label": "Algerian Arabic", "tables": {"langs": "semrel_arq"}}}}
    rows = [{"schema_version": 2, "language": lang, "model": "banyan", "setting": "s", "seed": seed,
             "status": "completed", "failure_reason": "", "variant": "paper", "task": task, "subset": "",
             "level": "sentence", "score": score, "n_pairs": 3, "n_oov": 0, "split": "test", "encoder_id": "x",
             "git_sha": "x", "device": "cpu", "source_json": f"results/eval/{lang}/banyan/s/seed{seed}.paper.json"}
            for lang, task, seed, score in [("aa", "old_task", 0, 40.0), ("arq", "semrel_arq", 0, 30.0),
                                            ("arq", "semrel_arq", 1, 34.0)]]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    extended = report.with_language_entries(tables, "langs", config)
    assert list(extended["tables"]["langs"]["columns"]) == ["Old", "Algerian Arabic"]
    assert list(tables["tables"]["langs"]["columns"]) == ["Old"]  # the declaration itself is not changed
    cells = report.build_table("langs", extended, report.load_scores(tmp_path / "scores.csv"), tmp_path, {})
    new = cells[cells.column == "Algerian Arabic"].iloc[0]
    assert (new.status, new["mean"], new.n_seeds) == ("ok", 32.0, 2) and math.isnan(new.paper_mean)
    assert report.format_cell(new).endswith("paper —")
    old = cells[cells.column == "Old"].iloc[0]
    assert report.format_cell(old).endswith("paper 50.00 · Δ -10.00")


def test_a_language_added_to_semeval_table3_gets_a_best_seed(repo_root, tmp_path):
    """SemEval Table 3 picks each row's seed on its development columns (`select_on`), which name only the paper's
    two languages: a language a block adds has only its own (test) column, so its seed is the best there, and the
    table says it is an optimistic pick, not read "missing". The paper's rows keep their development choice."""
    tables = report.load_tables(repo_root / "config/tables.yaml")
    config = {"languages": {"af": {}, "es": {}, "arq": {"label": "Algerian Arabic",
                                                        "tables": {"selfstrae_table3": "semrel_arq"}}}}
    setting = "ceco_linear_sentential_k128_u2"
    rows = [{"schema_version": 2, "language": lang, "model": "selfstrae", "setting": setting, "seed": seed,
             "status": "completed", "failure_reason": "", "variant": "paper", "task": task, "subset": "",
             "level": "sentence", "score": score, "n_pairs": 3, "n_oov": 0, "split": "test", "encoder_id": "x",
             "git_sha": "x", "device": "cpu",
             "source_json": f"results/eval/{lang}/selfstrae/{setting}/seed{seed}.paper.json"}
            for lang, task, seed, score in [("arq", "semrel_arq", 0, 30.0), ("arq", "semrel_arq", 1, 34.0),
                                            ("af", "stsb_nl_dev", 0, 10.0), ("af", "stsb_nl_dev", 1, 20.0),
                                            ("af", "stsb_nl", 0, 50.0), ("af", "stsb_nl", 1, 40.0)]]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    scores = report.load_scores(tmp_path / "scores.csv")
    cells, markdown = report.render("selfstrae_table3", tables, config, scores, repo_root / "paper_tables", {})
    new = cells[(cells.row == "Algerian Arabic") & (cells.column == "Algerian Arabic")].iloc[0]
    assert (new.status, new["mean"], new.best_seed) == ("ok", 34.0, 1)
    assert "Row `Algerian Arabic`: no development column of its own" in markdown and "optimistic" in markdown
    af = cells[(cells.row == "Afrikaans") & (cells.column == "NL STS-B (Test)")].iloc[0]
    assert (af["mean"], af.best_seed) == (40.0, 1)  # chosen on its dev column, not on the better test score
    assert "Row `Afrikaans`" not in markdown
    clash = {"languages": {"arq": {"label": "Afrikaans", "tables": {"banyan_table5": "semrel_arq"}}}}
    with pytest.raises(SystemExit, match="languages.arq.tables.banyan_table5: the table has a column 'Afrikaans' of "
                       "another language already; give languages.arq.label another name"):
        report.with_language_entries(tables, "banyan_table5", clash)


def test_config_checks_name_what_a_new_language_still_needs(monkeypatch):
    """Cross-key checks at DAG time, each naming the key: a table entry for a language no experiment trains; a
    language only a baseline evaluates, without tasks; tokenizer keys kind sentencepiece ignores; a raw inline set
    in the paper variant of a pretokenised language; a multi-view language without its corpus or parser."""
    import copy

    from strae import plan
    from test_workflow import REPO, paper_config

    monkeypatch.chdir(REPO)
    base = paper_config()
    block = {"corpus": [{"path": "config/config.yaml"}], "tokenizer": {"kind": "sentencepiece", "vocab_size": 100},
             "eval": {"paper": ["semrel_afr_test"]}, "tables": {"banyan_table5": "semrel_afr_test"}}

    def errors(edit):
        config = copy.deepcopy(base)
        config["languages"]["xx"] = copy.deepcopy(block)
        edit(config)
        return [e for e in plan.check_config(config) if "xx" in e]

    untrained = errors(lambda c: None)
    (table_error,) = [e for e in untrained if e.startswith("languages.xx.tables.banyan_table5: no experiment")]
    assert "add 'xx' to the `languages` of the experiment that trains banyan/ce_diagonal_entangled_k128_u2" in \
        table_error
    assert not [e for e in errors(lambda c: c["experiments"]["banyan_languages"]["languages"].append("xx"))
                if "tables" in e]

    def baseline_only(config):
        del config["languages"]["xx"]["eval"], config["languages"]["xx"]["tables"]
        config["baselines"]["glove"].update(enabled=True, languages=["en", "xx"])
    assert "languages.xx.eval.paper: no tasks listed, but scale.eval_variants has it" in errors(baseline_only)

    def pretrained_file(config):
        config["languages"]["xx"]["tokenizer"]["path"] = "model.model"
    assert [e for e in errors(pretrained_file) if e.startswith("languages.xx.tokenizer: ['path'] describe a "
                                                                "pre-trained model file")]

    def inline_paper_set_of_a_pretokenised_language(config):
        block = config["languages"]["xx"]
        block.update(pretokenize="treebank", eval_sets={"mine": {"path": "config/config.yaml", "level": "sentence",
                                                                 "split": "test", "score_range": [0, 5]}})
        block["eval"] = {"paper": ["mine"], "official": ["mine"]}
        del block["tables"]
    assert [e for e in errors(inline_paper_set_of_a_pretokenised_language)] == [
        "languages.xx.eval.paper: inline set 'mine' would be embedded without this language's pretokenize (treebank), "
        "which its runs trained with; list it under languages.xx.eval.official (embedded as the runs' corpus was) "
        "and add `official` to scale.eval_variants"]

    def multiview_language(config):
        config["multiview"]["languages"].append("xx")
    assert {e.split(":")[0] for e in errors(multiview_language)} >= {"multiview.corpora.xx", "multiview.parsers.xx"}


def test_fetch_places_a_blocks_inline_eval_sets(tmp_path, monkeypatch):
    """`strae fetch --language LANG` (the fetch_all rule for air-gapped clusters) places the block's inline eval
    sets its task lists name: url sets downloaded and verified, local ones checked; a manifest records file and
    sha256 of each."""
    semrel = write_semrel(tmp_path / "published.csv")
    url = "https://example.invalid/arq_test_with_labels.csv"

    def download(got_url, tmp):
        assert got_url == url
        tmp.write_bytes(semrel.read_bytes())
        return sha256_file(tmp)

    monkeypatch.setattr(fetch, "_download", download)
    common = {"format": "semrel2024", "level": "sentence", "split": "test", "score_range": [0, 1]}
    config = {"data": {"resources_dir": str(tmp_path / "resources"), "registry": "config/registry.yaml"},
              "languages": {"arq": {"eval_sets": {"remote": {"url": url, "sha256": sha256_file(semrel), **common},
                                                  "local": {"path": str(semrel), **common}},
                                    "eval": {"paper": ["remote", "local"]}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    manifest = tmp_path / "manifest.json"
    assert fetch.main(["--language", "arq", "--config", str(tmp_path / "config.yaml"), "--resources-dir",
                       str(tmp_path / "resources"), "--manifest", str(manifest)]) == 0
    placed = json.loads(manifest.read_text())["arq"]
    assert placed[url]["sha256"] == placed[str(semrel)]["sha256"] == sha256_file(semrel)
    assert placed[url]["file"].startswith(str(tmp_path / "resources" / "data" / "external"))
    config["languages"]["arq"]["eval_sets"]["remote"]["sha256"] = "f" * 64  # a different file than published
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ChecksumError):
        fetch.fetch_language_files("arq", tmp_path / "config.yaml", resources_dir=tmp_path / "other")


def test_readme_example_block_is_a_valid_language_block(monkeypatch):
    """The README's complete block (SemRel-2024 Marathi from upstream) passes the schema and the cross-key checks
    once its two sha256 placeholders are filled in; a url without its sha256 is refused, naming the key."""
    import copy
    import re

    from strae import plan
    from test_workflow import REPO, _schema_errors, paper_config

    monkeypatch.chdir(REPO)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Adding a language"):]
    block_text = re.search(r"```yaml\n(languages:\n.*?)```", section, re.S).group(1)
    assert block_text.count("<fill in on first fetch") == 2  # never a made-up hash
    block = yaml.safe_load(block_text.replace("<fill in on first fetch: curl -sL URL | sha256sum>", "0" * 64))  # quoted
    config = copy.deepcopy(paper_config())
    config["languages"].update(block["languages"])
    config["experiments"]["banyan_languages"]["languages"].append("mar")
    assert _schema_errors(config) == [] and plan.check_config(config) == []
    for spec in block["languages"]["mar"]["eval_sets"].values():
        assert spec["url"].startswith("https://raw.githubusercontent.com/semantic-textual-relatedness/"
                                      "Semantic_Relatedness_SemEval2024/")
    del config["languages"]["mar"]["eval_sets"]["semrel_mar_dev"]["sha256"]
    assert any(e.startswith("languages.mar.eval_sets.semrel_mar_dev.sha256: a url needs")
               for e in plan.check_config(config))
