"""Composition / decomposition functions, applied independently to each of the k channels of size u.

``linear``   Self-StrAE (SemEval-2024 Eq. 2-3): C = hcat(l, r) Phi + phi, D = hsplit(p Theta + theta), with
             Phi (2u x u), Theta (u x 2u) shared across channels -> 4u^2 + 3u parameters.
``diagonal`` Banyan Eq. 7-8: C = l * sigmoid(Phi_l) + r * sigmoid(Phi_r) + phi,
             D = (p * sigmoid(Theta_l) + theta_l, p * sigmoid(Theta_r) + theta_r) -> 7u parameters.

Shapes: embeddings are flat (n, E) with E = k * u laid out channel-major ((n, k, u) when viewed).
``compose(children)`` takes (n, 2, E) = [left, right] and returns (n, E); ``decompose(parent)`` takes (n, E)
and returns (n, 2, E) = [left message, right message].
"""
from __future__ import annotations

import math

import torch
from torch import nn


class LinearFunctions(nn.Module):
    def __init__(self, k: int, u: int) -> None:
        super().__init__()
        self.k, self.u = k, u
        # Stored as (in, out) so x @ W matches the papers' notation; nn.Linear's default init (kaiming-uniform).
        self.compose_weight = nn.Parameter(torch.empty(2 * u, u))
        self.compose_bias = nn.Parameter(torch.empty(u))
        self.decompose_weight = nn.Parameter(torch.empty(u, 2 * u))
        self.decompose_bias = nn.Parameter(torch.empty(2 * u))
        for weight, bias, fan_in in ((self.compose_weight, self.compose_bias, 2 * u),
                                     (self.decompose_weight, self.decompose_bias, u)):
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(weight, -bound, bound)
            nn.init.uniform_(bias, -bound, bound)

    def compose(self, children: torch.Tensor) -> torch.Tensor:
        n = children.shape[0]
        # (n, 2, k, u) -> (n, k, 2u): per channel hcat(left_u, right_u).
        pairs = children.reshape(n, 2, self.k, self.u).transpose(1, 2).reshape(n, self.k, 2 * self.u)
        return (pairs @ self.compose_weight + self.compose_bias).reshape(n, self.k * self.u)

    def compose_operands(self) -> tuple[bool, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(linear, left, right, bias) of :meth:`compose` for the fused induction kernel (models/fused.py): the
        (u, u) halves of the (2u, u) weight acting on the left and on the right child."""
        weight = self.compose_weight.detach()
        return True, weight[:self.u].contiguous(), weight[self.u:].contiguous(), self.compose_bias.detach()

    @torch.no_grad()
    def gains(self) -> dict[str, float]:
        """Spectral norms of the per-channel maps, biases aside: how much a level can amplify a signal (up or down).
        Unbounded here; train.json records them per epoch (Banyan Appendix B's instability: see README)."""
        # on the CPU: a (2u, u) matrix, and on CUDA an SVD would load cuSOLVER into every training process
        return {"compose": float(torch.linalg.matrix_norm(self.compose_weight.detach().double().cpu(), ord=2)),
                "decompose": float(torch.linalg.matrix_norm(self.decompose_weight.detach().double().cpu(), ord=2))}

    def decompose(self, parent: torch.Tensor) -> torch.Tensor:
        n = parent.shape[0]
        out = parent.reshape(n, self.k, self.u) @ self.decompose_weight + self.decompose_bias  # (n, k, 2u)
        return out.reshape(n, self.k, 2, self.u).transpose(1, 2).reshape(n, 2, self.k * self.u)


class DiagonalFunctions(nn.Module):
    def __init__(self, k: int, u: int, gate_init: tuple[float, float] = (0.6, 0.9)) -> None:
        super().__init__()
        self.k, self.u = k, u
        # The paper leaves the init unspecified; the reference code draws the gate parameters from U(0.6, 0.9)
        # (B:src/funcs.py:13-14,38-39), i.e. sigmoid gates of ~0.65-0.71: a parent keeps ~2/3 of each child and
        # the root->leaf signal decays slower with depth than from gates at sigmoid(0) = 0.5. Biases start at 0.
        low, high = gate_init
        self.compose_gate_left = nn.Parameter(torch.empty(u).uniform_(low, high))
        self.compose_gate_right = nn.Parameter(torch.empty(u).uniform_(low, high))
        self.compose_bias = nn.Parameter(torch.zeros(u))
        self.decompose_gate_left = nn.Parameter(torch.empty(u).uniform_(low, high))
        self.decompose_gate_right = nn.Parameter(torch.empty(u).uniform_(low, high))
        self.decompose_bias_left = nn.Parameter(torch.zeros(u))
        self.decompose_bias_right = nn.Parameter(torch.zeros(u))

    def _tile(self, vector: torch.Tensor) -> torch.Tensor:
        # Parameters are shared by all k channels: repeat the u-vector to length E (channel-major layout).
        return vector.repeat(self.k)

    def compose_gates(self) -> torch.Tensor:
        return torch.sigmoid(torch.stack((self.compose_gate_left, self.compose_gate_right)))  # (2, u)

    def compose(self, children: torch.Tensor) -> torch.Tensor:
        weighted = children * self.compose_gates().repeat(1, self.k)  # (n, 2, E)
        return weighted[:, 0] + weighted[:, 1] + self._tile(self.compose_bias)

    def compose_operands(self) -> tuple[bool, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(linear, left, right, bias) of :meth:`compose` for the fused induction kernel (models/fused.py): the
        sigmoid gates (u,) of each child, the very values compose uses."""
        gates = self.compose_gates().detach()
        return False, gates[0].contiguous(), gates[1].contiguous(), self.compose_bias.detach()

    @torch.no_grad()
    def gains(self) -> dict[str, float]:
        """Spectral norms of the per-channel maps, as LinearFunctions.gains: [diag(g_l) diag(g_r)] (u x 2u) and its
        decomposition counterpart have singular values sqrt(g_l^2 + g_r^2) per dimension, so at most sqrt(2)."""
        compose = self.compose_gates().double()
        decompose = self.decompose_gates().double()
        return {"compose": float(compose.norm(dim=0).max()), "decompose": float(decompose.norm(dim=0).max())}

    def decompose_gates(self) -> torch.Tensor:
        return torch.sigmoid(torch.stack((self.decompose_gate_left, self.decompose_gate_right)))  # (2, u)

    def decompose(self, parent: torch.Tensor) -> torch.Tensor:
        gates = self.decompose_gates().repeat(1, self.k)
        biases = torch.stack((self.decompose_bias_left, self.decompose_bias_right)).repeat(1, self.k)
        return parent.unsqueeze(1) * gates + biases  # (n, 2, E)


def make_functions(kind: str, k: int, u: int, gate_init: tuple[float, float] = (0.6, 0.9)) -> nn.Module:
    """``gate_init`` (the recipe's) applies to diagonal gates; linear functions use nn.Linear's init as both
    references do (S:src/models.py:206,224)."""
    if kind == "linear":
        return LinearFunctions(k, u)
    if kind == "diagonal":
        return DiagonalFunctions(k, u, gate_init)
    raise ValueError(f"model config key 'functions': {kind!r} is not one of linear, diagonal")
