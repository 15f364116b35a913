"""Contrastive multi-view sentence encoders: a BiLSTM view and a dependency Child-Sum Tree-LSTM view.

Quick-Thoughts-style training (Logeswaran & Lee 2018): a *target* encoder f embeds every sentence of a batch of
consecutive sentences, a *context* encoder g embeds them too, and for each sentence the softmax over inner products
f(s_i)·g(s_j), j ≠ i, must pick out its neighbours s_{i-1}, s_{i+1} (in-batch negatives, NLL). The multi-view
model ("Contrastive Tree LSTM", CTL) uses a BiLSTM for f and a Child-Sum Tree-LSTM (Tai et al. 2015) over the
dependency parse for g; the comparison model "Contrastive LSTM" (CL) uses a second BiLSTM for g. At test time the
sentence vector is the concatenation [f(s); g(s)].

Batches of trees are computed level by level (a node's level = 1 + the highest level among its children, leaves 0),
so all nodes of one level run in one batched cell call; ``naive_tree_lstm`` is the per-sentence recursion the tests
compare it with.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from strae.data.batching import pad_batch
from strae.runtime import host_to_device_many

VIEWS = ("bilstm", "treelstm")
#: model name -> (target view f, context view g)
MODELS: dict[str, tuple[str, str]] = {
    "ctl": ("bilstm", "treelstm"),  # the paper's Contrastive Tree LSTM (multi-view)
    "cl": ("bilstm", "bilstm"),  # the paper's comparison model, Contrastive LSTM (one view, two encoders)
}


@dataclass
class MultiviewConfig:
    """Architecture; paper §4.2 unless said otherwise."""

    model: str = "ctl"
    vocab_size: int = 20000  # + <pad>, <unk> rows (ids vocab_size, vocab_size + 1)
    embedding_dim: int = 300
    # Size of each view's sentence vector. The inner product f·g needs both views the same size, so the BiLSTM's
    # two directions have hidden // 2 units each (their final states concatenated = hidden) and the Tree-LSTM has
    # hidden units (its root state). The paper: "hidden layer ... fixed to 1000".
    hidden: int = 1000
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model {self.model!r}: use one of {sorted(MODELS)}")
        if self.hidden % 2:
            raise ValueError(f"hidden {self.hidden}: must be even (the BiLSTM splits it over two directions)")

    @property
    def views(self) -> tuple[str, str]:
        return MODELS[self.model]

    @property
    def pad_id(self) -> int:
        return self.vocab_size

    @property
    def unk_id(self) -> int:
        return self.vocab_size + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiviewConfig:
        return cls(**data)


# ------------------------------------------------------------------------------------------------ batches
@dataclass
class TreeBatch:
    """A batch of sentences as padded id rows (sequential view) and as one forest (tree view).

    ``heads[k]``: the batch-global node index of token k's head, -1 for a root (one root per sentence).
    ``roots[b]``: the node index of sentence b's root. Nodes are the tokens in sentence order.
    """

    ids: torch.Tensor  # (B, T) long, padded with pad_id
    lengths: torch.Tensor  # (B,) long
    node_ids: torch.Tensor  # (N,) long, token id per node
    heads: torch.Tensor  # (N,) long
    roots: torch.Tensor  # (B,) long

    def to(self, device: torch.device) -> TreeBatch:
        return TreeBatch(*(t.to(device) for t in (self.ids, self.lengths, self.node_ids, self.heads, self.roots)))


def make_batch(sentences: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int) -> TreeBatch:
    """``sentences``: (token ids, heads) per sentence, heads sentence-local (-1 = root)."""
    if not sentences:
        raise ValueError("make_batch: empty batch")
    lengths = [len(ids) for ids, _ in sentences]
    if min(lengths) < 1:
        raise ValueError("make_batch: a sentence has no tokens")
    ids, padded_lengths = pad_batch([tok for tok, _ in sentences], pad_id)
    node_ids, heads, roots = [], [], []
    offset = 0
    for b, (tok, head) in enumerate(sentences):
        n = len(tok)
        if len(head) != n:
            raise ValueError(f"make_batch: sentence {b} has {n} tokens but {len(head)} heads")
        local = np.asarray(head, dtype=np.int64)
        root_positions = np.flatnonzero(local < 0)
        if len(root_positions) != 1:
            raise ValueError(f"make_batch: sentence {b} has {len(root_positions)} roots (need exactly 1)")
        node_ids.append(np.asarray(tok, dtype=np.int64))
        heads.append(np.where(local < 0, -1, local + offset))
        roots.append(offset + int(root_positions[0]))
        offset += n
    return TreeBatch(
        ids=ids, lengths=padded_lengths,
        node_ids=torch.from_numpy(np.concatenate(node_ids)), heads=torch.from_numpy(np.concatenate(heads)),
        roots=torch.tensor(roots, dtype=torch.long),
    )


def node_levels(heads: np.ndarray) -> np.ndarray:
    """Level of every node: 0 for leaves, else 1 + max level of its children. Raises on a cycle."""
    n = len(heads)
    level = np.zeros(n, dtype=np.int64)
    # Walk up from every node; a node's level is at least (distance from a descendant leaf). Iterate to a fixpoint:
    # at most depth rounds, each vectorised.
    parent = heads.copy()
    has_parent = parent >= 0
    for _ in range(n + 1):
        candidate = np.zeros(n, dtype=np.int64)
        np.maximum.at(candidate, parent[has_parent], level[has_parent] + 1)
        new_level = np.maximum(level, candidate)
        if np.array_equal(new_level, level):
            return level
        level = new_level
    raise ValueError("dependency heads contain a cycle")


# ------------------------------------------------------------------------------------------------ cells
def _xavier(module: nn.Module) -> None:
    """Xavier-uniform weights, zero biases (paper §4.2)."""
    for param in module.parameters():
        if param.dim() >= 2:
            nn.init.xavier_uniform_(param)
        else:
            nn.init.zeros_(param)


class BiLSTMEncoder(nn.Module):
    """Final hidden states of both directions, concatenated: (B, hidden)."""

    def __init__(self, config: MultiviewConfig):
        super().__init__()
        self.embedding = nn.Embedding(config.vocab_size + 2, config.embedding_dim, padding_idx=config.pad_id)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden // 2, batch_first=True, bidirectional=True)
        _xavier(self)
        with torch.no_grad():
            self.embedding.weight[config.pad_id].zero_()

    def forward(self, batch: TreeBatch) -> torch.Tensor:
        embedded = self.embedding(batch.ids)
        # cuDNN runs packed sequences natively. On the CPU torch's packed LSTM steps through time in autograd ops
        # whose backward fills a whole (tokens, 4 * hidden/2) zero gradient per time step; sentences grouped by
        # length, each group padded to its own longest, take 2.4x less time on ELTeC's batches (the BiLSTM is most
        # of a multi-view step on the CPU) for the same numbers to rounding (tested)
        if bilstm_path(embedded.device) == "packed":
            return final_states_packed(self.lstm, embedded, batch.lengths)
        return final_states_by_length(self.lstm, embedded, batch.lengths)


def bilstm_path(device: torch.device) -> str:
    """How the BiLSTM view runs on ``device`` (a run's train.json records it): ``packed`` (cuDNN) or
    ``length_groups`` (the CPU: :func:`final_states_by_length`). Same numbers to rounding."""
    return "packed" if device.type == "cuda" else "length_groups"


def final_states_packed(lstm: nn.LSTM, embedded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[forward direction's state after each sentence's last token; backward direction's after its first]: (B, 2h)
    from a bidirectional one-layer ``lstm`` over padded ``embedded`` (B, T, E), via a packed sequence."""
    packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
    _, (h_n, _) = lstm(packed)  # (2, B, h): forward direction's last step, backward's first
    return torch.cat([h_n[0], h_n[1]], dim=-1)


def final_states_padded(lstm: nn.LSTM, embedded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`final_states_packed` without packing: each direction runs over the padded batch with its own weights
    of ``lstm``, the backward one over every sentence reversed within its length (padding stays at the end), and
    each direction's state is read at the sentence's last real step, before any padding."""
    B, T, E = embedded.shape
    lengths = lengths.to(embedded.device)
    t = torch.arange(T, device=embedded.device)[None, :]
    inside = t < lengths[:, None]
    reverse = torch.where(inside, lengths[:, None] - 1 - t, t)
    reversed_embedded = embedded.gather(1, reverse[:, :, None].expand(B, T, E))
    zeros = embedded.new_zeros(1, B, lstm.hidden_size)
    last = (lengths - 1)[:, None, None].expand(B, 1, lstm.hidden_size)
    states = []
    for x, suffix in ((embedded, ""), (reversed_embedded, "_reverse")):
        weights = [getattr(lstm, f"{name}_l0{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        # torch.lstm is what nn.LSTM calls: (input, (h0, c0), weights, has_biases, layers, dropout, train,
        # bidirectional, batch_first)
        output, _, _ = torch.lstm(x, (zeros, zeros), weights, True, 1, 0.0, lstm.training, False, True)
        states.append(output.gather(1, last)[:, 0])
    return torch.cat(states, dim=-1)


#: sentences of a batch are split into this many groups of similar length for the CPU's BiLSTM: measured on ELTeC
#: batches of 100 (lengths up to 64, mean ~25; 1 thread, forward + backward): 1 group 0.93-1.02 s, 2 0.56-0.58,
#: 4 0.45-0.47, 8 0.41-0.43; packed 0.99-1.13
LENGTH_GROUPS = 8


def final_states_by_length(lstm: nn.LSTM, embedded: torch.Tensor, lengths: torch.Tensor,
                           groups: int = LENGTH_GROUPS) -> torch.Tensor:
    """:func:`final_states_padded` over ``groups`` groups of sentences of similar length (sorted by length, each
    group cut to its own longest), so little of the work is padding; rows come back in the batch's order."""
    lengths = lengths.to(embedded.device)
    order = torch.argsort(lengths, descending=True, stable=True)
    parts = [final_states_padded(lstm, embedded[rows, :int(lengths[rows].max())], lengths[rows])
             for rows in order.chunk(min(groups, len(order)))]
    return torch.cat(parts)[torch.argsort(order)]


class ChildSumTreeLSTM(nn.Module):
    """Child-Sum Tree-LSTM (Tai et al. 2015, Eq. 2-8); leaves see zero child states. Output: root h, (B, hidden)."""

    def __init__(self, config: MultiviewConfig):
        super().__init__()
        d, e = config.hidden, config.embedding_dim
        self.hidden = d
        self.embedding = nn.Embedding(config.vocab_size + 2, e, padding_idx=config.pad_id)
        self.W_iou = nn.Linear(e, 3 * d)  # input, output, update gates from the node's word
        self.U_iou = nn.Linear(d, 3 * d, bias=False)  # ... and from the sum of its children's h
        self.W_f = nn.Linear(e, d)  # forget gate, one per child: W_f x_j + U_f h_k + b_f
        self.U_f = nn.Linear(d, d, bias=False)
        _xavier(self)
        with torch.no_grad():
            self.embedding.weight[config.pad_id].zero_()

    def cell(self, x_iou: torch.Tensor, x_f_per_child: torch.Tensor, child_h: torch.Tensor,
             child_c: torch.Tensor, child_parent: torch.Tensor, n_parents: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One batched step for ``n_parents`` nodes. ``child_parent[k]`` = which of them child k belongs to."""
        h_sum = x_iou.new_zeros(n_parents, self.hidden).index_add(0, child_parent, child_h)
        i, o, u = (x_iou + self.U_iou(h_sum)).chunk(3, dim=-1)
        f = torch.sigmoid(x_f_per_child + self.U_f(child_h))
        fc = x_iou.new_zeros(n_parents, self.hidden).index_add(0, child_parent, f * child_c)
        c = torch.sigmoid(i) * torch.tanh(u) + fc
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c

    def forward(self, batch: TreeBatch) -> torch.Tensor:
        heads = batch.heads.cpu().numpy()
        levels = node_levels(heads)
        n = len(heads)
        # The nodes sorted by level, so each level's word terms are one slice of one product: split's backward is
        # one concatenation, where indexing per level would fill a zero (nodes, 3 * hidden) gradient every level.
        order = np.argsort(levels, kind="stable")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        sizes = np.bincount(levels).tolist()
        bounds = np.cumsum([0] + sizes)
        # Every child of a level-L node has a lower level, so a level's children are the nodes whose head is on it:
        # grouped by their parent's level (in node order within it), with the parent's row within its level.
        child = np.flatnonzero(heads >= 0)
        parent_level = levels[heads[child]]
        by_level = np.argsort(parent_level, kind="stable")
        child, parent_level = child[by_level], parent_level[by_level]
        child_bounds = np.searchsorted(parent_level, np.arange(len(sizes) + 1))
        # the step's index arrays in one host-to-device copy (on CUDA; no copy per level)
        order_t, child_t, child_parent_t = host_to_device_many(
            [order, child, rank[heads[child]] - bounds[parent_level]], batch.node_ids.device)
        x = self.embedding(batch.node_ids[order_t])
        x_iou = self.W_iou(x).split(sizes)
        # Leaves (level 0, about half of a dependency tree's nodes) have no children: their child sum is zero, so
        # U_iou(0) = 0 (no bias) and there is no forget gate. Their states come from the word alone: the same
        # numbers without U_iou's largest product and W_f's rows for them. (A batch of one-word sentences only
        # would leave U_iou, W_f and U_f without a gradient, so Adam would skip them that step, where a zero
        # gradient would still move them by momentum; batches of 100 consecutive sentences never are.)
        x_f = self.W_f(x[sizes[0]:]).split(sizes[1:])
        i, o, u = x_iou[0].chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        H = x.new_zeros(n, self.hidden).index_copy(0, order_t[:sizes[0]], torch.sigmoid(o) * torch.tanh(c))
        C = x.new_zeros(n, self.hidden).index_copy(0, order_t[:sizes[0]], c)
        for level in range(1, len(sizes)):
            children = child_t[child_bounds[level]:child_bounds[level + 1]]
            child_parent = child_parent_t[child_bounds[level]:child_bounds[level + 1]]
            h, c = self.cell(x_iou[level], x_f[level - 1][child_parent], H[children], C[children], child_parent,
                             sizes[level])
            # out-of-place so autograd keeps every level's states
            nodes = order_t[bounds[level]:bounds[level + 1]]
            H = H.index_copy(0, nodes, h)
            C = C.index_copy(0, nodes, c)
        return H[batch.roots]


def naive_tree_lstm(encoder: ChildSumTreeLSTM, token_ids: Sequence[int], heads: Sequence[int]) -> torch.Tensor:
    """Reference: one sentence, plain recursion from the root (sentence-local heads, -1 = root). Returns (hidden,)."""
    children: dict[int, list[int]] = {i: [] for i in range(len(heads))}
    for i, head in enumerate(heads):
        if head >= 0:
            children[head].append(i)
    device = encoder.embedding.weight.device
    emb = encoder.embedding(torch.tensor(list(token_ids), dtype=torch.long, device=device))

    def visit(j: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = emb[j]
        kids = [visit(k) for k in children[j]]
        zero = x.new_zeros(encoder.hidden)
        h_sum = sum((h for h, _ in kids), zero)
        i, o, u = (encoder.W_iou(x) + encoder.U_iou(h_sum)).chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        for h_k, c_k in kids:
            f_k = torch.sigmoid(encoder.W_f(x) + encoder.U_f(h_k))
            c = c + f_k * c_k
        return torch.sigmoid(o) * torch.tanh(c), c

    root = [i for i, head in enumerate(heads) if head < 0][0]
    return visit(root)[0]


def _make_view(name: str, config: MultiviewConfig) -> nn.Module:
    return BiLSTMEncoder(config) if name == "bilstm" else ChildSumTreeLSTM(config)


# ------------------------------------------------------------------------------------------------ model
class MultiviewModel(nn.Module):
    def __init__(self, config: MultiviewConfig):
        super().__init__()
        self.config = config
        target_view, context_view = config.views
        self.target = _make_view(target_view, config)  # f
        self.context = _make_view(context_view, config)  # g

    def loss(self, batch: TreeBatch, books: torch.Tensor, positions: torch.Tensor,
             own_view_positive: bool = False) -> tuple[torch.Tensor, dict]:
        """Quick-Thoughts NLL. ``books``/``positions``: (B,) book id and sentence index in the book; sentence j is
        a positive for i when it is in the same book at position ±1 (it must also be in the batch).
        ``own_view_positive``: sentence i's own other view g(i) is a positive too (the paper's introduction: "different
        views of the same sentence should lead to close representation"); by default it is masked out, neither
        positive nor negative, as §3.2's Quick-Thoughts objective ("identify the sentence appearing in the context")."""
        f = self.target(batch)
        g = self.context(batch)
        scores = f @ g.T  # inner-product critic, h(u, v) = uᵀv
        eye = torch.eye(len(f), dtype=torch.bool, device=f.device)
        if not own_view_positive:
            scores = scores.masked_fill(eye, float("-inf"))  # a sentence is not its own context
        log_p = torch.log_softmax(scores, dim=-1)
        same_book = books[:, None] == books[None, :]
        adjacent = (positions[:, None] - positions[None, :]).abs() == 1
        context = same_book & adjacent
        positive = context | eye if own_view_positive else context
        n_pos = int(context.sum())
        if n_pos == 0:
            raise ValueError("batch has no context pairs (sentences not consecutive?)")
        loss = -log_p[positive].mean()
        with torch.no_grad():
            # share of context sentences ranked first among the sentence's other candidates (the own view left out
            # whatever the objective, so the metric and the pair count read the same in every run)
            ranked = scores.masked_fill(eye, float("-inf")) if own_view_positive else scores
            top = ranked.argmax(dim=-1)
            hit = context[torch.arange(len(f), device=f.device), top]
            has_pos = context.any(dim=-1)
            accuracy = float(hit[has_pos].float().mean())
        return loss, {"loss": float(loss.detach()), "context_top1": accuracy, "pairs": n_pos}

    @torch.no_grad()
    def encode(self, batch: TreeBatch) -> torch.Tensor:
        """Test-time sentence vector: [f(s); g(s)], (B, 2 * hidden)."""
        return torch.cat([self.target(batch), self.context(batch)], dim=-1)
