"""Naive, readable per-sentence reference of the Self-StrAE / Banyan engine (for tests only).

Written straight from the papers, one sentence and one pair at a time, independently of the batched engine:
greedy merging of the most cosine-similar adjacent pair (leftmost on ties) until one node remains, the
composition / decomposition equations written out per channel, the down pass from the root (whose downward
embedding is its upward one), and for entangled trees a node set keyed by structure with the downward embedding
averaged over all (parent, side) edges into a node; a sentence root with no parent in the batch takes its own upward
embedding (one that is also a constituent of another sentence takes its parents' messages only, as the Banyan
code's DGL propagation does).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    return float((x * y).sum() / torch.clamp(x.norm() * y.norm(), min=1e-8))


def compose(functions, kind: str, k: int, u: int, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    out = []
    for c in range(k):
        lc, rc = left[c * u:(c + 1) * u], right[c * u:(c + 1) * u]
        if kind == "linear":  # hcat(l, r) Phi + phi
            out.append(torch.cat((lc, rc)) @ functions.compose_weight + functions.compose_bias)
        else:  # l * sigmoid(Phi_l) + r * sigmoid(Phi_r) + phi
            out.append(lc * torch.sigmoid(functions.compose_gate_left)
                       + rc * torch.sigmoid(functions.compose_gate_right) + functions.compose_bias)
    return torch.cat(out)


def decompose(functions, kind: str, k: int, u: int, parent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lefts, rights = [], []
    for c in range(k):
        pc = parent[c * u:(c + 1) * u]
        if kind == "linear":  # hsplit(p Theta + theta)
            both = pc @ functions.decompose_weight + functions.decompose_bias
            lefts.append(both[:u])
            rights.append(both[u:])
        else:
            lefts.append(pc * torch.sigmoid(functions.decompose_gate_left) + functions.decompose_bias_left)
            rights.append(pc * torch.sigmoid(functions.decompose_gate_right) + functions.decompose_bias_right)
    return torch.cat(lefts), torch.cat(rights)


@dataclass
class Node:
    key: object  # a token id for a leaf, (left key, right key) for an internal node
    span: tuple[int, int]  # first and last leaf position in its sentence
    up: torch.Tensor
    children: tuple[Node, Node] | None = None
    down: torch.Tensor | None = None
    mask_key: torch.Tensor | None = None  # the node's dropout key (induction dropout only)


def greedy_tree(tokens: list[int], model, dropout=None, offset: int = 0) -> Node:
    """Greedy merging of one sentence. ``dropout`` (an engine ``InductionDropout``): leaves and parents carry the
    keyed masks the engine uses while inducing - a leaf is named by its token (entangled) or by its position in
    the packed batch, ``offset`` + i (sentential), a parent by its children - so the trees can be compared."""
    cfg = model.config
    masks = _Masks(model, dropout) if dropout is not None else None
    frontier = []
    for i, t in enumerate(tokens):
        node = Node(key=t, span=(i, i), up=model.embedding.weight[t])
        if masks is not None:
            node.mask_key, node.up = masks.leaf(t if masks.by_token else offset + i, node.up)
        frontier.append(node)
    while len(frontier) > 1:
        sims = [cosine(frontier[i].up, frontier[i + 1].up) for i in range(len(frontier) - 1)]
        best = sims.index(max(sims))  # first maximum: leftmost pair on ties
        a, b = frontier[best], frontier[best + 1]
        parent = Node(key=(a.key, b.key), span=(a.span[0], b.span[1]),
                      up=compose(model.functions, cfg.functions, cfg.k, cfg.u, a.up, b.up), children=(a, b))
        if masks is not None:
            parent.mask_key, parent.up = masks.parent(a.mask_key, b.mask_key, parent.up)
        frontier[best:best + 2] = [parent]
    return frontier[0]


class _Masks:
    """The engine's keyed dropout, one node at a time (strae.models.dropout names the masks)."""

    def __init__(self, model, dropout) -> None:
        self.dropout, self.size = dropout, model.config.embedding_size
        self.by_token = model.config.structure == "entangled"

    def leaf(self, ident: int, up: torch.Tensor):
        from strae.models.dropout import apply_keep, keyed_keep, leaf_keys

        key = leaf_keys(torch.tensor([ident]))
        keep = keyed_keep(key, self.dropout.leaf_p, self.dropout.seed, self.size)[0]
        return key, apply_keep(up, keep, self.dropout.leaf_p)

    def parent(self, left_key, right_key, up: torch.Tensor):
        from strae.models.dropout import apply_keep, keyed_keep, pair_keys

        key = pair_keys(left_key, right_key)
        keep = keyed_keep(key, self.dropout.function_p, self.dropout.function_seed, self.size)[0]
        return key, apply_keep(up, keep, self.dropout.function_p)


def walk(node: Node):
    yield node
    if node.children:
        for child in node.children:
            yield from walk(child)


def sentential(sentences: list[list[int]], model) -> tuple[list[Node], dict]:
    """Per-sentence trees; returns (roots, {(sentence, span): (up, down)})."""
    cfg = model.config
    roots, table = [], {}
    for b, tokens in enumerate(sentences):
        root = greedy_tree(tokens, model)
        root.down = root.up
        stack = [root]
        while stack:
            node = stack.pop()
            table[(b, node.span)] = (node.up, node.down)
            if node.children:
                left, right = decompose(model.functions, cfg.functions, cfg.k, cfg.u, node.down)
                node.children[0].down, node.children[1].down = left, right
                stack.extend(node.children)
        roots.append(root)
    return roots, table


def height(key) -> int:
    return 0 if not isinstance(key, tuple) else 1 + max(height(key[0]), height(key[1]))


def entangled(sentences: list[list[int]], model) -> tuple[list[Node], dict]:
    """One graph over the batch: returns (roots, {structure key: (up, down)})."""
    cfg = model.config
    roots = [greedy_tree(tokens, model) for tokens in sentences]
    up = {}
    for root in roots:
        for node in walk(root):
            up.setdefault(node.key, node.up)
    children = {child for key in up if isinstance(key, tuple) for child in key}
    root_keys = {root.key for root in roots} - children
    messages: dict[object, list[torch.Tensor]] = {key: [] for key in up}
    for key in root_keys:
        messages[key].append(up[key])
    down = {}
    # Parents are always taller than their children: visiting by decreasing height sees every message first.
    for key in sorted(up, key=height, reverse=True):
        down[key] = torch.stack(messages[key]).mean(0)
        if isinstance(key, tuple):  # every unique (parent, side) edge sends one message
            left, right = decompose(model.functions, cfg.functions, cfg.k, cfg.u, down[key])
            messages[key[0]].append(left)
            messages[key[1]].append(right)
    return roots, {key: (up[key], down[key]) for key in up}
