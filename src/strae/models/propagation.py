"""The up and down passes as ONE autograd function with a hand-derived backward (``propagation='handwritten'``).

Why: on a GPU a Banyan step is host-bound. Outside the (fused) induction, the ~29-level up and down passes run
~2,500 small torch ops per step under autograd (gathers, splits, cats, index_adds, their backward nodes), each a
Python call, an autograd record and a kernel launch (H100, 2026-11-25: forward 50 ms + backward 41 ms of a 73 ms
warm step, with the GPU mostly idle). The passes are simple enough to differentiate by hand: every node is an
affine function of two rows (diagonal functions, Banyan Eq. 7-8: elementwise; linear, Self-StrAE: per channel), so
both passes and both backward passes are one level-synchronous loop each, over one node buffer, with a handful of
ops per level and no autograd graph inside.

Nodes are numbered level by level (``Graph``: level 0 = leaves, a parent's level above both children's), so level
l's rows are one contiguous slice of the buffer and its children are rows of lower levels, already computed.

Written for diagonal functions (the linear ones swap in their per-channel products, ``_Linear``):
Forward, up (levels ascending):  U[i] = Mu[i] * (gl * U[left i] + gr * U[right i] + b)        (Mu: upward dropout)
Forward, down (levels descending): D[i] = (sum over messages to i + (U[i] if i is a parentless root)) / count[i],
    a parent p sends side s the message  Md[p, s] * (D[p] * hs + cs)                              (Md: fresh dropout)
Backward, down (levels ascending, children first): gT = gD_total / count with
    gD_total[p] = gD[p] + sum_s gT[child_s p] * Md[p, s] * hs;   parentless roots pass gT on to gU
Backward, up (levels descending, parents first): gU_total[c] = gU[c] + sum over (p, s) with child_s p = c of
    gl/gr * Mu[p] * gU_total[p];  the leaves' gradient is gU_total * Mu of level 0.

Numbers: the forward is the autograd engine's, op for op, with the same dropout masks drawn from torch's generator
in the same order (same sizes, same sequence), and messages summed in the same order: bitwise equal on CPU (tested).
The backward sums in another order: equal to rounding (tested in float64 and float32). On CUDA (where the induction
runs Triton) each level is one Triton kernel instead, for both function kinds (propagate_kernel.py).
"""
from __future__ import annotations

import contextlib
import copy

import numpy as np
import torch

from strae.models.dropout import keep_scale
from strae.runtime import host_to_device_many

# auto: handwritten where the induction runs Triton (CUDA), autograd elsewhere (StraeModel.propagation_mode)
PROPAGATION_MODES = ("auto", "autograd", "handwritten")


class LevelPlan:
    """Per-level index tensors of one graph for the handwritten passes (built once per graph, on its device).

    Every index array is assembled on the host and copied to the device in ONE transfer (then sliced): on a GPU
    each small copy costs host time, and the step is host-bound."""

    def __init__(self, graph, dtype: torch.dtype, triton_levels: bool = False) -> None:
        offsets = graph.level_offsets
        n_nodes, n_level0 = offsets[-1], offsets[1]
        self.offsets = offsets
        self.root_local = graph.root_local
        # (n_nodes, 1) messages each node averages, in the passes' dtype (converted once, not per level)
        self.count_flat = graph.down_count.to(dtype)
        self.count = self.count_flat.unsqueeze(1)  # a view: one conversion (one kernel on a GPU), not two
        arrays = {
            # Up: each parent's (left, right) children interleaved, as compose reads them ((n, 2, E) after a gather).
            "up_children": np.stack((graph.left, graph.right), axis=1).reshape(-1),
            # Parentless sentence roots (their downward sum starts from their own upward row), global node ids.
            "roots": graph.root_nodes,
        }
        if triton_levels:
            arrays["up_begin"], arrays["up_entries"] = _parents_csr(graph.left, graph.right, offsets, n_level0,
                                                                    n_nodes)
            if graph.down_left is graph.left and graph.down_right is graph.right:
                arrays["down_begin"], arrays["down_entries"] = arrays["up_begin"], arrays["up_entries"]
            else:
                arrays["down_begin"], arrays["down_entries"] = _parents_csr(graph.down_left, graph.down_right,
                                                                            offsets, n_level0, n_nodes)
            arrays["down_left"], arrays["down_right"] = graph.down_left, graph.down_right
            root = np.zeros(n_nodes, dtype=np.int64)
            root[graph.root_nodes] = 1
            arrays["root_flag"] = root
            # the kernels read their levels' bounds here (a launch may cover several levels)
            arrays["level_offsets"] = np.asarray(offsets, dtype=np.int64)
        else:
            # Down: per level side-major ([all left children, all right children]): the order the autograd
            # engine's routes sum a level's messages in, so the forward sums match it bit for bit. Level l's
            # slice is [2a, 2b) for its internal range [a, b).
            bounds = [offset - n_level0 for offset in offsets[1:]]
            arrays["down_children"] = np.concatenate(
                [np.concatenate((graph.down_left[a:b], graph.down_right[a:b])) for a, b in zip(bounds, bounds[1:])]
                or [np.zeros(0, dtype=np.int64)])
        # One copy to the device (runtime.host_to_device_many), each array starting 16-byte aligned in it: Triton
        # specialises a kernel on its pointer arguments' 16-byte alignment, so slices at odd offsets made new
        # variants to compile batch after batch (seconds of compiles inside a fresh run's first timed steps).
        names = list(arrays)
        moved = host_to_device_many([np.asarray(arrays[name], dtype=np.int64) for name in names], graph.device)
        for name, tensor in zip(names, moved):
            setattr(self, name, tensor)
        if triton_levels:
            self.up_parents = (self.up_begin, self.up_entries)
            self.down_parents = (self.down_begin, self.down_entries)

    def internal(self, level: int) -> tuple[int, int]:
        """Level ``level``'s range in the (left, right) arrays of internal nodes."""
        n_level0 = self.offsets[1]
        return self.offsets[level] - n_level0, self.offsets[level + 1] - n_level0

    def down_children_of(self, level: int) -> torch.Tensor:
        """Level ``level``'s down children, side-major (torch levels)."""
        a, b = self.internal(level)
        return self.down_children[2 * a:2 * b]


def _parents_csr(left: np.ndarray, right: np.ndarray, offsets, n_level0: int,
                 n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """For every node the (parent, side) pairs that reach it (2 * parent + side), as a CSR list in the order the
    torch levels sum them: parents' levels descending, left side first, node order (propagate_kernel.py reads it).
    ``offsets``: the graph's level offsets (node ranges per level)."""
    m = len(left)
    child = np.concatenate((left, right))
    begin = np.zeros(n_nodes + 1, dtype=np.int64)
    counts = np.bincount(child, minlength=n_nodes)
    np.cumsum(counts, out=begin[1:])
    if m == 0 or counts.max() <= 1:
        # Sentential trees: every node has at most one parent, so the order within a node's list is moot and each
        # entry goes straight to its node's slot (no sort; a Self-StrAE English batch's two lists, up and down, in a
        # fraction of the key sort's time, on the host of every GPU step)
        parent = 2 * (n_level0 + np.arange(m))
        entries = np.empty(2 * m, dtype=np.int64)
        entries[begin[child]] = np.concatenate((parent, parent + 1))
        return begin, entries
    # each node's level, only here: the sort-free path above has no use for it (a host step of every GPU step)
    level = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    local = np.concatenate((np.arange(m), np.arange(m)))  # the parent's index among the internal nodes
    side = np.repeat(np.array([0, 1]), m)
    # One int64 key ordering (child, parent level descending, side, parent), unique per entry, so sorting the keys
    # gives lexsort's order exactly; the entry's side and parent are read back from the sorted key itself, so a
    # value sort (SIMD where the CPU has it) replaces an argsort and a gather (a host step of every GPU step)
    n_levels = int(level.max()) + 1 if len(level) else 1
    width = max(m, 1)
    key = np.sort(((child * n_levels + (n_levels - 1 - level[n_level0 + local])) * 2 + side) * width + local)
    rest, local = np.divmod(key, width)
    return begin, 2 * (n_level0 + local) + rest % 2


def _tile(vectors: torch.Tensor, k: int) -> torch.Tensor:
    """(2, u) parameters shared by the k channels -> (2, E) (channel-major), as DiagonalFunctions tiles them."""
    return vectors.repeat(1, k)


def _untile(rows: torch.Tensor, k: int) -> torch.Tensor:
    """Adjoint of ``_tile``: (2, E) gradients summed over the k channels -> (2, u)."""
    return rows.view(rows.shape[0], k, -1).sum(1)


class _Diagonal:
    """Banyan Eq. 7-8 on (n, E) rows, its forward op for op as ``DiagonalFunctions`` (so the same numbers), and its
    adjoints. Parameters: the sigmoid gates (2, u) and bias (u) of compose, the gates and biases (2, u) of
    decompose (autograd differentiates the sigmoid outside); tiled to E once per pass."""

    def __init__(self, params, k: int) -> None:
        compose_gates, compose_bias, decompose_gates, decompose_biases = params
        self.k = k
        self.gates, self.bias = _tile(compose_gates, k), compose_bias.repeat(k)
        self.dgates, self.dbiases = _tile(decompose_gates, k), _tile(decompose_biases, k)
        self.grads = [torch.zeros_like(self.gates), torch.zeros_like(self.bias), torch.zeros_like(self.dgates),
                      torch.zeros_like(self.dbiases)]

    def compose(self, children: torch.Tensor) -> torch.Tensor:  # (n, 2, E) -> (n, E)
        weighted = children * self.gates
        return weighted[:, 0] + weighted[:, 1] + self.bias

    def decompose(self, parent: torch.Tensor) -> torch.Tensor:  # (n, E) -> (n, 2, E)
        return parent.unsqueeze(1) * self.dgates + self.dbiases

    def compose_backward(self, g: torch.Tensor, children: torch.Tensor) -> torch.Tensor:
        self.grads[0] += (g.unsqueeze(1) * children).sum(0)
        self.grads[1] += g.sum(0)
        return g.unsqueeze(1) * self.gates  # (n, 2, E)

    def decompose_backward(self, g_out: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        """``g_out``: (2, n, E) side-major gradients of the two messages -> (n, E)."""
        self.grads[2] += (g_out * parent.unsqueeze(0)).sum(1)
        self.grads[3] += g_out.sum(1)
        return g_out[0] * self.dgates[0] + g_out[1] * self.dgates[1]

    def param_grads(self) -> tuple[torch.Tensor, ...]:
        k = self.k
        return (_untile(self.grads[0], k), self.grads[1].view(k, -1).sum(0), _untile(self.grads[2], k),
                _untile(self.grads[3], k))


class _Linear:
    """Self-StrAE's per-channel linear functions (SemEval-2024 Eq. 2-3), forward op for op as ``LinearFunctions``,
    and their adjoints. Parameters: compose weight (2u, u) and bias (u), decompose weight (u, 2u) and bias (2u)."""

    def __init__(self, params, k: int) -> None:
        self.weight, self.bias, self.dweight, self.dbias = params
        self.k, self.u = k, self.weight.shape[1]
        self.grads = [torch.zeros_like(p) for p in params]

    def _pairs(self, children: torch.Tensor) -> torch.Tensor:  # (n, 2, E) -> (n, k, 2u): hcat(left_c, right_c)
        n = children.shape[0]
        return children.reshape(n, 2, self.k, self.u).transpose(1, 2).reshape(n, self.k, 2 * self.u)

    def _unpairs(self, pairs: torch.Tensor) -> torch.Tensor:  # (n, k, 2u) -> (n, 2, E)
        n = pairs.shape[0]
        return pairs.reshape(n, self.k, 2, self.u).transpose(1, 2).reshape(n, 2, self.k * self.u)

    def compose(self, children: torch.Tensor) -> torch.Tensor:
        n = children.shape[0]
        return (self._pairs(children) @ self.weight + self.bias).reshape(n, self.k * self.u)

    def decompose(self, parent: torch.Tensor) -> torch.Tensor:
        n = parent.shape[0]
        return self._unpairs(parent.reshape(n, self.k, self.u) @ self.dweight + self.dbias)

    def compose_backward(self, g: torch.Tensor, children: torch.Tensor) -> torch.Tensor:
        n, u = g.shape[0], self.u
        g = g.reshape(n, self.k, u)
        self.grads[0] += self._pairs(children).reshape(-1, 2 * u).T @ g.reshape(-1, u)
        self.grads[1] += g.sum((0, 1))
        return self._unpairs(g @ self.weight.T)

    def decompose_backward(self, g_out: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        n, u = parent.shape[0], self.u
        g = self._pairs(g_out.transpose(0, 1))  # (n, k, 2u)
        self.grads[2] += parent.reshape(-1, u).T @ g.reshape(-1, 2 * u)
        self.grads[3] += g.sum((0, 1))
        return (g @ self.dweight.T).reshape(n, self.k * u)

    def param_grads(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.grads)


_KINDS = {"diagonal": _Diagonal, "linear": _Linear}


class _Passes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, leaves, plan, kind, k, up_masks, down_masks, triton_levels, *params):
        functions = _KINDS[kind](params, k)
        run = _forward_triton if triton_levels else _forward_torch
        up, down = run(leaves, functions, plan, up_masks, down_masks)
        ctx.plan, ctx.kind, ctx.k, ctx.up_masks, ctx.down_masks = plan, kind, k, up_masks, down_masks
        ctx.triton_levels = triton_levels
        ctx.save_for_backward(up, down, *params)
        return up, down

    @staticmethod
    def backward(ctx, grad_up, grad_down):
        up, down, *params = ctx.saved_tensors
        functions = _KINDS[ctx.kind](params, ctx.k)
        grad_up = torch.zeros_like(up) if grad_up is None else grad_up.contiguous()
        grad_down = torch.zeros_like(down) if grad_down is None else grad_down.contiguous()
        run = _backward_triton if ctx.triton_levels else _backward_torch
        g_leaves = run(grad_up, grad_down, up, down, functions, ctx.plan, ctx.up_masks, ctx.down_masks)
        return (g_leaves, None, None, None, None, None, None, *functions.param_grads())


def _forward_torch(leaves, functions, plan, up_masks, down_masks):
    offsets = plan.offsets
    n_nodes, size = offsets[-1], leaves.shape[1]
    up = leaves.new_empty(n_nodes, size)
    up[:offsets[1]] = leaves if up_masks is None else leaves * up_masks[:offsets[1]]
    for level in range(1, len(offsets) - 1):
        start, stop = offsets[level], offsets[level + 1]
        a, b = plan.internal(level)
        parent = functions.compose(up.index_select(0, plan.up_children[2 * a:2 * b]).view(-1, 2, size))
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
            out = functions.decompose(down[start:stop])  # (n, 2, E)
            if down_masks is not None:
                out = out * down_masks[level]
            received.index_add_(0, plan.down_children_of(level), out.transpose(0, 1).reshape(-1, size))
    return up, down


def _backward_torch(grad_up, grad_down, up, down, functions, plan, up_masks, down_masks):
    offsets = plan.offsets
    size = up.shape[1]
    grad_up = grad_up.clone()
    # Down pass, children first: gT = d loss / d (a node's summed messages), i.e. its total gradient / count.
    grad_total = torch.empty_like(down)
    for level in range(len(offsets) - 1):
        start, stop = offsets[level], offsets[level + 1]
        g = grad_down[start:stop]
        if level > 0:
            g_out = grad_total.index_select(0, plan.down_children_of(level)).view(2, stop - start, size)
            if down_masks is not None:
                g_out = g_out * down_masks[level].transpose(0, 1)
            g = g + functions.decompose_backward(g_out, down[start:stop])
        grad_total[start:stop] = g / plan.count[start:stop]
    grad_up.index_add_(0, plan.roots, grad_total.index_select(0, plan.roots))
    # Up pass, parents first: each level's gradient is complete before its rows are read.
    for level in reversed(range(1, len(offsets) - 1)):
        start, stop = offsets[level], offsets[level + 1]
        a, b = plan.internal(level)
        g = grad_up[start:stop]
        if up_masks is not None:
            g = g * up_masks[start:stop]
        index = plan.up_children[2 * a:2 * b]
        g_children = functions.compose_backward(g, up.index_select(0, index).view(-1, 2, size))
        grad_up.index_add_(0, index, g_children.reshape(-1, size))
    g_leaves = grad_up[:offsets[1]]
    if up_masks is not None:
        g_leaves = g_leaves * up_masks[:offsets[1]]
    return g_leaves


# Rows per Triton program: a (BLOCK, E) tile; 16 x 256 fp32 is 4 KB per operand, comfortably in registers.
BLOCK = 16


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _node_ordered(down_masks) -> torch.Tensor | None:
    """The per-level down masks as one (n_internal, 2, E) tensor in node order (the kernels index it by node)."""
    if down_masks is None:
        return None
    return torch.cat(down_masks[1:]) if len(down_masks) > 1 else None


# Nodes per program of the linear kernels (walked one after another: the weights load once per program).
LINEAR_BLOCK = 8
# The narrow levels at a graph's top (from the first level up whose every level has at most this many nodes) share
# ONE single-program launch per pass instead of a launch each (propagate_kernel.py): ~20 of a batch's ~30 levels
# hold a few blocks, and every launch costs ~60 us of host time on the H100 box (a step is host-bound there), against
# a few microseconds of the one program's time per level. 0: a launch per level; results are the same either way
# (tests/test_propagation.py). Measured on the H100 box (2026-11-27, Amharic batches of 512, the same batches in
# alternating rounds in one process: benchmarks/train_throughput.py --compare-level-tail): Banyan's diagonal levels
# 490.5k -> 516.0k tokens/s with a 64-node tail (+5.2 %), Self-StrAE's linear levels 331.1k -> 339.2k with a
# 16-node tail (+2.4 %). The diagonal tail also passed on that GPU what a run checks (the levels' first-use check
# against the torch levels, whose 7-sentence graph runs wholly in the tail launch; determinism, resume and SIGTERM
# runs bit-identical: benchmarks/cuda_checks.py). The linear tail has not yet run a first-use check on a GPU (the
# Self-StrAE check fell back to the torch induction, whose levels are torch's): 0 until one passes.
LEVEL_TAIL_NODES = 64  # diagonal functions' levels
LINEAR_LEVEL_TAIL_NODES = 0  # linear functions' levels (16 measured faster; see above)


def level_tail_nodes(functions) -> int:
    """The narrow-top tail (nodes) that ``functions``' Triton levels run with."""
    return LINEAR_LEVEL_TAIL_NODES if isinstance(functions, _Linear) else LEVEL_TAIL_NODES


def set_level_tails(nodes: int) -> None:
    """Both tails (diagonal and linear) set to ``nodes``, for this process: benchmarks and checks that compare tails
    (they are engine constants, not training options)."""
    global LEVEL_TAIL_NODES, LINEAR_LEVEL_TAIL_NODES
    LEVEL_TAIL_NODES = LINEAR_LEVEL_TAIL_NODES = nodes


@contextlib.contextmanager
def level_tails(nodes: int):
    """:func:`set_level_tails` inside the block; both tails restored after."""
    global LEVEL_TAIL_NODES, LINEAR_LEVEL_TAIL_NODES
    saved = LEVEL_TAIL_NODES, LINEAR_LEVEL_TAIL_NODES
    set_level_tails(nodes)
    try:
        yield
    finally:
        LEVEL_TAIL_NODES, LINEAR_LEVEL_TAIL_NODES = saved


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _shape_args(functions, size: int) -> tuple[int, dict]:
    """(nodes per program, the kernels' shape constants) for ``functions``' Triton levels."""
    if isinstance(functions, _Linear):
        k, u = functions.k, functions.u
        return LINEAR_BLOCK, dict(K=k, U=u, E=size, K_B=_pow2(k), U_B=_pow2(u), BLOCK=LINEAR_BLOCK)
    return BLOCK, dict(E=size, E_B=_pow2(size), BLOCK=BLOCK)


def level_launches(offsets: list[int], per_program: int, tail_nodes: int,
                   first: int = 1) -> list[tuple[int, int, int]]:
    """(level_first, level_end, programs) of the launches covering levels first..L-1, ascending: a level of its own
    with a program per block, except that the narrow levels at the top (every one from some level up has at most
    ``tail_nodes`` nodes; 0: none) share one single-program launch when there are at least two of them."""
    top = len(offsets) - 1
    tail = top
    while tail - 1 >= max(first, 1) and offsets[tail] - offsets[tail - 1] <= tail_nodes:
        tail -= 1
    if top - tail < 2:
        tail = top
    launches = [(level, level + 1, triton_cdiv(offsets[level + 1] - offsets[level], per_program))
                for level in range(first, tail)]
    return launches + ([(tail, top, 1)] if tail < top else [])


def _forward_triton(leaves, functions, plan, up_masks, down_masks):
    from strae.models import propagate_kernel as kernels

    linear = isinstance(functions, _Linear)
    up_level = kernels.up_forward_linear if linear else kernels.up_forward
    down_level = kernels.down_forward_linear if linear else kernels.down_forward
    compose = (functions.weight, functions.bias) if linear else (functions.gates, functions.bias)
    decompose = (functions.dweight, functions.dbias) if linear else (functions.dgates, functions.dbiases)
    offsets = plan.offsets
    n_nodes, size = offsets[-1], leaves.shape[1]
    n_level0 = offsets[1]
    per_program, shape = _shape_args(functions, size)
    tail = level_tail_nodes(functions)
    up = leaves.new_empty(n_nodes, size)
    up[:n_level0] = leaves if up_masks is None else leaves * up_masks[:n_level0]
    mask_arg = up_masks if up_masks is not None else up
    for low, high, programs in level_launches(offsets, per_program, tail):
        up_level[(programs,)](up, plan.up_children, *compose, mask_arg, plan.level_offsets, low, high, n_level0,
                              **shape, MASKED=up_masks is not None)
    down = torch.empty_like(up)
    ordered = _node_ordered(down_masks)
    begin, entries = plan.down_parents
    for low, high, programs in reversed(level_launches(offsets, per_program, tail, first=0)):
        down_level[(programs,)](
            down, up, begin, entries, ordered if ordered is not None else up, *decompose, plan.count_flat,
            plan.root_flag, plan.level_offsets, low, high, n_level0, **shape, MASKED=ordered is not None)
    return up, down


def _backward_triton(grad_up, grad_down, up, down, functions, plan, up_masks, down_masks):
    from strae.models import propagate_kernel as kernels

    linear = isinstance(functions, _Linear)
    offsets = plan.offsets
    size = up.shape[1]
    n_level0 = offsets[1]
    per_program, shape = _shape_args(functions, size)
    tail = level_tail_nodes(functions)
    # partial rows: level l's blocks at bases[l - 1] .. bases[l] (levels 1..L-1 ascending)
    blocks = [triton_cdiv(offsets[level + 1] - offsets[level], per_program) for level in range(1, len(offsets) - 1)]
    bases = np.concatenate(([0], np.cumsum(blocks))).tolist()
    n_blocks = max(bases[-1], 1)
    ordered = _node_ordered(down_masks)
    grad_total = torch.empty_like(down)
    grad_total[:n_level0] = grad_down[:n_level0] / plan.count[:n_level0]
    if linear:
        u = functions.u
        down_level, decompose = kernels.down_backward_linear, functions.dweight
        up_level, compose = kernels.up_backward_linear, functions.weight
        partial_down = down.new_empty(n_blocks, 2 * u * u + 2 * u)
        partial_up = up.new_empty(n_blocks, 2 * u * u + u)
    else:
        down_level, decompose = kernels.down_backward, functions.dgates
        up_level, compose = kernels.up_backward, functions.gates
        partial_down = down.new_empty(n_blocks, 4, size)
        partial_up = up.new_empty(n_blocks, 3, size)
    for low, high, programs in level_launches(offsets, per_program, tail):
        down_level[(programs,)](grad_total, grad_down, down, plan.down_left, plan.down_right,
                                ordered if ordered is not None else down, decompose, plan.count_flat, partial_down,
                                plan.level_offsets, low, high, n_level0, bases[low - 1], **shape,
                                MASKED=ordered is not None)
    grad_up = grad_up.index_add(0, plan.roots, grad_total.index_select(0, plan.roots))
    pre = torch.empty_like(up)
    begin, entries = plan.up_parents
    for low, high, programs in reversed(level_launches(offsets, per_program, tail, first=0)):
        up_level[(programs,)](
            pre, grad_up, up, begin, entries, compose, up_masks if up_masks is not None else up, plan.up_children,
            partial_up, plan.level_offsets, low, high, n_level0, bases[high - 1] if low > 0 else 0, **shape,
            MASKED=up_masks is not None, INTERNAL=low > 0)
    if bases[-1] == 0:  # no internal nodes: no partials were written
        partial_down.zero_()
        partial_up.zero_()
    down_sums = partial_down[:bases[-1]].sum(0)
    up_sums = partial_up[:bases[-1]].sum(0)
    if linear:  # blocks back into the parameters' layouts: W (2u, u) = [left; right], Wd (u, 2u) = [left, right]
        square = u * u
        functions.grads = [torch.cat((up_sums[:square].view(u, u), up_sums[square:2 * square].view(u, u))),
                           up_sums[2 * square:],
                           torch.cat((down_sums[:square].view(u, u), down_sums[square:2 * square].view(u, u)), 1),
                           down_sums[2 * square:]]
    else:
        functions.grads = [up_sums[:2], up_sums[2], down_sums[:2], down_sums[2:]]
    return pre[:n_level0]


def draw_masks(sizes: list[tuple[tuple[int, ...], float]], device: torch.device,
               dtype: torch.dtype) -> list[torch.Tensor]:
    """``dropout_mask(shape, p)`` for each (shape, p) in order, from ONE draw of torch's generator.

    Each mask takes the 64-bit draws ``dropout_mask`` would take ((numel + 3) // 4), in sequence, so on CPU (one
    Mersenne stream) the masks are bit for bit those of drawing them one by one, as the autograd engine does
    (tested); on CUDA one launch instead of one per level (Philox offsets differ: other masks, equally random).
    """
    counts = [(int(np.prod(shape)) + 3) // 4 for shape, p in sizes]
    live = [p > 0.0 for _, p in sizes]
    total = sum(count for count, on in zip(counts, live) if on)
    draws = torch.empty(total, dtype=torch.int64, device=device).random_(-2 ** 63, 2 ** 63 - 1) if total else None
    bits = draws.view(torch.int16) if draws is not None else None
    masks: list[torch.Tensor | None] = [None] * len(sizes)
    at, index = 0, 0
    while index < len(sizes):
        shape, p = sizes[index]
        if not live[index]:
            masks[index] = torch.ones(shape, dtype=dtype, device=device)
            index += 1
            continue
        # a run of masks with the same p whose bits are contiguous (numel % 4 == 0: no unused draw bits between
        # them) becomes one compare and one scale, then views: 2 ops per run instead of 2 per level
        run = [index]
        while (run[-1] + 1 < len(sizes) and live[run[-1] + 1] and sizes[run[-1] + 1][1] == p
               and int(np.prod(sizes[run[-1]][0])) % 4 == 0):
            run.append(run[-1] + 1)
        numels = [int(np.prod(sizes[i][0])) for i in run]
        keep = round((1.0 - p) * 65536)
        block = (bits[4 * at:4 * at + sum(numels)] >= 32768 - keep).to(dtype).mul_(65536.0 / keep)
        for i, piece in zip(run, block.split(numels)):
            masks[i] = piece.view(sizes[i][0])
        at += sum(counts[i] for i in run)
        index = run[-1] + 1
    return masks


def propagate_handwritten(model, graph, dropout: bool,
                          triton_levels: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``StraeModel.propagate`` (either function kind), with the same dropout masks drawn in the same order.
    ``triton_levels``: each level as one Triton kernel (CUDA, or the interpreter in tests)."""
    recipe, functions, config = model.recipe, model.functions, model.config
    p_embedding = recipe.embedding_dropout if dropout else 0.0
    p_function = recipe.function_dropout if dropout else 0.0
    offsets, size = graph.level_offsets, config.embedding_size
    leaves = model.embedding(graph.leaf_tokens)
    device, dtype = leaves.device, leaves.dtype
    sizes: list[tuple[tuple[int, ...], float]] = []
    keyed = graph.up_keep is not None
    if not keyed and (p_embedding > 0 or p_function > 0):
        # fresh upward masks, level by level, as fast_dropout draws them in the autograd engine's up pass
        sizes += [((offsets[level + 1] - offsets[level], size), p_embedding if level == 0 else p_function)
                  for level in range(len(offsets) - 1)]
    n_fresh_up = len(sizes)
    if p_function > 0:  # downward messages, top level first, (n, 2, E) per level as the autograd engine draws
        sizes += [((offsets[level + 1] - offsets[level], 2, size), p_function)
                  for level in reversed(range(1, len(offsets) - 1))]
    masks = draw_masks(sizes, device, dtype) if sizes else []
    up_masks = None
    if keyed and (p_embedding > 0 or p_function > 0):
        # the induction's keyed masks (so the graph trained is the graph induced), scaled as apply_keep scales them
        scales = torch.full((offsets[-1], 1), keep_scale(p_function), dtype=dtype, device=device)
        scales[:offsets[1]] = keep_scale(p_embedding)
        up_masks = graph.up_keep.to(dtype) * scales
    elif n_fresh_up:
        up_masks = torch.cat(masks[:n_fresh_up])
    down_masks = None
    if p_function > 0:
        down_masks = [None] + list(reversed(masks[n_fresh_up:]))  # indexed by level
    plan = LevelPlan(graph, dtype, triton_levels)
    if config.functions == "diagonal":
        params = (functions.compose_gates(), functions.compose_bias,
                  torch.sigmoid(torch.stack((functions.decompose_gate_left, functions.decompose_gate_right))),
                  torch.stack((functions.decompose_bias_left, functions.decompose_bias_right)))
    else:
        params = (functions.compose_weight, functions.compose_bias, functions.decompose_weight,
                  functions.decompose_bias)
    return _Passes.apply(leaves, plan, config.functions, config.k, up_masks, down_masks, triton_levels, *params)


# How far the Triton levels' fp32 results may sit from the exact (float64) ones, as a multiple of how far the torch
# levels' own fp32 results sit: a parameter's gradient sums thousands of per-node, per-channel terms that largely
# cancel (Self-StrAE k256 u1: decompose_bias's gradient 0.13 from terms summing to ~10^3 in size), so the rounding
# of either summation order is large next to the result and a bound relative to the result alone failed the correct
# kernels there (torch 5.4e-6, Triton 3.9e-5 from float64, on the interpreter). A wrong kernel is off by far more
# (a TF32 product ~10^3 times fp32's rounding; a wrong index by the result's size).
LEVELS_CHECK_ROUNDING_FACTOR = 32


def self_check(model, device: torch.device) -> str | None:
    """Run one small fixed batch through the torch and the Triton levels (forward and backward, no dropout) in fp32
    and through the torch levels in float64; None when the Triton levels' error (from float64) is within 1e-4 of
    each result's size or within ``LEVELS_CHECK_ROUNDING_FACTOR`` times the torch levels' own fp32 error. Any
    failure (compiler, driver) is returned as the reason, so a run falls back instead of stopping. Draws nothing
    from torch's generator (the run stays seeded as before)."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([9, 1, 2, 6, 5, 9, 3])
    ids = torch.randint(0, model.config.vocab_size, (len(lengths), int(lengths.max())), generator=generator)
    try:
        with torch.no_grad():
            packed, induction = model.induce(ids.to(device), lengths.to(device), dropout=False)
            graph = model.build(induction, packed)
        exact = copy.deepcopy(model).to(torch.float64)  # the same weights, upcast exactly; the same graph
        weights = torch.linspace(-1.0, 1.0, model.config.embedding_size, device=device)
        results = []
        for owner, triton_levels in ((model, False), (model, True), (exact, False)):
            params = [p for p in owner.parameters() if p.requires_grad]
            w = weights.to(owner.embedding.weight.dtype)
            with torch.enable_grad():
                up, down = propagate_handwritten(owner, graph, False, triton_levels=triton_levels)
                loss = (up * w).square().sum() + (down * w.flip(0)).sin().sum()
                grads = torch.autograd.grad(loss, params, allow_unused=True)
            results.append([up.detach(), down.detach()] + [g for g in grads if g is not None])
        names = ("up", "down") + ("gradient",) * (len(results[0]) - 2)
        for name, torch_fp32, triton_fp32, reference in zip(names, *results):
            error = float((triton_fp32.double() - reference).abs().max())
            rounding = float((torch_fp32.double() - reference).abs().max())
            scale = float(reference.abs().max()) or 1.0
            if not error <= max(1e-4 * scale, LEVELS_CHECK_ROUNDING_FACTOR * rounding):
                return (f"{name} differs from float64 by up to {error:.3g} (scale {scale:.3g}; the torch levels' "
                        f"fp32 by {rounding:.3g})")
    except Exception as error:  # a compiler, driver or device failure must not stop training: fall back, say why
        return f"{type(error).__name__}: {error}"
    return None
