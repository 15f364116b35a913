"""Which engine runs the no-grad greedy induction: the batched torch loop (``trees.induce``) or one Triton kernel.

``trees.induce`` is one Python iteration per merge step (~20 small kernels each); on a GPU a Banyan batch spends
most of its forward launching them. ``induce_fused`` runs every sentence's merges in ONE kernel launch
(``induce_kernel.py``, one program per sentence) and returns the same ``Induction`` in the same node numbering.
Only the induction is fused: the differentiable recompute (``StraeModel.propagate``) is unchanged.

The setting ``induction_kernel``: ``torch`` | ``triton`` | ``auto`` (triton on CUDA when triton imports and a
first small batch gives the torch path's trees, torch otherwise - on CPU triton is never imported, so the CPU
path is exactly the torch one). Triton's interpreter (``TRITON_INTERPRET=1``) runs the kernel on the CPU: that
is how the tests check it, and it is a correctness path, not a speed path.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from strae.models.dropout import _as_int32, keep_scale
from strae.models.trees import Induction, InductionDropout, PackedBatch, _normalize, leaf_dropout, merge_schedule
from strae.models.trees import induce as induce_torch
from strae.runtime import host_to_device_many

INDUCTION_KERNELS = ("auto", "torch", "triton")
# Longer sentences fall back to the torch loop: the per-slot vectors live in registers (T_B = next power of 2).
MAX_SLOTS = 1024


@dataclass(frozen=True)
class KernelChoice:
    requested: str
    used: str
    reason: str

    def record(self) -> dict[str, Any]:
        """What train.json's provenance records about the induction engine."""
        record = {"requested": self.requested, "used": self.used, "reason": self.reason}
        if self.used == "triton":
            import triton
            record["triton"] = triton.__version__
            record["interpreter"] = interpreting()
        return record


def fell_back(choice: dict[str, Any] | None) -> bool:
    """Whether a recorded engine choice (``KernelChoice.record()``, train.json's provenance: the induction's or the
    Triton levels') is a Triton engine that failed its first-use check and runs torch instead: correct, but on a GPU
    ~2-25x slower, so `strae train` warns and the campaign summary says so."""
    return (isinstance(choice, dict) and choice.get("used") == "torch"
            and "first-use check" in str(choice.get("reason")))


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_unavailable(device: torch.device) -> str | None:
    """Why the Triton induction cannot run on ``device`` (None: it can)."""
    if device.type != "cuda" and not interpreting():
        return (f"device {device.type}: the Triton induction runs on CUDA (TRITON_INTERPRET=1 runs it on the CPU "
                "interpreter, for tests only)")
    try:
        import triton  # noqa: F401
    except ImportError as error:
        return f"triton does not import ({error})"
    return None


def choose_kernel(requested: str, device: torch.device, functions: nn.Module) -> KernelChoice:
    """Resolve the ``induction_kernel`` setting for ``device`` (raises ValueError when ``triton`` cannot run)."""
    if requested not in INDUCTION_KERNELS:
        raise ValueError(f"induction_kernel {requested!r} is not one of {', '.join(INDUCTION_KERNELS)}")
    if requested == "torch":
        return KernelChoice(requested, "torch", "requested")
    if requested == "auto" and device.type != "cuda":  # without importing triton: CPU runs stay as they were
        return KernelChoice(requested, "torch", f"auto: device {device.type} (the Triton induction is for CUDA)")
    problem = triton_unavailable(device)
    if compose_operands(functions) is None:
        problem = f"no fused composition for {type(functions).__name__}"
    if requested == "triton":
        if problem:
            raise ValueError(f"induction_kernel triton: {problem}; use auto or torch")
        return KernelChoice(requested, "triton", "requested")
    if problem:
        return KernelChoice(requested, "torch", f"auto: {problem}")
    mismatch = self_check(functions, device)
    if mismatch:
        return KernelChoice(requested, "torch", f"auto: the Triton induction failed its first-use check: {mismatch}")
    return KernelChoice(requested, "triton", "auto: CUDA, triton imports, first-use check passed")


def self_check(functions: nn.Module, device: torch.device) -> str | None:
    """Induce one small fixed batch with both engines (with keyed dropout); None if the trees agree."""
    generator = torch.Generator().manual_seed(0)  # not the global RNG: training stays seeded as before
    lengths = [9, 1, 2, 6, 5, 9, 3]
    try:
        leaves = torch.rand(sum(lengths), functions.k * functions.u, generator=generator).sub_(0.5).to(device)
        tokens = torch.randint(0, 5, (sum(lengths),), generator=generator).to(device)
        packed = PackedBatch(tokens=tokens, lengths=lengths, offsets=np.concatenate(([0], np.cumsum(lengths))))
        dropout = InductionDropout(seed=12345, leaf_p=0.1, function_p=0.1, leaf_ids=tokens)
        with torch.no_grad():
            expected = induce_torch(leaves, packed, functions.compose, dropout)
            got = induce_fused(leaves, packed, functions, dropout)
        return compare(expected, got)
    except Exception as error:  # a compiler, driver or device failure must not stop training: fall back, say why
        return f"{type(error).__name__}: {error}"


def compare(expected: Induction, got: Induction, atol: float = 1e-5) -> str | None:
    """None if ``got`` is the same induction as ``expected`` (trees equal, embeddings within ``atol``)."""
    for name in ("left", "right", "height", "roots", "span_start", "span_end"):
        if not torch.equal(getattr(expected, name), getattr(got, name)):
            return f"{name} differs"
    if (expected.keep is None) != (got.keep is None) or (expected.keep is not None
                                                         and not torch.equal(expected.keep, got.keep)):
        return "keep masks differ"
    if not torch.allclose(expected.up, got.up, rtol=atol, atol=atol):
        return f"up embeddings differ by up to {float((expected.up - got.up).abs().max()):.3g}"
    return None


def compose_operands(functions: nn.Module) -> tuple[bool, torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(linear?, left operand, right operand, bias) of the composition (each functions class states its own,
    ``compose_operands()``), or None if it has no fused form."""
    operands = getattr(functions, "compose_operands", None)
    return operands() if operands is not None else None


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _warps(slots: int) -> int:
    """One warp per sentence while it fits: a merge step is ~10 reductions over the slots and the embedding, and
    within one warp each is a few shuffles with no block-wide barrier. ptxas for sm_90 (triton 3.9): 1 warp uses
    ~200 registers, no spills, for slots <= 256 (Banyan k128 u2 and Self-StrAE k16 u16 alike); 512 slots reach the
    register limit, so wider batches take 4 warps. Chosen from register counts, not timed (no GPU here)."""
    return 1 if slots <= 256 else 4


@torch.no_grad()
def induce_fused(leaf_embeddings: torch.Tensor, packed: PackedBatch, functions: nn.Module,
           dropout: InductionDropout | None = None) -> Induction:
    """``trees.induce`` with the merge loop in one Triton kernel; the torch loop for what it does not cover
    (non-fp32 embeddings, sentences longer than ``MAX_SLOTS - 1``, compositions without a fused form)."""
    operands = compose_operands(functions)
    slots = _pow2(max(packed.lengths) + 1)
    if operands is None or leaf_embeddings.dtype != torch.float32 or slots > MAX_SLOTS:
        return induce_torch(leaf_embeddings, packed, functions.compose, dropout)
    # Imported here, not at the top: importing it imports triton, which CPU runs never need. `strae export` copies
    # it with the rest of the engine (this line becomes a relative import), so an exported model uses it on CUDA too.
    from strae.models.induce_kernel import induce_kernel

    linear, w_left, w_right, bias = operands
    device, batch = leaf_embeddings.device, len(packed.lengths)
    n_leaves, emb = leaf_embeddings.shape
    n_internal = n_leaves - batch
    leaf_embeddings, keys, keep = leaf_dropout(leaf_embeddings.contiguous(), dropout, n_leaves + n_internal)
    up = torch.cat((leaf_embeddings, leaf_embeddings.new_empty(n_internal, emb)))
    # The first similarities exactly as the torch loop takes them (packed neighbours, across sentences too).
    unit = _normalize(leaf_embeddings)
    adjacent = (unit[:-1] * unit[1:]).sum(-1) if n_leaves > 1 else unit.new_zeros(1)
    leaf_rows = torch.arange(n_leaves, device=device)
    span_start = torch.cat((leaf_rows, leaf_rows.new_empty(n_internal)))
    span_end = span_start.clone()
    # Launch arguments must be real allocations even where a batch has no merges (or no dropout).
    # left, right, height; rows of an even width, so each row starts 16-byte aligned whatever n_internal (Triton
    # specialises the kernel on its pointers' alignment: odd widths compiled a second variant mid-run)
    width = max(n_internal, 1)
    merges = torch.empty(3, width + width % 2, dtype=torch.long, device=device)
    roots = torch.empty(batch, dtype=torch.long, device=device)
    scratch = torch.zeros(1, dtype=torch.int32, device=device)
    function_p = dropout.function_p if dropout is not None else 0.0
    induce_kernel[(batch,)](
        up, adjacent.contiguous(), keys if keys is not None else scratch,
        (keep if keep is not None else scratch).view(torch.uint8), *_schedule(packed, device),
        merges[0], merges[1], merges[2], span_start, span_end, roots, w_left, w_right, bias,
        n_leaves, _as_int32(dropout.function_seed) if dropout is not None else 0,
        65536 - round((1.0 - function_p) * 65536), keep_scale(function_p),  # keyed_keep's threshold and scale
        K=functions.k, U=functions.u, E=emb, HALVES=(emb + 1) // 2, K_B=_pow2(functions.k), U_B=_pow2(functions.u),
        T_B=slots, LINEAR=linear, DROPOUT=dropout is not None, num_warps=_warps(slots))
    return Induction(n_leaves=n_leaves, left=merges[0, :n_internal], right=merges[1, :n_internal],
                     height=merges[2, :n_internal], up=up, roots=roots, span_start=span_start, span_end=span_end,
                     keep=keep, dropout=dropout)


def _schedule(packed: PackedBatch, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Per program p (the p-th sentence of the length-sorted order): its first packed row, length and batch
    index; and per step the id of its first merge, so that program p's merge at step s is step_base[s] + p."""
    order, active_counts = merge_schedule(packed.lengths)
    step_base = np.zeros(max(len(active_counts), 1), dtype=np.int64)
    np.cumsum(active_counts[:-1], out=step_base[1:len(active_counts)])
    lengths = [packed.lengths[b] for b in order]
    return tuple(host_to_device_many([packed.offsets[:-1][order],  # int64 already; the fancy index copies
                                      np.asarray(lengths, dtype=np.int32), np.asarray(order, dtype=np.int32),
                                      step_base], device))
