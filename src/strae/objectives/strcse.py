"""``strcse``: two passes with fresh dropout masks (SemEval-2024 appendix A). CE on both passes' leaves, and
contrastive between the two passes' downward embeddings of the same non-terminals, averaged.

With induction dropout the second pass induces its own trees, which may differ: its non-terminals are paired with
the first pass's by the token span they cover (same sentence, same first and last leaf), and non-terminals whose
span the other pass did not build are left out of the contrastive term (metric ``strcse_paired``: the share kept).
"""
from __future__ import annotations

import numpy as np
import torch

from strae.objectives.base import Objective, Passes
from strae.objectives.terms import contrastive_gemm_shapes, cross_entropy_gemm_shapes
from strae.runtime import host_to_device


class StrCSE(Objective):
    name = "strcse"

    def loss(self, passes: Passes):
        first, second = passes.first, passes.again()
        ce = 0.5 * (self.cross_entropy(passes.dembedding, first) + self.cross_entropy(passes.dembedding, second))
        metrics: dict[str, float | torch.Tensor] = {}
        n = first.n_leaves
        if second.graph is first.graph:  # same trees: node i of one pass is node i of the other
            a, b = first.down[n:], second.down[n:]
        else:
            pairs = span_pairs(first, second)
            a, b = first.down.index_select(0, pairs[0]), second.down.index_select(0, pairs[1])
            metrics["strcse_paired"] = pairs[0].numel() / max(first.graph.n_nodes - n, 1)
        contrastive = self.contrastive(a, b)
        loss = 0.5 * (ce + contrastive)
        return loss, {**metrics, "ce": ce.detach(), "contrastive": contrastive.detach()}

    def gemm_shapes(self, graph, size, vocab):
        # at most every non-terminal is paired (all of them when both passes share their trees)
        leaves = graph.level_offsets[1]
        return cross_entropy_gemm_shapes(leaves, size, vocab) * 2 + contrastive_gemm_shapes(graph.n_nodes - leaves,
                                                                                            size)


def span_pairs(first, second) -> tuple[torch.Tensor, torch.Tensor]:
    """Node ids (in each pass's graph) of the non-terminals the two inductions built over the same token span.

    Spans are packed leaf rows, so (first leaf, last leaf) names one sentence's span uniquely; an entangled node
    that several matched spans map to is paired once per distinct (first node, second node) pair.
    """
    def internal_span_keys(induction) -> np.ndarray:
        n = induction.n_leaves
        start = induction.span_start[n:].cpu().numpy()
        end = induction.span_end[n:].cpu().numpy()
        return start * n + end

    keys_a, keys_b = internal_span_keys(first.induction), internal_span_keys(second.induction)
    _, index_a, index_b = np.intersect1d(keys_a, keys_b, assume_unique=True, return_indices=True)
    n = first.induction.n_leaves
    nodes_a = first.graph.occurrence_node[n + index_a]
    nodes_b = second.graph.occurrence_node[n + index_b]
    pairs = np.unique(np.stack((nodes_a, nodes_b)), axis=1) if len(nodes_a) else np.zeros((2, 0), np.int64)
    device = first.graph.device
    return host_to_device(pairs[0], device), host_to_device(pairs[1], device)
