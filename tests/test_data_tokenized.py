"""Tokenised corpora: ids + offsets round trip, the papers' length filter and its dropped counts."""
from __future__ import annotations

import numpy as np
import pytest

from strae.data.tokenized import TokenizedCorpus, tokenize_corpus
from strae.data.tokenizer import load_tokenizer, train_sentencepiece


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    corpus_dir = root / "corpora"
    corpus_dir.mkdir()
    rng = np.random.default_rng(0)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(20) for j in range(20)]
    lines = ["a b", "x"]  # too short after tokenisation
    lines += [" ".join(rng.choice(words, size=int(rng.integers(3, 30)))) for _ in range(600)]
    lines.append(" ".join(["zz"] * 300))  # too long: > 200 pieces
    (corpus_dir / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (corpus_dir / "dev.txt").write_text("\n".join(lines[2:40]) + "\n", encoding="utf-8")
    train_sentencepiece(corpus_dir / "train.txt", root / "tok.model", requested_vocab=300)
    metas = tokenize_corpus(corpus_dir, root / "tok.model", root / "out", min_len=4, max_len=200)
    return root, lines, metas


def test_round_trip_and_filter(tokenized):
    root, lines, metas = tokenized
    tok = load_tokenizer(root / "tok.model")
    corpus = TokenizedCorpus(root / "out", "train")
    expected = [ids for ids in tok.encode_batch(lines) if 4 <= len(ids) <= 200]
    assert len(corpus) == len(expected) == metas["train"]["n_sentences"]
    assert all(corpus[i].tolist() == expected[i] for i in range(len(corpus)))
    assert corpus[-1].tolist() == expected[-1]
    assert corpus[0].dtype == np.int32 and corpus.offsets.dtype == np.int64
    assert corpus.lengths.min() >= 4 and corpus.lengths.max() <= 200
    assert corpus.n_tokens == int(corpus.lengths.sum()) == len(corpus.ids)
    assert corpus.vocab_size == tok.vocab_size and corpus.pad_id == tok.vocab_size
    dropped = metas["train"]["dropped"]
    assert dropped["too_long"] == 1 and dropped["too_short"] >= 1
    assert metas["train"]["input_sentences"] == len(lines)
    assert isinstance(corpus.ids, np.memmap)


def test_a_train_split_with_no_sentence_kept_is_refused_and_never_marked_complete(tokenized, tmp_path):
    """Tokenising a train split that keeps no sentence (empty, or every sentence dropped by the length filter) stops
    naming the text file and writes no completion mark (the trainers would only refuse it later); min > max is
    refused up front."""
    import shutil

    from strae.data import tokenized as tokenized_mod

    root, _, _ = tokenized
    corpus_dir = tmp_path / "corpora"
    shutil.copytree(root / "corpora", corpus_dir)
    (corpus_dir / "train.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"train\.txt: no sentence of 4\.\.200 subword pieces"):
        tokenize_corpus(corpus_dir, root / "tok.model", tmp_path / "out", min_len=4, max_len=200)
    assert not (tmp_path / "out" / "train.json").exists()
    # an empty dev split is a warning here (GloVe reads only train; strae train refuses it, naming it)
    shutil.copy2(root / "corpora" / "train.txt", corpus_dir / "train.txt")
    (corpus_dir / "dev.txt").write_text("x\n", encoding="utf-8")
    assert tokenize_corpus(corpus_dir, root / "tok.model", tmp_path / "out", min_len=4, max_len=200)["dev"][
        "n_sentences"] == 0
    with pytest.raises(SystemExit, match=r"--min-pieces / data\.min_subword_tokens 9 > --max-pieces"):
        tokenized_mod.main(["--lang", "en", "--corpus-dir", str(corpus_dir), "--tokenizer", str(root / "tok.model"),
                            "--out-dir", str(tmp_path / "o2"), "--min-pieces", "9", "--max-pieces", "3"])
    assert not (tmp_path / "o2").exists()


def test_dev_split_and_missing_split_error(tokenized, tmp_path):
    root, _, metas = tokenized
    assert len(TokenizedCorpus(root / "out", "dev")) == metas["dev"]["n_sentences"] > 0
    with pytest.raises(SystemExit, match="strae tokenize-corpus"):
        TokenizedCorpus(tmp_path, "train")


def test_a_truncated_ids_file_is_named(tokenized, tmp_path):
    import shutil

    root, _, _ = tokenized
    broken = tmp_path / "broken"
    shutil.copytree(root / "out", broken)
    ids = broken / "dev.ids.npy"
    ids.write_bytes(ids.read_bytes()[: ids.stat().st_size // 2])
    with pytest.raises(SystemExit, match=r"dev.ids.npy: unreadable .*re-run `strae tokenize-corpus`"):
        TokenizedCorpus(broken, "dev")


def test_a_rerun_interrupted_between_splits_leaves_no_new_train_beside_an_old_dev(tokenized, tmp_path, monkeypatch):
    """Each split's .json marks it complete: a rerun removes both before writing either, so one that stops after
    train leaves no dev to be paired with it; the splits name the prepared corpus they come from."""
    import shutil

    from strae.data import tokenized as module
    from strae.io import write_json

    root, _, metas = tokenized
    corpus_dir, out = tmp_path / "corpora", tmp_path / "out"
    shutil.copytree(root / "corpora", corpus_dir)
    write_json(corpus_dir / "meta.json", {"corpus_source": "fallback"})
    first = tokenize_corpus(corpus_dir, root / "tok.model", out, min_len=4, max_len=200)
    assert first["train"]["corpus_meta_sha256"] == first["dev"]["corpus_meta_sha256"]
    write_json(corpus_dir / "meta.json", {"corpus_source": "fallback", "re-prepared": True})
    real = module.tokenize_split

    def stop_at_dev(text_file, tokenizer, out_dir, split, *args, **kwargs):
        if split == "dev":
            raise KeyboardInterrupt
        return real(text_file, tokenizer, out_dir, split, *args, **kwargs)

    monkeypatch.setattr(module, "tokenize_split", stop_at_dev)
    with pytest.raises(KeyboardInterrupt):
        tokenize_corpus(corpus_dir, root / "tok.model", out, min_len=4, max_len=200)
    assert (out / "train.json").exists() and not (out / "dev.json").exists()


def test_the_tokenizers_record_must_describe_the_model_it_sits_beside(tokenized, tmp_path):
    """A model replaced by hand beside its record, or a corpus encoded with another pretokenizer than the one the
    model was trained on, is refused before anything is written; the model's own record passes."""
    import shutil

    from strae.io import sha256_file, write_json

    root, _, _ = tokenized
    model = tmp_path / "tok.model"
    shutil.copy(root / "tok.model", model)
    write_json(model.with_suffix(".json"), {"kind": "sentencepiece", "sha256": sha256_file(model),
                                            "pretokenize": "none"})
    assert tokenize_corpus(root / "corpora", model, tmp_path / "ok", min_len=4, max_len=200)["train"]["n_sentences"]
    with pytest.raises(SystemExit, match="trained on text pretokenised with 'none'"):
        tokenize_corpus(root / "corpora", model, tmp_path / "pre", min_len=4, max_len=200, pretokenize="treebank")
    write_json(model.with_suffix(".json"), {"kind": "sentencepiece", "sha256": "0" * 64, "pretokenize": "none"})
    with pytest.raises(SystemExit, match="not the model .* records"):
        tokenize_corpus(root / "corpora", model, tmp_path / "swapped", min_len=4, max_len=200)
    assert not (tmp_path / "pre").exists() and not (tmp_path / "swapped").exists()
