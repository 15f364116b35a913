"""Tokenizers: BPEmb file + preprocessing, the trained fallback, the vocabulary rule, the id layout."""
from __future__ import annotations

import json
import random

import pytest
import yaml

from strae.data.tokenizer import build_tokenizer, choose_vocab_size, load_tokenizer, normalize, train_sentencepiece

BPEMB_NAME = "tokenizers/en.wiki.bpe.vs25000"


def test_normalize_is_bpemb_preprocessing():
    assert normalize("Hello World 2024") == "hello world 0000"
    assert normalize("ÉCOLE ५ ٣") == "école 0 0"  # Unicode digits too, as BPEmb's re.sub(r"\d", "0")


@pytest.mark.mirror
def test_bpemb_file_has_25000_pieces_and_matches_bpemb_package(mirror):
    model = mirror / f"{BPEMB_NAME}.model"
    tok = load_tokenizer(model)
    assert tok.vocab_size == 25000 and tok.pad_id == 25000
    assert [tok.id_to_piece(i) for i in range(4)] == ["<unk>", "<s>", "</s>", "▁t"]
    assert tok.encode("The Year 1887") == tok.encode("the year 0000")  # lowercase + digits -> 0
    assert tok.encode_batch(["The Year 1887", "a"]) == [tok.encode("the year 0000"), tok.encode("a")]
    assert all(0 <= i < tok.vocab_size for i in tok.encode("Ünïcode and digits 42"))

    from bpemb import BPEmb

    # lang+vs+model_file with segmentation_only: bpemb uses the local file and never downloads
    reference = BPEmb(lang="en", vs=25000, model_file=model, segmentation_only=True, cache_dir=mirror / "absent")
    text = "Anarchism draws on many currents of thought, in 1887 and 2024."
    assert tok.encode_as_pieces(text) == reference.encode(text)
    assert tok.encode(text) == list(reference.encode_ids(text))


@pytest.mark.mirror
def test_bpemb_kind_copies_the_registry_file(mirror, tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)  # the config names config/registry.yaml relative to the repository
    config = {"data": {"resources_dir": str(tmp_path / "res"), "registry": "config/registry.yaml"},
              "languages": {"xx": {"tokenizer": {"kind": "bpemb", "registry": BPEMB_NAME}}}}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    record = build_tokenizer("xx", config_path, out=tmp_path / "xx.model", mirror=mirror)
    assert (tmp_path / "xx.model").read_bytes() == (mirror / f"{BPEMB_NAME}.model").read_bytes()
    assert record["vocab_size"] == 25000
    assert json.loads((tmp_path / "xx.json").read_text())["kind"] == "bpemb"


def _synthetic_corpus(path, n_lines=3000, seed=0):
    rng = random.Random(seed)
    syllables = "ka lo mi nu pe ra si to vu we xa yo ze bi do fu ga he ji ko".split()
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n_lines):
            words = ["".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(rng.randint(4, 12))]
            handle.write(f"The {' '.join(words)} walkers {rng.randint(0, 9999)} Times.\n")


def test_vocab_rule_is_explicit():
    assert choose_vocab_size(25000, 200_000, 80)[0] == 25000  # big corpus: the requested size
    assert choose_vocab_size(25000, 20_000, 80)[0] == 10_000  # small corpus: half its word types
    size, reason = choose_vocab_size(25000, 100, 80)
    assert size == 1000 and "floor" in reason  # tiny corpus: the floor
    assert choose_vocab_size(25000, 100, 2000)[0] == 2004  # floor >= alphabet + specials


def test_fallback_trains_on_small_corpus(tmp_path):
    corpus = tmp_path / "train.txt"
    _synthetic_corpus(corpus)
    record = train_sentencepiece(corpus, tmp_path / "xx.model", requested_vocab=25000)
    tok = load_tokenizer(tmp_path / "xx.model")
    expected, _ = choose_vocab_size(25000, record["word_types"], record["alphabet_size"])
    assert 1000 < expected < 25000  # the corpus-size rule, not the request, decided
    assert record["vocab_size"] == tok.vocab_size == expected and tok.pad_id == expected
    assert "word types" in record["vocab_rule"]
    pieces = [tok.id_to_piece(i) for i in range(tok.vocab_size)]
    assert pieces[:3] == ["<unk>", "<s>", "</s>"]  # BPEmb id layout
    assert not any(ch.isupper() or (ch.isdigit() and ch != "0") for p in pieces[3:] for ch in p)
    ids = tok.encode("The walkers 1234 Times.")
    assert tok.unk_id not in ids and tok.decode(ids) == "the walkers 0000 times."


def test_a_trained_tokenizer_is_the_same_file_wherever_it_is_trained(tmp_path):
    """The model used to record its training file's path and a random temp folder: the same pieces had another
    sha256 on every training, and every run's data fingerprint with it."""
    from strae.io import sha256_file

    corpus = tmp_path / "train.txt"
    _synthetic_corpus(corpus, n_lines=1500)
    elsewhere = tmp_path / "elsewhere" / "corpus.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(corpus.read_bytes())
    train_sentencepiece(corpus, tmp_path / "a.model", requested_vocab=500)
    train_sentencepiece(elsewhere, tmp_path / "b.model", requested_vocab=500)
    assert sha256_file(tmp_path / "a.model") == sha256_file(tmp_path / "b.model")
    assert str(tmp_path).encode() not in (tmp_path / "a.model").read_bytes()



def test_a_corpus_over_the_sample_size_trains_on_a_seeded_sample(tmp_path, monkeypatch):
    """SentencePiece's own sample of a corpus over input_sentence_size lines differs between processes whatever its
    seed; the tokenizer samples such a corpus itself (seeded) and gives SentencePiece at most that many lines."""
    from strae.data import tokenizer as module
    from strae.io import sha256_file

    keep = module.sampled_lines(10, 4)
    assert keep.sum() == 4 and (module.sampled_lines(10, 4) == keep).all() and module.sampled_lines(4, 4) is None
    corpus = tmp_path / "train.txt"
    _synthetic_corpus(corpus, n_lines=1500)
    monkeypatch.setitem(module.TRAINER_SETTINGS, "input_sentence_size", 400)
    seen = []
    real = module.spm.SentencePieceTrainer.train

    def counting(**kwargs):
        lines = list(kwargs.pop("sentence_iterator"))
        seen.append(len(lines))
        return real(sentence_iterator=iter(lines), **kwargs)

    monkeypatch.setattr(module.spm.SentencePieceTrainer, "train", counting)
    module.train_sentencepiece(corpus, tmp_path / "a.model", requested_vocab=300)
    module.train_sentencepiece(corpus, tmp_path / "b.model", requested_vocab=300)
    assert seen == [400, 400] and sha256_file(tmp_path / "a.model") == sha256_file(tmp_path / "b.model")


def test_sentencepiece_kind_writes_model_and_record(tmp_path):
    corpus = tmp_path / "corpora/xx/train.txt"
    corpus.parent.mkdir(parents=True)
    _synthetic_corpus(corpus, n_lines=1500)
    config = {"data": {"resources_dir": str(tmp_path)},
              "languages": {"xx": {"tokenizer": {"kind": "sentencepiece", "vocab_size": 500}}}}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    record = build_tokenizer("xx", config_path)
    out = tmp_path / "tokenizers/xx.model"
    assert out.exists() and record["vocab_size"] == 500 and record["requested_vocab_size"] == 500
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["corpus_sha256"] and saved["sha256"] and saved["pad_id"] == 500


def test_paper_languages_use_the_references_bpemb_tokenizers(repo_root):
    """Both references tokenise every language with BPEmb vs25000 (B:scripts/get_tok.py: BPEmb(lang, vs=25000));
    the config asks for exactly that (offline, without the model, `strae tokenizer` trains SentencePiece instead
    and records why: test_add_language)."""
    config = yaml.safe_load((repo_root / "config" / "config.yaml").read_text(encoding="utf-8"))
    paper_languages = [lang for lang, block in config["languages"].items() if block.get("paper_source")]
    assert len(paper_languages) >= 5
    for lang in paper_languages:
        spec = config["languages"][lang]["tokenizer"]
        assert spec["kind"] == "bpemb", lang
        if "registry" in spec:
            assert spec["registry"] == f"tokenizers/{lang}.wiki.bpe.vs25000", lang
        else:
            assert (spec["language"], spec["vocab_size"], spec.get("fallback", "sentencepiece")) == \
                (lang, 25000, "sentencepiece"), lang



@pytest.mark.parametrize("value, threads", [("2", 2), (" 3 ", 3), ("4,2", 4), ("", -1), ("0", -1), ("-1", -1),
                                            ("²", -1), ("many", -1)])
def test_encoding_threads_follow_omp_num_threads(monkeypatch, value, threads):
    """The workflow sets OMP_NUM_THREADS per job: SentencePiece's encoding takes that many threads (of a nested
    list, the outer level's), every core (-1) only where it says nothing usable."""
    from strae.data.tokenizer import _env_threads

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert _env_threads() == threads


def test_an_empty_corpus_is_named_not_a_sentencepiece_traceback(tmp_path):
    from strae.data.tokenizer import train_sentencepiece

    corpus = tmp_path / "train.txt"
    corpus.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(SystemExit, match="train.txt: no text to train a tokenizer on"):
        train_sentencepiece(corpus, tmp_path / "xx.model", requested_vocab=100)
    assert not (tmp_path / "xx.model").exists()
