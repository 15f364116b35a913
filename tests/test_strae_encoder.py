"""StraeEncoder: loading a trained run directory, sentence/word vectors, and a round trip through `strae evaluate`."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("strae.models.model", reason="the model engine (strae.models.model) is not installed yet")
pytest.importorskip("strae.data.tokenized", reason="strae.data.tokenized is not installed yet")

from strae import train as trainer  # noqa: E402
from strae.encode import load_encoder  # noqa: E402
from strae.models.encoder import StraeEncoder  # noqa: E402
from test_train import WORDS, make_tiny_corpus  # noqa: E402

SENTENCES = ["the cat sat on the mat", "a big dog ran over the green hill", "old man ate bread", "bird sang"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoder")
    data_dir, tokenizer = make_tiny_corpus(root / "data")
    out = root / "run"
    argv = ["--model", "banyan", "--lang", "xx", "--seed", "1", "--out", str(out), "--data-dir", str(data_dir),
            "--tokenizer", str(tokenizer), "--k", "4", "--u", "2", "--batch-size", "32", "--epochs", "1",
            "--device", "cpu"]
    assert trainer.train(argv) == 0
    return out


@pytest.fixture(scope="module")
def encoder(run_dir):
    loaded = load_encoder(str(run_dir))
    assert isinstance(loaded, StraeEncoder)
    return loaded


def _embedding_matrix(encoder: StraeEncoder) -> torch.Tensor:
    """The model's token embedding table (V or V+1 rows of size k*u), found by shape."""
    v, e = encoder.config.vocab_size, encoder.config.k * encoder.config.u
    for name, tensor in encoder.model.state_dict().items():
        if "embed" in name and tensor.ndim == 2 and tensor.shape[1] == e and tensor.shape[0] in (v, v + 1):
            return tensor
    raise AssertionError("no embedding table found in the model's state_dict")


def test_sentence_vectors(encoder):
    vectors = encoder.encode_sentences([*SENTENCES, ""])
    assert vectors.dtype == np.float32 and vectors.shape == (5, 8)
    assert np.isfinite(vectors[:4]).all()
    assert np.isnan(vectors[4]).all()  # no pieces -> no vector (counted as OOV by the harness)
    # distinct sentences get distinct vectors
    assert not np.allclose(vectors[0], vectors[1])


def test_batching_never_changes_a_vector(encoder):
    together = encoder.encode_sentences(SENTENCES, batch_size=64)
    one_by_one = encoder.encode_sentences(SENTENCES, batch_size=1)
    np.testing.assert_allclose(together, one_by_one, rtol=1e-5, atol=1e-6)
    reversed_order = encoder.encode_sentences(SENTENCES[::-1], batch_size=3)[::-1]
    np.testing.assert_allclose(together, reversed_order, rtol=1e-5, atol=1e-6)


def test_word_vectors_compose_pieces(encoder):
    pieces = {word: encoder.tokenizer.encode(word) for word in WORDS}
    single = [w for w, p in pieces.items() if len(p) == 1]
    multi = [w for w, p in pieces.items() if len(p) > 1]
    assert single and multi, "the tiny tokenizer should give both one-piece and multi-piece words"
    table = _embedding_matrix(encoder)
    vectors = encoder.encode_words(single)
    for word, vector in zip(single, vectors):
        np.testing.assert_allclose(vector, table[pieces[word][0]].numpy(), rtol=1e-6, atol=1e-7)
    # a multi-piece word is the model's own composition of its pieces (= a "sentence" of those pieces)
    composed = encoder.encode_words(multi)
    np.testing.assert_allclose(composed, encoder.encode_sentences(multi), rtol=1e-5, atol=1e-6)
    assert np.isfinite(composed).all()
    assert np.isnan(encoder.encode_words([""])).all()


def test_run_info_and_describe(encoder, run_dir):
    record = json.loads((run_dir / "train.json").read_text())
    info = encoder.run_info()
    assert info == {"language": "xx", "model": "banyan", "setting": record["run"]["setting"], "seed": 1,
                    "status": "completed", "failure_reason": None}
    described = encoder.describe()
    assert described["encoder_id"] == f"banyan/{record['run']['setting']}/seed1"
    assert len(described["model_sha256"]) == 64 and described["config"]["k"] == 4


def test_unknown_option_is_a_clear_error(run_dir):
    with pytest.raises(SystemExit, match="stopwords"):
        load_encoder(str(run_dir), stopwords="remove")


@pytest.mark.mirror
def test_round_trip_through_strae_evaluate(run_dir, mirror, tmp_path, repo_root, monkeypatch):
    from strae.evaluate import harness

    monkeypatch.chdir(repo_root)
    out = tmp_path / "eval.json"
    code = harness.main(["--model", str(run_dir), "--lang", "en", "--variant", "paper", "--tasks", "simlex,sts12",
                         "--out", str(out), "--resources-dir", str(tmp_path / "resources"), "--quiet",
                         "--device", "cpu"])
    assert code == 0
    document = json.loads(out.read_text())
    assert document["encoder"]["device"].startswith("cpu")
    assert document["run"]["model"] == "banyan" and document["run"]["seed"] == 1
    assert document["run"]["status"] == "completed"
    assert document["encoder"]["kind"] == "strae"
    for name in ("simlex", "sts12"):
        task = document["tasks"][name]
        assert task["n_pairs"] > 0 and -100 <= task["score"] <= 100
