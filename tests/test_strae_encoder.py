"""StraeEncoder: loading a trained run directory, sentence/word vectors, and a round trip through `strae evaluate`."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("strae.models.model", reason="the model engine (strae.models.model) is not installed yet")
pytest.importorskip("strae.data.tokenized", reason="strae.data.tokenized is not installed yet")

from strae.encode import load_encoder  # noqa: E402
from strae.models.encoder import StraeEncoder  # noqa: E402
from test_train import WORDS, train_tiny_run  # noqa: E402

SENTENCES = ["the cat sat on the mat", "a big dog ran over the green hill", "old man ate bread", "bird sang"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return train_tiny_run(tmp_path_factory.mktemp("encoder"), seed=1)


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
                    "status": "completed", "failure_reason": None, "recipe": "banyan",
                    # the fixture's train args override the recipe's batch size and epochs: tables say so
                    "recipe_overrides": "batch_size=32;epochs=1", "corpus_source": None}
    described = encoder.describe()
    assert described["encoder_id"] == f"banyan/{record['run']['setting']}/seed1"
    assert len(described["model_sha256"]) == 64 and described["config"]["k"] == 4


def test_unknown_option_is_a_clear_error(run_dir):
    with pytest.raises(SystemExit, match="stopwords"):
        load_encoder(str(run_dir), stopwords="remove")
    for bad in ("abc", "0", "-1"):  # a cap of no pieces (all NaN) or a negative slice: named, not run
        with pytest.raises(SystemExit, match=f"max_pieces={bad}: a positive number"):
            load_encoder(str(run_dir), max_pieces=bad)
    assert load_encoder(str(run_dir), max_pieces="5").describe()["max_pieces"] == 5


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
    # STS-12's score is the Spearman of the encoder's own cosines against the gold, over every pair: recomputed here
    import numpy as np
    from scipy.stats import spearmanr

    from strae.evaluate.tasks import read_pairs, resolve_data_file

    pairs = read_pairs(resolve_data_file("eval/paper_variant/sts12_test", tmp_path / "resources"), "sentence")
    encoder = load_encoder(str(run_dir), device="cpu")
    left, right = encoder.encode_sentences(pairs.left), encoder.encode_sentences(pairs.right)
    cosines = (left * right).sum(1) / (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1))
    assert document["tasks"]["sts12"]["n_pairs"] == len(pairs.gold) == 3108
    assert document["tasks"]["sts12"]["score"] == pytest.approx(100 * spearmanr(cosines, pairs.gold)[0], abs=1e-3)


def _copy_run(run_dir, dest, manifest=None, data=None):
    """A copy of the run whose encoder.json / train.json `data` block carry extra fields."""
    import shutil

    shutil.copytree(run_dir, dest)
    for name, fields in (("encoder.json", manifest), ("train.json", None)):
        document = json.loads((dest / name).read_text())
        # strae train records the corpus' pretokenisation in both files; drop it so each test says where it is
        if name == "encoder.json":
            document.pop("pretokenize", None)
            document.update(fields or {})
        else:
            document.setdefault("data", {}).pop("pretokenize", None)
            document["data"].update(data or {})
        (dest / name).write_text(json.dumps(document))
    return dest


def test_encoder_applies_the_runs_pretokenisation(run_dir, tmp_path):
    from strae.data.pretokenize import treebank

    raw = ["the cat's (big) mat-house.", "old man-child ate bread."]
    plain = load_encoder(str(run_dir), device="cpu")
    assert plain.pretokenize == "none"  # the fixture's corpus meta records no pretokenisation
    assert json.loads((run_dir / "encoder.json").read_text())["pretokenize"] == "none"  # strae train wrote it
    ptb = load_encoder(str(_copy_run(run_dir, tmp_path / "ptb", manifest={"pretokenize": "treebank"})), device="cpu")
    assert (ptb.pretokenize, ptb.describe()["pretokenize"]) == ("treebank", "treebank")
    # sentences and words: raw text through the treebank run == pretokenised text through the plain one
    np.testing.assert_allclose(ptb.encode_sentences(raw), plain.encode_sentences([treebank(s) for s in raw]),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(ptb.encode_sentences(raw), plain.encode_sentences(raw))
    np.testing.assert_allclose(ptb.encode_words(["man-child"]), plain.encode_words(["man - child"]),
                               rtol=1e-5, atol=1e-6)
    # the option overrides the run's record, and says so
    forced = load_encoder(str(tmp_path / "ptb"), device="cpu", pretokenize="none")
    assert (forced.pretokenize, forced.describe()["pretokenize_source"]) == ("none", "encoder option")
    with pytest.raises(ValueError, match="pretokenize"):
        load_encoder(str(tmp_path / "ptb"), device="cpu", pretokenize="moses")


def test_pretokenisation_read_from_train_json_then_corpus_meta(run_dir, tmp_path):
    via_train = _copy_run(run_dir, tmp_path / "a", data={"pretokenize": "treebank"})
    assert load_encoder(str(via_train), device="cpu").describe()["pretokenize_source"] == "train.json"
    corpus = tmp_path / "tokenized"
    corpus.mkdir()
    (corpus / "train.json").write_text(json.dumps({"pretokenize": "treebank"}))
    via_corpus = load_encoder(str(_copy_run(run_dir, tmp_path / "b", data={"dir": str(corpus)})), device="cpu")
    assert via_corpus.pretokenize == "treebank"
    assert via_corpus.describe()["pretokenize_source"] == str(corpus / "train.json")


def test_paper_variant_embeds_the_reference_files_as_they_are(tmp_path):
    """The paper-variant files are the reference code's own and it embedded them unchanged: no pretokenisation
    for a strae run on that variant (official files are raw text: the run's own pretokenisation applies)."""
    from strae.evaluate.harness import variant_encoder_options

    run = tmp_path / "run"
    run.mkdir()
    (run / "encoder.json").write_text(json.dumps({"kind": "strae", "pretokenize": "treebank"}))
    assert variant_encoder_options(str(run), "paper", {"device": "cpu"}) == {"device": "cpu", "pretokenize": "none"}
    assert variant_encoder_options(str(run), "official", {}) == {}
    assert variant_encoder_options(str(run), "paper", {"pretokenize": "treebank"}) == {"pretokenize": "treebank"}
    (run / "encoder.json").write_text(json.dumps({"kind": "glove"}))
    assert variant_encoder_options(str(run), "paper", {}) == {}
    assert variant_encoder_options("random-token", "paper", {}) == {}
