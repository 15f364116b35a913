"""`strae train-roberta`: MLM pre-training of RoBERTa-medium from scratch on a language's corpus.

Paper schedule (Banyan appendix A): 200,000 steps, 10% linear warm-up, peak lr 5e-5, linear decay to 0; 15% masking
with 80/10/10 replacement. The paper does not state the batch size or optimiser details; it used the Transformers
library, so the Trainer defaults are used where the paper is silent (AdamW betas 0.9/0.999, eps 1e-8, weight decay 0,
gradient clipping at norm 1.0). Batch size defaults to 64 sentences. Everything is a flag and lands in train.json.

Speed without changing the objective: the step's sentences are packed several to a row with block-diagonal attention
(``--packing sentences``; ``none`` pads each to the step's longest), attention runs through torch's fused SDPA with
the relative-position scores as its additive mask (``--attention eager`` is the explicit reference), bf16 autocast
where the device supports it (``--precision``), and ``--grad-accumulation N`` splits a step into N forward/backward
passes whose gradients sum to the full batch's exactly (the loss is normalised by the whole step's masked count).

The step loop (checkpointing, resume, time budget, divergence handling, train.json) is shared with
``baselines.roberta.simcse`` through :func:`run_steps`.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from tqdm import tqdm

from strae import paths
from strae.io import provenance, read_json, sha256_file
from strae.runs import (CHECKPOINT_FILE, RunRecord, TrainingFailed, copy_tokenizer, load_checkpoint, save_checkpoint,
                        save_weights)
from strae.runtime import (
    bf16_autocast_supported, capture_rng_states, describe_device, resolve_device, restore_rng_states, seed_everything,
)


def autocast_context(device: torch.device, precision: str) -> tuple[Callable[[], Any], str]:
    """(context factory, resolved precision). ``auto`` = bf16 autocast where it pays off, else fp32.

    Parameters and optimiser state stay fp32 (master weights) either way; autocast only lowers matmul inputs.
    """
    if precision == "auto":
        precision = "bf16" if bf16_autocast_supported(device) else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext, "fp32"
    if precision != "bf16":
        raise SystemExit(f"--precision {precision!r}: expected auto, fp32 or bf16")
    return (lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)), "bf16"


def linear_warmup_decay(total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """lr multiplier: 0 -> 1 over ``warmup_steps``, then linearly to 0 at ``total_steps`` (HF's linear schedule)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def mlm_token_losses(model, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """(cross-entropy per predicted position, its segment id): the vocabulary projection runs only on the ~15%
    predicted positions instead of all of them (the projection dominates CPU time). ``rows``: a ``data.Rows``."""
    from baselines.roberta.model import encode

    hidden = encode(model.roberta, rows.inputs, rows.segments)
    predicted = rows.predicted if rows.predicted is not None else rows.predicted_index()
    logits = model.lm_head(hidden.flatten(0, 1).index_select(0, predicted))
    losses = torch.nn.functional.cross_entropy(logits.float(), rows.labels.flatten()[predicted], reduction="none")
    return losses, rows.segments.flatten()[predicted]


def mlm_loss(model, rows) -> torch.Tensor:
    """Masked-LM cross-entropy averaged over the predicted positions: the value ``RobertaForMaskedLM(labels=...)``
    gives on the padded batch."""
    return mlm_token_losses(model, rows)[0].mean()


def run_steps(*, run_dir: Path, record: RunRecord, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
              scheduler: torch.optim.lr_scheduler.LRScheduler, total_steps: int,
              forward_backward: Callable[[int], tuple[torch.Tensor, dict[str, float]]], clip_grad_norm: float,
              checkpoint_every: int, log_every: int, max_minutes: float | None, description: str,
              signature: dict[str, Any] | None = None) -> str:
    """Run optimiser steps ``[start, total_steps)``, resuming from ``run_dir/checkpoint.pt`` when present.

    ``signature``: the settings a checkpoint must have been written with to be resumed (shape, batch, lr, ...); a
    checkpoint from other settings is an error naming the keys that differ, never a silent mix.

    ``forward_backward(step)`` computes the step's loss, calls ``backward`` itself (once per micro-batch under
    gradient accumulation) and returns (detached loss, metrics); this loop zeroes, clips and steps around it.

    Returns "completed" or "stopped" (time budget hit; checkpoint saved, rerun the same command to resume).
    Raises :class:`strae.runs.TrainingFailed` on a non-finite loss. ``record`` (train.json) is updated in place.
    """
    checkpoint_path = run_dir / CHECKPOINT_FILE
    step, elapsed_before = 0, 0.0
    if checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path)
        if state["total_steps"] != total_steps:
            raise SystemExit(
                f"{checkpoint_path}: written for {state['total_steps']} steps, this command asks for {total_steps}; "
                "use the same options to resume or a new --out"
            )
        saved = state.get("signature")
        if signature is not None and saved is None:
            raise SystemExit(f"{checkpoint_path}: written by an older strae that did not record its settings; "
                             "it cannot be resumed safely, use a new --out")
        if signature is not None and saved != signature:
            differ = sorted(k for k in set(signature) | set(saved or {}) if (saved or {}).get(k) != signature.get(k))
            raise SystemExit(f"{checkpoint_path}: written with other settings ({', '.join(differ)} differ); "
                             "use the same options to resume or a new --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng_states(state["rng"])
        step, elapsed_before = state["step"], state["elapsed_s"]
        record.history = state["history"]
        record.timings["resumed_from_step"] = step
        print(f"resuming {run_dir} at step {step}/{total_steps}", file=sys.stderr)

    def checkpoint(now_elapsed: float) -> None:
        save_checkpoint(checkpoint_path, dict(
            model=model.state_dict(), optimizer=optimizer.state_dict(), scheduler=scheduler.state_dict(),
            rng=capture_rng_states(), step=step, total_steps=total_steps, elapsed_s=now_elapsed,
            history=record.history, signature=signature))
        record.timings.update(steps_done=step, train_seconds=round(now_elapsed, 1))
        record.to_disk(run_dir)

    started = time.monotonic()
    deadline = started + max_minutes * 60 if max_minutes is not None else None
    window_loss, window_steps, window_start = 0.0, 0, time.monotonic()
    model.train()
    status = "completed"
    with tqdm(total=total_steps, initial=step, desc=description, dynamic_ncols=True, mininterval=5) as bar:
        while step < total_steps:
            optimizer.zero_grad(set_to_none=True)
            loss, metrics = forward_backward(step)
            if not torch.isfinite(loss):
                raise TrainingFailed(f"non-finite loss {loss.item()} at step {step}")
            if clip_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            window_loss += loss.item()
            window_steps += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if step % log_every == 0 or step == total_steps:
                now = time.monotonic()
                record.history.append({
                    "step": step, "loss": window_loss / window_steps, "lr": scheduler.get_last_lr()[0],
                    "steps_per_s": window_steps / max(now - window_start, 1e-9), **metrics,
                })
                window_loss, window_steps, window_start = 0.0, 0, now
            if step % checkpoint_every == 0 and step < total_steps:
                checkpoint(elapsed_before + time.monotonic() - started)
            if deadline is not None and time.monotonic() > deadline and step < total_steps:
                status = "stopped"
                break
    total_elapsed = elapsed_before + time.monotonic() - started
    checkpoint(total_elapsed)
    record.timings["steps_per_s"] = round(step / max(total_elapsed, 1e-9), 4)
    return status


def finish_run(run_dir: Path, record: RunRecord, status: str, weights: dict[str, Any], encoder_fields: dict) -> int:
    """Write model.pt, train.json and (last) encoder.json for a completed run; report a stopped one."""
    from strae.encode import write_encoder_manifest

    if status == "stopped":
        record.blocks["stopped_reason"] = "time budget (--max-minutes) reached; rerun the same command to resume"
        record.to_disk(run_dir)
        print(f"{run_dir}: stopped at step {record.timings['steps_done']} (time budget); resumable", file=sys.stderr)
        return 0
    save_weights(run_dir, weights)
    record.status = "completed"
    record.to_disk(run_dir)
    write_encoder_manifest(run_dir, "roberta", **encoder_fields)
    return 0


def new_record(*, language: str, model: str, setting: str, seed: int, config: dict[str, Any],
               device: torch.device, precision: str, extra_provenance: dict[str, Any]) -> RunRecord:
    return RunRecord(
        language=language, model=model, setting=setting, seed=seed, config=config,
        timings={"device": describe_device(device), "precision": precision, "torch_threads": torch.get_num_threads()},
        provenance=provenance(**extra_provenance),
    )


def corpus_provenance(data_dir: str | None, corpus_file: str | None, split: str, n_sentences: int) -> dict[str, Any]:
    """Where the training sentences came from (paths as given and resolved, meta/sha256 where cheap)."""
    info: dict[str, Any] = {"n_sentences": n_sentences, "split": split}
    if corpus_file is not None:
        info.update(kind="text", path=str(corpus_file), resolved=str(Path(corpus_file).resolve()),
                    sha256=sha256_file(corpus_file))
    else:
        directory = Path(data_dir)
        info.update(kind="tokenized", path=str(data_dir), resolved=str(directory.resolve()))
        meta = directory / f"{split}.json"
        if meta.exists():
            info["meta"] = read_json(meta)
    return info


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="run directory")
    parser.add_argument("--corpus", default=None, help="UTF-8 text file, one sentence per line (instead of --data-dir)")
    parser.add_argument("--max-sentences", type=int, default=None, help="read at most this many --corpus lines")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", default="auto", help="auto (bf16 autocast where supported) | fp32 | bf16")
    parser.add_argument("--checkpoint-every", type=int, default=1000, help="steps between resumable checkpoints")
    parser.add_argument("--log-every", type=int, default=50, help="steps per train.json history entry")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="stop (checkpointed, resumable) after this much wall time")
    parser.add_argument("--clip-grad-norm", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--record-failure", action="store_true", help="exit 0 on divergence (recorded as failed)")


def main(argv: list[str] | None = None) -> int:
    from baselines.roberta.data import collate, load_corpus, mask_for_mlm, pack, padded_rows
    from baselines.roberta.model import (ATTENTION_IMPLEMENTATIONS, SHAPES, RobertaShape, build_mlm_model,
                                         non_embedding_parameter_count)
    from strae.data.batching import batch_at_step
    from strae.data.tokenizer import load_tokenizer

    parser = argparse.ArgumentParser(prog="strae train-roberta", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", required=True)
    parser.add_argument("--resources-dir", default=paths.DEFAULT_RESOURCES,
                        help="the config's data.resources_dir: where --data-dir and --tokenizer default to")
    parser.add_argument("--data-dir", default=None, help="tokenised corpus (default <resources>/tokenized/LANG)")
    parser.add_argument("--tokenizer", default=None, help="SentencePiece model (default <resources>/tokenizers/LANG.model)")
    parser.add_argument("--setting", default="medium_mlm", help="run label (run-directory level under roberta/)")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per optimiser step (effective batch)")
    parser.add_argument("--max-length", type=int, default=128,
                        help="ids per sentence incl. <s> and </s> (longer ones truncated); also the packed row length")
    parser.add_argument("--mask-probability", type=float, default=0.15)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="table6",
                        help="table6: hidden 256, Banyan Table 6's ≈10M (default); turc_medium: hidden 512 (25.2M)")
    parser.add_argument("--layers", type=int, default=None, help="override the shape's layer count")
    parser.add_argument("--heads", type=int, default=None, help="override the shape's attention heads")
    parser.add_argument("--hidden", type=int, default=None, help="override the shape's hidden size")
    parser.add_argument("--ffn", type=int, default=None, help="override the shape's feed-forward size")
    parser.add_argument("--packing", choices=("sentences", "none"), default="sentences",
                        help="sentences: several per row, block-diagonal attention; none: pad each to the longest")
    parser.add_argument("--grad-accumulation", type=int, default=1,
                        help="forward/backward passes per step (the effective batch stays --batch-size)")
    parser.add_argument("--attention", choices=ATTENTION_IMPLEMENTATIONS, default="sdpa",
                        help="sdpa: fused kernel, position scores as its additive mask; eager: explicit softmax")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.grad_accumulation < 1:
        raise SystemExit(f"--grad-accumulation {args.grad_accumulation}: must be >= 1")
    if args.max_length < 3:
        raise SystemExit(f"--max-length {args.max_length}: must be >= 3 (<s>, one piece, </s>)")

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    autocast, precision = autocast_context(device, args.precision)
    tokenizer_path = Path(args.tokenizer or paths.tokenizer_model(args.lang, args.resources_dir))
    if not tokenizer_path.is_file():
        raise SystemExit(f"--tokenizer {tokenizer_path}: not found (run `strae tokenizer` for {args.lang} first)")
    tokenizer = load_tokenizer(tokenizer_path)
    data_dir = None if args.corpus else (args.data_dir or paths.tokenized_dir(args.lang, args.resources_dir))
    corpus = load_corpus(data_dir, args.corpus, tokenizer, max_sentences=args.max_sentences)

    dims = dict(SHAPES[args.shape])
    for key, value in (("num_hidden_layers", args.layers), ("num_attention_heads", args.heads),
                       ("hidden_size", args.hidden), ("intermediate_size", args.ffn)):
        if value is not None:
            dims[key] = value
    shape = RobertaShape(n_pieces=tokenizer.vocab_size, max_position_embeddings=max(514, args.max_length), **dims)
    special = shape.special
    seed_everything(args.seed)
    model = build_mlm_model(shape, attention=args.attention).to(device)
    warmup_steps = int(round(args.warmup_fraction * args.steps))
    # fused AdamW on CUDA: one kernel for all parameters instead of several per tensor (same update rule)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=args.weight_decay, fused=device.type == "cuda" or None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(args.steps, warmup_steps))

    run_dir = args.out
    run_dir.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_path, run_dir)
    config = {
        "objective": "mlm", "shape_name": args.shape, "shape": shape.to_dict(), "special_ids": special.to_dict(),
        "steps": args.steps,
        "warmup_steps": warmup_steps, "lr": args.lr, "schedule": "linear warm-up then linear decay to 0",
        "optimizer": {"name": "AdamW", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": args.weight_decay,
                      "fused": device.type == "cuda"},
        "batch_size": args.batch_size, "max_length": args.max_length, "mask_probability": args.mask_probability,
        "mask_replacement": {"mask": 0.8, "random": 0.1, "keep": 0.1}, "clip_grad_norm": args.clip_grad_norm,
        "packing": args.packing, "grad_accumulation": args.grad_accumulation, "attention": args.attention,
        "precision": precision, "data_dir": data_dir, "corpus_file": args.corpus,
        "corpus": corpus_provenance(data_dir, args.corpus, "train", len(corpus)),
        "tokenizer": {"path": str(tokenizer_path), "sha256": sha256_file(tokenizer_path)},
        # Banyan Table 6's convention: no embedding matrices, no LM head
        "non_embedding_parameters": non_embedding_parameter_count(model.roberta),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    record = new_record(language=args.lang, model="roberta", setting=args.setting, seed=args.seed, config=config,
                        device=device, precision=precision, extra_provenance={"argv": list(argv or sys.argv[1:])})
    record.to_disk(run_dir)

    def forward_backward(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        indices = batch_at_step(len(corpus), args.batch_size, args.seed, step)
        ids, attention = collate([corpus[int(i)] for i in indices], special, args.max_length)
        # masking depends only on (seed, step) and is drawn on the padded layout, so resumed runs and both packing
        # modes predict exactly the same positions
        generator = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        inputs, labels = mask_for_mlm(ids, special, generator, args.mask_probability)
        rows = (pack(inputs, labels, special, args.max_length) if args.packing == "sentences"
                else padded_rows(inputs, labels, special))
        n_predicted = int((labels != -100).sum())
        total = torch.zeros((), device=device)
        for chunk in rows.chunks(args.grad_accumulation):
            with autocast():
                losses, _ = mlm_token_losses(model, chunk.to(device))
            # the whole step's mean: accumulated gradients equal the single-pass gradient
            chunk_loss = losses.sum() / n_predicted
            chunk_loss.backward()
            total += chunk_loss.detach()
        return total, {"tokens": int(attention.sum()), "rows": len(rows), "row_ids": int(rows.inputs.numel())}

    try:
        status = run_steps(run_dir=run_dir, record=record, model=model, optimizer=optimizer, scheduler=scheduler,
                           total_steps=args.steps, forward_backward=forward_backward,
                           clip_grad_norm=args.clip_grad_norm, checkpoint_every=args.checkpoint_every,
                           log_every=args.log_every, max_minutes=args.max_minutes,
                           description=f"roberta-mlm {args.lang} seed{args.seed}",
                           signature={"weight_decay": args.weight_decay,
                                      **{key: config[key] for key in ("shape", "batch_size", "max_length", "lr",
                                                                      "warmup_steps", "mask_probability")}})
    except TrainingFailed as error:
        return record.fail(run_dir, str(error), args.record_failure)
    weights = {"shape": shape.to_dict(), "state_dict": model.state_dict(), "objective": "mlm"}
    return finish_run(run_dir, record, status, weights, {"model": "roberta", "objective": "mlm"})


if __name__ == "__main__":
    sys.exit(main())
