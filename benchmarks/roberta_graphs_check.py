"""Is ``strae train-roberta --cuda-graphs on`` the eager step on a GPU? One printed line, two checks:

    python benchmarks/roberta_graphs_check.py [--device cuda] [--steps 20] [--batch-size 64] [--layers 8]

1. ``same function``: one model trained ``--steps`` AdamW steps eagerly and a copy trained through the CUDA graphs on
   the same batches, dropout off, fp32 (no autocast, no TF32): the first step's gradients (largest difference
   relative to the largest gradient) and every step's loss (largest relative difference); rounding only: ``ok``
   below 1e-4 and 1e-3.
2. ``repeatable``: the graphed step twice from the same seed with dropout on: identical weights or not.
3. ``resumed``: the same, stopped half-way and continued with a new model, optimizer and graphs from the saved
   weights, AdamW state and CUDA generator (what a checkpoint holds): identical to the uninterrupted run or not.
Batches: random pieces with English-like lengths (as ``roberta_throughput.py`` without ``--data-dir``), packed into
rows of ``--max-length`` ids; masking seeded per step. CPU runs refuse ``--cuda-graphs`` (it needs CUDA).
"""
from __future__ import annotations

import argparse
import copy

import numpy as np
import torch

from baselines.roberta.data import collate, mask_for_mlm, pack
from baselines.roberta.graphs import GraphedMlm, to_bucket
from baselines.roberta.model import SHAPES, RobertaShape, build_mlm_model
from baselines.roberta.train import mlm_token_losses
from strae.runtime import capture_rng_states, describe_device, resolve_device, restore_rng_states, seed_everything

# tests stand in a CPU emulation of torch.cuda.make_graphed_callables to run this script's plumbing without a GPU
MAKE_GRAPHED = None


def batches(args: argparse.Namespace, special) -> list:
    rng = np.random.default_rng(0)
    lengths = np.clip(np.round(rng.lognormal(np.log(26), 0.6, (args.steps, args.batch_size))), 4, 126)
    out = []
    for step, row in enumerate(lengths):
        ids, _ = collate([rng.integers(0, args.vocab, int(n)) for n in row], special, args.max_length)
        inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(step))
        out.append((pack(inputs, labels, special, args.max_length), int((labels != -100).sum())))
    return out


def train(model, data, device, graphs: bool, special, max_length: int, optimizer=None):
    """(loss per step, the first step's gradients, the final weights, the optimizer)."""
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-3)
    graphed = GraphedMlm(model, device, "fp32", make_graphed=MAKE_GRAPHED) if graphs else None
    losses, first_grads = [], None
    for rows, n_predicted in data:
        optimizer.zero_grad(set_to_none=True)
        if graphed is not None:
            loss = graphed.loss(to_bucket(rows, special.pad, n_predicted, max_length))
        else:
            loss = mlm_token_losses(model, rows.to(device))[0].sum() / n_predicted
        loss.backward()
        losses.append(float(loss.detach()))
        if first_grads is None:
            first_grads = torch.cat([p.grad.flatten().float().cpu() if p.grad is not None
                                     else torch.zeros(p.numel()) for p in model.parameters()])
        optimizer.step()
    weights = {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}
    return losses, first_grads, weights, optimizer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=25000)
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dims = {**SHAPES["table6"], "num_hidden_layers": args.layers}
    torch.manual_seed(0)
    shape = RobertaShape(n_pieces=args.vocab, **dims)
    initial = build_mlm_model(shape)
    data = batches(args, shape.special)

    def fresh(train_mode: bool):
        model = copy.deepcopy(initial).to(device)
        return model.train() if train_mode else model.eval()

    eager_losses, eager_grads, *_ = train(fresh(False), data, device, False, shape.special, args.max_length)
    graphed_losses, graphed_grads, *_ = train(fresh(False), data, device, True, shape.special, args.max_length)
    grad_error = float((eager_grads - graphed_grads).abs().max() / eager_grads.abs().max())
    loss_error = max(abs(a - b) / abs(a) for a, b in zip(eager_losses, graphed_losses))
    ok = grad_error < 1e-4 and loss_error < 1e-3
    runs = []
    for _ in range(2):
        seed_everything(1)
        runs.append(train(fresh(True), data, device, True, shape.special, args.max_length)[2])
    repeat = max(float((runs[0][k] - runs[1][k]).abs().max()) for k in runs[0])
    # resume: the first half, then a new model, optimizer and graphs from its saved state (as a checkpoint holds
    # them: weights, AdamW state, the CUDA generator), the second half; the captures happen again after the resume
    seed_everything(1)
    half = len(data) // 2
    model = fresh(True)
    *_, optimizer = train(model, data[:half], device, True, shape.special, args.max_length)
    saved = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                           "rng": capture_rng_states(device)})
    del model, optimizer
    resumed = fresh(True)
    resumed.load_state_dict(saved["model"])
    optimizer = torch.optim.AdamW(resumed.parameters(), lr=1e-3)
    optimizer.load_state_dict(saved["optimizer"])
    restore_rng_states(saved["rng"], device)
    final = train(resumed, data[half:], device, True, shape.special, args.max_length, optimizer)[2]
    resume = max(float((runs[0][k] - final[k]).abs().max()) for k in final)
    print(f"roberta cuda-graphs check {describe_device(device)} torch {torch.__version__} table6 layers {args.layers} "
          f"batch {args.batch_size} steps {args.steps} | same function (dropout off, fp32): first-step gradients "
          f"max rel. diff {grad_error:.1e}, losses over {args.steps} steps max rel. diff {loss_error:.1e} "
          f"({eager_losses[0]:.3f} -> {eager_losses[-1]:.3f}) {'ok' if ok else 'DIFFERS'} | "
          f"repeatable (dropout on): {'identical' if repeat == 0 else f'differs (max {repeat:.2e})'} | "
          f"resumed at step {half}: {'identical' if resume == 0 else f'differs (max {resume:.2e})'}")


if __name__ == "__main__":
    main()
