"""``contrastive``: every node's upward embedding against its downward one, over all nodes (SemEval-2024 Eq. 2)."""
from __future__ import annotations

from strae.objectives.base import Objective, Passes
from strae.objectives.terms import contrastive_gemm_shapes


class Contrastive(Objective):
    name = "contrastive"

    def loss(self, passes: Passes):
        contrastive = self.contrastive(passes.first.up, passes.first.down)
        return contrastive, {"contrastive": contrastive.detach()}

    def gemm_shapes(self, graph, size, vocab):
        return contrastive_gemm_shapes(graph.n_nodes, size)
