"""The authors' own corpus as a language's paper_source: used when it loads, else the block's corpus (the mirror's
substitute); the choice and the fetched text's sha256 (trust on first use) are recorded.

The paper source here is a small local dataset in the shape of m0pper/Small-Multilingual-Corpora (one config per
language, splits train/dev, column `text`, one sentence per line), loaded with HF `datasets` offline."""
from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from strae.data.corpus import prepare_corpus
from strae.data.fetch import ChecksumError, FetchError
from strae.data.fetch import main as fetch_main
from strae.data.tokenized import tokenize_corpus
from strae.data.tokenizer import train_sentencepiece

TRAIN = [f"Paper sentence {i} has words. It stays one line {i}." for i in range(60)]
# a row with a line break inside: the reference writes rows raw and reads the file by lines, so it is two lines
TRAIN[7] = "A row written raw\nbreaks into two lines, as in the reference."
TRAIN_LINES = [piece for row in TRAIN for piece in row.split("\n")]
DEV = [f"Paper dev line {i} here." for i in range(8)]


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache", raising=False)
    hub = tmp_path / "Small-Multilingual-Corpora"
    (hub / "xx").mkdir(parents=True)
    for split, lines in (("train", TRAIN), ("dev", DEV)):
        with open(hub / "xx" / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps({"text": line}) + "\n")
    (hub / "README.md").write_text(
        "---\nconfigs:\n- config_name: xx\n  data_files:\n  - split: train\n    path: xx/train.jsonl\n"
        "  - split: dev\n    path: xx/dev.jsonl\n---\n", encoding="utf-8")
    fallback = tmp_path / "mirror_substitute.txt"
    fallback.write_text("\n".join(f"Mirror paragraph {i} first part. Then a second sentence {i}." for i in range(80))
                        + "\n", encoding="utf-8")

    def write_config(dataset: str):
        paper = {"corpus": [{"hf_dataset": dataset, "config": "xx", "split": "train"}],
                 "dev_corpus": [{"hf_dataset": dataset, "config": "xx", "split": "dev"}],
                 "segmented": True, "subsample": False}
        config = {"data": {"resources_dir": str(tmp_path / "resources"), "registry": "config/registry.yaml",
                           "subsample_seed": 3, "tokens_per_language": 100, "dev_sentences": 10},
                  "languages": {"xx": {"segmenter": "en", "paper_source": paper,
                                       "corpus": [{"path": str(fallback)}]}}}
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    return tmp_path, hub, write_config


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_paper_source_used_when_available_and_recorded(setup, repo_root, monkeypatch):
    tmp_path, hub, write_config = setup
    monkeypatch.chdir(repo_root)
    meta = prepare_corpus("xx", write_config(str(hub)), out_dir=tmp_path / "out")
    assert meta["corpus_source"] == "paper_source" and meta["paper_source_skipped"] is None
    # every line, in order, unsplit (segmented: true) and not subsampled (subsample: false; budget was 100 tokens)
    assert _lines(tmp_path / "out" / "train.txt") == TRAIN_LINES and len(TRAIN_LINES) == len(TRAIN) + 1
    assert _lines(tmp_path / "out" / "dev.txt") == DEV
    assert meta["subsampled"] is False and meta["segmenter"]["package"] is None
    source = meta["sources"][0]
    fetched = source["file"]  # under the (absolute) resources_dir
    assert source["sha256"] == hashlib.sha256(open(fetched, "rb").read()).hexdigest()
    assert "trust on first use" in source["checksum"]
    assert open(f"{fetched}.sha256").read().strip() == source["sha256"]
    # a local dataset has no hub commit to ask for: said, not guessed (a hub dataset's: the next test)
    assert source["hf_commit"] == "unknown"
    # the tokenised corpus says which source its text came from
    train_sentencepiece(tmp_path / "out" / "train.txt", tmp_path / "tok.model", requested_vocab=200)
    metas = tokenize_corpus(tmp_path / "out", tmp_path / "tok.model", tmp_path / "tok", min_len=1)
    assert metas["train"]["corpus_source"] == metas["dev"]["corpus_source"] == "paper_source"
    # trust on first use: a changed copy of the fetched text is an error, never silently used or replaced
    with open(fetched, "a", encoding="utf-8") as handle:
        handle.write("tampered\n")
    with pytest.raises(ChecksumError, match="trust|changed"):
        prepare_corpus("xx", write_config(str(hub)), out_dir=tmp_path / "again")


def test_the_hub_commit_a_paper_source_was_read_at_is_recorded(setup, repo_root, monkeypatch):
    """A hub dataset named without `revision:` is read at whatever its default branch holds then: the hub is asked
    which commit that is first, the text is read at exactly that commit, and the commit is kept beside the fetched
    text and in the corpus meta, so the run's data can be pinned later."""
    import types

    import datasets
    import huggingface_hub

    tmp_path, hub, write_config = setup
    monkeypatch.chdir(repo_root)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False, raising=False)  # the hub answers (stubbed)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False, raising=False)
    commit = "0123456789abcdef0123456789abcdef01234567"
    asked, loaded = [], []

    def dataset_info(self, repo_id, revision=None, timeout=None, **kwargs):
        asked.append((repo_id, revision, timeout))
        return types.SimpleNamespace(sha=commit)

    real_load = datasets.load_dataset

    def load_dataset(name, config=None, split=None, revision=None, **kwargs):
        loaded.append((name, split, revision))
        return real_load(str(hub), config, split=split)  # the hub's files, here a local copy

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    meta = prepare_corpus("xx", write_config("owner/corpus"), out_dir=tmp_path / "out")
    assert asked == [("owner/corpus", None, 15)] * 2  # train and dev, once each (first use), never waiting forever
    assert loaded == [("owner/corpus", "train", commit), ("owner/corpus", "dev", commit)]  # read at that commit
    assert {source["hf_commit"] for source in meta["sources"] + meta["dev_sources"]} == {commit}
    assert _lines(tmp_path / "out" / "train.txt") == TRAIN_LINES
    # the cached text keeps its commit; the hub is not asked again
    meta = prepare_corpus("xx", write_config("owner/corpus"), out_dir=tmp_path / "again")
    assert len(asked) == 2 and meta["sources"][0]["hf_commit"] == commit


def test_falls_back_to_the_mirror_corpus_when_the_paper_source_cannot_load(setup, repo_root, monkeypatch):
    tmp_path, hub, write_config = setup
    monkeypatch.chdir(repo_root)
    config = write_config(str(tmp_path / "not-fetched-dataset"))
    meta = prepare_corpus("xx", config, out_dir=tmp_path / "out")
    assert meta["corpus_source"] == "corpus" and "not-fetched-dataset" in meta["paper_source_skipped"]
    train = _lines(tmp_path / "out" / "train.txt")
    assert train and all(line.startswith(("Mirror", "Then")) for line in train)  # segmented by sentencex
    assert meta["subsampled"] is True and meta["segmenter"]["package"] == "sentencex"
    # forcing the paper source fails loudly instead
    with pytest.raises(FetchError, match="not-fetched-dataset"):
        prepare_corpus("xx", config, out_dir=tmp_path / "forced", corpus_source="paper_source")
    assert not (tmp_path / "forced" / "train.txt").exists()


def test_corpus_source_flag_and_fetch_paper_corpus(setup, repo_root, monkeypatch, capsys):
    tmp_path, hub, write_config = setup
    monkeypatch.chdir(repo_root)
    config = write_config(str(hub))
    meta = prepare_corpus("xx", config, out_dir=tmp_path / "out", corpus_source="corpus")
    assert meta["corpus_source"] == "corpus" and meta["paper_source_skipped"] == "--corpus-source corpus"
    assert fetch_main(["--paper-corpus", "xx", "--config", str(config),
                       "--resources-dir", str(tmp_path / "resources")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and all("trust on first use" in line for line in printed)


def test_train_and_dev_are_checked_as_one_set(setup, repo_root, monkeypatch):
    """meta.json, written last, vouches for train.txt + dev.txt together: a split that is not the one it names (a
    rerun stopped between the two files) is refused by tokenize-corpus before anything is tokenised."""
    import strae.data.corpus as corpus

    tmp_path, hub, write_config = setup
    monkeypatch.chdir(repo_root)
    config = write_config(str(hub))
    out = tmp_path / "out"
    prepare_corpus("xx", config, out_dir=out)
    train_sentencepiece(out / "train.txt", tmp_path / "tok.model", requested_vocab=200)
    tokenize_corpus(out, tmp_path / "tok.model", tmp_path / "tok", min_len=1)  # the set as written: accepted
    (out / "dev.txt").write_text("a dev line of another run\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="dev.txt: its sha256 is not the one"):
        tokenize_corpus(out, tmp_path / "tok.model", tmp_path / "tok2", min_len=1)
    assert not (tmp_path / "tok2").exists()  # refused before train was tokenised
    # a rerun that writes a different train.txt and dies before dev.txt and meta.json
    real = corpus._write_selected
    calls = []

    def dies_on_dev(paths, language, target, outs, desc):
        calls.append(desc)
        if len(calls) == 2:
            raise KeyboardInterrupt
        written = real(paths, language, target, outs, desc)
        with open(next(iter(outs.values())), "a", encoding="utf-8") as handle:
            handle.write("a sentence the earlier run did not have\n")
        return written

    monkeypatch.setattr(corpus, "_write_selected", dies_on_dev)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus("xx", config, out_dir=out)
    with pytest.raises(SystemExit, match="train.txt: its sha256 is not the one"):
        tokenize_corpus(out, tmp_path / "tok.model", tmp_path / "tok3", min_len=1)
