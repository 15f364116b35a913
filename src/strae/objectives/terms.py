"""The loss terms the objectives combine (``strae.objectives``), and the matrix products each one costs.

- ``leaf_cross_entropy``: reconstruction of leaf tokens through the (untied) dembedding Linear(E -> V).
  The vocabulary projection is the most expensive op of a CE step (a 512-sentence English batch has ~3.7k
  unique leaves x 25k pieces), so it runs as a fused, chunked op: logits are formed a block of rows at a time
  (bf16 matmul where the device supports it, fp32 softmax), and each block's gradients are computed while the block
  is at hand and stashed for backward — no (N, V) matrix of logits or probabilities ever exists, only one block's.
- ``symmetric_contrastive``: SemEval-2024 Eq. 2 / Banyan Eq. 6. Row i of ``a`` is the positive of row i of ``b``;
  logits are cosine * exp(temperature) (the reference code's convention), averaged over both directions.

``cross_entropy_gemm_shapes`` / ``contrastive_gemm_shapes``: the (m, k, n) of the products a term cannot avoid
(forward and both gradients), which the objectives declare and the throughput benchmark turns into a speed bound.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from strae.runtime import bf16_autocast_supported

# Rows of logits per block: on CPU 256 x 25k fp32 = 25 MB, about what stays in the last-level cache. On a GPU the
# block costs ~10 kernel launches whatever its size and the step is launch-bound (issue 10): 8192 rows (a whole
# English batch's ~3.7k leaves in one block; <= 0.8 GB of fp32 logits, and as much again for its probabilities).
_ROW_BLOCK = 256
_ROW_BLOCK_GPU = 8192
# -log p_target straight from the softmax while p_target >= e^-60 (~1e-26, a normal fp32 with full precision);
# beyond, the row's loss is taken in the max form (_max_form_losses), which cannot underflow
_CE_MAX_DIRECT_LOSS = 60.0
# Rows of the contrastive's (M, M) exp(S) per block. The matrix itself is held whole (in the compute dtype); a block
# bounds pass 2's (rows, M) temporary. CPU: 1024. GPU: a whole English Self-StrAE batch (~15.7k internal nodes) in one
# block — with 1024-row blocks the term was ~16 blocks x ~10 launches per pass, and on an H100 it took 13.6 ms against
# its GEMMs' 7.9 ms (2026-11-26; the temporary is <= 16384 x M in the compute dtype, 1 GB for an English batch).
_CONTRASTIVE_BLOCK = 1024
_CONTRASTIVE_BLOCK_GPU = 16384


def _add_product(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """out += a @ b: inside the GEMM when the dtypes agree, else through a product in a's dtype (bf16 products
    summed into an fp32 gradient)."""
    if out.dtype == a.dtype:
        out.addmm_(a, b)
    else:
        out += torch.mm(a, b)


def _max_form_losses(scores: torch.Tensor, probs: torch.Tensor, targets: torch.Tensor,
                     accumulate: torch.dtype) -> torch.Tensor:
    """Per row lse - logit_target, with lse = max - log(p at the max): that p is 1 / sum exp(logit - max) >= 1/V,
    so it never underflows (p_target can). ``probs`` = softmax(scores), row for row."""
    peak, at_peak = scores.max(dim=1)
    at_peak_p = probs.gather(1, at_peak[:, None]).squeeze(1)
    return peak.to(accumulate) - at_peak_p.to(accumulate).log() - scores.gather(1, targets[:, None]).squeeze(1).to(
        accumulate)


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """mean_i CE(x_i W^T (+ b), t_i); gradients are computed in forward (the loss is a scalar, so backward only
    scales them by the incoming gradient)."""

    @staticmethod
    def forward(ctx, x, weight, bias, targets, low_precision: bool):
        n = x.shape[0]
        compute = torch.bfloat16 if low_precision else x.dtype
        accumulate = torch.float32 if low_precision else x.dtype
        w = weight.to(compute)
        xc = x.to(compute)
        b = bias.to(compute) if bias is not None else None
        needs = ctx.needs_input_grad
        # Gradients, accumulated block by block: d/dx row by row, d/dW and d/db summed over the blocks (in fp32
        # when the products are bf16). Until 2026-11-27 the blocks' softmax - onehot went into one (N, V) buffer
        # multiplied out after the loop: 1.65 GB of fp32 for a Self-StrAE English batch (16.5k leaves x 25k), written
        # once and read twice. Per block, the same products touch a block that is still in cache, and the buffer is
        # one block (measured on 2 CPU cores: the CE of 3.7k and 16.5k rows 5 % faster, peak memory down by N x V).
        grad_x = torch.empty(n, x.shape[1], dtype=compute, device=x.device) if needs[0] else None
        grad_w = torch.zeros(weight.shape, dtype=accumulate, device=x.device) if needs[1] else None
        grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=x.device) if bias is not None else None
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        row_block = _ROW_BLOCK if x.device.type == "cpu" else _ROW_BLOCK_GPU
        # One block of logits at a time, and as few sweeps over it as torch's kernels allow (on a GPU the (rows, V)
        # sweeps are memory-bound: a whole Banyan batch's is 0.4 GB of fp32 per sweep): the product with its bias
        # added in the GEMM, the softmax kernel writing straight into ``probs``, the loss in the max form (one max,
        # which also says where it is: _max_form_losses).
        # fp32 on a CPU: the loss from p_target directly, without the max sweep (~10 % of a block's time there);
        # a GPU keeps the max form, whose check for tiny probabilities would be a host sync
        on_cpu_fp32 = x.device.type == "cpu" and compute == torch.float32
        logits = torch.empty(min(n, row_block), weight.shape[0], dtype=compute, device=x.device)
        probs = torch.empty_like(logits)  # softmax - onehot of the block's rows
        for start in range(0, n, row_block):
            stop = min(n, start + row_block)
            rows = torch.arange(stop - start, device=x.device)
            block_targets = targets[start:stop]
            scores = logits[:stop - start]
            if b is not None:
                torch.addmm(b, xc[start:stop], w.T, out=scores)
            else:
                torch.mm(xc[start:stop], w.T, out=scores)
            block = probs[:stop - start]
            torch.ops.aten._softmax.out(scores, 1, False, out=block)  # fp32 accumulation inside, even for bf16
            if on_cpu_fp32:
                # -log p_target, unless p_target is too small to have full precision (then the max form)
                row_losses = block[rows, block_targets].log().neg_()
                tiny = row_losses > _CE_MAX_DIRECT_LOSS
                if bool(tiny.any()):  # a CPU reads this without waiting for anything
                    row_losses[tiny] = _max_form_losses(scores[tiny], block[tiny], block_targets[tiny], accumulate)
            else:
                row_losses = _max_form_losses(scores, block, block_targets, accumulate)
            total += row_losses.sum()
            block[rows, block_targets] -= 1.0
            if grad_bias is not None:
                grad_bias += block.sum(0, dtype=torch.float32)
            if grad_x is not None:
                torch.mm(block, w, out=grad_x[start:stop])
            if grad_w is not None:
                _add_product(grad_w, block.T, xc[start:stop])
        scale = 1.0 / n
        if grad_x is not None:
            grad_x = grad_x.to(x.dtype).mul_(scale)
        if grad_w is not None:
            grad_w = grad_w.to(weight.dtype).mul_(scale)
        if grad_bias is not None:
            grad_bias = grad_bias.to(bias.dtype).mul_(scale)
        ctx.save_for_backward(*(g if g is not None else torch.empty(0) for g in (grad_x, grad_w, grad_bias)))
        ctx.has = (grad_x is not None, grad_w is not None, grad_bias is not None)
        return (total * scale).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        saved = ctx.saved_tensors
        grads = [g * grad_output if has else None for g, has in zip(saved, ctx.has)]
        return grads[0], grads[1], grads[2], None, None


def cross_entropy_gemm_shapes(rows: int, size: int, vocab: int) -> list[tuple[int, int, int]]:
    """CE over ``rows`` leaves: logits = H W^T, dH = P W, dW = P^T H."""
    return [(rows, size, vocab), (rows, vocab, size), (vocab, rows, size)]


def contrastive_gemm_shapes(rows: int, size: int) -> list[tuple[int, int, int]]:
    """Contrastive over ``rows`` pairs: S = A B^T, dA = G B, dB = G^T A."""
    return [(rows, size, rows), (rows, rows, size), (rows, rows, size)]


def leaf_cross_entropy(dembedding: torch.nn.Linear, leaves: torch.Tensor, targets: torch.Tensor,
                       bf16: bool = True) -> torch.Tensor:
    """Mean cross entropy of predicting ``targets`` from the leaves' downward embeddings."""
    if leaves.shape[0] == 0:
        return leaves.sum() * 0.0
    low_precision = bf16 and leaves.dtype == torch.float32 and bf16_autocast_supported(leaves.device)
    if not torch.is_grad_enabled():  # evaluation (dev loss): no gradients to stash
        compute = torch.bfloat16 if low_precision else leaves.dtype
        bias = None if dembedding.bias is None else dembedding.bias.to(compute)
        logits = F.linear(leaves.to(compute), dembedding.weight.to(compute), bias)
        return F.cross_entropy(logits.to(leaves.dtype), targets)
    return _FusedLinearCrossEntropy.apply(leaves, dembedding.weight, dembedding.bias, targets, low_precision)


class _FusedSymmetricContrastive(torch.autograd.Function):
    """Symmetric InfoNCE over unit rows ``a``, ``b`` with logits S = a b^T * scale, blocked by rows.

    |S| <= scale <= 40, so exp(S) cannot overflow: no running max is needed. Pass 1 forms exp(S) block by block
    (kept in the compute dtype) with its row and column sums; pass 2 turns each block into
    dL/dS = (softmax_row + softmax_col - 2I) / 2M and multiplies it out.
    The (M, M) matrix is never held in fp32 and never transposed.
    """

    @staticmethod
    def forward(ctx, a, b, scale: float, low_precision: bool):
        m = a.shape[0]
        compute = torch.bfloat16 if low_precision else a.dtype
        accumulate = torch.float32 if low_precision else a.dtype
        ac, bc = (a * scale).to(compute), b.to(compute)  # S = (scale a) b^T
        expo = torch.empty(m, m, dtype=compute, device=a.device)
        row_sum = torch.empty(m, dtype=accumulate, device=a.device)
        col_sum = torch.zeros_like(row_sum)
        diag = torch.empty_like(row_sum)
        block_rows = _CONTRASTIVE_BLOCK if a.device.type == "cpu" else _CONTRASTIVE_BLOCK_GPU
        for start in range(0, m, block_rows):
            stop = min(m, start + block_rows)
            block = torch.mm(ac[start:stop], bc.T, out=expo[start:stop])  # formed in place: no block copy
            # the positives S_ii are the block's diagonal at offset ``start``: a strided view, not an index kernel
            # (on CUDA under deterministic algorithms an advanced-index write is a sort-based index_put)
            diag[start:stop] = block.diagonal(start).to(accumulate)
            block.exp_()  # |S| <= scale <= 40: exp cannot overflow, no max subtraction needed
            row_sum[start:stop] = block.sum(1, dtype=accumulate)
            col_sum += block.sum(0, dtype=accumulate)
        loss = 0.5 * ((row_sum.log() - diag).mean() + (col_sum.log() - diag).mean())
        inv_row, inv_col = (1.0 / row_sum).to(compute), (1.0 / col_sum).to(compute)
        grad_a = torch.empty(m, a.shape[1], dtype=compute, device=a.device)
        grad_b = torch.zeros(m, b.shape[1], dtype=accumulate, device=b.device)
        # 1/row_sum_i + 1/col_sum_j of a block, in one buffer reused by every block: a fresh (rows, M) temporary per
        # block (and a fresh product per block for each gradient) is, on a CPU, freshly mapped memory that the kernel
        # zeroes page by page. Reused buffers and products written into the gradients: the fused term at M = 20k on
        # 2 CPU cores 6.4-6.7 -> 5.8 s, at 12k 2.46 -> 2.17 s (2026-11-27), the same values. On a GPU, one launch
        # fewer per block (the gradient of b accumulates inside its GEMM).
        weights = torch.empty(min(m, block_rows), m, dtype=compute, device=a.device)
        factor = 0.5 / m * scale
        for start in range(0, m, block_rows):
            stop = min(m, start + block_rows)
            # dL/dS = (softmax_row + softmax_col - 2I) / 2M, from exp(S) and the row / column sums; in place (exp(S)
            # is read once more, here). The products write into the gradients (no per-block result buffers).
            block_weights = torch.add(inv_row[start:stop].unsqueeze(1), inv_col.unsqueeze(0),
                                      out=weights[:stop - start])
            block = expo[start:stop].mul_(block_weights)
            block.diagonal(start).sub_(2.0)
            torch.mm(block, bc, out=grad_a[start:stop])
            _add_product(grad_b, block.T, ac[start:stop])
        ctx.save_for_backward(grad_a.to(a.dtype).mul_(factor), grad_b.to(b.dtype).mul_(factor / scale))
        return loss.to(a.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        grad_a, grad_b = ctx.saved_tensors
        return grad_a * grad_output, grad_b * grad_output, None, None


def symmetric_contrastive(a: torch.Tensor, b: torch.Tensor, temperature: float,
                          bf16: bool = True) -> torch.Tensor:
    """-1/(2M) sum_i [log softmax_row(A)_ii + log softmax_col(A)_ii], A_ij = cos(a_i, b_j) * exp(temperature)."""
    if a.shape[0] == 0:
        return a.sum() * 0.0
    scale = math.exp(temperature)
    a_unit, b_unit = F.normalize(a, dim=-1, eps=1e-8), F.normalize(b, dim=-1, eps=1e-8)
    if torch.is_grad_enabled() and scale <= 40.0:
        low_precision = bf16 and a.dtype == torch.float32 and bf16_autocast_supported(a.device)
        return _FusedSymmetricContrastive.apply(a_unit, b_unit, scale, low_precision)
    logits = a_unit @ b_unit.T * scale
    target = torch.arange(a.shape[0], device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
