"""Dropout masks for the engine: fresh masks (``fast_dropout``) and *keyed* masks for the upward pass.

Both references induce trees on dropped-out embeddings: the merge cosines are taken between leaves that carry
embedding dropout and parents that carry composition dropout (B:src/models.py:95,100 + B:src/funcs.py:29;
S:src/models.py:180,215). For the graph trained to be the graph induced, the differentiable recompute must see
the very same masks. And for entangled structures one node is shared by every occurrence of its (left, right)
pair, so every occurrence must get the same mask (the reference computes each unique node once, so it has one).

strae induces per occurrence, so it derives each upward mask from a *key* that names the node: a leaf's key
hashes its token (entangled: one mask per unique token) or its occurrence (sentential: one mask per leaf), and a
parent's key hashes its children's keys, i.e. the subtree it spans. Masks are then a pure function of (step seed,
key): identical for every occurrence of one entangled node, cheap to recompute, and deterministic on any device.
Integer hashing stays inside int64 without overflow (32-bit values, 16-bit multiplier halves), so CPU and CUDA
agree bit for bit.
"""
from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_LEAF_SALT = 0x2545F491
_PAIR_SALT = 0x61C88647


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout drawing 16 random bits per element from 64-bit draws (4 elements per draw).

    Same semantics as ``F.dropout(x, p, training=True)`` up to a keep probability quantised to 1/65536; about
    3x cheaper on CPU, where generating one random number per element dominated the whole up/down pass.
    """
    if p <= 0.0:
        return x
    return x * dropout_mask(x.shape, p, x.device, x.dtype)


def dropout_mask(shape, p: float, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The multiplier ``fast_dropout`` applies (0 or 1/keep), drawn from torch's generator exactly as it draws it
    (so an engine that draws masks ahead, models/propagation.py, gets the same masks in the same order)."""
    n = int(torch.Size(shape).numel())
    if p <= 0.0:
        return torch.ones(shape, dtype=dtype, device=device)
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-2 ** 63, 2 ** 63 - 1)
    bits = draws.view(torch.int16)[:n].view(shape)
    keep = round((1.0 - p) * 65536)
    return (bits >= 32768 - keep).to(dtype).mul_(65536.0 / keep)


def _as_int32(value: int) -> int:
    """A 32-bit pattern as the signed int32 Python value torch accepts for an int32 tensor."""
    value &= _MASK32
    return value - (1 << 32) if value >= 1 << 31 else value


_M1, _M2 = _as_int32(0x7FEB352D), _as_int32(0x846CA68B)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """Chris Wellons' lowbias32 integer hash on int32 tensors (32-bit patterns; products wrap modulo 2^32).

    Right shifts are masked so they act as logical shifts on negative int32 values. ``hash32_reference`` is the
    same function in exact int64 arithmetic; a test checks they agree.
    """
    x = x.to(torch.int32)
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _M1
    x ^= (x >> 15) & 0x1FFFF
    x *= _M2
    x ^= (x >> 16) & 0xFFFF
    return x


def hash32_reference(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 in int64 without overflow (16-bit multiplier halves); returns values in [0, 2^32)."""
    def mul(v: torch.Tensor, constant: int) -> torch.Tensor:
        low, high = constant & 0xFFFF, constant >> 16
        return (v * low + (((v * high) & 0xFFFF) << 16)) & _MASK32

    x = x.long() & _MASK32
    x = x ^ (x >> 16)
    x = mul(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = mul(x, 0x846CA68B)
    return x ^ (x >> 16)


def leaf_keys(ids: torch.Tensor) -> torch.Tensor:
    """Keys of leaves named by ``ids`` (token ids for entangled structures, occurrence ids for sentential ones)."""
    return hash32(ids.to(torch.int32) + _as_int32(_LEAF_SALT))


def pair_keys(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Key of the parent of (left, right): order-sensitive, so (a, b) and (b, a) are different nodes."""
    return hash32(hash32(left ^ _as_int32(_PAIR_SALT)) + right)


def keep_scale(p: float) -> float:
    """The inverted-dropout scale of a kept element (keep probability quantised to 1/65536)."""
    return 65536.0 / round((1.0 - p) * 65536)


def keyed_keep(keys: torch.Tensor, p: float, seed: int, size: int) -> torch.Tensor:
    """(n, size) bool: which elements of the nodes ``keys`` survive dropout ``p`` under the step's ``seed``.

    Each element hash gives 32 bits, used as two 16-bit draws (one for an element of the first half of the
    vector, one for the second), so the keep probability is quantised to 1/65536 exactly like ``fast_dropout``.
    """
    keep = round((1.0 - p) * 65536)
    base = hash32(keys ^ _as_int32(seed))  # (n,)
    halves = (size + 1) // 2
    offsets = hash32(torch.arange(halves, device=keys.device, dtype=torch.int32))
    bits = hash32(base.unsqueeze(1) ^ offsets.unsqueeze(0))  # (n, halves): 32 random bits each
    threshold = 65536 - keep
    low = (bits & 0xFFFF) >= threshold
    high = ((bits >> 16) & 0xFFFF) >= threshold
    return torch.cat((low, high), dim=1)[:, :size]


def apply_keep(x: torch.Tensor, keep: torch.Tensor, p: float) -> torch.Tensor:
    return x * keep.to(x.dtype).mul_(keep_scale(p))
