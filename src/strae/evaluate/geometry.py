"""Alignment and uniformity of embeddings (Wang & Isola 2020), as in the Self-StrAE paper's Figure 2.

Both are losses: lower is better. Inputs are L2-normalised here (each row projected onto the unit sphere), so
callers pass raw embeddings. Channel-structured embeddings (k channels x u dims) are flattened to k*u before
normalising, i.e. the whole node embedding is one point on the sphere (the vector the harness also scores).

- ``alignment(x, y, alpha=2)`` = mean_i ||x_i/|x_i| - y_i/|y_i| ||_2 ** alpha over positive pairs (x_i, y_i).
  In Self-StrAE a positive pair is a node's upward (encoder) and downward (decoder) embedding; range [0, 2**alpha].
- ``uniformity(x, t=2)`` = log mean_{i<j} exp(-t ||x_i/|x_i| - x_j/|x_j| ||_2 ** 2) over all distinct pairs
  (``torch.pdist``, as in Wang & Isola's reference code); range [-4t, 0], and it approaches its minimum when points
  spread evenly over the sphere.

Pure functions: they accept numpy arrays or torch tensors, never modify them, and return a Python float.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _as_unit_rows(x: Any) -> torch.Tensor:
    tensor = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).detach()
    tensor = tensor.to(torch.float64).reshape(tensor.shape[0], -1) if tensor.ndim > 2 else tensor.to(torch.float64)
    if tensor.ndim != 2:
        raise ValueError(f"expected embeddings of shape (n, d) or (n, k, u), got {tuple(tensor.shape)}")
    if torch.isnan(tensor).any():
        raise ValueError("embeddings contain NaN; drop rows without vectors before measuring geometry")
    return torch.nn.functional.normalize(tensor, p=2, dim=1)


def alignment(x: Any, y: Any, alpha: float = 2.0) -> float:
    """Mean ||x̂_i - ŷ_i||^alpha over row-aligned positive pairs (x̂ = x/|x|). Lower = positives closer."""
    x_hat, y_hat = _as_unit_rows(x), _as_unit_rows(y)
    if x_hat.shape != y_hat.shape:
        raise ValueError(f"positive pairs need equal shapes, got {tuple(x_hat.shape)} and {tuple(y_hat.shape)}")
    if x_hat.shape[0] == 0:
        raise ValueError("alignment of zero pairs is undefined")
    return float((x_hat - y_hat).norm(p=2, dim=1).pow(alpha).mean())


def uniformity(x: Any, t: float = 2.0, max_points: int | None = 10_000, seed: int = 0) -> float:
    """log of the mean Gaussian potential exp(-t ||x̂_i - x̂_j||^2) over pairs i<j. Lower = more uniform.

    ``pdist`` needs n(n-1)/2 distances, so with more than ``max_points`` rows a seeded uniform subsample of
    ``max_points`` rows is used (``None`` = always use every row).
    """
    x_hat = _as_unit_rows(x)
    if x_hat.shape[0] < 2:
        raise ValueError("uniformity needs at least 2 embeddings")
    if max_points is not None and x_hat.shape[0] > max_points:
        generator = torch.Generator().manual_seed(seed)
        x_hat = x_hat[torch.randperm(x_hat.shape[0], generator=generator)[:max_points]]
    return float(torch.pdist(x_hat, p=2).pow(2).mul(-t).exp().mean().log())


def alignment_uniformity(up: Any, down: Any, alpha: float = 2.0, t: float = 2.0,
                         max_points: int | None = 10_000, seed: int = 0) -> dict[str, float]:
    """Figure 2's two numbers for one model: alignment of (up_i, down_i) node pairs, uniformity of the up embeddings.

    ``up[i]`` and ``down[i]`` are the encoder and decoder embeddings of the same tree node.
    """
    return {
        "alignment": alignment(up, down, alpha=alpha),
        "uniformity": uniformity(up, t=t, max_points=max_points, seed=seed),
        "uniformity_down": uniformity(down, t=t, max_points=max_points, seed=seed),
        "n_nodes": int(len(up)),
        "alpha": alpha,
        "t": t,
    }
