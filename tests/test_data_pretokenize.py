"""Pretokenisation (languages.<lang>.pretokenize): the treebank recipe on hand-checked sentences, idempotence on
text it produced, and that corpus tokenisation applies and records it."""
from __future__ import annotations

import json

import pytest
import yaml

from strae.data.pretokenize import PretokenizeError, check_kind, pretokenize, treebank
from strae.data.tokenized import TokenizedCorpus, tokenize_corpus
from strae.data.tokenized import main as tokenize_main
from strae.data.tokenizer import load_tokenizer, train_sentencepiece

# (raw, expected) pairs checked by hand against the reference corpus's conventions (Banyan data/small_train.txt)
HAND_CHECKED = [
    # clitic 's split off; hyphen between words split as " - "; brackets as -LRB-/-RRB-; final period split off
    ("Pennsylvania's all-state team (ECN) won.", "Pennsylvania 's all - state team -LRB- ECN -RRB- won ."),
    # quotes stay plain double quotes (nltk's `` / '' mapped back); n't split as PTB does
    ('He said "we couldn\'t" and left.', 'He said " we could n\'t " and left .'),
    # CoreNLP keeps prefixed hyphenations whole (non-, pre-, pan-, x-), but splits others (self - made)
    ("A self-made pre-war non-profit pan-Arab X-Files fan.", "A self - made pre-war non-profit pan-Arab X-Files fan ."),
    # only the final period of the sentence is split; abbreviations and decimals are not
    ("Mr. Smith paid $5.00 in the U.S. today.", "Mr. Smith paid $ 5.00 in the U.S. today ."),
    # square brackets are not escaped (the reference corpus has a bare "]"), question mark split
    ("Is it [really] over?", "Is it [ really ] over ?"),
]


@pytest.mark.parametrize("raw,expected", HAND_CHECKED)
def test_treebank_on_hand_checked_sentences(raw, expected):
    assert treebank(raw) == expected
    assert treebank(expected) == expected  # idempotent on its own output (already-tokenised text is left alone)


def test_none_is_identity_and_unknown_kind_names_the_key():
    text = "Pennsylvania's all-state (team)."
    assert pretokenize(text, "none") == pretokenize(text, None) == text
    assert check_kind(None) == "none"
    with pytest.raises(PretokenizeError, match=r"languages\.xx\.pretokenize.*treebank"):
        check_kind("moses", "languages.xx.pretokenize")


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretok")
    corpus_dir = root / "corpora"
    corpus_dir.mkdir()
    lines = [f"The walker's {w}-{v} path (route {i}) ended in town." for i, (w, v) in
             enumerate((w, v) for w in ("long", "short", "wide", "old") for v in ("term", "range", "side"))] * 20
    lines += ["Tiny (x)."]  # 3 raw words: its piece count crosses the length filter only after pretokenisation
    (corpus_dir / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (corpus_dir / "dev.txt").write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    train_sentencepiece(corpus_dir / "train.txt", root / "tok.model", requested_vocab=300)
    return root, corpus_dir, lines


def test_tokenize_corpus_applies_and_records_pretokenize(small_corpus):
    root, corpus_dir, lines = small_corpus
    raw = tokenize_corpus(corpus_dir, root / "tok.model", root / "raw", pretokenize="none")
    ptb = tokenize_corpus(corpus_dir, root / "tok.model", root / "ptb", pretokenize="treebank")
    assert raw["train"]["pretokenize"] == "none" and ptb["train"]["pretokenize"] == "treebank"
    assert json.loads((root / "ptb" / "dev.json").read_text())["pretokenize"] == "treebank"
    # the same raw text (train.txt is shared), different pieces: the ids are those of the pretokenised text
    assert raw["train"]["text_sha256"] == ptb["train"]["text_sha256"]
    tok = load_tokenizer(root / "tok.model")
    expected = [ids for ids in tok.encode_batch([treebank(line) for line in lines]) if 4 <= len(ids) <= 200]
    corpus = TokenizedCorpus(root / "ptb", "train")
    assert [corpus[i].tolist() for i in range(len(corpus))] == expected
    assert ptb["train"]["n_tokens"] > raw["train"]["n_tokens"]
    assert ptb["train"]["n_tokens"] == sum(len(ids) for ids in expected)


def test_cli_reads_the_language_block_and_flag_overrides(small_corpus, tmp_path):
    root, corpus_dir, _ = small_corpus
    config = {"data": {"resources_dir": str(tmp_path / "res")},
              "languages": {"xx": {"pretokenize": "treebank", "corpus": [{"path": "unused.txt"}],
                                   "tokenizer": {"kind": "sentencepiece"}}}}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    common = ["--lang", "xx", "--config", str(config_path), "--corpus-dir", str(corpus_dir),
              "--tokenizer", str(root / "tok.model")]
    assert tokenize_main([*common, "--out-dir", str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "train.json").read_text())["pretokenize"] == "treebank"
    assert tokenize_main([*common, "--out-dir", str(tmp_path / "b"), "--pretokenize", "none"]) == 0
    assert json.loads((tmp_path / "b" / "train.json").read_text())["pretokenize"] == "none"
    config["languages"]["xx"]["pretokenize"] = "bogus"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"languages\.xx\.pretokenize"):  # the config schema names it first
        tokenize_main([*common, "--out-dir", str(tmp_path / "c")])


def test_trained_sentencepiece_sees_pretokenised_text(small_corpus, tmp_path):
    _, corpus_dir, _ = small_corpus
    record = train_sentencepiece(corpus_dir / "train.txt", tmp_path / "p.model", requested_vocab=300,
                                 pretokenize="treebank")
    assert record["pretokenize"] == "treebank"
    raw = train_sentencepiece(corpus_dir / "train.txt", tmp_path / "r.model", requested_vocab=300)
    assert raw["pretokenize"] == "none"

    def pieces(model):
        tok = load_tokenizer(model)
        return {tok.id_to_piece(i) for i in range(tok.vocab_size)}

    # the bracket escape exists only in the pretokenised training text
    assert "lrb" in pieces(tmp_path / "p.model") and "lrb" not in pieces(tmp_path / "r.model")
