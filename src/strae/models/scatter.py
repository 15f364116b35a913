"""Row gathers and scatter-sums whose every kernel is a gather: deterministic on CUDA without a sort per call.

The message passing moves rows between levels with ``index_select`` (its backward is an ``index_add``) and sums
messages with ``index_add``. On CUDA, ``index_add`` uses atomics; under ``torch.use_deterministic_algorithms``
(strae train's default) torch swaps in a sort-based version, which sorts the indices again on every call —
~190 calls per Banyan step (counted on CPU: 128 index_select backwards, 60 down-pass sums). The indices are
known on the host when the graph is built, so the sort can be done there once: ``Csr`` keeps, for an index vector
over ``size`` rows, the items in destination order (stable) and each destination's count, and a sum becomes a gather
plus ``segment_reduce`` (one sequential sum per destination: deterministic), or a plain gather when every
destination receives at most one item (``pos``: the item each destination takes, or a zero row).

The summation order is the items' order, as CPU ``index_add`` sums (results are bitwise equal on CPU: tested), so
the choice changes speed, not numbers. Selected by ``scatter='presorted'`` (``strae train --scatter``); the default
``index_add`` keeps torch's kernels. On 2 CPU cores a whole Banyan step is about as fast either way (batch 512:
10.9k vs 9.5k tokens/s over 3 steps, within this machine's noise) although one ``segment_reduce`` is 10-20x slower
than one CPU ``index_add``. Its speed on a GPU is NOT measured yet (tools/gpu_measure.sh: banyan-presorted).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from strae.runtime import host_to_device

SCATTER_MODES = ("index_add", "presorted")


@dataclass
class Csr:
    """An index vector over ``size`` destination rows, sorted once on the host."""

    size: int
    order: torch.Tensor | None  # (n,) item of each sorted position (stable by destination); None when ``pos`` is set
    counts: torch.Tensor | None  # (size,) items per destination
    pos: torch.Tensor | None  # (size,) the one item each destination takes (n = a zero row); only when counts <= 1

    @classmethod
    def build(cls, index: np.ndarray, size: int, device: torch.device) -> Csr:
        """One index vector over ``size`` rows (``build_many`` with a single segment)."""
        return cls.build_many(np.asarray(index), {0: (0, len(index))}, {0: size}, device)[0]

    @classmethod
    def build_many(cls, index: np.ndarray, segments: dict[int, tuple[int, int]], sizes: dict[int, int],
                   device: torch.device) -> dict[int, Csr]:
        """``{key: Csr.build(index[start:end], sizes[key])}`` for every key of ``segments``, computed over all
        segments at once and copied to ``device`` in ONE transfer (a graph has ~30 levels per route; one small
        host-to-device copy per level and array would cost the host more than the sorts it saves)."""
        keys = list(segments)
        if not keys:
            return {}
        lengths = np.array([segments[k][1] - segments[k][0] for k in keys], dtype=np.int64)
        size = np.array([sizes[k] for k in keys], dtype=np.int64)
        item_start = np.concatenate(([0], np.cumsum(lengths)))
        dest_start = np.concatenate(([0], np.cumsum(size)))
        local = np.concatenate([np.asarray(index[s:e], dtype=np.int64) for s, e in segments.values()])
        rows = np.repeat(size, lengths)  # each item's segment's row count
        bad = np.flatnonzero((local < 0) | (local >= rows))
        if bad.size:
            raise ValueError(f"index {int(local[bad[0]])} out of range for {int(rows[bad[0]])} rows")
        key_of_item = np.repeat(np.arange(len(keys)), lengths)
        dest = local + dest_start[key_of_item]  # one destination space for all segments, segment by segment
        position = np.arange(local.size) - item_start[key_of_item]  # each item's row in its own segment
        counts = np.bincount(dest, minlength=int(dest_start[-1]))
        busiest = np.zeros(len(keys), dtype=np.int64)  # most items any destination of the segment receives
        nonempty = size > 0
        if counts.size:
            busiest[nonempty] = np.maximum.reduceat(counts, dest_start[:-1][nonempty])
        pos = np.repeat(lengths, size)  # "a zero row" (row n of the padded values) unless an item lands there
        pos[dest] = position
        order = position[np.argsort(dest, kind="stable")]  # segment by segment, as dest is
        flat = host_to_device(np.concatenate((pos, order, counts)), device)
        pos_t, order_t, counts_t = flat.split([pos.size, order.size, counts.size])
        out: dict[int, Csr] = {}
        for i, key in enumerate(keys):
            d0, d1, i0, i1 = dest_start[i], dest_start[i + 1], item_start[i], item_start[i + 1]
            if busiest[i] <= 1:
                out[key] = cls(size=int(size[i]), order=None, counts=None, pos=pos_t[d0:d1])
            else:
                out[key] = cls(size=int(size[i]), order=order_t[i0:i1], counts=counts_t[d0:d1], pos=None)
        return out

    def sum_into(self, values: torch.Tensor) -> torch.Tensor:
        """(size, ...) rows: row d = the sum of ``values[i]`` over the items i with destination d (0 if none)."""
        if self.pos is not None:
            padded = torch.cat((values, values.new_zeros((1,) + tuple(values.shape[1:]))))
            return padded.index_select(0, self.pos)
        return torch.segment_reduce(values.index_select(0, self.order), "sum", lengths=self.counts, initial=0.0)


class _GatherRows(torch.autograd.Function):
    """``x.index_select(0, index)``; backward sums the gradient rows into x's rows through ``csr`` (no atomics)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, csr: Csr) -> torch.Tensor:
        ctx.csr = csr
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.csr.sum_into(grad.contiguous()), None, None


class _ScatterSum(torch.autograd.Function):
    """Rows of ``src`` summed into ``csr.size`` rows by ``index``; backward is the gather ``grad[index]``."""

    @staticmethod
    def forward(ctx, src: torch.Tensor, index: torch.Tensor, csr: Csr) -> torch.Tensor:
        ctx.index = index
        return csr.sum_into(src)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad.contiguous().index_select(0, ctx.index), None, None


def gather_rows(x: torch.Tensor, index: torch.Tensor, csr: Csr | None) -> torch.Tensor:
    """``x[index]`` (rows); with a ``csr`` of ``index`` over x's rows, a backward without atomics or sorts."""
    if csr is None:
        return x.index_select(0, index)
    return _GatherRows.apply(x, index, csr)


def scatter_sum(src: torch.Tensor, index: torch.Tensor, size: int, csr: Csr | None) -> torch.Tensor:
    """(size, ...) zeros with ``src``'s rows added at ``index`` (``index_add``'s order); presorted with a ``csr``."""
    if csr is None:
        return src.new_zeros((size,) + tuple(src.shape[1:])).index_add(0, index, src)
    return _ScatterSum.apply(src, index, csr)
