"""`strae coverage`: how often a corpus uses the word tasks' vocabulary, counted the same way in any script."""
from __future__ import annotations

import csv
import json

import pytest

from strae.data import coverage


def test_words_fold_case_and_split_on_punctuation_and_symbols_in_any_script():
    assert coverage.words("The CAT's mat -LRB- 3 -RRB- , e-mail!") == ["the", "cat", "s", "mat", "lrb", "3", "rrb",
                                                                       "e", "mail"]
    # combining marks are not punctuation: a word with vowel signs stays one word; the danda (U+0964) splits
    assert coverage.words("किताब। पानी,") == ["किताब", "पानी"]
    assert coverage.words("Straße\u00a0NAÏVE") == ["strasse", "naïve"]  # casefold, any whitespace


def test_coverage_counts_occurrences_types_lines_and_the_distinct_per_line_histogram():
    vocabularies = {"a": {"cat", "dog", "sun"}, "b": {"sun", "moon"}}
    lines = ["the cat and the dog, the cat", "", "sun moon sun", "nothing here", "Cat dog sun moon"]
    got = coverage.coverage(lines, vocabularies)
    assert (got["lines"], got["words"]) == (4, 7 + 3 + 2 + 4)  # the empty line is not a line
    a, b = got["sets"]["a"], got["sets"]["b"]
    assert a["occurrences"] == 3 + 2 + 3 and b["occurrences"] == 3 + 2
    assert a["per_million_words"] == round(8 / 16 * 1e6, 1)
    assert (a["types"], a["types_present"], a["types_with_10_or_more"]) == (3, 3, 0)
    assert a["lines_with_one"] == 0.75 and b["lines_with_one"] == 0.5
    assert a["distinct_per_line"] == round((2 + 1 + 0 + 3) / 4, 3)  # distinct: "cat" twice counts once
    assert a["distinct_per_line_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 1, **{str(k): 0 for k in range(4, 10)},
                                                "10+": 0}
    assert sum(b["distinct_per_line_histogram"].values()) == 4
    assert a["task_words_present"] == 1.0 and a["task_words_with_10_or_more"] == 0.0
    # weighted by the task's own running words: "moon" (absent) three times, "sun" (present) once -> 25 %
    weighted = coverage.coverage(["the sun"], {"c": coverage.task_vocabulary(["moon", "moon"], ["moon sun"])})
    assert weighted["sets"]["c"]["task_words_present"] == 0.25 and weighted["sets"]["c"]["types_present"] == 1


@pytest.mark.mirror
def test_the_command_counts_the_configured_word_tasks_and_shows_a_selected_corpus_floor(
        mirror, repo_root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # resources/ (the fetched task files) lands here
    wordsim = set()
    for name in ("wordsim353_sim", "wordsim353_rel"):
        with open(mirror / "eval" / "word" / f"{name}.csv", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                wordsim |= {row["word1"].lower(), row["word2"].lower()}
    chosen = sorted(wordsim)
    # a corpus drawn for the vocabulary: every line five distinct WordSim words; a plain one: mostly none
    selected = tmp_path / "selected.txt"
    selected.write_text("\n".join(" ".join(["some", *chosen[i:i + 5], "text ."]) for i in range(0, 200, 5)) + "\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("a sentence without them .\n" * 30 + f"one {chosen[0]} here .\n" * 10)
    config = str(repo_root / "config" / "config.yaml")
    out = tmp_path / "coverage.json"
    assert coverage.main(["--lang", "en", "--config", config, "--corpus", str(selected), str(plain),
                          "--label", "selected", "plain", "--union", "wordsim353=wordsim_sim,wordsim_rel",
                          "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["schema_version"] == coverage.SCHEMA_VERSION and document["provenance"]["git_sha"] is not None
    sets = {corpus["label"]: corpus["sets"] for corpus in document["corpora"]}
    assert set(sets["selected"]) == {"simlex", "wordsim_sim", "wordsim_rel", coverage.union_name("word"), "wordsim353"}
    assert sets["selected"]["wordsim353"]["distinct_per_line_histogram"]["5"] == 40
    assert sets["selected"]["wordsim353"]["types_present"] == 200
    assert sets["plain"]["wordsim353"]["lines_with_one"] == 0.25
    assert sets["plain"]["wordsim353"]["distinct_per_line_histogram"]["0"] == 30
    assert "| selected | wordsim353 | 40 |" in capsys.readouterr().out
    assert sets["selected"]["wordsim353"]["task_words_present"] < 1.0  # 200 of the 437 words

    with pytest.raises(SystemExit):
        coverage.main(["--lang", "en", "--config", config, "--corpus", str(plain), "--union", "x=simlex,stsb"])
    assert "--union x=simlex,stsb" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="nowhere.txt: corpus file not found"):
        coverage.main(["--lang", "en", "--config", config, "--corpus", str(tmp_path / "nowhere.txt")])
    with pytest.raises(SystemExit, match="no word-level task"):
        coverage.main(["--lang", "en", "--config", config, "--corpus", str(plain), "--tasks", "stsb"])
    # a sentence task's words: the sentences of both sides
    assert coverage.main(["--lang", "en", "--config", config, "--corpus", str(plain), "--level", "sentence",
                          "--tasks", "stsb", "sickr", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["level"] == "sentence"
    sets = document["corpora"][0]["sets"]
    assert set(sets) == {"stsb", "sickr", coverage.union_name("sentence")}
    assert sets["stsb"]["types"] > 1000 and sets["stsb"]["types_present"] < sets["stsb"]["types"]
