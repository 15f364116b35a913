"""Structure induction and (entangled) tree graphs, batched over all sentences of a batch.

Pipeline (see DESIGN.md "Performance stance"):

1. ``induce`` runs greedy merging (most cosine-similar adjacent pair, leftmost on ties, until one node remains)
   for every sentence at once, under no_grad. In training, with the recipe's ``induction_dropout`` (both
   references), leaves and parents carry their dropout while merging; the masks are *keyed* by node
   (``models/dropout.py``) and returned, so the differentiable recompute applies the very same ones. Sentences are
   sorted by length so the sentences still merging at step s are a prefix of the batch; each frontier is a linked
   list over fixed slots (slot = position of the node's leftmost leaf), so a merge is O(1) batched index writes,
   not a shift.
   Result: one node per *occurrence* (leaves = token positions, internal nodes = merges) with children and heights.
2. ``build_graph`` turns the occurrences into the graph the model runs on. ``sentential``: every occurrence is a
   node. ``entangled`` (Banyan Alg. 1): leaves are the unique tokens and an internal node is identified by its
   (left, right) canonical child ids, deduplicated level by level with integer keys ``left * N + right``.
   Either way nodes are numbered level by level (level = height; leaves are level 0), so a node's children are
   always on lower levels and its parents on higher ones.
3. ``Route`` precomputes, in integer land, how per-level outputs are routed to the level that consumes them
   (children -> parent for the up pass; parent messages -> children for the down pass) so that the
   differentiable passes touch every routed row exactly once (no growing table, no in-place writes).

On a GPU step 1 is launch-bound (one Python iteration of ~20 small kernels per merge step). ``models/fused.py``
runs it as ONE Triton kernel (one program per sentence: argmax, compose, keyed function dropout, renormalise, the
two new neighbour similarities), producing the same ``Induction`` in the same step-major node numbering
(``merge_schedule``); leaf dropout and the first similarities stay batched torch ops, and steps 2-3 and the
differentiable passes are untouched. The model picks the engine (``induction_kernel``: auto = Triton on CUDA,
this loop on CPU). Its GPU speed is UNMEASURED (written and tested on Triton's CPU interpreter, without a GPU).

The structure is a deterministic function of (parameters, tokens, the step's dropout seed). Keyed masks give
every occurrence of one (left, right) pair the same mask, so a pair has one well-defined embedding - which is
what makes entangling well defined - and the per-sentence trees are identical under both structures.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from strae.models.dropout import apply_keep, keyed_keep, leaf_keys, pair_keys
from strae.models.scatter import Csr, gather_rows, scatter_sum
from strae.runtime import host_to_device, host_to_device_many


@dataclass
class PackedBatch:
    tokens: torch.Tensor  # (N_L,) token id of every leaf occurrence, sentence-major in batch order
    lengths: list[int]
    offsets: np.ndarray  # (B + 1,) start of each sentence in ``tokens``
    host_tokens: np.ndarray | None = None  # ``tokens`` on the host when packed there (build_graph reads them)

    def tokens_on_host(self) -> np.ndarray:
        """``tokens`` as a host array: the packing's own copy when there is one (no device-to-host copy)."""
        return self.host_tokens if self.host_tokens is not None else self.tokens.cpu().numpy()


def pack_batch(ids: torch.Tensor, lengths: torch.Tensor, vocab_size: int,
               device: torch.device | None = None) -> PackedBatch:
    """The batch's tokens, sentence after sentence, checked. ``device``: where ``tokens`` go (default: ``ids``'
    device). A host batch is packed and checked with numpy and, for a CUDA model, sent in one asynchronous copy:
    packing on the GPU read lengths and token ranges back (four host syncs at every training step, the first of
    them waiting for the previous step's queued work), and torch's CPU kernels for these few small ops wait for
    their intra-op thread pool whenever its cores are busy (cProfile on the H100 box, torch's default 16 threads:
    8-14 ms of own time per step; on 2 busy cores here 1-47 ms per batch, against numpy's 0.24 ms)."""
    device = ids.device if device is None else torch.device(device)
    if ids.dim() != 2:
        raise ValueError(f"ids: expected a (batch, time) LongTensor, got shape {tuple(ids.shape)}")
    lengths_list = [int(x) for x in lengths.tolist()]
    if len(lengths_list) != ids.shape[0]:
        raise ValueError(f"lengths: {len(lengths_list)} entries for a batch of {ids.shape[0]} sentences")
    if lengths_list and (min(lengths_list) < 1 or max(lengths_list) > ids.shape[1]):
        raise ValueError(f"lengths: every sentence needs 1..{ids.shape[1]} tokens, got min {min(lengths_list)} "
                         f"max {max(lengths_list)}")
    offsets = np.zeros(len(lengths_list) + 1, dtype=np.int64)
    np.cumsum(lengths_list, out=offsets[1:])
    if ids.device.type == "cpu":
        mask = np.arange(ids.shape[1]) < np.asarray(lengths_list, dtype=np.int64)[:, None]
        host_tokens = ids.numpy()[mask].astype(np.int64, copy=False)  # row-major: sentence after sentence
        low, high = (int(host_tokens.min()), int(host_tokens.max())) if host_tokens.size else (0, 0)
        _check_token_range(low, high, vocab_size)
        tokens = host_to_device(host_tokens, device)  # checked before the copy; build_graph reads host_tokens
    else:
        positions = torch.arange(ids.shape[1], device=ids.device)
        mask = positions.unsqueeze(0) < host_to_device(np.asarray(lengths_list, dtype=np.int64), ids.device)[:, None]
        tokens = ids[mask].long()
        host_tokens = None
        low, high = (int(tokens.min()), int(tokens.max())) if tokens.numel() else (0, 0)
        _check_token_range(low, high, vocab_size)
        tokens = tokens.to(device)
    return PackedBatch(tokens=tokens, lengths=lengths_list, offsets=offsets, host_tokens=host_tokens)


def _check_token_range(low: int, high: int, vocab_size: int) -> None:
    if low < 0 or high >= vocab_size:
        raise ValueError(f"ids: token ids must lie in [0, {vocab_size}) inside each sentence's length "
                         f"(pad id {vocab_size} only after it); got range [{low}, {high}]")


@dataclass
class Induction:
    """Greedy-merge result, one node per occurrence: ids 0..N_L-1 are leaves, N_L.. are merges."""

    n_leaves: int
    left: torch.Tensor  # (N_I,) occurrence id of the left child of each merge
    right: torch.Tensor  # (N_I,)
    height: torch.Tensor  # (N_I,) 1 + max(child heights); leaves have height 0
    up: torch.Tensor  # (N_L + N_I, E) upward embeddings (no grad; with the induction dropout when given)
    roots: torch.Tensor  # (B,) occurrence id of each sentence's root, batch order
    span_start: torch.Tensor  # (N_L + N_I,) packed row of each occurrence's leftmost leaf
    span_end: torch.Tensor  # (N_L + N_I,) packed row of its rightmost leaf
    keep: torch.Tensor | None = None  # (N_L + N_I, E) bool upward dropout masks used while inducing, if any
    dropout: InductionDropout | None = None


@dataclass
class InductionDropout:
    """Dropout applied while inducing (the references' behaviour); masks are keyed by node (models/dropout.py).

    ``leaf_ids`` names each leaf occurrence for its mask: its token id (entangled: one mask per unique token) or
    its occurrence index (sentential: one mask per leaf). A parent's key hashes its children's keys.
    """

    seed: int
    leaf_p: float
    function_p: float
    leaf_ids: torch.Tensor  # (N_L,)

    @property
    def function_seed(self) -> int:
        return (self.seed * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, dim=-1, eps=1e-8)


def merge_schedule(lengths: list[int]) -> tuple[list[int], np.ndarray]:
    """The batch order of the induction (longest first, stable) and, per merge step s, how many sentences of
    that order still merge (those with length - 1 > s: a prefix because of the sort). Merge ids are numbered
    step-major: step s's merges are ``sum(active_counts[:s]) + (position in the order)``."""
    order = sorted(range(len(lengths)), key=lambda b: -lengths[b])
    t_max = max(lengths)
    active_counts = np.searchsorted(-np.array([lengths[b] for b in order]) + 1, -np.arange(t_max - 1), side="left")
    return order, active_counts


def leaf_dropout(leaf_embeddings: torch.Tensor, dropout: InductionDropout | None,
                 n_occ: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(leaves with their keyed embedding dropout, (n_occ,) int32 keys, (n_occ, E) bool keep masks); the
    leaves' rows of keys and masks are filled, the merges' rows are left for the induction to write."""
    if dropout is None:
        return leaf_embeddings, None, None
    n_leaves, emb = leaf_embeddings.shape
    keys = torch.empty(n_occ, dtype=torch.int32, device=leaf_embeddings.device)
    keys[:n_leaves] = leaf_keys(dropout.leaf_ids)
    keep = torch.empty(n_occ, emb, dtype=torch.bool, device=leaf_embeddings.device)
    keep[:n_leaves] = keyed_keep(keys[:n_leaves], dropout.leaf_p, dropout.seed, emb)
    return apply_keep(leaf_embeddings, keep[:n_leaves], dropout.leaf_p), keys, keep


@torch.no_grad()
def induce(leaf_embeddings: torch.Tensor, packed: PackedBatch,
           compose: Callable[[torch.Tensor], torch.Tensor], dropout: InductionDropout | None = None) -> Induction:
    """Greedy merging for all sentences in parallel. ``compose`` maps (n, 2, E) children to (n, E) parents.

    With ``dropout``, leaves carry their keyed embedding-dropout mask and every parent its keyed
    function-dropout mask before any similarity is taken from it (B:src/models.py:95,100; S:src/models.py:180).

    Frontier embeddings live in packed rows (row = sentence start + slot, one extra all-zero sentinel row), so
    no (B, T, E) padded tensor is ever built; only the per-slot bookkeeping (similarity to the next frontier
    element, next / previous slot, node id, height) is padded to (B, T + 1).
    """
    device = leaf_embeddings.device
    lengths = packed.lengths
    batch, n_leaves, emb = len(lengths), leaf_embeddings.shape[0], leaf_embeddings.shape[1]
    t_max = max(lengths)
    n_internal = n_leaves - batch
    order, active_counts = merge_schedule(lengths)
    order_t = host_to_device(np.asarray(order, dtype=np.int64), device)
    sorted_lengths = host_to_device(np.asarray([lengths[b] for b in order], dtype=np.int64), device)
    sentinel = t_max  # an always-dead extra slot, so "no neighbour" needs no branch
    n_occ = n_leaves + n_internal
    leaf_embeddings, keys, keep = leaf_dropout(leaf_embeddings, dropout, n_occ)
    leaf_rows = torch.arange(n_leaves, device=device)
    span_start = torch.cat((leaf_rows, leaf_rows.new_empty(n_internal)))
    span_end = span_start.clone()

    slots = torch.arange(t_max + 1, device=device)
    alive = slots.unsqueeze(0) < sorted_lengths.unsqueeze(1)  # (B, T+1)
    starts = host_to_device(packed.offsets[:-1], device)[order_t]
    # Packed row of (sorted sentence, slot); dead slots and the sentinel point at the zero row n_leaves.
    row_of = torch.where(alive, starts.unsqueeze(1) + slots, torch.full_like(slots, n_leaves))
    frontier = torch.cat((leaf_embeddings, leaf_embeddings.new_zeros(1, emb)))
    unit = _normalize(frontier)
    node_id = torch.where(alive, row_of, torch.full_like(row_of, -1))
    node_height = torch.zeros(batch, t_max + 1, dtype=torch.long, device=device)
    has_next = slots.unsqueeze(0) + 1 < sorted_lengths.unsqueeze(1)
    nxt = torch.where(has_next, slots + 1, torch.full_like(row_of, sentinel))
    prv = torch.where(alive & (slots > 0), slots - 1, torch.full_like(row_of, sentinel))
    neg_inf = torch.full((), float("-inf"), dtype=leaf_embeddings.dtype, device=device)  # a fill, not a copy
    sim = torch.full((batch, t_max + 1), float("-inf"), dtype=leaf_embeddings.dtype, device=device)
    if t_max > 1:
        adjacent = (unit[:n_leaves - 1] * unit[1:n_leaves]).sum(-1)  # packed neighbours (across sentences too)
        sim[has_next] = adjacent[row_of[has_next]]

    left = torch.empty(n_internal, dtype=torch.long, device=device)
    right = torch.empty_like(left)
    height = torch.empty_like(left)
    up_internal = torch.empty(n_internal, emb, dtype=leaf_embeddings.dtype, device=device)
    rows_all = torch.arange(batch, device=device)
    base = 0
    for step in range(t_max - 1):
        n_active = int(active_counts[step])
        if n_active == 0:
            break
        rows = rows_all[:n_active]
        row_base = starts[:n_active]
        i = sim[:n_active].argmax(dim=1)  # first maximum = leftmost pair on ties
        j = nxt[rows, i]
        pair_rows = torch.stack((row_base + i, row_base + j), dim=1)  # (A, 2) packed rows of the children
        parent = compose(frontier[pair_rows])
        stop = base + n_active
        left_ids, right_ids = node_id[rows, i], node_id[rows, j]
        if dropout is not None:
            parent_keys = pair_keys(keys[left_ids], keys[right_ids])
            keys[n_leaves + base:n_leaves + stop] = parent_keys
            parent_keep = keyed_keep(parent_keys, dropout.function_p, dropout.function_seed, emb)
            keep[n_leaves + base:n_leaves + stop] = parent_keep
            parent = apply_keep(parent, parent_keep, dropout.function_p)
        parent_unit = _normalize(parent)
        new_height = node_height[rows, i].maximum(node_height[rows, j]) + 1
        left[base:stop] = left_ids
        right[base:stop] = right_ids
        span_start[n_leaves + base:n_leaves + stop] = span_start[left_ids]
        span_end[n_leaves + base:n_leaves + stop] = span_end[right_ids]
        height[base:stop] = new_height
        up_internal[base:stop] = parent
        new_ids = torch.arange(n_leaves + base, n_leaves + stop, device=device)
        base = stop
        # Parent takes the left child's slot; the right child's slot dies and is unlinked.
        frontier[pair_rows[:, 0]] = parent
        unit[pair_rows[:, 0]] = parent_unit
        node_id[rows, i] = new_ids
        node_height[rows, i] = new_height
        sim[rows, j] = neg_inf
        after = nxt[rows, j]
        nxt[rows, i] = after
        prv[rows, after] = i  # writes into the sentinel column when there is no right neighbour: harmless
        before = prv[rows, i]
        # One gather for both neighbours; the sentinel's row is zero, and its similarity is masked anyway.
        neighbours = unit[row_of[rows.unsqueeze(1), torch.stack((before, after), dim=1)]]  # (A, 2, E)
        sims = (neighbours * parent_unit.unsqueeze(1)).sum(-1)
        sim[rows, i] = torch.where(after != sentinel, sims[:, 1], neg_inf)
        sim[rows, before] = torch.where(before != sentinel, sims[:, 0], neg_inf)
    roots = torch.empty(batch, dtype=torch.long, device=device)
    roots[order_t] = node_id[:, 0]  # slot 0 always ends up holding the root
    return Induction(n_leaves=n_leaves, left=left, right=right, height=height,
                     up=torch.cat((leaf_embeddings, up_internal)), roots=roots, span_start=span_start,
                     span_end=span_end, keep=keep, dropout=dropout)


def _csr(table: dict[int, Csr] | None, level: int) -> Csr | None:
    return None if table is None else table[level]


@dataclass
class Route:
    """Routing of rows produced per level to the levels that consume them (all indices precomputed).

    Item t goes from row ``src_row[t]`` of level ``src_level[t]``'s output to slot ``dst_slot[t]`` of level
    ``dst_level[t]``'s input. Producers run in ``producer_rank`` order; each producer does one index_select and
    a split into per-consumer chunks; a consumer concatenates its chunks, whose order ``slots(level)`` gives.
    """

    gather: torch.Tensor
    produce: dict[int, tuple[int, int, list[int], list[int]]]  # level -> (start, end, consumer levels, counts)
    slot_index: torch.Tensor
    consume: dict[int, tuple[int, int]]  # level -> (start, end) into slot_index
    # For consumers whose slots are a permutation (every slot filled once, the up pass): received-row index of
    # each slot in slot order, so the consumer can index_select instead of scattering.
    slot_inverse: torch.Tensor
    # scatter='presorted' (models/scatter.py): each producer's gather and each consumer's permutation (up pass) or
    # sum into its level's rows (down pass), sorted on the host once; None: torch's index_add kernels
    emit_csr: dict[int, Csr] | None = None
    consume_csr: dict[int, Csr] | None = None

    @classmethod
    def build(cls, src_level: np.ndarray, src_row: np.ndarray, dst_level: np.ndarray, dst_slot: np.ndarray,
              producer_rank: np.ndarray, device: torch.device, level_sizes: np.ndarray | None = None,
              consumer_sums: bool = False) -> Route:
        """``level_sizes`` given: presorted index structures too (``consumer_sums``: the consumers sum received
        rows into their level's rows, the down pass; else they permute them into slot order, the up pass)."""
        n = len(src_level)
        order = np.lexsort((np.arange(n), dst_level, producer_rank[src_level]))
        src_sorted, dst_sorted = src_level[order], dst_level[order]
        produce: dict[int, tuple[int, int, list[int], list[int]]] = {}
        if n:
            change = np.flatnonzero((src_sorted[1:] != src_sorted[:-1]) | (dst_sorted[1:] != dst_sorted[:-1])) + 1
            bounds = np.concatenate(([0], change, [n])).tolist()
            for start, end in zip(bounds[:-1], bounds[1:]):
                level, consumer = int(src_sorted[start]), int(dst_sorted[start])
                entry = produce.setdefault(level, (start, end, [], []))
                produce[level] = (entry[0], end, entry[2] + [consumer], entry[3] + [end - start])
        # A consumer receives chunks in producer order: the items of ``order`` with its level, in that order.
        by_consumer = np.argsort(dst_sorted, kind="stable")
        slots = dst_slot[order][by_consumer]
        consumers = dst_sorted[by_consumer]
        consume: dict[int, tuple[int, int]] = {}
        inverse = np.zeros(n, dtype=np.int64)
        if n:
            change = np.flatnonzero(consumers[1:] != consumers[:-1]) + 1
            bounds = np.concatenate(([0], change, [n])).tolist()
            for start, end in zip(bounds[:-1], bounds[1:]):
                consume[int(consumers[start])] = (start, end)
                inverse[start:end] = np.argsort(slots[start:end], kind="stable")
        gather = src_row[order]
        emit_csr = consume_csr = None
        if level_sizes is not None:
            # a down-pass producer emits two rows per node (its decomposition's two outputs)
            rows_per_node = 2 if consumer_sums else 1
            emit_csr = Csr.build_many(gather, {level: entry[:2] for level, entry in produce.items()},
                                      {level: rows_per_node * int(level_sizes[level]) for level in produce}, device)
            consume_csr = Csr.build_many(
                slots if consumer_sums else inverse, consume,
                {level: int(level_sizes[level]) if consumer_sums else end - start
                 for level, (start, end) in consume.items()}, device)
        return cls(gather=host_to_device(gather, device), produce=produce,
                   slot_index=host_to_device(slots, device), consume=consume,
                   slot_inverse=host_to_device(inverse, device), emit_csr=emit_csr, consume_csr=consume_csr)

    def emit(self, level: int, output: torch.Tensor, pending: list[list[torch.Tensor]]) -> None:
        entry = self.produce.get(level)
        if entry is None:
            return
        start, end, consumers, counts = entry
        taken = gather_rows(output, self.gather[start:end], _csr(self.emit_csr, level))
        for consumer, chunk in zip(consumers, taken.split(counts)):
            pending[consumer].append(chunk)

    def received(self, level: int, pending: list[list[torch.Tensor]]) -> torch.Tensor | None:
        chunks = pending[level]
        if not chunks:
            return None
        return chunks[0] if len(chunks) == 1 else torch.cat(chunks)

    def in_slot_order(self, level: int, pending: list[list[torch.Tensor]]) -> torch.Tensor:
        start, end = self.consume[level]
        return gather_rows(self.received(level, pending), self.slot_inverse[start:end],
                           _csr(self.consume_csr, level))

    def summed(self, level: int, pending: list[list[torch.Tensor]], size: int) -> torch.Tensor | None:
        """The rows received by ``level`` summed into its ``size`` rows by slot (None: nothing received)."""
        messages = self.received(level, pending)
        if messages is None:
            return None
        return scatter_sum(messages, self.slots(level), size, _csr(self.consume_csr, level))

    def slots(self, level: int) -> torch.Tensor | None:
        entry = self.consume.get(level)
        return None if entry is None else self.slot_index[entry[0]:entry[1]]


@dataclass
class Graph:
    """The nodes the model runs on, numbered level by level (level h = nodes of height h; level 0 = leaves)."""

    structure: str
    level_offsets: list[int]  # (H + 2,) node range of each level
    leaf_tokens: torch.Tensor  # (n_level0,) token of each leaf node
    left: np.ndarray  # (n_nodes - n_level0,) child node ids of internal nodes, in node order
    right: np.ndarray
    # the children receiving the decomposition's first and second output (the recipe's decoder child order)
    down_left: np.ndarray
    down_right: np.ndarray
    roots: torch.Tensor  # (B,) node id of each sentence's root, batch order
    occurrence_node: np.ndarray  # (N_L + N_I,) node id of every occurrence (identity for sentential)
    # (up_route, down_route), built on first use: the autograd passes need them, the handwritten ones do not
    # (models/propagation.py), and on a GPU their host-side sorts and copies are a share of a step
    route_factory: Callable[[], tuple[Route, Route]] = field(repr=False)
    root_local: dict[int, torch.Tensor]  # level -> local indices of parentless sentence roots (down = own up)
    root_nodes: np.ndarray  # the same roots as global node ids, by level (host copy, for the handwritten passes)
    down_count: torch.Tensor  # (n_nodes,) number of down messages each node averages (its parents', or 1 at a root)
    node_occurrence: np.ndarray  # (n_nodes,) one occurrence of each node (entangled: the first one)
    # (n_nodes, E) bool upward dropout masks the induction used, in node order (None: induced without dropout)
    up_keep: torch.Tensor | None = None
    induction_dropout: InductionDropout | None = None
    device: torch.device = field(default=torch.device("cpu"))
    root_csr: dict[int, Csr] | None = None  # scatter='presorted': root_local's index structures (models/scatter.py)
    _routes: tuple[Route, Route] | None = field(default=None, repr=False)

    @property
    def up_route(self) -> Route:
        return self._built_routes()[0]

    @property
    def down_route(self) -> Route:
        return self._built_routes()[1]

    def _built_routes(self) -> tuple[Route, Route]:
        if self._routes is None:
            self._routes = self.route_factory()
        return self._routes

    def add_roots(self, level: int, total: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        """``total`` plus, at level ``level``'s parentless sentence roots, their own upward rows."""
        roots = self.root_local.get(level)
        if roots is None:
            return total
        csr = _csr(self.root_csr, level)
        if csr is None:
            return total.index_add(0, roots, up.index_select(0, roots))
        return total + scatter_sum(gather_rows(up, roots, csr), roots, total.shape[0], csr)

    @property
    def n_nodes(self) -> int:
        return self.level_offsets[-1]

    @property
    def n_levels(self) -> int:
        return len(self.level_offsets) - 1

    def level_size(self, level: int) -> int:
        return self.level_offsets[level + 1] - self.level_offsets[level]


# Host-side set operations of build_graph. On a GPU the graph is built on the host between two launches and was a
# third of a handwritten Banyan step (8 of 27 ms on an H200), much of it in np.unique's generic paths; these give
# np.unique's exact results (tests/test_models_engine.py) for the inputs build_graph has.


def _unique_small_ints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(values, return_index=True, return_inverse=True) for non-negative integers of a small range (token
    ids): a presence table instead of a sort (0.6 vs 2.0 ms for 16k tokens)."""
    if len(values) == 0:
        return np.unique(values, return_index=True, return_inverse=True)
    present = np.zeros(int(values.max()) + 1, dtype=bool)
    present[values] = True
    unique = np.flatnonzero(present)
    inverse = (np.cumsum(present) - 1)[values]
    first = np.full(len(unique), len(values), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(values)))
    return unique, first, inverse


_PACKED_SORT_MIN = 1024  # from this many keys _stable_argsort packs them (measured crossover ~1k, 2-core EPYC)


def _stable_argsort(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, keys[order]) with order = np.argsort(keys, kind="stable"), for non-negative int64 keys.

    Each key is packed with its position (key * n + i) and the packed values sorted: ties then fall in position
    order, exactly the stable argsort, and numpy's value sort (SIMD where the CPU has it) is ~3-5x faster than its
    stable argsort of int64 (a timsort) for thousands of keys: 1.1 -> 0.25 ms for a first tree level of 8k pairs.
    Short arrays (the upper levels), where the extra calls cost more than the sort saves, and keys too large to
    pack take the argsort."""
    n = len(keys)
    if n >= _PACKED_SORT_MIN and keys.min() >= 0 and int(keys.max()) < np.iinfo(np.int64).max // n - 1:
        packed = np.sort(keys.astype(np.int64, copy=False) * n + np.arange(n))  # int64 whatever the keys' type
        ordered, order = np.divmod(packed, n)
        return order, ordered.astype(keys.dtype, copy=False)
    order = np.argsort(keys, kind="stable")
    return order, keys[order]


def _sorted_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, keys[order], new) of the stable sort, ``new`` marking where a run of equal keys starts."""
    order, ordered = _stable_argsort(keys)
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return order, ordered, new


def _unique_sorted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(keys, return_index=True, return_inverse=True) without its generic overhead (one stable sort)."""
    order, ordered, new = _sorted_runs(keys)
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], order[new], inverse


def _stable_order(small: np.ndarray) -> np.ndarray:
    """np.argsort(small, kind="stable") for non-negative integers such as tree heights: as int16 numpy sorts them by
    radix (0.09 vs 0.65 ms for 16k heights)."""
    if len(small) and small.max() < np.iinfo(np.int16).max:
        small = small.astype(np.int16)
    return np.argsort(small, kind="stable")


def build_graph(induction: Induction, tokens: torch.Tensor | np.ndarray, structure: str,
                decoder_child_order: str = "position", scatter: str = "index_add") -> Graph:
    """The graph of ``induction`` under ``structure`` (``scatter``: StraeModel's validated choice; ``presorted``
    adds the presorted index structures of models/scatter.py). ``tokens``: the leaves' token ids, on any device
    or as a host array (``PackedBatch.tokens_on_host()``: no copy back from the GPU).

    ``decoder_child_order`` says which child receives the decomposition's first ("left") output: ``position``
    the positional left child; ``node_id`` the child with the lower node id, as the Self-StrAE reference's DGL
    edge order does (S:src/models.py:112,227-232: leaves are numbered by position, parents by creation, so a
    parent whose left child is a merge and right child a leaf sends its "left" message to the right child).
    Composition is positional either way. ``node_id`` is defined for sentential structures only.
    """
    device = induction.up.device
    if decoder_child_order not in ("position", "node_id"):
        raise ValueError(f"recipe key 'decoder_child_order': {decoder_child_order!r} is not one of position, node_id")
    if decoder_child_order == "node_id" and structure != "sentential":
        raise ValueError("recipe key 'decoder_child_order': node_id reproduces the Self-StrAE reference decoder, "
                         "which has sentential trees only; use position for entangled structures "
                         "(strae train --set decoder_child_order=position)")
    n_leaves = induction.n_leaves
    left = induction.left.cpu().numpy()
    right = induction.right.cpu().numpy()
    height = induction.height.cpu().numpy()
    tokens_np = tokens if isinstance(tokens, np.ndarray) else tokens.cpu().numpy()
    roots_np = induction.roots.cpu().numpy()
    n_occ = n_leaves + len(left)
    by_height = _stable_order(height)
    n_levels = int(height.max()) + 1 if len(height) else 1
    level_bounds = np.searchsorted(height[by_height], np.arange(1, n_levels + 1), side="left")
    node_of = np.empty(n_occ, dtype=np.int64)
    if structure == "entangled":
        leaf_tokens, first_leaf, inverse = _unique_small_ints(tokens_np)
        node_of[:n_leaves] = inverse
        offsets = [0, len(leaf_tokens)]
        lefts, rights, representatives = [], [], [first_leaf]
        left_by_height, right_by_height = left[by_height], right[by_height]  # each level's slice is then a view
        for level in range(1, n_levels):
            a, b = level_bounds[level - 1], level_bounds[level]
            occ = by_height[a:b]
            lc, rc = node_of[left_by_height[a:b]], node_of[right_by_height[a:b]]
            # the distinct (left node, right node) keys, as np.unique finds them: each becomes one node, numbered in
            # key order, represented by its first occurrence; the occurrences are numbered in sorted order directly
            # (one scatter, no inverse array)
            order, _, new = _sorted_runs(lc * n_occ + rc)
            node_of[n_leaves + occ[order]] = np.cumsum(new) + (offsets[-1] - 1)
            first = order[new]
            lefts.append(lc[first])
            rights.append(rc[first])
            representatives.append(n_leaves + occ[first])
            offsets.append(offsets[-1] + len(first))
        node_left = np.concatenate(lefts) if lefts else np.zeros(0, np.int64)
        node_right = np.concatenate(rights) if rights else np.zeros(0, np.int64)
        node_occurrence = np.concatenate(representatives)
        # (the entangled graph's decoder is positional: node_id was refused above)
        down_left, down_right = node_left, node_right
    elif structure == "sentential":
        leaf_tokens = tokens_np
        node_of[:n_leaves] = np.arange(n_leaves)
        node_of[n_leaves + by_height] = n_leaves + np.arange(len(left))
        node_left = node_of[left[by_height]]
        node_right = node_of[right[by_height]]
        offsets = [0, n_leaves] + (n_leaves + level_bounds[1:]).tolist()
        node_occurrence = np.concatenate((np.arange(n_leaves), n_leaves + by_height))
        down_left, down_right = node_left, node_right
        if decoder_child_order == "node_id":
            # Occurrence ids order a sentence's nodes like the reference's: leaves by position first, then
            # parents in creation order. Swap where the positional left child has the higher id.
            swap = left[by_height] > right[by_height]
            down_left = np.where(swap, node_right, node_left)
            down_right = np.where(swap, node_left, node_right)
    else:
        raise ValueError(f"model config key 'structure': {structure!r} is not one of sentential, entangled")

    offsets_np = np.asarray(offsets, dtype=np.int64)
    n_nodes = int(offsets_np[-1])
    node_level = np.repeat(np.arange(len(offsets_np) - 1), np.diff(offsets_np))
    node_local = np.arange(n_nodes) - offsets_np[node_level]
    n_level0 = int(offsets_np[1])
    parents = np.arange(n_level0, n_nodes)
    parent_level = node_level[parents]
    parent_local = node_local[parents]
    # Items of both passes: side 0 = left child, side 1 = right child (the decoder's sides per its child order).
    child = np.concatenate((node_left, node_right))
    down_child = np.concatenate((down_left, down_right))
    p_level = np.concatenate((parent_level, parent_level))
    p_slot = np.concatenate((2 * parent_local, 2 * parent_local + 1))
    n_lv = len(offsets_np) - 1
    ascending = np.arange(n_lv)
    level_sizes = np.diff(offsets_np) if scatter == "presorted" else None

    def routes() -> tuple[Route, Route]:
        up_route = Route.build(node_level[child], node_local[child], p_level, p_slot, ascending, device, level_sizes)
        down_route = Route.build(p_level, p_slot, node_level[down_child], node_local[down_child],
                                 n_lv - 1 - ascending, device, level_sizes, consumer_sums=True)
        return up_route, down_route
    # Down embedding = mean over the messages of all parents (edges); a root without a parent takes its own upward
    # embedding. A sentence root that is also a constituent of another sentence in the batch (entangled only) has
    # parents and takes their messages only, as in the Banyan code: DGL's prop_nodes over the reversed graph's
    # topological frontiers after the first (B:src/models.py:113-126) overwrites every node that has a parent.
    # (Measured: 0 of 10,240 sentences in 20 real English batches; short corpora or duplicated phrases can have it.)
    count = np.bincount(child, minlength=n_nodes).astype(np.float64)
    root_nodes = _unique_sorted(node_of[roots_np])[0]
    root_nodes = root_nodes[count[root_nodes] == 0]
    count[root_nodes] = 1
    root_local: dict[int, torch.Tensor] = {}
    root_levels = node_level[root_nodes]
    by_level = np.argsort(root_levels, kind="stable")
    root_levels, root_nodes = root_levels[by_level], root_nodes[by_level]
    levels, first = np.unique(root_levels, return_index=True)
    bounds = dict(zip(levels.tolist(), zip(first.tolist(), np.append(first[1:], len(root_levels)).tolist())))
    # the graph's index arrays in one host-to-device copy; the roots' local rows then as a view per level
    local, leaf_tokens_t, roots_t, count_t, node_occurrence_t = host_to_device_many(
        [node_local[root_nodes], leaf_tokens, node_of[roots_np], count, node_occurrence], device)
    for level, (start, end) in bounds.items():
        root_local[level] = local[start:end]
    root_csr = None if level_sizes is None else Csr.build_many(
        node_local[root_nodes], bounds, {level: int(level_sizes[level]) for level in bounds}, device)
    return Graph(structure=structure, level_offsets=offsets_np.tolist(),
                 leaf_tokens=leaf_tokens_t,
                 left=node_left, right=node_right, down_left=down_left, down_right=down_right,
                 roots=roots_t,
                 occurrence_node=node_of, route_factory=routes, root_local=root_local, root_nodes=root_nodes,
                 down_count=count_t, node_occurrence=node_occurrence,
                 up_keep=None if induction.keep is None else induction.keep[node_occurrence_t],
                 induction_dropout=induction.dropout, device=device, root_csr=root_csr)
