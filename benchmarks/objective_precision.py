"""The objective's two terms at one loss precision after another: time per call (forward + the gradients the fused
terms form) and error against a float64 reference, in one printed line.

    python benchmarks/objective_precision.py --device cuda            # Self-StrAE-sized English batch (defaults)
    python benchmarks/objective_precision.py --device cpu --rows 512 --vocab 2000 --pairs 500   # plumbing

Why: a Self-StrAE step on a GPU is bound by these products in fp32 (~1 TFLOP per English batch of 512 sentences;
21 of its 49 ms on an H100), which run on CUDA cores. ``tf32`` puts them on TF32 tensor cores (10-bit mantissa
inputs, fp32 accumulation). This prints, per precision (fp32, tf32), ms per call and the largest gradient error
relative to the largest gradient entry, so the speed and the accuracy are read together. On a CPU ``tf32`` is fp32.
"""
from __future__ import annotations

import argparse
import functools
import math
import time

import torch

from strae import objectives
from strae.objectives.terms import leaf_cross_entropy, symmetric_contrastive
from strae.runtime import configure_float32_matmul

PRECISIONS = ("fp32", "tf32")  # the recipe's loss_precision values with fp32 tensors


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=16_384, help="leaves in the CE term (an English batch: ~16k)")
    parser.add_argument("--size", type=int, default=256, help="embedding size")
    parser.add_argument("--vocab", type=int, default=25_000)
    parser.add_argument("--pairs", type=int, default=15_700, help="internal nodes in the contrastive term")
    parser.add_argument("--temperature", type=float, default=0.2)
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated, of: fp32, tf32")
    parser.add_argument("--repeats", type=int, default=5)
    return parser


def matmul_precision(precision: str, device: torch.device):
    """The products' mode inside a term exactly as training sets it (``Objective.matmul_precision``)."""
    return objectives.create("ce", precision=precision, temperature=0.0).matmul_precision(device)


def cross_entropy_call(layer, x, y, precision: str, device: torch.device):
    with matmul_precision(precision, device):
        loss = leaf_cross_entropy(layer, x, y, bf16=False)
    return loss, torch.autograd.grad(loss, [x, *layer.parameters()])


def contrastive_call(a, b, temperature: float, precision: str, device: torch.device):
    with matmul_precision(precision, device):
        loss = symmetric_contrastive(a, b, temperature, bf16=False)
    return loss, torch.autograd.grad(loss, [a, b])


def relative_error(got, want) -> float:
    """The largest gradient error over the largest gradient entry, across the term's gradients."""
    worst = 0.0
    for g, w in zip(got, want):
        worst = max(worst, float((g.double() - w).abs().max() / w.abs().max().clamp_min(1e-300)))
    return worst


def timed(call, device: torch.device, repeats: int) -> float:
    call()  # warm-up (allocations, cuBLAS heuristics)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / repeats * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    precisions = args.precisions.split(",")
    if unknown := [p for p in precisions if p not in PRECISIONS]:
        parser.error(f"--precisions: unknown {', '.join(unknown)} (expected {', '.join(PRECISIONS)})")
    device = torch.device(args.device)
    configure_float32_matmul()  # full fp32 unless a precision asks otherwise, as training does
    torch.manual_seed(0)
    layer = torch.nn.Linear(args.size, args.vocab).to(device)
    # leaves and node embeddings of the scale the engine hands the terms (unit-ish rows)
    x = (torch.randn(args.rows, args.size, device=device) / math.sqrt(args.size)).requires_grad_()
    y = torch.randint(0, args.vocab, (args.rows,), device=device)
    a = torch.randn(args.pairs, args.size, device=device).requires_grad_()
    b = (a.detach() + 0.5 * torch.randn_like(a)).requires_grad_()  # positives near their anchors
    reference_layer = torch.nn.Linear(args.size, args.vocab).double().to(device)
    reference_layer.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    x64 = x.detach().double().requires_grad_()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    _, ce_want = cross_entropy_call(reference_layer, x64, y, "fp32", device)
    _, co_want = contrastive_call(a64, b64, args.temperature, "fp32", device)

    fields = []
    for precision in precisions:
        _, ce_got = cross_entropy_call(layer, x, y, precision, device)
        _, co_got = contrastive_call(a, b, args.temperature, precision, device)
        ce_ms = timed(functools.partial(cross_entropy_call, layer, x, y, precision, device), device, args.repeats)
        co_ms = timed(functools.partial(contrastive_call, a, b, args.temperature, precision, device), device,
                      args.repeats)
        fields.append(f"{precision}: ce {ce_ms:.2f} ms err {relative_error(ce_got, ce_want):.1e}, contrastive "
                      f"{co_ms:.2f} ms err {relative_error(co_got, co_want):.1e}")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"objective precision device={device.type}:{name} torch={torch.__version__} rows={args.rows} "
          f"size={args.size} vocab={args.vocab} pairs={args.pairs} | " + " | ".join(fields), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
