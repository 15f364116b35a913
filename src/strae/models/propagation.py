"""The up and down passes as ONE autograd function with a hand-derived backward (``propagation='handwritten'``).

Why: on a GPU a Banyan step is host-bound. Outside the (fused) induction, the ~29-level up and down passes run
~2,500 small torch ops per step under autograd (gathers, splits, cats, index_adds, their backward nodes), each a
Python call, an autograd record and a kernel launch (H100, 2026-11-25: forward 50 ms + backward 41 ms of a 73 ms
warm step... per step, with the GPU mostly idle). The passes are simple enough to differentiate by hand: with
diagonal functions (Banyan Eq. 7-8) every node is an elementwise affine function of two rows, so both passes and
both backward passes are one level-synchronous loop each, over one node buffer, with a handful of ops per level and
no autograd graph inside.

Nodes are numbered level by level (``Graph``: level 0 = leaves, a parent's level above both children's), so level
l's rows are one contiguous slice of the buffer and its children are rows of lower levels, already computed.

Forward, up (levels ascending):  U[i] = Mu[i] * (gl * U[left i] + gr * U[right i] + b)        (Mu: upward dropout)
Forward, down (levels descending): D[i] = (sum over messages to i + (U[i] if i is a parentless root)) / count[i],
    a parent p sends side s the message  Md[p, s] * (D[p] * hs + cs)                              (Md: fresh dropout)
Backward, down (levels ascending, children first): gT = gD_total / count with
    gD_total[p] = gD[p] + sum_s gT[child_s p] * Md[p, s] * hs;   parentless roots pass gT on to gU
Backward, up (levels descending, parents first): gU_total[c] = gU[c] + sum over (p, s) with child_s p = c of
    gl/gr * Mu[p] * gU_total[p];  the leaves' gradient is gU_total * Mu of level 0.

Numbers: the forward is the autograd engine's, op for op, with the same dropout masks drawn from torch's generator
in the same order (same sizes, same sequence), and messages summed in the same order: bitwise equal on CPU (tested).
The backward sums in another order: equal to rounding (tested in float64 and float32). Diagonal functions only;
``StraeModel`` refuses ``handwritten`` with linear functions (Self-StrAE), whose passes keep autograd.
"""
from __future__ import annotations

import numpy as np
import torch

from strae.models.dropout import dropout_mask, keep_scale

PROPAGATION_MODES = ("autograd", "handwritten")


class LevelPlan:
    """Per-level index tensors of one graph for the handwritten passes (built once per graph, on its device)."""

    def __init__(self, graph, dtype: torch.dtype) -> None:
        offsets = graph.level_offsets
        n_level0 = offsets[1]
        device = graph.device
        self.offsets = offsets
        # Up: each parent's (left, right) children interleaved, as compose reads them ((n, 2, E) after the gather).
        self.up_children = torch.from_numpy(np.stack((graph.left, graph.right), axis=1).reshape(-1)).to(device)
        # Down: per level side-major ([all left children, all right children]): the order the autograd engine's
        # routes sum a level's messages in, so the forward sums match it bit for bit.
        down_left, down_right = graph.down_left, graph.down_right
        self.down_children: list[torch.Tensor | None] = [None]
        for level in range(1, len(offsets) - 1):
            start, stop = offsets[level] - n_level0, offsets[level + 1] - n_level0
            self.down_children.append(torch.from_numpy(np.concatenate((down_left[start:stop],
                                                                       down_right[start:stop]))).to(device))
        # Parentless sentence roots (their downward sum starts from their own upward row), global node ids.
        roots = [offsets[level] + local for level, local in sorted(graph.root_local.items())]
        self.root_local = graph.root_local
        self.roots = torch.cat(roots) if roots else torch.zeros(0, dtype=torch.long, device=device)
        # (n_nodes, 1) messages each node averages, in the passes' dtype (converted once, not per level)
        self.count = graph.down_count.to(dtype).unsqueeze(1)

    def internal(self, level: int) -> tuple[int, int]:
        """Level ``level``'s range in the (left, right) arrays of internal nodes."""
        n_level0 = self.offsets[1]
        return self.offsets[level] - n_level0, self.offsets[level + 1] - n_level0


def _tile(vectors: torch.Tensor, k: int) -> torch.Tensor:
    """(2, u) parameters shared by the k channels -> (2, E) (channel-major), as DiagonalFunctions tiles them."""
    return vectors.repeat(1, k)


def _untile(rows: torch.Tensor, k: int) -> torch.Tensor:
    """Adjoint of ``_tile``: (2, E) gradients summed over the k channels -> (2, u)."""
    return rows.view(rows.shape[0], k, -1).sum(1)


class _Passes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, leaves, compose_gates, compose_bias, decompose_gates, decompose_biases, plan, k, up_masks,
                down_masks):
        offsets = plan.offsets
        n_nodes, size = offsets[-1], leaves.shape[1]
        gates, bias = _tile(compose_gates, k), compose_bias.repeat(k)
        dgates, dbiases = _tile(decompose_gates, k), _tile(decompose_biases, k)
        up = leaves.new_empty(n_nodes, size)
        up[:offsets[1]] = leaves if up_masks is None else leaves * up_masks[:offsets[1]]
        for level in range(1, len(offsets) - 1):
            start, stop = offsets[level], offsets[level + 1]
            a, b = plan.internal(level)
            children = up.index_select(0, plan.up_children[2 * a:2 * b]).view(-1, 2, size)
            weighted = children * gates
            parent = weighted[:, 0] + weighted[:, 1] + bias
            up[start:stop] = parent if up_masks is None else parent * up_masks[start:stop]
        down = torch.empty_like(up)
        received = torch.zeros_like(up)
        for level in reversed(range(len(offsets) - 1)):
            start, stop = offsets[level], offsets[level + 1]
            total = received[start:stop]
            roots = plan.root_local.get(level)
            if roots is not None:
                total = total.index_add(0, roots, up[start:stop].index_select(0, roots))
            down[start:stop] = total / plan.count[start:stop]
            if level > 0:
                out = down[start:stop].unsqueeze(1) * dgates + dbiases  # (n, 2, E), as decompose
                if down_masks is not None:
                    out = out * down_masks[level]
                received.index_add_(0, plan.down_children[level], out.transpose(0, 1).reshape(-1, size))
        ctx.plan, ctx.k, ctx.up_masks, ctx.down_masks = plan, k, up_masks, down_masks
        ctx.save_for_backward(up, down, gates, dgates)
        return up, down

    @staticmethod
    def backward(ctx, grad_up, grad_down):
        up, down, gates, dgates = ctx.saved_tensors
        plan, k, up_masks, down_masks = ctx.plan, ctx.k, ctx.up_masks, ctx.down_masks
        offsets = plan.offsets
        size = up.shape[1]
        grad_up = torch.zeros_like(up) if grad_up is None else grad_up.clone()
        grad_down = torch.zeros_like(down) if grad_down is None else grad_down
        # Down pass, children first: gT = d loss / d (a node's summed messages), i.e. its total gradient / count.
        grad_total = torch.empty_like(down)
        g_dgates = down.new_zeros(2, size)
        g_dbiases = down.new_zeros(2, size)
        for level in range(len(offsets) - 1):
            start, stop = offsets[level], offsets[level + 1]
            g = grad_down[start:stop]
            if level > 0:
                g_out = grad_total.index_select(0, plan.down_children[level]).view(2, stop - start, size)
                if down_masks is not None:
                    g_out = g_out * down_masks[level].transpose(0, 1)
                g = g + (g_out[0] * dgates[0] + g_out[1] * dgates[1])
                g_dgates += (g_out * down[start:stop].unsqueeze(0)).sum(1)
                g_dbiases += g_out.sum(1)
            grad_total[start:stop] = g / plan.count[start:stop]
        grad_up.index_add_(0, plan.roots, grad_total.index_select(0, plan.roots))
        # Up pass, parents first: each level's gradient is complete before its rows are read.
        g_gates = up.new_zeros(2, size)
        g_bias = up.new_zeros(size)
        for level in reversed(range(1, len(offsets) - 1)):
            start, stop = offsets[level], offsets[level + 1]
            a, b = plan.internal(level)
            g = grad_up[start:stop]
            if up_masks is not None:
                g = g * up_masks[start:stop]
            index = plan.up_children[2 * a:2 * b]
            children = up.index_select(0, index).view(-1, 2, size)
            g_gates += (g.unsqueeze(1) * children).sum(0)
            g_bias += g.sum(0)
            grad_up.index_add_(0, index, (g.unsqueeze(1) * gates).view(-1, size))
        g_leaves = grad_up[:offsets[1]]
        if up_masks is not None:
            g_leaves = g_leaves * up_masks[:offsets[1]]
        return (g_leaves, _untile(g_gates, k), g_bias.view(k, -1).sum(0), _untile(g_dgates, k),
                _untile(g_dbiases, k), None, None, None, None)


def propagate_handwritten(model, graph, dropout: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``StraeModel.propagate`` for diagonal functions, with the same dropout masks drawn in the same order."""
    recipe, functions, config = model.recipe, model.functions, model.config
    p_embedding = recipe.embedding_dropout if dropout else 0.0
    p_function = recipe.function_dropout if dropout else 0.0
    offsets, size = graph.level_offsets, config.embedding_size
    leaves = model.embedding(graph.leaf_tokens)
    up_masks = None
    if p_embedding > 0 or p_function > 0:
        if graph.up_keep is not None:
            # The induction's keyed masks (so the graph trained is the graph induced), as apply_keep scales them.
            scales = torch.full((offsets[-1], 1), keep_scale(p_function) if p_function > 0 else 1.0,
                                dtype=leaves.dtype, device=leaves.device)
            scales[:offsets[1]] = keep_scale(p_embedding) if p_embedding > 0 else 1.0
            up_masks = graph.up_keep.to(leaves.dtype) * scales
            if p_embedding <= 0:
                up_masks[:offsets[1]] = 1.0
            if p_function <= 0:
                up_masks[offsets[1]:] = 1.0
        else:
            # Fresh masks, level by level, as fast_dropout draws them in the autograd engine's up pass.
            up_masks = torch.cat([dropout_mask((offsets[level + 1] - offsets[level], size),
                                               p_embedding if level == 0 else p_function, leaves.device,
                                               leaves.dtype)
                                  for level in range(len(offsets) - 1)])
    down_masks = None
    if p_function > 0:
        # Fresh masks for the downward messages, top level first, (n, 2, E) per level as the autograd engine draws.
        down_masks = [None] * (len(offsets) - 1)
        for level in reversed(range(1, len(offsets) - 1)):
            down_masks[level] = dropout_mask((offsets[level + 1] - offsets[level], 2, size), p_function,
                                             leaves.device, leaves.dtype)
    plan = LevelPlan(graph, leaves.dtype)
    compose_gates = functions.compose_gates()
    decompose_gates = torch.sigmoid(torch.stack((functions.decompose_gate_left, functions.decompose_gate_right)))
    decompose_biases = torch.stack((functions.decompose_bias_left, functions.decompose_bias_right))
    return _Passes.apply(leaves, compose_gates, functions.compose_bias, decompose_gates, decompose_biases, plan,
                         config.k, up_masks, down_masks)
