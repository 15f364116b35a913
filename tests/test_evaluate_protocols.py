"""The labelled scoring protocols: the papers' string-ranked lexical Spearman, exact cosine ties, STS subset mean.

Oracle values marked "scipy 1.11.3 / numpy 1.26.0" were computed once with the reference code's pinned versions
(exlab-research/Banyan requirements.yaml) running the reference's own call,
``stats.spearmanr(np.array([float(np.float32(p)) for p in predictions]), np.array(gold_strings))``.
"""
from __future__ import annotations

import csv

import numpy as np
import pytest
from scipy.stats import spearmanr

from strae.evaluate import metrics


def gold_strings(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return [row[2] for row in list(csv.reader(handle))[1:]]


def reference_like_predictions(n):
    """A fixed prediction vector with positives, negatives, exponent-notation values and ties."""
    i = np.arange(n, dtype=np.float64)
    p = 0.6 * np.sin(1.7 * i) + 0.1
    p[::37] = 1e-5 * np.cos(i[::37])
    p[5::50] = 0.5
    return p


# ----------------------------------------------------------------------------------------- reference protocol
def test_prediction_strings_are_float32_widened_reprs():
    # torch computes the cosine in float32; .item() widens it; numpy 1.26 writes the shortest round-trip repr
    assert metrics.reference_prediction_strings([0.1, 1e-5, -0.0, 1.0, -0.25]) == [
        "0.10000000149011612", "9.999999747378752e-06", "-0.0", "1.0", "-0.25"]


def test_hand_worked_example():
    predictions = [0.3, -0.2, -0.5, 0.9, 1e-5]
    gold = ["10.00", "2.5", "9", "1.2", "0.5"]
    # strings: '0.30000001192092896' '-0.20000000298023224' '-0.5' '0.8999999761581421' '9.999999747378752e-06'
    # ranked as strings: -0.2.. (1) < -0.5 (2) < 0.3.. (3) < 0.89.. (4) < 9.99e-06 (5)  -> [3, 1, 2, 4, 5]
    # gold as strings:   0.5 (1) < 1.2 (2) < 10.00 (3) < 2.5 (4) < 9 (5)                 -> [3, 4, 5, 2, 1]
    # d = [0, -3, -3, 2, 4], sum d^2 = 38, rho = 1 - 6 * 38 / (5 * 24) = -0.9
    np.testing.assert_array_equal(metrics.string_average_ranks(metrics.reference_prediction_strings(predictions)),
                                  [3, 1, 2, 4, 5])
    np.testing.assert_array_equal(metrics.string_average_ranks(gold), [3, 4, 5, 2, 1])
    score, reason = metrics.spearman_reference_strings_x100(np.array(predictions), gold)
    assert reason is None and score == pytest.approx(-90.0)
    # numerically: predictions [4, 2, 1, 5, 3] vs gold [5, 3, 4, 2, 1], sum d^2 = 24, rho = 1 - 144/120 = -0.2
    assert metrics.spearman_x100(predictions, [float(g) for g in gold])[0] == pytest.approx(-20.0)


def test_string_ties_get_average_ranks_and_equal_numbers_need_equal_strings():
    # "7" and "7.0" are one number but two strings: only identical strings tie
    np.testing.assert_array_equal(metrics.string_average_ranks(["7", "7.0", "7", "3"]), [2.5, 4, 2.5, 1])


def test_negative_predictions_rank_in_reverse():
    gold = ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
    numbers = np.array([float(g) for g in gold])
    negative = -numbers / 10.0  # perfectly anti-correlated numerically
    assert metrics.spearman_x100(negative, numbers)[0] == pytest.approx(-100.0)
    # '-0.1' < '-0.2' < ... as strings: the reference ranks them as if they were positive
    assert metrics.spearman_reference_strings_x100(negative, gold)[0] == pytest.approx(100.0)
    # and every negative cosine ranks below every positive one, whatever its size
    ranks = metrics.string_average_ranks(metrics.reference_prediction_strings([-0.9, -0.1, 0.05, 0.8]))
    np.testing.assert_array_equal(ranks, [2, 1, 3, 4])


def test_undefined_cases_follow_the_strings():
    assert metrics.spearman_reference_strings_x100([0.5], ["1"]) == (None, metrics.UNDEFINED_TOO_FEW)
    assert metrics.spearman_reference_strings_x100([0.5, 0.5], ["1", "2"]) == (None, metrics.UNDEFINED_CONSTANT)
    assert metrics.spearman_reference_strings_x100([0.1, 0.5], ["3", "3"]) == (None,
                                                                              metrics.UNDEFINED_CONSTANT_GOLD)


def test_score_pairs_carries_both_protocols_on_the_same_scored_pairs():
    gold = np.array([10.0, 1.5, 2.5, 9.0, 3.0])
    text = ["10.00", "1.5", "2.5", "9", "3"]
    s = gold / 10.0
    left = np.tile([1.0, 0.0], (5, 1))
    right = np.stack([s, np.sqrt(1.0 - s ** 2)], axis=1)
    right[4] = np.nan  # OOV: dropped from both protocols
    result = metrics.score_pairs(left, right, gold, gold_text=text)
    assert result.score == pytest.approx(100.0) and result.n_oov == 1
    # '10.00' ranks between '1.5' and '2.5' as a string: gold ranks [2, 1, 3, 4] vs predictions [4, 1, 2, 3]
    expected = np.corrcoef([4, 1, 2, 3], [2, 1, 3, 4])[0, 1] * 100
    assert result.extra[metrics.SPEARMAN_REFERENCE_STRINGS] == pytest.approx(expected)
    record = result.to_dict()
    assert record["scores"] == {metrics.SPEARMAN: result.score,
                                metrics.SPEARMAN_REFERENCE_STRINGS: result.extra[metrics.SPEARMAN_REFERENCE_STRINGS]}
    assert "score_reasons" not in record
    assert "scores" in metrics.score_pairs(left, right, gold).to_dict()  # no gold text -> numeric only
    assert metrics.SPEARMAN_REFERENCE_STRINGS not in metrics.score_pairs(left, right, gold).to_dict()["scores"]


@pytest.mark.mirror
@pytest.mark.parametrize("path,perfect,fixed", [
    # (mirror file, perfect predictor under the reference protocol, fixed predictions under it) - scipy 1.11.3 /
    # numpy 1.26.0 oracle values (module docstring)
    ("eval/paper_variant/simlex_995.csv", 100.0, -2.307810572516428),
    ("eval/word/wordsim353_sim.csv", 97.68883813546192, 2.7601425686957075),
    ("eval/word/wordsim353_rel.csv", 100.0, 2.688897546805547),
    ("eval/word/simlex999.csv", 100.0, 2.0546605463955046),
])
def test_real_files_match_the_reference_scipy(mirror, path, perfect, fixed):
    gold = gold_strings(mirror / path)
    numbers = np.array([float(g) for g in gold])
    # a perfect predictor: cosines monotone in gold (gold / 10 lies in [0, 1])
    assert metrics.spearman_x100(numbers / 10.0, numbers)[0] == pytest.approx(100.0)
    reference, _ = metrics.spearman_reference_strings_x100(numbers / 10.0, gold)
    assert reference == pytest.approx(perfect, abs=1e-9)
    if "wordsim353_sim" in path:
        assert reference < 99.0  # '10.00' (identical words) ranks between '1.x' and '2.x'
    predictions = reference_like_predictions(len(gold))
    assert metrics.spearman_reference_strings_x100(predictions, gold)[0] == pytest.approx(fixed, abs=1e-9)
    # the gold strings themselves as predictions carry the same quirk on both sides
    assert metrics.spearman_reference_strings_x100(numbers, gold)[0] == pytest.approx(100.0)


# ----------------------------------------------------------------------------------------- exact ties
def test_identical_vectors_give_identical_cosines():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 33)).astype(np.float32)
    # every pair of a vector with itself: cosine exactly 1, all tied (the naive formula leaves 1 +- a few ulp)
    self_cos = metrics.rowwise_cosine(vectors, vectors.copy())
    assert set(self_cos.tolist()) == {1.0}
    # the same (unordered) pair anywhere in the file gets the same bits
    left = np.concatenate([vectors[:10], vectors[10:20], vectors[:10]])
    right = np.concatenate([vectors[10:20], vectors[:10], vectors[10:20]])
    cos = metrics.rowwise_cosine(left, right)
    assert np.array_equal(cos[:10], cos[10:20]) and np.array_equal(cos[:10], cos[20:])
    # a zero vector stays at similarity 0, also against itself; NaN rows stay NaN
    assert metrics.rowwise_cosine(np.zeros((1, 3)), np.zeros((1, 3)))[0] == 0.0
    assert np.isnan(metrics.rowwise_cosine(np.full((1, 3), np.nan), np.ones((1, 3)))[0])
    np.testing.assert_allclose(cos[:10], [float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))
                                          for a, b in zip(vectors[:10].astype(np.float64),
                                                          vectors[10:20].astype(np.float64))], rtol=1e-12)


def test_per_subset_scores_do_not_depend_on_rounding_of_tied_pairs():
    """Pairs whose two sentences encode to the same vector are true ties (cosine 1): the score must equal the one
    computed with those ties written out, whatever the vectors' magnitudes or the rows' order."""
    rng = np.random.default_rng(7)
    n, n_same = 60, 25
    left = rng.normal(size=(n, 16)).astype(np.float32)
    right = rng.normal(size=(n, 16)).astype(np.float32)
    right[:n_same] = left[:n_same]  # e.g. sentences identical after tokenisation
    gold = rng.uniform(0, 5, size=n)
    cos = metrics.rowwise_cosine(left, right)
    explicit = cos.copy()
    explicit[:n_same] = 1.0
    expected = spearmanr(explicit, gold).statistic * 100
    assert metrics.score_pairs(left, right, gold).score == expected
    order = rng.permutation(n)
    assert metrics.score_pairs(right[order], left[order], gold[order]).score == expected
    assert metrics.score_pairs(left.astype(np.float64) * 3.0, right.astype(np.float64) * 3.0, gold).score == \
        pytest.approx(expected, abs=1e-9)


# ----------------------------------------------------------------------------------------- subset mean
def test_subset_mean_is_the_unweighted_mean_of_subset_scores():
    scores = [metrics.Score(score=10.0, n_pairs=5, n_oov=0), metrics.Score(score=40.0, n_pairs=500, n_oov=0)]
    assert metrics.subset_mean(scores) == (25.0, None)
    undefined = [*scores, metrics.Score(score=None, n_pairs=1, n_oov=0, reason=metrics.UNDEFINED_TOO_FEW)]
    assert metrics.subset_mean(undefined) == (None, metrics.UNDEFINED_SUBSET)
