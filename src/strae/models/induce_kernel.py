"""The fused greedy induction as one Triton kernel (imported only when the Triton induction is used).

One program per sentence (``grid = (B,)`` in length-sorted order) runs all of that sentence's merges in one
launch. The per-slot bookkeeping of ``trees.induce`` (similarity to the next frontier element, next / previous
slot, node id, height, rightmost leaf, dropout key) lives in registers as (T_B,) vectors; embeddings are rows of
the ``up`` output (leaves prefilled by the caller, each merge written once), read back from L2. A merge is: argmax
of the similarities (leftmost on ties, NaN counts as largest like ``torch.argmax``), compose the two children,
the keyed function-dropout mask (``models/dropout.py``: the same lowbias32 int32 arithmetic), store, normalise,
and the two new neighbour similarities. Merge ``o`` of step ``s`` for sorted sentence ``p`` is numbered
``step_base[s] + p``: the step-major numbering of ``trees.induce``, where the sentences still merging at step s
are the first ``active_counts[s]`` of the sorted batch.

Only long-stable ``tl`` APIs are used (arange/load/store/where/reductions/debug_barrier, constexpr branches), so
the kernel compiles with the Triton that ships with older torch releases too. Embedding tiles are (K_B, U_B) =
(channels, channel size) padded to powers of two; padded elements load as 0 and are zeroed after the bias.
"""
from __future__ import annotations

# In a try block only for `strae export`: sentence-transformers loads an exported folder with transformers' remote
# code loader, which demands every package a copied file imports at its top level *outside* try blocks; this module
# is imported only when the Triton induction was chosen (triton present), so an export loads without triton too.
try:
    import triton
    import triton.language as tl
except ImportError:
    raise


@triton.jit
def _hash32(x):
    # lowbias32 on int32 (dropout.hash32): products wrap modulo 2^32, shifts masked to act as logical shifts.
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * 2146121005  # 0x7FEB352D
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * -2073254261  # 0x846CA68B as int32
    x = x ^ ((x >> 16) & 0xFFFF)
    return x


@triton.jit
def _pick(vector, at):
    """The element of ``vector`` where ``at`` is true (exactly one position)."""
    return tl.sum(tl.where(at, vector, 0), axis=0)


@triton.jit
def _unit(x):
    norm = tl.sqrt(tl.sum(tl.sum(x * x, axis=1), axis=0))
    return x / tl.maximum(norm, 1e-8)  # F.normalize(eps=1e-8)


@triton.jit
def _cosine(unit, row):
    return tl.sum(tl.sum(unit * _unit(row), axis=1), axis=0)


# Scalars that differ from batch to batch are not specialised on (no recompilation per value class).
@triton.jit(do_not_specialize=["n_leaves", "function_seed", "threshold"])
def induce_kernel(up_ptr, adjacent_ptr, leaf_key_ptr, keep_ptr, start_ptr, length_ptr, batch_ptr, step_base_ptr,
                  left_ptr, right_ptr, height_ptr, span_start_ptr, span_end_ptr, root_ptr,
                  w_left_ptr, w_right_ptr, bias_ptr, n_leaves, function_seed, threshold, scale,
                  K: tl.constexpr, U: tl.constexpr, E: tl.constexpr, HALVES: tl.constexpr, K_B: tl.constexpr,
                  U_B: tl.constexpr, T_B: tl.constexpr, LINEAR: tl.constexpr, DROPOUT: tl.constexpr):
    p = tl.program_id(0)
    start = tl.load(start_ptr + p)  # int64: packed row of the sentence's first leaf
    n = tl.load(length_ptr + p)  # int32; slot n is the sentinel ("no neighbour")
    channel = tl.arange(0, K_B)
    within = tl.arange(0, U_B)
    element = channel[:, None] * U + within[None, :]  # flat index c * u + i of the (K_B, U_B) tile
    in_row = (channel[:, None] < K) & (within[None, :] < U)
    if LINEAR:  # (u, u) blocks of the (2u, u) weight, loaded TRANSPOSED: rows = output, cols = input of the child
        # (the products below then sum over the last axis: see there why)
        w_offsets = within[None, :] * U + within[:, None]
        w_mask = (within[:, None] < U) & (within[None, :] < U)
        w_left = tl.load(w_left_ptr + w_offsets, mask=w_mask, other=0.0)
        w_right = tl.load(w_right_ptr + w_offsets, mask=w_mask, other=0.0)
    else:  # sigmoid gates, shared by all channels
        w_left = tl.load(w_left_ptr + within, mask=within < U, other=0.0)
        w_right = tl.load(w_right_ptr + within, mask=within < U, other=0.0)
    bias = tl.load(bias_ptr + within, mask=within < U, other=0.0)

    slot = tl.arange(0, T_B)
    sim = tl.load(adjacent_ptr + start + slot, mask=slot < n - 1, other=float("-inf"))
    nxt = tl.where(slot + 1 < n, slot + 1, n)
    prv = tl.where((slot > 0) & (slot < n), slot - 1, n)
    node = start + slot  # occurrence id of the node held by each slot (int64)
    last_leaf = start + slot  # packed row of its rightmost leaf
    height = tl.zeros((T_B,), dtype=tl.int32)
    key = tl.zeros((T_B,), dtype=tl.int32)
    element_hash = element
    if DROPOUT:
        key = tl.load(leaf_key_ptr + start + slot, mask=slot < n, other=0)
        element_hash = _hash32(tl.where(element < HALVES, element, element - HALVES))  # keyed_keep's offsets

    for step in range(0, n - 1):
        score = tl.where(sim != sim, float("inf"), sim)  # torch.argmax takes the first NaN
        best = tl.max(score, axis=0)
        i = tl.min(tl.where(score == best, slot, T_B), axis=0)  # leftmost maximum
        at_i = slot == i
        j = _pick(nxt, at_i)
        at_j = slot == j
        left_id = _pick(node, at_i)
        right_id = _pick(node, at_j)
        new_height = tl.maximum(_pick(height, at_i), _pick(height, at_j)) + 1
        merge = tl.load(step_base_ptr + step) + p
        occ = n_leaves + merge
        left_row = tl.load(up_ptr + left_id * E + element, mask=in_row, other=0.0)
        right_row = tl.load(up_ptr + right_id * E + element, mask=in_row, other=0.0)
        if LINEAR:  # per channel: hcat(l, r) @ W + b. Summed over the last axis against the blocks' transposes,
            # never as sum(l[:, :, None] * W[None, :, :], axis=1): Triton's combine pass rewrites that form into a
            # tt.dot, which runs fp32 as TF32 on NVIDIA (at k16 u16 the induction failed its first-use check on an
            # H100, 2026-11-27: up embeddings off by 6.6e-4, and the run fell back to the torch induction, ~25x
            # slower); as propagate_kernel._times. tests/test_fused_induction.py asserts no tt.dot.
            parent = (tl.sum(left_row[:, None, :] * w_left[None, :, :], axis=2)
                      + tl.sum(right_row[:, None, :] * w_right[None, :, :], axis=2) + bias[None, :])
        else:  # l * sigmoid(g_l) + r * sigmoid(g_r) + b, in the torch path's order
            parent = left_row * w_left[None, :] + right_row * w_right[None, :] + bias[None, :]
        parent = tl.where(in_row, parent, 0.0)  # padded channels got the bias: keep them out of the norms
        if DROPOUT:  # dropout.pair_keys + keyed_keep + apply_keep
            parent_key = _hash32(_hash32(_pick(key, at_i) ^ 1640531527) + _pick(key, at_j))  # 0x61C88647
            bits = _hash32(_hash32(parent_key ^ function_seed) ^ element_hash)
            draw = tl.where(element < HALVES, bits & 0xFFFF, (bits >> 16) & 0xFFFF)
            keep = draw >= threshold
            tl.store(keep_ptr + occ * E + element, keep.to(tl.uint8), mask=in_row)
            parent = parent * tl.where(keep, scale, 0.0)
            key = tl.where(at_i, parent_key, key)
        tl.store(up_ptr + occ * E + element, parent, mask=in_row)
        tl.store(left_ptr + merge, left_id)
        tl.store(right_ptr + merge, right_id)
        tl.store(height_ptr + merge, new_height.to(tl.int64))
        tl.store(span_start_ptr + occ, start + i)
        tl.store(span_end_ptr + occ, _pick(last_leaf, at_j))
        # The parent takes the left child's slot; the right child's slot dies and is unlinked.
        node = tl.where(at_i, occ, node)
        height = tl.where(at_i, new_height, height)
        last_leaf = tl.where(at_i, _pick(last_leaf, at_j), last_leaf)
        sim = tl.where(at_j, float("-inf"), sim)
        after = _pick(nxt, at_j)
        nxt = tl.where(at_i, after, nxt)
        prv = tl.where(slot == after, i, prv)
        before = _pick(prv, at_i)
        parent_unit = _unit(parent)
        # (a scalar condition is folded into the tile mask through the row length: 0 when there is no neighbour)
        after_row = tl.load(up_ptr + _pick(node, slot == after) * E + element,
                            mask=in_row & (element < tl.where(after < n, E, 0)), other=0.0)
        before_row = tl.load(up_ptr + _pick(node, slot == before) * E + element,
                             mask=in_row & (element < tl.where(before < n, E, 0)), other=0.0)
        sim = tl.where(at_i, tl.where(after < n, _cosine(parent_unit, after_row), float("-inf")), sim)
        sim = tl.where(slot == before, tl.where(before < n, _cosine(parent_unit, before_row), float("-inf")), sim)
        # Later steps read this parent's row back (as a child or a neighbour), possibly from other threads.
        tl.debug_barrier()
    tl.store(root_ptr + tl.load(batch_ptr + p), _pick(node, slot == 0))  # slot 0 ends up holding the root
