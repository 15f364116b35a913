"""Scoring: Spearman rho x 100 between cosine similarity and gold, with explicit OOV and degenerate cases.

Conventions (written into every result):
- cosine(a, b) = â.b̂ with â = a / max(|a|, 1e-8), in float64, so a zero vector gets similarity 0 (as
  ``torch.nn.functional.cosine_similarity`` does) rather than NaN. Ties are exact: the cosine is computed once per
  distinct pair of bit-identical vectors (unordered), so pairs whose sentences encode to the same vectors get
  bit-identical cosines, and a pair of bit-identical non-zero vectors gets exactly 1.0. Without this, tied pairs
  carried rounding noise (1 - 1e-16 vs 1 + 1e-16) and their ranks, hence per-subset STS scores, depended on it;
- a pair where either side is a NaN row (the Encoder's "no vector", e.g. OOV) is counted in ``n_oov`` and dropped;
- the score is ``None`` (JSON null) with a ``reason`` when Spearman is undefined: fewer than 2 scored pairs, or
  constant similarities or constant gold. It is never reported as 0, which would look like a real, bad model.
- pooled aggregation = one Spearman over the concatenation of all subsets' pairs (not a mean of subset scores);
  the mean of the per-subset scores (SentEval's convention) is reported beside it as ``spearman_subset_mean``.

Named metrics (keys of a task's ``scores`` in the evaluation JSON, columns of scores.csv):
- ``spearman``: the correct Spearman of cosine vs the numeric gold (the headline ``score``);
- ``spearman_reference_strings``: word-level tasks only, the papers' protocol: the reference code
  (exlab-research/Banyan ``src/eval.py:58-64,79-91``, identical in mopper97/Self-StrAE) passes float predictions and
  the gold scores as the *strings* read from the file to ``scipy.stats.spearmanr``, whose ``np.column_stack`` turns
  both into one string array, so both columns are ranked lexicographically (``10.00`` between ``1.x`` and ``2.x``,
  negative cosines in reverse order). Reproduced here without old numpy/scipy: see ``spearman_reference_strings_x100``;
- ``spearman_subset_mean``: pooled tasks with subsets only, the unweighted mean of the subsets' ``spearman``.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

COSINE_EPS = 1e-8
UNDEFINED_CONSTANT = "undefined (constant similarities)"
UNDEFINED_CONSTANT_GOLD = "undefined (constant gold scores)"
UNDEFINED_TOO_FEW = "undefined (fewer than 2 pairs with vectors)"
UNDEFINED_SUBSET = "undefined (a subset's score is undefined)"

SPEARMAN = "spearman"
SPEARMAN_REFERENCE_STRINGS = "spearman_reference_strings"
SPEARMAN_SUBSET_MEAN = "spearman_subset_mean"
METRIC_DEFINITIONS = {
    SPEARMAN: "Spearman rho x 100 of cosine vs the numeric gold score (average ranks for ties); the headline score",
    SPEARMAN_REFERENCE_STRINGS: (
        "word-level tasks: the papers' protocol (exlab-research/Banyan src/eval.py:58-64,79-91 @ 7c2cd93, same in "
        "mopper97/Self-StrAE @ 5aace3f; scipy 1.11.3, numpy 1.26.0): spearmanr(float predictions, gold strings) "
        "column-stacks both into one '<U32' array, so both columns are ranked as strings. Predictions: cosine "
        "rounded to float32 (torch), widened to a Python float (.item()), written as numpy 1.26 writes a float64 "
        "(shortest round-trip repr); gold: the file's score field verbatim (surrounding whitespace removed, as the "
        "reference's line.split() did). Average ranks by code-point string order, Pearson of the ranks, x 100"
    ),
    SPEARMAN_SUBSET_MEAN: (
        "pooled tasks with subsets: unweighted mean of the subsets' spearman (SentEval's per-subset convention); "
        "the headline stays the pooled Spearman (the papers' and MTEB's convention)"
    ),
}
# numpy 1.26 promotes float64 to '<U32' when it meets a string array (np.result_type(float64, '<U5') == '<U32').
REFERENCE_FLOAT_CHARS = 32


class UndefinedScoreError(ValueError):
    """Raised by ``spearman_x100(..., strict=True)`` when the correlation is undefined."""


class NonFiniteEmbeddingError(ValueError):
    """An encoder returned an infinite value (an overflow): no score can be computed from it."""


@dataclasses.dataclass
class Score:
    """The result of scoring one set of pairs."""

    score: float | None  # Spearman rho x 100, None when undefined
    n_pairs: int  # pairs in the file(s)
    n_oov: int  # pairs dropped because a side had no vector (NaN row)
    reason: str | None = None  # why score is None
    # further named metrics (SPEARMAN_REFERENCE_STRINGS, SPEARMAN_SUBSET_MEAN) and why any of them is None
    extra: dict[str, float | None] = dataclasses.field(default_factory=dict)
    extra_reasons: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def n_scored(self) -> int:
        return self.n_pairs - self.n_oov

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "n_pairs": self.n_pairs, "n_oov": self.n_oov,
                               "n_scored": self.n_scored}
        if self.reason is not None:
            out["reason"] = self.reason
        out["scores"] = {SPEARMAN: self.score, **self.extra}
        reasons = {**({SPEARMAN: self.reason} if self.reason is not None else {}), **self.extra_reasons}
        if reasons:
            out["score_reasons"] = reasons
        return out


def nan_rows(embeddings: np.ndarray) -> np.ndarray:
    """Boolean mask of rows that contain any NaN (the Encoder's "no vector" marker). An infinite value is no such
    marker but a broken encoder (overflow): an error, not a silently dropped pair or a NaN cosine."""
    embeddings = np.asarray(embeddings)
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n, d), got shape {embeddings.shape}")
    infinite = np.isinf(embeddings).any(axis=1)
    if infinite.any():
        raise NonFiniteEmbeddingError(f"{int(infinite.sum())} of {len(embeddings)} embeddings hold an infinite value "
                                      "(the encoder overflowed); NaN is the only 'no vector' marker")
    return np.isnan(embeddings).any(axis=1)


def _row_ids(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each distinct row's first occurrence, id of every row); rows equal byte for byte share an id."""
    rows = np.ascontiguousarray(rows)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
    _, first, ids = np.unique(keys, return_index=True, return_inverse=True)
    return first, ids.reshape(-1)


def rowwise_cosine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """cos(left[i], right[i]) for every row, float64, with exact ties (module docstring).

    Each distinct vector is normalised once, and each distinct unordered pair of distinct vectors gets one
    cosine, reused for every row holding that pair; a pair of one vector with itself is exactly 1.0 (for a vector
    shorter than 1e-8, its squared norm over 1e-16: ~0). NaN rows give NaN (callers drop them first).
    """
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    if left.shape != right.shape or left.ndim != 2:
        raise ValueError(f"left/right must be equal 2-D shapes, got {left.shape} and {right.shape}")
    n = left.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if left.shape[1] == 0:
        return np.zeros(n, dtype=np.float64)
    first, ids = _row_ids(np.concatenate([left, right]))
    vectors = np.concatenate([left, right])[first]
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    units = vectors / np.maximum(norms, COSINE_EPS)[:, None]
    low, high = np.minimum(ids[:n], ids[n:]), np.maximum(ids[:n], ids[n:])
    pairs, inverse = np.unique(low.astype(np.int64) * len(first) + high, return_inverse=True)
    pair_low, pair_high = pairs // len(first), pairs % len(first)
    cosines = np.einsum("ij,ij->i", units[pair_low], units[pair_high])
    same = pair_low == pair_high
    cosines[same] = np.where(norms[pair_low[same]] >= COSINE_EPS, 1.0, cosines[same])
    cosines[np.isnan(norms[pair_low]) | np.isnan(norms[pair_high])] = np.nan
    return cosines[inverse.reshape(-1)]


def spearman_x100(similarities: np.ndarray, gold: np.ndarray, strict: bool = False) -> tuple[float | None, str | None]:
    """Spearman rank correlation x 100 (ties get average ranks). Returns (score, None) or (None, reason)."""
    similarities = np.asarray(similarities, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    reason = None
    if similarities.shape != gold.shape:
        raise ValueError(f"similarities {similarities.shape} and gold {gold.shape} differ in shape")
    if similarities.size < 2:
        reason = UNDEFINED_TOO_FEW
    elif np.ptp(similarities) == 0.0:
        reason = UNDEFINED_CONSTANT
    elif np.ptp(gold) == 0.0:
        reason = UNDEFINED_CONSTANT_GOLD
    if reason is None:
        # scipy.stats here, not at import: the tables and record commands read this module's names only, and
        # scipy.stats costs them ~1 s each
        from scipy.stats import spearmanr

        rho = spearmanr(similarities, gold).statistic
        if np.isfinite(rho):
            return float(rho) * 100.0, None
        reason = UNDEFINED_CONSTANT  # pragma: no cover - guarded above; kept so NaN can never leak out
    if strict:
        raise UndefinedScoreError(reason)
    return None, reason


def reference_prediction_strings(similarities: np.ndarray) -> list[str]:
    """The strings the reference's predictions became inside ``spearmanr``'s ``np.column_stack``.

    The reference computes each cosine with torch in float32 and collects ``.item()`` (a Python float holding the
    float32 value); ``np.array`` of those is float64, and numpy 1.26 casts float64 to ``'<U32'`` with ``str`` of the
    scalar, the shortest round-trip representation, which equals Python's ``repr`` (checked against numpy 1.26.0 on
    21,000 values from 1e-8 to 1e18, both signs, zeros and the 1e-4 / 1e16 switches to exponent notation).
    """
    values = np.asarray(similarities, dtype=np.float64).astype(np.float32).astype(np.float64)
    return [repr(float(v))[:REFERENCE_FLOAT_CHARS] for v in values]


def string_average_ranks(strings: Any) -> np.ndarray:
    """Ranks 1..n of strings in code-point order (numpy's ``'<U'`` order), ties sharing their average rank:
    what scipy 1.11's ``rankdata(method='average')`` returned for a string array."""
    array = np.asarray(list(strings), dtype=str)
    _, inverse, counts = np.unique(array, return_inverse=True, return_counts=True)
    last = np.cumsum(counts).astype(np.float64)
    first = last - counts + 1.0
    return ((first + last) / 2.0)[inverse.reshape(-1)]


def spearman_reference_strings_x100(similarities: np.ndarray, gold_text: Any,
                                    strict: bool = False) -> tuple[float | None, str | None]:
    """The papers' lexical protocol (``SPEARMAN_REFERENCE_STRINGS``): both columns ranked as strings.

    ``gold_text``: the gold scores as the file's strings (``PairSet.gold_text``). Undefined cases as in
    ``spearman_x100``, judged on the strings as scipy 1.11 did (all prediction strings equal = constant).
    """
    predictions = reference_prediction_strings(similarities)
    gold_text = [str(g) for g in gold_text]
    if len(predictions) != len(gold_text):
        raise ValueError(f"{len(predictions)} similarities and {len(gold_text)} gold strings")
    reason = None
    if len(predictions) < 2:
        reason = UNDEFINED_TOO_FEW
    elif len(set(predictions)) == 1:
        reason = UNDEFINED_CONSTANT
    elif len(set(gold_text)) == 1:
        reason = UNDEFINED_CONSTANT_GOLD
    if reason is None:
        ranked = np.column_stack([string_average_ranks(predictions), string_average_ranks(gold_text)])
        rho = np.corrcoef(ranked, rowvar=False)[1, 0]  # scipy 1.11: np.corrcoef(a_ranked, rowvar=0)[1, 0]
        if np.isfinite(rho):
            return float(rho) * 100.0, None
        reason = UNDEFINED_CONSTANT  # pragma: no cover - guarded above
    if strict:
        raise UndefinedScoreError(reason)
    return None, reason


def score_pairs(left: np.ndarray, right: np.ndarray, gold: np.ndarray, gold_text: Any = None) -> Score:
    """Cosine of each (left[i], right[i]) vs gold[i]; NaN-row pairs counted as OOV and dropped.

    With ``gold_text`` (the gold scores as the file's strings; word-level tasks), the papers' string-ranked
    protocol is computed on the same scored pairs too (``Score.extra[SPEARMAN_REFERENCE_STRINGS]``).
    """
    gold = np.asarray(gold, dtype=np.float64)
    if len(left) != len(gold) or len(right) != len(gold):
        raise ValueError(f"{len(left)} left / {len(right)} right embeddings for {len(gold)} gold scores")
    missing = nan_rows(left) | nan_rows(right)
    keep = ~missing
    similarities = rowwise_cosine(np.asarray(left)[keep], np.asarray(right)[keep])
    score, reason = spearman_x100(similarities, gold[keep])
    result = Score(score=score, n_pairs=int(len(gold)), n_oov=int(missing.sum()), reason=reason)
    if gold_text is not None:
        gold_text = list(gold_text)
        if len(gold_text) != len(gold):
            raise ValueError(f"{len(gold_text)} gold strings for {len(gold)} gold scores")
        kept_text = [text for text, k in zip(gold_text, keep) if k]
        value, why = spearman_reference_strings_x100(similarities, kept_text)
        result.extra[SPEARMAN_REFERENCE_STRINGS] = value
        if why is not None:
            result.extra_reasons[SPEARMAN_REFERENCE_STRINGS] = why
    return result


def score_pooled(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Score:
    """One Spearman over all parts' pairs together (the STS "all" convention)."""
    if not parts:
        raise ValueError("score_pooled needs at least one part")
    left = np.concatenate([np.asarray(p[0]) for p in parts])
    right = np.concatenate([np.asarray(p[1]) for p in parts])
    gold = np.concatenate([np.asarray(p[2], dtype=np.float64) for p in parts])
    return score_pairs(left, right, gold)


def subset_mean(subset_scores: list[Score]) -> tuple[float | None, str | None]:
    """SentEval's per-subset convention: the unweighted mean of the subsets' Spearman scores (x 100).
    Undefined (None, reason) when there are no subsets or any subset's score is undefined."""
    if not subset_scores:
        raise ValueError("subset_mean needs at least one subset score")
    values = [s.score for s in subset_scores]
    if any(v is None for v in values):
        return None, UNDEFINED_SUBSET
    return float(np.mean(np.asarray(values, dtype=np.float64))), None
