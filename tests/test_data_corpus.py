"""Corpus preparation: segmentation, whitespace normalisation, deterministic subsampling, budget, dev split."""
from __future__ import annotations

import gzip
import lzma
import random

import pytest
import yaml

from strae.data.corpus import main as prepare_main
from strae.data.corpus import prepare_corpus, select_by_budget
from strae.data.segment import iter_paragraphs, split_sentences

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def _paragraphs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for p in range(n):
        sentences = []
        for s in range(rng.randint(1, 4)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 15))]
            sentences.append(f"Sentence {p}x{s} " + " ".join(words) + ".")  # unique marker per sentence
        out.append("  ".join(sentences) + ("\t \u00a0" if p % 7 == 0 else ""))
    return out


@pytest.fixture
def toy_language(tmp_path):
    corpus = tmp_path / "toy.txt.xz"
    text = "\n".join(_paragraphs(400)) + "\n\n   \n"
    with lzma.open(corpus, "wt", encoding="utf-8") as handle:
        handle.write(text)
    config = {
        "data": {"resources_dir": str(tmp_path / "resources"), "registry": "config/registry.yaml",
                 "subsample_seed": 7, "tokens_per_language": 3000, "dev_sentences": 50},
        "languages": {"xx": {"segmenter": "en", "corpus": [{"path": str(corpus)}]}},
    }
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return tmp_path, config_path


def test_segmentation_normalises_whitespace_and_drops_empty_lines(tmp_path):
    plain = tmp_path / "p.txt.gz"
    with gzip.open(plain, "wt", encoding="utf-8") as handle:
        handle.write("  First  one.\tSecond\u00a0one here.  \n\n \t\nThird.\n")
    paragraphs = list(iter_paragraphs(plain))
    assert paragraphs == ["First one. Second one here.", "Third."]
    assert split_sentences(paragraphs[0], "en") == ["First one.", "Second one here."]


def test_same_seed_identical_bytes_different_seed_different(toy_language):
    tmp_path, config_path = toy_language
    a = prepare_corpus("xx", config_path, out_dir=tmp_path / "a")
    b = prepare_corpus("xx", config_path, out_dir=tmp_path / "b")
    c = prepare_corpus("xx", config_path, out_dir=tmp_path / "c", seed=8)
    for split in ("train.txt", "dev.txt"):
        assert (tmp_path / "a" / split).read_bytes() == (tmp_path / "b" / split).read_bytes()
    assert (tmp_path / "a/train.txt").read_bytes() != (tmp_path / "c/train.txt").read_bytes()
    assert a["train"]["sha256"] == b["train"]["sha256"] != c["train"]["sha256"]


def test_token_budget_within_one_line_and_dev_disjoint(toy_language):
    tmp_path, config_path = toy_language
    meta = prepare_corpus("xx", config_path, out_dir=tmp_path / "out")
    train = (tmp_path / "out/train.txt").read_text(encoding="utf-8").splitlines()
    dev = (tmp_path / "out/dev.txt").read_text(encoding="utf-8").splitlines()
    lengths = [len(line.split()) for line in train]
    total = sum(lengths)
    assert total == meta["train"]["whitespace_tokens"]
    assert total >= 3000 and total - max(lengths) < 3000  # budget reached, overshoot < one line
    assert len(dev) == 50 and not set(dev) & set(train)
    assert all(line and line == " ".join(line.split()) for line in train + dev)
    assert meta["subsample_seed"] == 7 and meta["sources"][0]["sha256"]


def test_cli_flags_override_config(toy_language):
    tmp_path, config_path = toy_language
    out = tmp_path / "cli"
    assert prepare_main(["--lang", "xx", "--config", str(config_path), "--tokens", "500",
                         "--out-dir", str(out)]) == 0
    total = sum(len(line.split()) for line in (out / "train.txt").read_text(encoding="utf-8").splitlines())
    assert 500 <= total < 500 + 16 + 3  # one line at most 15 words + the 2-token marker


def test_select_by_budget_edges():
    import numpy as np

    counts = np.array([5, 5, 5, 5])
    order = np.array([3, 1, 0, 2])
    assert select_by_budget(order, counts, 10).tolist() == [3, 1]  # exactly on the budget: stop there
    assert select_by_budget(order, counts, 11).tolist() == [3, 1, 0]  # crossing line kept
    assert select_by_budget(order, counts, 100).tolist() == [3, 1, 0, 2]  # smaller pool: everything


def test_unknown_language_is_a_clear_error(toy_language):
    _, config_path = toy_language
    with pytest.raises(SystemExit, match="languages.zz"):
        prepare_corpus("zz", config_path)


def test_a_text_without_spaces_between_words_is_warned_about(tmp_path, caplog):
    """The budget counts whitespace-separated words: a script that writes none makes each sentence one 'token', so
    data.tokens_per_language becomes a count of sentences; said (a spaced corpus is not warned about)."""
    import logging

    corpus = tmp_path / "nospace.txt"
    corpus.write_text("\n".join(f"文{i}字是这样写的。句{i}也是。" for i in range(60)) + "\n", encoding="utf-8")
    config = {"data": {"resources_dir": str(tmp_path / "resources"), "registry": "config/registry.yaml",
                       "subsample_seed": 7, "tokens_per_language": 30, "dev_sentences": 5},
              "languages": {"zz": {"segmenter": "zh", "corpus": [{"path": str(corpus)}]}}}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="strae.data.corpus"):
        prepare_corpus("zz", config_path, out_dir=tmp_path / "out")
    assert any("languages.zz: 1.00 whitespace-separated words per sentence" in r.getMessage() and
               "a count of sentences" in r.getMessage() for r in caplog.records)


def test_a_spaced_text_is_not_warned_about(toy_language, caplog):
    import logging

    tmp_path, config_path = toy_language
    with caplog.at_level(logging.WARNING, logger="strae.data.corpus"):
        prepare_corpus("xx", config_path, out_dir=tmp_path / "out")
    assert not any("whitespace-separated words per sentence" in r.getMessage() for r in caplog.records)
