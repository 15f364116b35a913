"""Scoring: Spearman rho x 100 between cosine similarity and gold, with explicit OOV and degenerate cases.

Conventions (written into every result):
- cosine(a, b) = a.b / max(|a| |b|, 1e-8) in float64, so a zero vector gets similarity 0 (as
  ``torch.nn.functional.cosine_similarity`` does) rather than NaN;
- a pair where either side is a NaN row (the Encoder's "no vector", e.g. OOV) is counted in ``n_oov`` and dropped;
- the score is ``None`` (JSON null) with a ``reason`` when Spearman is undefined: fewer than 2 scored pairs, or
  constant similarities or constant gold. It is never reported as 0, which would look like a real, bad model.
- pooled aggregation = one Spearman over the concatenation of all subsets' pairs (not a mean of subset scores).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.stats import spearmanr

COSINE_EPS = 1e-8
UNDEFINED_CONSTANT = "undefined (constant similarities)"
UNDEFINED_CONSTANT_GOLD = "undefined (constant gold scores)"
UNDEFINED_TOO_FEW = "undefined (fewer than 2 pairs with vectors)"


class UndefinedScoreError(ValueError):
    """Raised by ``spearman_x100(..., strict=True)`` when the correlation is undefined."""


@dataclasses.dataclass
class Score:
    """The result of scoring one set of pairs."""

    score: float | None  # Spearman rho x 100, None when undefined
    n_pairs: int  # pairs in the file(s)
    n_oov: int  # pairs dropped because a side had no vector (NaN row)
    reason: str | None = None  # why score is None

    @property
    def n_scored(self) -> int:
        return self.n_pairs - self.n_oov

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "n_pairs": self.n_pairs, "n_oov": self.n_oov,
                               "n_scored": self.n_scored}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def nan_rows(embeddings: np.ndarray) -> np.ndarray:
    """Boolean mask of rows that contain any NaN (the Encoder's "no vector" marker)."""
    embeddings = np.asarray(embeddings)
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n, d), got shape {embeddings.shape}")
    return np.isnan(embeddings).any(axis=1)


def rowwise_cosine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """cos(left[i], right[i]) for every row, float64; NaN where either row has a NaN."""
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    if left.shape != right.shape or left.ndim != 2:
        raise ValueError(f"left/right must be equal 2-D shapes, got {left.shape} and {right.shape}")
    dots = np.einsum("ij,ij->i", left, right)
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    return dots / np.maximum(norms, COSINE_EPS)


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
        rho = spearmanr(similarities, gold).statistic
        if np.isfinite(rho):
            return float(rho) * 100.0, None
        reason = UNDEFINED_CONSTANT  # pragma: no cover - guarded above; kept so NaN can never leak out
    if strict:
        raise UndefinedScoreError(reason)
    return None, reason


def score_pairs(left: np.ndarray, right: np.ndarray, gold: np.ndarray) -> Score:
    """Cosine of each (left[i], right[i]) vs gold[i]; NaN-row pairs counted as OOV and dropped."""
    gold = np.asarray(gold, dtype=np.float64)
    if len(left) != len(gold) or len(right) != len(gold):
        raise ValueError(f"{len(left)} left / {len(right)} right embeddings for {len(gold)} gold scores")
    missing = nan_rows(left) | nan_rows(right)
    keep = ~missing
    similarities = rowwise_cosine(np.asarray(left)[keep], np.asarray(right)[keep])
    score, reason = spearman_x100(similarities, gold[keep])
    return Score(score=score, n_pairs=int(len(gold)), n_oov=int(missing.sum()), reason=reason)


def score_pooled(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Score:
    """One Spearman over all parts' pairs together (the STS "all" convention)."""
    if not parts:
        raise ValueError("score_pooled needs at least one part")
    left = np.concatenate([np.asarray(p[0]) for p in parts])
    right = np.concatenate([np.asarray(p[1]) for p in parts])
    gold = np.concatenate([np.asarray(p[2], dtype=np.float64) for p in parts])
    return score_pairs(left, right, gold)
