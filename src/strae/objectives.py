"""Training objectives of the Self-StrAE / Banyan family.

- ``leaf_cross_entropy``: reconstruction of leaf tokens through the (untied) dembedding Linear(E -> V).
  The vocabulary projection is the most expensive op of a CE step (a 512-sentence English batch has ~3.7k
  unique leaves x 25k pieces), so it runs as a fused, chunked op: logits are formed a block of rows at a time
  (bf16 matmul where the device supports it, fp32 softmax), and the gradients are computed in the same sweep
  and stashed for backward — the full (N, V) logits matrix never exists in fp32 and is never re-read.
- ``symmetric_contrastive``: SemEval-2024 Eq. 2 / Banyan Eq. 6. Row i of ``a`` is the positive of row i of ``b``;
  logits are cosine * exp(temperature) (the reference code's convention), averaged over both directions.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from strae.runtime import bf16_autocast_supported

# Rows of logits per block: 256 x 25k fp32 = 25 MB, about what stays in the last-level cache.
_ROW_BLOCK = 256


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """mean_i CE(x_i W^T (+ b), t_i); gradients are computed in forward (the loss is a scalar, so backward only
    scales them by the incoming gradient)."""

    @staticmethod
    def forward(ctx, x, weight, bias, targets, low_precision: bool):
        n = x.shape[0]
        compute = torch.bfloat16 if low_precision else x.dtype
        w = weight.to(compute)
        xc = x.to(compute)
        needs = ctx.needs_input_grad
        probs = torch.empty(n, weight.shape[0], dtype=compute, device=x.device)  # softmax - onehot, per row
        grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=x.device) if bias is not None else None
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        for start in range(0, n, _ROW_BLOCK):
            stop = min(n, start + _ROW_BLOCK)
            rows = torch.arange(stop - start, device=x.device)
            block_targets = targets[start:stop]
            logits = xc[start:stop] @ w.T
            if bias is not None:
                logits += bias.to(compute)
            if low_precision:
                # bf16 softmax (fp32 accumulation inside the kernel), about half the memory traffic of an fp32
                # one. The loss uses lse = max - log(p_max): p_max >= 1/V never underflows, unlike p_target.
                # Its precision is that of the bf16 logits it is computed from.
                block = torch.softmax(logits, dim=1)
                peak = logits.amax(dim=1).float()
                lse = peak - block.amax(dim=1).float().log()
                total += (lse - logits[rows, block_targets].float()).sum()
            else:
                target_logit = logits[rows, block_targets]
                peak = logits.amax(dim=1, keepdim=True)
                block = logits.sub_(peak).exp_()
                norm = block.sum(dim=1, keepdim=True)
                total += (norm.log().squeeze(1) + peak.squeeze(1) - target_logit).sum()
                block.div_(norm)
            block[rows, block_targets] -= 1.0
            if grad_bias is not None:
                grad_bias += block.sum(0, dtype=torch.float32)
            probs[start:stop] = block
        scale = 1.0 / n
        grad_x = (probs @ w).to(x.dtype).mul_(scale) if needs[0] else None
        grad_w = (probs.T @ xc).to(weight.dtype).mul_(scale) if needs[1] else None
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


def symmetric_contrastive(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """-1/(2M) sum_i [log softmax_row(A)_ii + log softmax_col(A)_ii], A_ij = cos(a_i, b_j) * exp(temperature)."""
    if a.shape[0] == 0:
        return a.sum() * 0.0
    scale = math.exp(temperature)
    logits = F.normalize(a, dim=-1, eps=1e-8) @ F.normalize(b, dim=-1, eps=1e-8).T * scale
    target = torch.arange(a.shape[0], device=a.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
