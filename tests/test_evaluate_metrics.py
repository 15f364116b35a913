"""Scoring, geometry and the random-token baseline on tiny inputs with known answers."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from strae.evaluate import geometry, metrics
from strae.evaluate.random_token import RandomTokenEncoder, load


def unit_pairs(similarities):
    """(left, right) 2-D embeddings whose row-wise cosine is exactly ``similarities``."""
    s = np.asarray(similarities, dtype=np.float64)
    left = np.tile([1.0, 0.0], (len(s), 1))
    right = np.stack([s, np.sqrt(1.0 - s**2)], axis=1)
    return left, right


def test_spearman_known_values():
    assert metrics.spearman_x100([1, 2, 3, 4], [10, 20, 30, 40])[0] == pytest.approx(100.0)
    assert metrics.spearman_x100([1, 2, 3, 4], [4, 3, 2, 1])[0] == pytest.approx(-100.0)
    # no ties: rho = 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6*4/120 = 0.8
    assert metrics.spearman_x100([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])[0] == pytest.approx(80.0)
    # ties get average ranks: gold ranks [1, 2.5, 2.5, 4] against [1, 2, 3, 4]
    expected = np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1] * 100
    assert metrics.spearman_x100([0.1, 0.2, 0.3, 0.4], [1, 2, 2, 3])[0] == pytest.approx(expected)


def test_cosine_rowwise_and_zero_vector():
    left, right = unit_pairs([0.9, -0.5, 0.0])
    np.testing.assert_allclose(metrics.rowwise_cosine(left * 3.0, right * 0.5), [0.9, -0.5, 0.0], atol=1e-12)
    assert metrics.rowwise_cosine(np.zeros((1, 2)), np.ones((1, 2)))[0] == 0.0


def test_pooled_is_one_correlation_over_all_pairs_not_mean_of_subsets():
    # each subset is perfectly ranked on its own (100), but pooled ranks are sims [1,2,3,4] vs gold [3,4,1,2]:
    # sum d^2 = 16 -> rho = 1 - 6*16/60 = -0.6
    a = (*unit_pairs([0.1, 0.2]), np.array([1.0, 2.0]))
    b = (*unit_pairs([0.3, 0.4]), np.array([0.0, 0.5]))
    assert metrics.score_pairs(*a).score == pytest.approx(100.0)
    assert metrics.score_pairs(*b).score == pytest.approx(100.0)
    pooled = metrics.score_pooled([a, b])
    assert pooled.score == pytest.approx(-60.0)
    assert pooled.n_pairs == 4 and pooled.n_oov == 0


def test_gold_derived_embeddings_give_100():
    gold = np.array([0.0, 1.3, 2.2, 4.9, 3.1, 5.0, 0.4])
    left, right = unit_pairs(gold / 5.0)
    result = metrics.score_pairs(left, right, gold)
    assert result.score == pytest.approx(100.0)
    assert result.reason is None


def test_constant_similarities_are_undefined_not_zero():
    gold = np.array([1.0, 2.0, 3.0])
    vectors = np.ones((3, 4), dtype=np.float32)
    result = metrics.score_pairs(vectors, vectors, gold)
    assert result.score is None
    assert result.reason == metrics.UNDEFINED_CONSTANT
    assert result.to_dict()["score"] is None
    with pytest.raises(metrics.UndefinedScoreError, match="constant similarities"):
        metrics.spearman_x100(np.full(3, 0.5), gold, strict=True)


def test_nan_rows_counted_as_oov_and_dropped():
    gold = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    left, right = unit_pairs([0.1, 0.9, 0.3, 0.4, 0.5])
    left[1] = np.nan  # the pair that would spoil the ranking has no vector
    right[3, 0] = np.nan
    result = metrics.score_pairs(left, right, gold)
    assert (result.n_pairs, result.n_oov, result.n_scored) == (5, 2, 3)
    assert result.score == pytest.approx(100.0)
    all_missing = metrics.score_pairs(np.full((2, 2), np.nan), np.ones((2, 2)), gold[:2])
    assert all_missing.score is None and all_missing.reason == metrics.UNDEFINED_TOO_FEW
    # an infinite value is an overflowed encoder, not a missing vector: an error naming it, not a NaN cosine
    # (which read as "constant similarities") nor a string-ranked 'nan' sorted above every prediction
    left[2, 0] = np.inf
    with pytest.raises(ValueError, match="1 of 5 embeddings hold an infinite value"):
        metrics.score_pairs(left, right, gold, gold_text=[str(g) for g in gold])


# ------------------------------------------------------------------------------------------------- geometry
def test_alignment_known_values():
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert geometry.alignment(x, x * 5.0) == pytest.approx(0.0)  # normalised: scale does not matter
    assert geometry.alignment(x, -x) == pytest.approx(4.0)  # antipodal: ||2 x_hat||^2
    assert geometry.alignment(x, -x, alpha=1) == pytest.approx(2.0)
    # orthogonal unit vectors: squared distance 2
    assert geometry.alignment([[1.0, 0.0]], [[0.0, 3.0]]) == pytest.approx(2.0)


def test_uniformity_known_values():
    # two antipodal points: one pair at squared distance 4 -> log exp(-2*4) = -8
    assert geometry.uniformity([[1.0, 0.0], [-3.0, 0.0]]) == pytest.approx(-8.0)
    # identical points: log exp(0) = 0 (worst); the square's 6 pairs: 4 at d^2=2, 2 at d^2=4
    assert geometry.uniformity([[1.0, 1.0], [2.0, 2.0]]) == pytest.approx(0.0)
    square = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=float)
    expected = math.log((4 * math.exp(-4) + 2 * math.exp(-8)) / 6)
    assert geometry.uniformity(square) == pytest.approx(expected)
    # channel-structured (n, k, u) input is flattened to k*u
    assert geometry.uniformity(square.reshape(4, 2, 1)) == pytest.approx(expected)


def test_geometry_rejects_nan_and_summary_keys():
    with pytest.raises(ValueError, match="NaN"):
        geometry.uniformity([[np.nan, 1.0], [1.0, 0.0]])
    rng = np.random.default_rng(0)
    up = rng.normal(size=(50, 8))
    summary = geometry.alignment_uniformity(up, up + 0.01 * rng.normal(size=(50, 8)))
    assert summary["alignment"] < 0.01 and summary["uniformity"] < 0 and summary["n_nodes"] == 50


# ------------------------------------------------------------------------------------------------- random-token
def test_random_token_is_seeded_pooled_and_lowercased():
    encoder = load(seed=3, dim=16)
    words = encoder.encode_words(["Cat", "cat", "dog", ""])
    assert words.shape == (4, 16) and words.dtype == np.float32
    np.testing.assert_array_equal(words[0], words[1])
    assert not np.allclose(words[0], words[2])
    assert np.isnan(words[3]).all()  # empty -> no vector
    sentence = encoder.encode_sentences(["the cat  sat"])[0]
    expected = np.mean([encoder.token_vector(t) for t in ["the", "cat", "sat"]], axis=0)
    np.testing.assert_allclose(sentence, expected, rtol=1e-6)
    other_seed = RandomTokenEncoder(seed=4, dim=16).encode_words(["cat"])[0]
    assert not np.allclose(other_seed, words[1])


def test_random_token_width_is_its_run_not_an_evaluation_label():
    """``--encoder-option dim=2000`` makes the floor the run random-token/dim2000, so it carries no evaluation label
    (it would read ``dim2000@dim-2000``); the same option given to a trained run's encoder is a label."""
    from strae.evaluate.harness import evaluation_setting

    assert load(dim="2000").describe()["encoder_id"] == "random-token/dim2000/seed0"
    assert evaluation_setting({"dim": 2000, "device": "cpu"}, {}, "random-token").label is None
    assert evaluation_setting({"dim": 2000, "seed": 1}, {}, "random-token").options == {}
    assert evaluation_setting({"dim": 2000, "vectors": "random-token"}, {}, "multiview_ctl").label == \
        "dim-2000_vectors-random-token"


def test_random_token_stable_across_processes():
    code = ("from strae.evaluate.random_token import load; import sys; "
            "sys.stdout.write(load(seed=7, dim=8).encode_words(['stable'])[0].tobytes().hex())")
    # PYTHONHASHSEED differs per process; the vector must not
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": str(s), "PATH": ""}).stdout for s in (1, 2)}
    here = load(seed=7, dim=8).encode_words(["stable"])[0].tobytes().hex()
    assert outputs == {here}
