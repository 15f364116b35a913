"""``ceco``: CE where a vocabulary exists (leaves), contrastive up vs down where it does not (internal nodes),
averaged (SemEval-2024 Eq. 3; Self-StrAE's objective)."""
from __future__ import annotations

from strae.objectives.base import Objective, Passes
from strae.objectives.terms import contrastive_gemm_shapes, cross_entropy_gemm_shapes


class CrossEntropyContrastive(Objective):
    name = "ceco"

    def loss(self, passes: Passes):
        first = passes.first
        ce = self.cross_entropy(passes.dembedding, first)
        contrastive = self.contrastive(first.up[first.n_leaves:], first.down[first.n_leaves:])
        loss = 0.5 * (ce + contrastive)
        return loss, {"ce": ce.detach(), "contrastive": contrastive.detach()}

    def gemm_shapes(self, graph, size, vocab):
        leaves = graph.level_offsets[1]
        return cross_entropy_gemm_shapes(leaves, size, vocab) + contrastive_gemm_shapes(graph.n_nodes - leaves, size)
