"""What an objective sees of a training step (``Pass``, ``Passes``) and what it provides (``Objective``)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from strae.objectives import LOSS_PRECISIONS
from strae.objectives.terms import leaf_cross_entropy, symmetric_contrastive
from strae.runtime import tf32_products

if TYPE_CHECKING:
    from strae.models.trees import Graph, Induction

GemmShapes = list[tuple[int, int, int]]


@dataclass(frozen=True)
class Pass:
    """One up-and-down pass of the model over a batch: its trees, their graph, and every node's embeddings
    (row i of ``up`` and ``down`` is node i; leaves come first)."""
    induction: Induction
    graph: Graph
    up: torch.Tensor
    down: torch.Tensor

    @property
    def n_leaves(self) -> int:
        return self.graph.level_offsets[1]


@dataclass(frozen=True)
class Passes:
    """A step as an objective sees it: the engine's first pass; ``again()`` runs one more over the same batch
    (fresh dropout masks; with induction dropout, freshly induced trees, which may differ; without it, the first
    pass's trees); the vocabulary projection the CE term reconstructs leaves through."""
    first: Pass
    again: Callable[[], Pass]
    dembedding: torch.nn.Linear


class Objective:
    """A training objective: ``loss`` combines its terms into (loss, metrics), ``gemm_shapes`` declares the
    matrix products they cost. ``precision`` (fp32 | bf16 | tf32) and ``temperature`` come from the run's recipe
    (``loss_precision``, ``temperature``), once per run; the terms still keep fp32 where the device has no bf16.
    tf32: the terms' products run on CUDA's TF32 tensor cores (fp32 in and out; everything outside the objective,
    the message passing included, stays full fp32); on a CPU it is fp32."""

    name: ClassVar[str]

    def __init__(self, *, precision: str, temperature: float) -> None:
        if precision not in LOSS_PRECISIONS:
            raise ValueError(f"loss_precision {precision!r}: expected one of {', '.join(LOSS_PRECISIONS)}")
        self.precision = precision
        self.bf16 = precision == "bf16"
        self.temperature = temperature

    def loss(self, passes: Passes) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        """The loss and this objective's own metrics (the engine adds loss and the batch counts). A metric computed
        on the device stays a detached 0-dim tensor: reading it back is a host sync, which the engine defers until
        the step's backward has been launched (``StraeModel.loss(read_back=False)``)."""
        raise NotImplementedError

    def gemm_shapes(self, graph: Graph, size: int, vocab: int) -> GemmShapes:
        """(m, k, n) of every matrix product the loss needs for a batch with this (first pass's) graph."""
        raise NotImplementedError

    # The terms, at this run's precision.
    def cross_entropy(self, dembedding: torch.nn.Linear, pass_: Pass) -> torch.Tensor:
        """Mean CE of reconstructing each leaf's token from its downward embedding."""
        with self.matmul_precision(pass_.down.device):
            return leaf_cross_entropy(dembedding, pass_.down[:pass_.n_leaves], pass_.graph.leaf_tokens, self.bf16)

    def contrastive(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Symmetric InfoNCE: row i of ``a`` is the positive of row i of ``b``."""
        with self.matmul_precision(a.device):
            return symmetric_contrastive(a, b, self.temperature, self.bf16)

    def matmul_precision(self, device: torch.device):
        """TF32 products inside a term when the recipe says tf32 and the term runs on CUDA; the process setting
        (full fp32, runtime.configure_float32_matmul) is restored after. The fused terms compute their gradients in
        their forward, so every product of a term runs inside this block."""
        return tf32_products(self.precision == "tf32" and device.type == "cuda")
