"""The loss terms the objectives combine (``strae.objectives``), and the matrix products each one costs.

- ``leaf_cross_entropy``: reconstruction of leaf tokens through the (untied) dembedding Linear(E -> V).
  The vocabulary projection is the most expensive op of a CE step (a 512-sentence English batch has ~3.7k
  unique leaves x 25k pieces), so it runs as a fused, chunked op: logits are formed a block of rows at a time
  (bf16 matmul where the device supports it, fp32 softmax), and the gradients are computed in the same sweep
  and stashed for backward — the full (N, V) logits matrix never exists in fp32 and is never re-read.
- ``symmetric_contrastive``: SemEval-2024 Eq. 2 / Banyan Eq. 6. Row i of ``a`` is the positive of row i of ``b``;
  logits are cosine * exp(temperature) (the reference code's convention), averaged over both directions.

Products in 3xTF32 (``loss_precision: tf32x3``, CUDA only): each fp32 operand is split into a TF32-exact high part
and the low rest, and a @ b = a_lo b_hi + a_hi b_lo + a_hi b_hi runs on TF32 tensor cores (the a_lo b_lo term,
~2^-21 relative, is left out) — about fp32's accuracy (fp32 accumulation over these products' 256 to 25k terms
rounds more than that) at tensor-core speed, where the plain fp32 products run on CUDA cores. A short product with
a large output (logits, similarities) runs as one product over the concatenated parts (inner dimension 3 x 256),
a long one with a small output (the gradients) as three.

``cross_entropy_gemm_shapes`` / ``contrastive_gemm_shapes``: the (m, k, n) of the products a term cannot avoid
(forward and both gradients), which the objectives declare and the throughput benchmark turns into a speed bound.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from strae.runtime import bf16_autocast_supported, tf32_products

# Rows of logits per block: on CPU 256 x 25k fp32 = 25 MB, about what stays in the last-level cache. On a GPU the
# block costs ~10 kernel launches whatever its size and the step is launch-bound (issue 10): 8192 rows (a whole
# English batch's ~3.7k leaves in one block; <= 0.8 GB of fp32 logits beside the (N, V) gradient buffer).
_ROW_BLOCK = 256
_ROW_BLOCK_GPU = 8192
_TF32_MASK = -8192  # 0xFFFFE000: the sign, exponent and 10 mantissa bits a TF32 input keeps


def tf32_split(x: torch.Tensor, in_place: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 ``x`` = high + low exactly: high is x with its lower 13 mantissa bits cleared (TF32-exact), low the
    rest (|low| < 2^-10 |x|; ``in_place``: x itself becomes low, one buffer fewer)."""
    high = (x.view(torch.int32) & _TF32_MASK).view(torch.float32)
    return high, (x.sub_(high) if in_place else x - high)


class _Products:
    """A term's matrix products, plain (in the operands' dtype) or 3xTF32 (``split``). An operand is split once per
    term (``parts``: (high, low)); a short product with a large output (logits, similarities: inner dimension 256)
    runs as ONE product of operands stacked once per term (``stacked``: [low high high] x [high low high] along the
    inner dimension), so its large output is written once; a long product with a small output (the gradients) as
    three products of the parts, small ones first, each added in fp32. Without ``split`` each is the operand itself
    and each product one plain product."""

    def __init__(self, split: bool):
        self.split = split

    def parts(self, x: torch.Tensor, in_place: bool = False):
        return tf32_split(x, in_place) if self.split else x

    def stacked(self, parts, left: bool) -> torch.Tensor:
        """(rows, 3k) from an operand's parts: the left factor of :meth:`short` as is, the right one transposed."""
        if not self.split:
            return parts
        high, low = parts
        return torch.cat([low, high, high] if left else [high, low, high], dim=1)

    @staticmethod
    def rows(x, start: int, stop: int):
        return tuple(p[start:stop] for p in x) if isinstance(x, tuple) else x[start:stop]

    @staticmethod
    def t(x):
        return tuple(p.T for p in x) if isinstance(x, tuple) else x.T

    def short(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None,
              bias: torch.Tensor | None = None) -> torch.Tensor:
        """a @ b (+ bias) of stacked operands, into ``out`` when given."""
        # TF32 tensor cores for the split products only (on CUDA; a CPU has none and multiplies the parts in fp32)
        with tf32_products(self.split and a.is_cuda):
            return torch.mm(a, b, out=out) if bias is None else torch.addmm(bias, a, b, out=out)

    def long(self, a, b) -> torch.Tensor:
        """a @ b of operands given as their parts."""
        if not self.split:
            return torch.mm(a, b)
        (a_high, a_low), (b_high, b_low) = a, b
        with tf32_products(a_high.is_cuda):
            result = torch.mm(a_low, b_high)
            result.addmm_(a_high, b_low)
            return result.addmm_(a_high, b_high)


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """mean_i CE(x_i W^T (+ b), t_i); gradients are computed in forward (the loss is a scalar, so backward only
    scales them by the incoming gradient)."""

    @staticmethod
    def forward(ctx, x, weight, bias, targets, low_precision: bool, split: bool = False):
        n = x.shape[0]
        compute = torch.bfloat16 if low_precision else x.dtype
        accumulate = torch.float32 if low_precision else x.dtype
        w = weight.to(compute)
        xc = x.to(compute)
        b = bias.to(compute) if bias is not None else None
        products = _Products(split)
        w_parts, x_parts = products.parts(w), products.parts(xc)
        x_stacked, w_stacked = products.stacked(x_parts, left=True), products.stacked(w_parts, left=False)
        needs = ctx.needs_input_grad
        probs = torch.empty(n, weight.shape[0], dtype=compute, device=x.device)  # softmax - onehot, per row
        grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=x.device) if bias is not None else None
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        row_block = _ROW_BLOCK if x.device.type == "cpu" else _ROW_BLOCK_GPU
        # One block of logits at a time, and as few sweeps over it as torch's kernels allow (on a GPU the (N, V)
        # sweeps are memory-bound: a Self-StrAE batch's is 1.65 GB of fp32 per sweep): the product with its bias
        # added in the GEMM, one max (which also says where it is), the softmax kernel writing straight into
        # ``probs``. The loss uses lse = max - log(p at the max): that p is 1 / sum exp(logit - max) >= 1/V, so it
        # never underflows (p_target can).
        logits = torch.empty(min(n, row_block), weight.shape[0], dtype=compute, device=x.device)
        for start in range(0, n, row_block):
            stop = min(n, start + row_block)
            rows = torch.arange(stop - start, device=x.device)
            block_targets = targets[start:stop]
            scores = logits[:stop - start]
            products.short(x_stacked[start:stop], w_stacked.T, out=scores, bias=b)
            peak, at_peak = scores.max(dim=1)
            block = probs[start:stop]
            torch.ops.aten._softmax.out(scores, 1, False, out=block)  # fp32 accumulation inside, even for bf16
            lse = peak.to(accumulate) - block[rows, at_peak].to(accumulate).log()
            total += (lse - scores[rows, block_targets].to(accumulate)).sum()
            block[rows, block_targets] -= 1.0
            if grad_bias is not None:
                grad_bias += block.sum(0, dtype=torch.float32)
        scale = 1.0 / n
        probs_parts = products.parts(probs, in_place=True)  # (split: probs becomes its low part, one buffer fewer)
        grad_x = products.long(probs_parts, w_parts).to(x.dtype).mul_(scale) if needs[0] else None
        grad_w = products.long(products.t(probs_parts), x_parts).to(weight.dtype).mul_(scale) if needs[1] else None
        if grad_bias is not None:
            grad_bias = grad_bias.to(bias.dtype).mul_(scale)
        ctx.save_for_backward(*(g if g is not None else torch.empty(0) for g in (grad_x, grad_w, grad_bias)))
        ctx.has = (grad_x is not None, grad_w is not None, grad_bias is not None)
        return (total * scale).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        saved = ctx.saved_tensors
        grads = [g * grad_output if has else None for g, has in zip(saved, ctx.has)]
        return grads[0], grads[1], grads[2], None, None, None


def cross_entropy_gemm_shapes(rows: int, size: int, vocab: int) -> list[tuple[int, int, int]]:
    """CE over ``rows`` leaves: logits = H W^T, dH = P W, dW = P^T H."""
    return [(rows, size, vocab), (rows, vocab, size), (vocab, rows, size)]


def contrastive_gemm_shapes(rows: int, size: int) -> list[tuple[int, int, int]]:
    """Contrastive over ``rows`` pairs: S = A B^T, dA = G B, dB = G^T A."""
    return [(rows, size, rows), (rows, rows, size), (rows, rows, size)]


def leaf_cross_entropy(dembedding: torch.nn.Linear, leaves: torch.Tensor, targets: torch.Tensor,
                       bf16: bool = True, split: bool = False) -> torch.Tensor:
    """Mean cross entropy of predicting ``targets`` from the leaves' downward embeddings (``split``: the training
    products in 3xTF32, for fp32 leaves; evaluation keeps plain products)."""
    if leaves.shape[0] == 0:
        return leaves.sum() * 0.0
    low_precision = bf16 and leaves.dtype == torch.float32 and bf16_autocast_supported(leaves.device)
    if not torch.is_grad_enabled():  # evaluation (dev loss): no gradients to stash
        compute = torch.bfloat16 if low_precision else leaves.dtype
        bias = None if dembedding.bias is None else dembedding.bias.to(compute)
        logits = F.linear(leaves.to(compute), dembedding.weight.to(compute), bias)
        return F.cross_entropy(logits.to(leaves.dtype), targets)
    return _FusedLinearCrossEntropy.apply(leaves, dembedding.weight, dembedding.bias, targets, low_precision,
                                          split and not low_precision and leaves.dtype == torch.float32)


class _FusedSymmetricContrastive(torch.autograd.Function):
    """Symmetric InfoNCE over unit rows ``a``, ``b`` with logits S = a b^T * scale, blocked by rows.

    |S| <= scale <= 40, so exp(S) cannot overflow: no running max is needed. Pass 1 forms exp(S) block by block
    (kept in the compute dtype) with its row and column sums; pass 2 turns each block into
    dL/dS = (softmax_row + softmax_col - 2I) / 2M and multiplies it out.
    The (M, M) matrix is never held in fp32 and never transposed.
    """

    @staticmethod
    def forward(ctx, a, b, scale: float, low_precision: bool, split: bool = False):
        m = a.shape[0]
        compute = torch.bfloat16 if low_precision else a.dtype
        accumulate = torch.float32 if low_precision else a.dtype
        ac, bc = (a * scale).to(compute), b.to(compute)  # S = (scale a) b^T
        products = _Products(split)
        a_parts, b_parts = products.parts(ac), products.parts(bc)
        a_stacked, b_stacked = products.stacked(a_parts, left=True), products.stacked(b_parts, left=False)
        expo = torch.empty(m, m, dtype=compute, device=a.device)
        row_sum = torch.empty(m, dtype=accumulate, device=a.device)
        col_sum = torch.zeros_like(row_sum)
        diag = torch.empty_like(row_sum)
        block_rows = _ROW_BLOCK * 4
        for start in range(0, m, block_rows):
            stop = min(m, start + block_rows)
            rows = torch.arange(stop - start, device=a.device)
            block = products.short(a_stacked[start:stop], b_stacked.T, out=expo[start:stop])  # in place: no copy
            diag[start:stop] = block[rows, rows + start].to(accumulate)
            block.exp_()  # |S| <= scale <= 40: exp cannot overflow, no max subtraction needed
            row_sum[start:stop] = block.sum(1, dtype=accumulate)
            col_sum += block.sum(0, dtype=accumulate)
        loss = 0.5 * ((row_sum.log() - diag).mean() + (col_sum.log() - diag).mean())
        inv_row, inv_col = (1.0 / row_sum).to(compute), (1.0 / col_sum).to(compute)
        grad_a = torch.empty_like(a)
        grad_b = torch.zeros(m, b.shape[1], dtype=accumulate, device=b.device)
        factor = 0.5 / m * scale
        for start in range(0, m, block_rows):
            stop = min(m, start + block_rows)
            rows = torch.arange(stop - start, device=a.device)
            # dL/dS = (softmax_row + softmax_col - 2I) / 2M, from exp(S) and the row / column sums.
            block = expo[start:stop] * (inv_row[start:stop].unsqueeze(1) + inv_col.unsqueeze(0))
            block[rows, rows + start] -= 2.0
            block_parts = products.parts(block, in_place=True)
            grad_a[start:stop] = products.long(block_parts, b_parts).to(a.dtype).mul_(factor)
            grad_b += products.long(products.t(block_parts), products.rows(a_parts, start, stop)).to(accumulate)
        ctx.save_for_backward(grad_a, grad_b.to(b.dtype).mul_(factor / scale))
        return loss.to(a.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        grad_a, grad_b = ctx.saved_tensors
        return grad_a * grad_output, grad_b * grad_output, None, None, None


def symmetric_contrastive(a: torch.Tensor, b: torch.Tensor, temperature: float,
                          bf16: bool = True, split: bool = False) -> torch.Tensor:
    """-1/(2M) sum_i [log softmax_row(A)_ii + log softmax_col(A)_ii], A_ij = cos(a_i, b_j) * exp(temperature)."""
    if a.shape[0] == 0:
        return a.sum() * 0.0
    scale = math.exp(temperature)
    a_unit, b_unit = F.normalize(a, dim=-1, eps=1e-8), F.normalize(b, dim=-1, eps=1e-8)
    if torch.is_grad_enabled() and scale <= 40.0:
        low_precision = bf16 and a.dtype == torch.float32 and bf16_autocast_supported(a.device)
        return _FusedSymmetricContrastive.apply(a_unit, b_unit, scale, low_precision,
                                                split and not low_precision and a.dtype == torch.float32)
    logits = a_unit @ b_unit.T * scale
    target = torch.arange(a.shape[0], device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
