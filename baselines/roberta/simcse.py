"""`strae train-simcse`: unsupervised SimCSE continuation of a trained RoBERTa run (Gao et al. 2021).

Each sentence is encoded twice with dropout active; the two views are positives and the other sentences of the
batch are negatives: loss = cross-entropy over cos(h_i, h'_j) / temperature, target j = i.

Defaults = the SimCSE paper's unsupervised recipe (its repo's ``run_unsup_example.sh``; the Banyan paper says it used
"the default parameters and implementation for unsupervised RoBERTa training"):
  temperature 0.05, batch size 64, max sequence length 32, 1 epoch over 10^6 corpus sentences, lr 1e-5 (their
  RoBERTa-base value), AdamW without weight decay, linear decay from the peak lr with no warm-up (HF Trainer
  defaults), dropout 0.1 as the only augmentation.
One deliberate difference: SimCSE trains with the [CLS] token + MLP pooler; here the training pooler is the mean over
non-pad tokens, the same pooling used at evaluation (the Banyan paper evaluates all baselines by mean pooling).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from strae.io import read_json, sha256_file, write_json


def simcse_loss(model, ids: torch.Tensor, attention: torch.Tensor, temperature: float) -> tuple[torch.Tensor, float]:
    """Unsupervised SimCSE loss for one batch (two dropout passes in one forward); also returns top-1 accuracy."""
    from baselines.roberta.model import mean_pool

    doubled_ids = torch.cat([ids, ids])
    doubled_attention = torch.cat([attention, attention])
    hidden = model.roberta(input_ids=doubled_ids, attention_mask=doubled_attention).last_hidden_state
    pooled = mean_pool(hidden.float(), doubled_attention)
    first, second = pooled.chunk(2)
    logits = F.cosine_similarity(first.unsqueeze(1), second.unsqueeze(0), dim=-1) / temperature
    targets = torch.arange(len(ids), device=ids.device)
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    return F.cross_entropy(logits, targets), accuracy


def main(argv: list[str] | None = None) -> int:
    from baselines.roberta.data import batch_indices, collate, load_corpus
    from baselines.roberta.encoder import load_weights
    from baselines.roberta.train import (DivergedError, add_common_arguments, autocast_context, copy_tokenizer,
                                         corpus_provenance, finish_run, linear_warmup_decay, new_record,
                                         record_failure, run_steps)
    from strae.runtime import resolve_device, seed_everything
    from strae.tokenize import load_tokenizer

    parser = argparse.ArgumentParser(prog="strae train-simcse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--init", type=Path, required=True, help="completed `strae train-roberta` run directory")
    parser.add_argument("--data-dir", default=None, help="tokenised corpus (default: the --init run's corpus)")
    parser.add_argument("--setting", default="medium_mlm_simcse")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32, help="ids per sentence incl. <s> and </s>")
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=1_000_000,
                        help="sentences per epoch (SimCSE: 10^6 Wikipedia sentences); capped by the corpus size")
    parser.add_argument("--steps", type=int, default=None, help="override the step count (time-boxed runs)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    init_train = args.init / "train.json"
    if not (args.init / "model.pt").exists() or not init_train.exists():
        raise SystemExit(f"--init {args.init}: no model.pt/train.json (is the RoBERTa run completed?)")
    init_record = read_json(init_train)
    if init_record.get("status") != "completed":
        raise SystemExit(f"{init_train}: status {init_record.get('status')!r}, expected 'completed'")
    init_config = init_record["config"]
    language = init_record["run"]["language"]

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    autocast, precision = autocast_context(device, args.precision)
    tokenizer_path = args.init / "tokenizer.model"
    tokenizer = load_tokenizer(tokenizer_path)
    data_dir = None
    corpus_file = args.corpus
    if corpus_file is None:
        data_dir = args.data_dir or init_config.get("data_dir")
        if data_dir is None:
            corpus_file = init_config.get("corpus_file")
    corpus = load_corpus(data_dir, corpus_file, tokenizer, max_sentences=args.max_sentences)
    sentences_per_epoch = min(args.sentences, len(corpus))
    steps = args.steps or args.epochs * (sentences_per_epoch // args.batch_size)

    seed_everything(args.seed)
    shape, model = load_weights(args.init / "model.pt")
    model.to(device)
    special = shape.special
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(steps, 0))

    run_dir = args.out
    run_dir.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_path, run_dir)
    config = {
        "objective": "simcse_unsup", "init_run": str(args.init), "init_model_sha256": sha256_file(args.init / "model.pt"),
        "init_config": init_config, "shape": shape.to_dict(), "special_ids": special.to_dict(), "steps": steps,
        "lr": args.lr, "schedule": "linear decay to 0, no warm-up", "batch_size": args.batch_size,
        "max_length": args.max_length, "temperature": args.temperature, "epochs": args.epochs,
        "sentences_per_epoch": sentences_per_epoch, "pooler": "mean over non-pad tokens (train and eval)",
        "optimizer": {"name": "AdamW", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
        "clip_grad_norm": args.clip_grad_norm, "precision": precision,
        # the word encoder reads word contexts from this corpus (by default the pre-training corpus)
        "data_dir": data_dir, "corpus_file": corpus_file,
        "corpus": corpus_provenance(data_dir, corpus_file, "train", len(corpus)),
    }
    record = new_record(language=language, model="roberta_simcse", setting=args.setting, seed=args.seed,
                        config=config, device=device, precision=precision,
                        extra_provenance={"argv": list(argv or sys.argv[1:])})
    write_json(run_dir / "train.json", record)

    def compute_loss(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        # SimCSE's 10^6 sentences = here the first `sentences_per_epoch` corpus sentences (already a random sample),
        # visited in a seeded order
        indices = batch_indices(sentences_per_epoch, args.batch_size, args.seed, step)
        ids, attention = collate([corpus[int(i)] for i in indices], special, args.max_length)
        with autocast():
            loss, accuracy = simcse_loss(model, ids.to(device), attention.to(device), args.temperature)
        return loss, {"accuracy": accuracy}

    try:
        status = run_steps(run_dir=run_dir, record=record, model=model, optimizer=optimizer, scheduler=scheduler,
                           total_steps=steps, compute_loss=compute_loss, clip_grad_norm=args.clip_grad_norm,
                           checkpoint_every=args.checkpoint_every, log_every=args.log_every,
                           max_minutes=args.max_minutes, description=f"simcse {language} seed{args.seed}")
    except DivergedError as error:
        return record_failure(run_dir, record, str(error), args.record_failure)
    weights = {"shape": shape.to_dict(), "state_dict": model.state_dict(), "objective": "simcse_unsup"}
    return finish_run(run_dir, record, status, weights, {"model": "roberta_simcse", "objective": "simcse_unsup"})


if __name__ == "__main__":
    sys.exit(main())
