"""The handwritten passes' levels as Triton kernels: one launch per level per pass, or one for a run of narrow levels
(imported only on that path).

models/propagation.py gives the math; these kernels do it level by level, fused: a program reads a block of a
level's nodes (BLOCK rows x E columns), gathers what it needs (children's rows, or the messages of its parents
through a CSR list), and writes the level's rows. A launch covers the levels level_first..level_end - 1 (their bounds
read from the plan's ``offsets`` on the device), in the pass's order, each level's blocks shared out over the
launch's programs, with a barrier between levels: a wide level gets a launch of its own with a program per block,
and the narrow levels at a graph's top (a few nodes each, ~20 of a batch's ~30 levels) share ONE single-program
launch (propagation.LEVEL_TAIL_NODES): each launch costs ~60 us of host time on an H100 box, where a step is
host-bound, and a level of a few blocks costs the one program a few microseconds. Every sum runs in a fixed order
inside one block (no atomics): the results are deterministic, and the per-parameter gradient sums are written per
block ("partials", in the same rows however the levels are launched) and added by torch afterwards. A step launches
~4 kernels per tree level (or per wide level) instead of ~80 ops. Diagonal functions work
on (BLOCK nodes, E) tiles; linear ones (further down) on one node's (channels, channel size) tile at a time.

Sums follow the torch path's order (a node's messages in its CSR order = the order torch's index_add adds them);
the GPU compiler may contract a*b+c into one FMA, so CUDA results equal the torch path's to rounding, not bitwise.
Only long-stable ``tl`` APIs (load/store/where/sum/max, constexpr branches), as in induce_kernel.py.
"""
from __future__ import annotations

# In a try block for `strae export`, as induce_kernel.py (imported only when the Triton passes run).
try:
    import triton
    import triton.language as tl
except ImportError:
    raise


@triton.jit
def _level(offsets_ptr, i, level_first, level_end, n_level0, REVERSED: tl.constexpr):
    """The i-th level of the launch's range in the pass's order: its first node, its first internal-node index
    (node - n_level0) and its node count."""
    if REVERSED:
        level = level_end - 1 - i
    else:
        level = level_first + i
    start = tl.load(offsets_ptr + level)
    return start, start - n_level0, tl.load(offsets_ptr + level + 1) - start


@triton.jit
def _block(pid, n, E: tl.constexpr, E_B: tl.constexpr, BLOCK: tl.constexpr):
    """Block ``pid``'s rows (a BLOCK of the level's n nodes) and columns (E of E_B), with their masks."""
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, E_B)
    valid = rows < n
    col_ok = cols < E
    return rows, cols, valid, col_ok, valid[:, None] & col_ok[None, :]


@triton.jit
def _parent_entry(entries_ptr, first, t, degree, valid, col_ok):
    """The t-th (parent, side) pair of each row's CSR list, and the tile mask of the rows that have one."""
    has = valid & (t < degree)
    entry = tl.load(entries_ptr + first + t, mask=has, other=0)
    parent = entry // 2
    return parent, entry - 2 * parent, has[:, None] & col_ok[None, :]


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0"])
def up_forward(up_ptr, children_ptr, gates_ptr, bias_ptr, mask_ptr, offsets_ptr, level_first, level_end, n_level0,
               E: tl.constexpr, E_B: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """Each level's rows start..start+n: U = Mu * (gl * U[left] + gr * U[right] + b); children of internal node
    first+r at children[2(first+r)], children[2(first+r)+1]. Levels ascending."""
    cols = tl.arange(0, E_B)
    col_ok = cols < E
    g_left = tl.load(gates_ptr + cols, mask=col_ok, other=0.0)
    g_right = tl.load(gates_ptr + E + cols, mask=col_ok, other=0.0)
    bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, False)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            rows, cols, valid, col_ok, tile = _block(pid, n, E, E_B, BLOCK)
            internal = (first + rows).to(tl.int64)
            left = tl.load(children_ptr + 2 * internal, mask=valid, other=0)
            right = tl.load(children_ptr + 2 * internal + 1, mask=valid, other=0)
            x_left = tl.load(up_ptr + left[:, None] * E + cols[None, :], mask=tile, other=0.0)
            x_right = tl.load(up_ptr + right[:, None] * E + cols[None, :], mask=tile, other=0.0)
            parent = x_left * g_left[None, :] + x_right * g_right[None, :] + bias[None, :]
            node = (start + rows).to(tl.int64)
            if MASKED:
                parent = parent * tl.load(mask_ptr + node[:, None] * E + cols[None, :], mask=tile, other=0.0)
            tl.store(up_ptr + node[:, None] * E + cols[None, :], parent, mask=tile)
        tl.debug_barrier()  # the next level reads these rows (a launch of several levels has one program)


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0"])
def down_forward(down_ptr, up_ptr, begin_ptr, entries_ptr, mask_ptr, gates_ptr, bias_ptr, count_ptr, root_ptr,
                 offsets_ptr, level_first, level_end, n_level0, E: tl.constexpr, E_B: tl.constexpr, BLOCK: tl.constexpr,
                 MASKED: tl.constexpr):
    """Each level's rows start..start+n: D = (sum of the parents' messages + U if a parentless root) / count, a
    message from (parent p, side s) being Md[p, s] * (D[p] * h_s + c_s); a node's (p, s) are
    entries[begin[i]:begin[i+1]] as 2p + s. Levels descending."""
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, True)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            rows, cols, valid, col_ok, tile = _block(pid, n, E, E_B, BLOCK)
            node = (start + rows).to(tl.int64)
            first_entry = tl.load(begin_ptr + node, mask=valid, other=0)
            degree = tl.load(begin_ptr + node + 1, mask=valid, other=0) - first_entry
            total = tl.zeros((BLOCK, E_B), dtype=tl.float32)
            for t in range(0, tl.max(degree, axis=0)):
                parent, side, m = _parent_entry(entries_ptr, first_entry, t, degree, valid, col_ok)
                message = (tl.load(down_ptr + parent[:, None] * E + cols[None, :], mask=m, other=0.0)
                           * tl.load(gates_ptr + side[:, None] * E + cols[None, :], mask=m, other=0.0)
                           + tl.load(bias_ptr + side[:, None] * E + cols[None, :], mask=m, other=0.0))
                if MASKED:
                    message = message * tl.load(mask_ptr + ((parent - n_level0) * 2 + side)[:, None] * E
                                                + cols[None, :], mask=m, other=0.0)
                total += tl.where(m, message, 0.0)
            root = tl.load(root_ptr + node, mask=valid, other=0)
            own = tl.load(up_ptr + node[:, None] * E + cols[None, :], mask=tile & (root != 0)[:, None], other=0.0)
            total += own
            count = tl.load(count_ptr + node, mask=valid, other=1.0)
            tl.store(down_ptr + node[:, None] * E + cols[None, :], total / count[:, None], mask=tile)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0", "block_base"])
def down_backward(grad_total_ptr, grad_down_ptr, down_ptr, left_ptr, right_ptr, mask_ptr, gates_ptr, count_ptr,
                  partial_ptr, offsets_ptr, level_first, level_end, n_level0, block_base,
                  E: tl.constexpr, E_B: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """Each level's rows (internal nodes, children's levels done): gT = (gD + sum_s gT[child_s] * Md[., s] * h_s)
    / count; partials (4, E) per block, block_base + the blocks of the levels before it in the launch: sum gT[child_s]
    Md * D (d/dh_s), sum gT[child_s] Md (d/dc_s). Levels ascending."""
    cols = tl.arange(0, E_B)
    col_ok = cols < E
    h_left = tl.load(gates_ptr + cols, mask=col_ok, other=0.0)
    h_right = tl.load(gates_ptr + E + cols, mask=col_ok, other=0.0)
    base = block_base.to(tl.int64)  # advanced by int64 block counts (the offsets are int64)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, False)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            rows, cols, valid, col_ok, tile = _block(pid, n, E, E_B, BLOCK)
            internal = (first + rows).to(tl.int64)
            node = (start + rows).to(tl.int64)
            child_left = tl.load(left_ptr + internal, mask=valid, other=0)
            child_right = tl.load(right_ptr + internal, mask=valid, other=0)
            g_left = tl.load(grad_total_ptr + child_left[:, None] * E + cols[None, :], mask=tile, other=0.0)
            g_right = tl.load(grad_total_ptr + child_right[:, None] * E + cols[None, :], mask=tile, other=0.0)
            if MASKED:
                g_left = g_left * tl.load(mask_ptr + (internal * 2)[:, None] * E + cols[None, :], mask=tile,
                                          other=0.0)
                g_right = g_right * tl.load(mask_ptr + (internal * 2 + 1)[:, None] * E + cols[None, :], mask=tile,
                                            other=0.0)
            g = (tl.load(grad_down_ptr + node[:, None] * E + cols[None, :], mask=tile, other=0.0)
                 + (g_left * h_left[None, :] + g_right * h_right[None, :]))
            count = tl.load(count_ptr + node, mask=valid, other=1.0)
            tl.store(grad_total_ptr + node[:, None] * E + cols[None, :], g / count[:, None], mask=tile)
            d = tl.load(down_ptr + node[:, None] * E + cols[None, :], mask=tile, other=0.0)
            out = partial_ptr + (base + pid).to(tl.int64) * 4 * E + cols
            tl.store(out, tl.sum(g_left * d, axis=0), mask=col_ok)
            tl.store(out + E, tl.sum(g_right * d, axis=0), mask=col_ok)
            tl.store(out + 2 * E, tl.sum(g_left, axis=0), mask=col_ok)
            tl.store(out + 3 * E, tl.sum(g_right, axis=0), mask=col_ok)
        base += tl.cdiv(n, BLOCK)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0", "block_end"])
def up_backward(pre_ptr, grad_up_ptr, up_ptr, begin_ptr, entries_ptr, gates_ptr, mask_ptr, children_ptr, partial_ptr,
                offsets_ptr, level_first, level_end, n_level0, block_end, E: tl.constexpr, E_B: tl.constexpr,
                BLOCK: tl.constexpr, MASKED: tl.constexpr, INTERNAL: tl.constexpr):
    """Each level's rows (parents' levels done): G = gU + sum over (p, s) of g_s * P[p]; P = G * Mu (the gradient
    at the composition's output, what the children and the parameters receive); for internal levels, partials
    (3, E) per block, ending at block_end (the blocks of the launch's levels come last to first before it): sum
    P * U[left], sum P * U[right] (d/dg_l, d/dg_r), sum P (d/db). Levels descending."""
    base = block_end.to(tl.int64)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, True)
        base -= tl.cdiv(n, BLOCK)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            rows, cols, valid, col_ok, tile = _block(pid, n, E, E_B, BLOCK)
            node = (start + rows).to(tl.int64)
            g = tl.load(grad_up_ptr + node[:, None] * E + cols[None, :], mask=tile, other=0.0)
            first_entry = tl.load(begin_ptr + node, mask=valid, other=0)
            degree = tl.load(begin_ptr + node + 1, mask=valid, other=0) - first_entry
            for t in range(0, tl.max(degree, axis=0)):
                parent, side, m = _parent_entry(entries_ptr, first_entry, t, degree, valid, col_ok)
                g += tl.where(m, tl.load(gates_ptr + side[:, None] * E + cols[None, :], mask=m, other=0.0)
                              * tl.load(pre_ptr + parent[:, None] * E + cols[None, :], mask=m, other=0.0), 0.0)
            if MASKED:
                g = g * tl.load(mask_ptr + node[:, None] * E + cols[None, :], mask=tile, other=0.0)
            tl.store(pre_ptr + node[:, None] * E + cols[None, :], g, mask=tile)
            if INTERNAL:
                internal = (first + rows).to(tl.int64)
                left = tl.load(children_ptr + 2 * internal, mask=valid, other=0)
                right = tl.load(children_ptr + 2 * internal + 1, mask=valid, other=0)
                x_left = tl.load(up_ptr + left[:, None] * E + cols[None, :], mask=tile, other=0.0)
                x_right = tl.load(up_ptr + right[:, None] * E + cols[None, :], mask=tile, other=0.0)
                out = partial_ptr + (base + pid).to(tl.int64) * 3 * E + cols
                tl.store(out, tl.sum(g * x_left, axis=0), mask=col_ok)
                tl.store(out + E, tl.sum(g * x_right, axis=0), mask=col_ok)
                tl.store(out + 2 * E, tl.sum(g, axis=0), mask=col_ok)
        tl.debug_barrier()


# ------------------------------------------------------------------------------------------------------------------
# Linear functions (Self-StrAE): per channel c, compose = [l_c, r_c] (2u) @ W (2u, u) + b and decompose = p_c @ Wd
# (u, 2u) + bd, the (u, u) blocks shared by the k channels. A node is a (K_B, U_B) tile (channels x channel size);
# products are broadcast-multiply-sums over a (K_B, U_B, U_B) block (tl.dot needs sizes >= 16; u is 1..32 here).
# A program walks a block's BLOCK nodes one after another, so the weights are loaded once and the weight-gradient
# partials are summed in registers over the block's nodes.


@triton.jit
def _node_tile(K: tl.constexpr, U: tl.constexpr, K_B: tl.constexpr, U_B: tl.constexpr):
    """Flat element c * U + i of each (channel, position) of a node's tile, and the mask of the real ones."""
    channel = tl.arange(0, K_B)
    within = tl.arange(0, U_B)
    return channel[:, None] * U + within[None, :], (channel[:, None] < K) & (within[None, :] < U)


@triton.jit
def _live_tile(in_row, row, n):
    """``in_row`` where ``row`` < ``n`` (a scalar condition), as a tile mask (a scalar & a tile is not one in
    Triton's interpreter)."""
    return in_row & ((row + tl.zeros(in_row.shape, dtype=tl.int32)) < n)


@triton.jit
def _row(pid, r, n, in_row, BLOCK: tl.constexpr):
    """Block ``pid``'s r-th node of the level (of n): its index, whether it exists, and its tile mask."""
    row = pid * BLOCK + r
    return row, row < n, _live_tile(in_row, row, n)


@triton.jit
def _store_square(ptr, block, U: tl.constexpr, U_B: tl.constexpr):
    """Store the (U, U) part of a (U_B, U_B) block row-major at ``ptr`` (a weight-gradient partial)."""
    within = tl.arange(0, U_B)
    inside = (within[:, None] < U) & (within[None, :] < U)
    tl.store(ptr + within[:, None] * U + within[None, :], block, mask=inside)


@triton.jit
def _square(ptr, row_stride, U: tl.constexpr, U_B: tl.constexpr):
    """The (U, U) block at ``ptr`` whose rows are ``row_stride`` apart (zero-padded to U_B)."""
    within = tl.arange(0, U_B)
    inside = (within[:, None] < U) & (within[None, :] < U)
    return tl.load(ptr + within[:, None] * row_stride + within[None, :], mask=inside, other=0.0)


@triton.jit
def _times(x, w):
    """out[c, j] = sum_i x[c, i] w[i, j]: each channel's row times the block. Summed over the last axis against the
    block's transpose, never as sum(x[:, :, None] * w[None, :, :], axis=1): Triton's combine pass rewrites that form
    into a tt.dot, which runs fp32 as TF32 on NVIDIA (~1e-3 relative; at k16 u16 it failed the first-use check on an
    H200, 2026-11-26). tests/test_propagation.py asserts no kernel holds a tt.dot."""
    return _times_transposed(x, tl.trans(w))


@triton.jit
def _times_transposed(x, w):
    """out[c, i] = sum_j x[c, j] w[i, j]: each channel's row times the block's transpose (the adjoint of _times)."""
    return tl.sum(x[:, None, :] * w[None, :, :], axis=2)


@triton.jit
def _outer(a, b):
    """sum over channels of a[c, i] b[c, j]: a block's gradient."""
    return tl.sum(a[:, :, None] * b[:, None, :], axis=0)


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0"])
def up_forward_linear(up_ptr, children_ptr, w_ptr, b_ptr, mask_ptr, offsets_ptr, level_first, level_end, n_level0,
                      K: tl.constexpr, U: tl.constexpr, E: tl.constexpr, K_B: tl.constexpr, U_B: tl.constexpr,
                      BLOCK: tl.constexpr, MASKED: tl.constexpr):
    element, in_row = _node_tile(K, U, K_B, U_B)
    within = tl.arange(0, U_B)
    w_left = _square(w_ptr, U, U, U_B)
    w_right = _square(w_ptr + U * U, U, U, U_B)
    bias = tl.load(b_ptr + within, mask=within < U, other=0.0)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, False)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            for r in range(0, BLOCK):
                row, live, m = _row(pid, r, n, in_row, BLOCK)
                internal = (first + row).to(tl.int64)
                left = tl.load(children_ptr + 2 * internal, mask=live, other=0)
                right = tl.load(children_ptr + 2 * internal + 1, mask=live, other=0)
                parent = (_times(tl.load(up_ptr + left * E + element, mask=m, other=0.0), w_left)
                          + _times(tl.load(up_ptr + right * E + element, mask=m, other=0.0), w_right)
                          + bias[None, :])
                node = (start + row).to(tl.int64)
                if MASKED:
                    parent = parent * tl.load(mask_ptr + node * E + element, mask=m, other=0.0)
                tl.store(up_ptr + node * E + element, parent, mask=m)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0"])
def down_forward_linear(down_ptr, up_ptr, begin_ptr, entries_ptr, mask_ptr, wd_ptr, bd_ptr, count_ptr, root_ptr,
                        offsets_ptr, level_first, level_end, n_level0, K: tl.constexpr, U: tl.constexpr,
                        E: tl.constexpr, K_B: tl.constexpr, U_B: tl.constexpr, BLOCK: tl.constexpr,
                        MASKED: tl.constexpr):
    element, in_row = _node_tile(K, U, K_B, U_B)
    within = tl.arange(0, U_B)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, True)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            for r in range(0, BLOCK):
                row, live, m = _row(pid, r, n, in_row, BLOCK)
                node = (start + row).to(tl.int64)
                total = tl.zeros((K_B, U_B), dtype=tl.float32)
                for t in range(tl.load(begin_ptr + node, mask=live, other=0),
                               tl.load(begin_ptr + node + 1, mask=live, other=0)):
                    entry = tl.load(entries_ptr + t)
                    parent = entry // 2
                    side = entry - 2 * parent
                    # the side's (u, u) block of Wd (u, 2u) and its half of bd (2u)
                    message = (_times(tl.load(down_ptr + parent * E + element, mask=in_row, other=0.0),
                                      _square(wd_ptr + side * U, 2 * U, U, U_B))
                               + tl.load(bd_ptr + side * U + within, mask=within < U, other=0.0)[None, :])
                    if MASKED:
                        message = message * tl.load(mask_ptr + ((parent - n_level0) * 2 + side) * E + element,
                                                    mask=in_row, other=0.0)
                    total += tl.where(in_row, message, 0.0)
                root = tl.load(root_ptr + node, mask=live, other=0)
                total += tl.load(up_ptr + node * E + element, mask=_live_tile(m, 0, root), other=0.0)  # root: 0/1
                count = tl.load(count_ptr + node, mask=live, other=1.0)
                tl.store(down_ptr + node * E + element, total / count, mask=m)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0", "block_base"])
def down_backward_linear(grad_total_ptr, grad_down_ptr, down_ptr, left_ptr, right_ptr, mask_ptr, wd_ptr, count_ptr,
                         partial_ptr, offsets_ptr, level_first, level_end, n_level0, block_base, K: tl.constexpr,
                         U: tl.constexpr, E: tl.constexpr, K_B: tl.constexpr, U_B: tl.constexpr,
                         BLOCK: tl.constexpr, MASKED: tl.constexpr):
    """As down_backward; partials per block: d/dWd's two (u, u) blocks, then d/dbd's two halves."""
    element, in_row = _node_tile(K, U, K_B, U_B)
    within = tl.arange(0, U_B)
    wd_left = _square(wd_ptr, 2 * U, U, U_B)
    wd_right = _square(wd_ptr + U, 2 * U, U, U_B)
    base = block_base.to(tl.int64)  # advanced by int64 block counts (the offsets are int64)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, False)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            acc_left = tl.zeros((U_B, U_B), dtype=tl.float32)
            acc_right = tl.zeros((U_B, U_B), dtype=tl.float32)
            acc_b_left = tl.zeros((U_B,), dtype=tl.float32)
            acc_b_right = tl.zeros((U_B,), dtype=tl.float32)
            for r in range(0, BLOCK):
                row, live, m = _row(pid, r, n, in_row, BLOCK)
                internal = (first + row).to(tl.int64)
                node = (start + row).to(tl.int64)
                child_left = tl.load(left_ptr + internal, mask=live, other=0)
                child_right = tl.load(right_ptr + internal, mask=live, other=0)
                g_left = tl.load(grad_total_ptr + child_left * E + element, mask=m, other=0.0)
                g_right = tl.load(grad_total_ptr + child_right * E + element, mask=m, other=0.0)
                if MASKED:
                    g_left = g_left * tl.load(mask_ptr + (internal * 2) * E + element, mask=m, other=0.0)
                    g_right = g_right * tl.load(mask_ptr + (internal * 2 + 1) * E + element, mask=m, other=0.0)
                g = (tl.load(grad_down_ptr + node * E + element, mask=m, other=0.0)
                     + (_times_transposed(g_left, wd_left) + _times_transposed(g_right, wd_right)))
                count = tl.load(count_ptr + node, mask=live, other=1.0)
                tl.store(grad_total_ptr + node * E + element, g / count, mask=m)
                d = tl.load(down_ptr + node * E + element, mask=m, other=0.0)
                acc_left += _outer(d, g_left)
                acc_right += _outer(d, g_right)
                acc_b_left += tl.sum(g_left, axis=0)
                acc_b_right += tl.sum(g_right, axis=0)
            out = partial_ptr + (base + pid).to(tl.int64) * (2 * U * U + 2 * U)
            _store_square(out, acc_left, U, U_B)
            _store_square(out + U * U, acc_right, U, U_B)
            tl.store(out + 2 * U * U + within, acc_b_left, mask=within < U)
            tl.store(out + 2 * U * U + U + within, acc_b_right, mask=within < U)
        base += tl.cdiv(n, BLOCK)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["level_first", "level_end", "n_level0", "block_end"])
def up_backward_linear(pre_ptr, grad_up_ptr, up_ptr, begin_ptr, entries_ptr, w_ptr, mask_ptr, children_ptr,
                       partial_ptr, offsets_ptr, level_first, level_end, n_level0, block_end, K: tl.constexpr,
                       U: tl.constexpr, E: tl.constexpr, K_B: tl.constexpr, U_B: tl.constexpr, BLOCK: tl.constexpr,
                       MASKED: tl.constexpr, INTERNAL: tl.constexpr):
    """As up_backward; partials per block (internal levels): d/dW's left and right (u, u) blocks, then d/db."""
    element, in_row = _node_tile(K, U, K_B, U_B)
    within = tl.arange(0, U_B)
    base = block_end.to(tl.int64)
    for i in range(0, level_end - level_first):
        start, first, n = _level(offsets_ptr, i, level_first, level_end, n_level0, True)
        base -= tl.cdiv(n, BLOCK)
        for pid in range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
            acc_left = tl.zeros((U_B, U_B), dtype=tl.float32)
            acc_right = tl.zeros((U_B, U_B), dtype=tl.float32)
            acc_b = tl.zeros((U_B,), dtype=tl.float32)
            for r in range(0, BLOCK):
                row, live, m = _row(pid, r, n, in_row, BLOCK)
                node = (start + row).to(tl.int64)
                g = tl.load(grad_up_ptr + node * E + element, mask=m, other=0.0)
                for t in range(tl.load(begin_ptr + node, mask=live, other=0),
                               tl.load(begin_ptr + node + 1, mask=live, other=0)):
                    entry = tl.load(entries_ptr + t)
                    parent = entry // 2
                    side = entry - 2 * parent
                    g += _times_transposed(tl.load(pre_ptr + parent * E + element, mask=in_row, other=0.0),
                                           _square(w_ptr + side * U * U, U, U, U_B))
                if MASKED:
                    g = g * tl.load(mask_ptr + node * E + element, mask=m, other=0.0)
                tl.store(pre_ptr + node * E + element, g, mask=m)
                if INTERNAL:
                    internal = (first + row).to(tl.int64)
                    left = tl.load(children_ptr + 2 * internal, mask=live, other=0)
                    right = tl.load(children_ptr + 2 * internal + 1, mask=live, other=0)
                    acc_left += _outer(tl.load(up_ptr + left * E + element, mask=m, other=0.0), g)
                    acc_right += _outer(tl.load(up_ptr + right * E + element, mask=m, other=0.0), g)
                    acc_b += tl.sum(g, axis=0)
            if INTERNAL:
                out = partial_ptr + (base + pid).to(tl.int64) * (2 * U * U + U)
                _store_square(out, acc_left, U, U_B)
                _store_square(out + U * U, acc_right, U, U_B)
                tl.store(out + 2 * U * U + within, acc_b, mask=within < U)
        tl.debug_barrier()
