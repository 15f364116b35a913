"""Training objectives of the Self-StrAE / Banyan family.

- ``leaf_cross_entropy``: reconstruction of leaf tokens through the (untied) dembedding Linear(E -> V).
- ``symmetric_contrastive``: SemEval-2024 Eq. 2 / Banyan Eq. 6. Row i of ``a`` is the positive of row i of ``b``;
  logits are cosine * exp(temperature) (the reference code's convention), averaged over both directions.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from strae.runtime import bf16_autocast_supported


def _autocast(device: torch.device, enabled: bool):
    if enabled and bf16_autocast_supported(device):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def leaf_cross_entropy(dembedding: torch.nn.Linear, leaves: torch.Tensor, targets: torch.Tensor,
                       bf16: bool = True) -> torch.Tensor:
    """Mean cross entropy of predicting ``targets`` from the leaves' downward embeddings."""
    if leaves.shape[0] == 0:
        return leaves.sum() * 0.0
    with _autocast(leaves.device, bf16 and leaves.dtype == torch.float32):
        logits = dembedding(leaves)
    return F.cross_entropy(logits.float() if logits.dtype == torch.bfloat16 else logits, targets)


def symmetric_contrastive(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """-1/(2M) sum_i [log softmax_row(A)_ii + log softmax_col(A)_ii], A_ij = cos(a_i, b_j) * exp(temperature)."""
    if a.shape[0] == 0:
        return a.sum() * 0.0
    scale = math.exp(temperature)
    logits = F.normalize(a, dim=-1, eps=1e-8) @ F.normalize(b, dim=-1, eps=1e-8).T * scale
    target = torch.arange(a.shape[0], device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
