"""``ce``: reconstruct every leaf's token from its downward embedding (Banyan's objective)."""
from __future__ import annotations

from strae.objectives.base import Objective, Passes
from strae.objectives.terms import cross_entropy_gemm_shapes


class CrossEntropy(Objective):
    name = "ce"

    def loss(self, passes: Passes):
        ce = self.cross_entropy(passes.dembedding, passes.first)
        return ce, {"ce": ce.detach()}

    def gemm_shapes(self, graph, size, vocab):
        return cross_entropy_gemm_shapes(graph.level_offsets[1], size, vocab)
