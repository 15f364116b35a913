"""``strae train-multiview``: Quick-Thoughts-style contrastive training of the multi-view encoder (or CL).

    strae train-multiview --parses resources/parses/L --lang L --seed N --out DIR [--model ctl|cl]
                          [--max-sentences N] [--max-steps N] [--hidden 1000] [--embedding-dim 300] ...

Paper §4 defaults: Adam lr 5e-3, gradient clipping 5.0 (total norm), batch 100 consecutive sentences, one epoch,
20k most frequent tokens, embeddings 300, hidden 1000, Xavier weights and zero biases. Batches follow corpus order
(not shuffled): the other sentences of a batch are the negatives, as in Quick-Thoughts. A run trains on the
first ``--max-sentences`` kept sentences of the parse (the budget; the paper itself stopped after 4.6M of 78M
sentences) and can be capped at ``--max-steps``.

Run directory: ``vocab.json``, ``checkpoint.pt`` (every ``--checkpoint-every-steps`` steps: model, optimiser, RNG,
step, history; rerunning the same command resumes from it), ``model.pt`` (config + weights), ``parser.json`` (the
spaCy pipeline the parse used; the encoder parses eval sentences with the same one), ``train.json``, and
``encoder.json`` written last.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from baselines.multiview.data import Vocabulary, batch_at, count_context_pairs, load_parsed, select_training
from baselines.multiview.model import MODELS, MultiviewConfig, MultiviewModel
from baselines.multiview.parse import META_FILE
from strae.encode import write_encoder_manifest
from strae.io import provenance, read_json, write_json
from strae.runs import CHECKPOINT_FILE, RunRecord, TrainingFailed, load_checkpoint, save_checkpoint, save_weights
from strae.runtime import capture_rng_states, describe_device, resolve_device, restore_rng_states, seed_everything


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae train-multiview", description=__doc__.split("\n\n")[0])
    p.add_argument("--parses", required=True, type=Path, help="directory written by `strae parse-corpus`")
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (labels the run)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--model", choices=sorted(MODELS), default="ctl",
                   help="ctl: BiLSTM target vs Tree-LSTM context (the paper's model); cl: BiLSTM vs BiLSTM")
    p.add_argument("--vocab-size", type=int, default=20000)
    p.add_argument("--no-lowercase", dest="lowercase", action="store_false",
                   help="keep case in the vocabulary (default: lowercase tokens)")
    p.add_argument("--embedding-dim", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1000, help="sentence-vector size of each view")
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--clip-grad-norm", type=float, default=5.0)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--max-tokens", type=int, default=64, help="drop longer sentences (kept as context gaps)")
    p.add_argument("--sentences-per-book", type=int, default=None,
                   help="train on each book's first N kept sentences (all books contribute; corpus order kept)")
    p.add_argument("--max-sentences", type=int, default=None, help="then on the first N of those")
    p.add_argument("--max-steps", type=int, default=None, help="stop after N steps (recorded)")
    p.add_argument("--checkpoint-every-steps", type=int, default=50)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--setting", default=None, help="run label (default: the model name + hidden size)")
    p.add_argument("--record-failure", action="store_true", help="exit 0 after recording a failed run")
    p.add_argument("--quiet", action="store_true")
    return p


def setting_name(args: argparse.Namespace) -> str:
    return args.setting or f"{args.model}_h{args.hidden}_e{args.embedding_dim}"


def _recipe(args: argparse.Namespace) -> dict:
    return {k: getattr(args, k) for k in ("model", "vocab_size", "lowercase", "embedding_dim", "hidden", "lr",
                                          "clip_grad_norm", "batch_size", "max_tokens", "sentences_per_book", "max_sentences",
                                          "max_steps", "seed")}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    setting = setting_name(args)
    recipe = _recipe(args)
    previous = RunRecord.from_disk(out)
    if (out / "encoder.json").exists() and previous is not None and previous.status == "completed":
        if previous.config.get("recipe") == recipe:  # same command twice
            print(f"{out}: already trained (train.json status completed)")
            return 0
        raise SystemExit(f"{out}: holds a completed run with another recipe; use another --out or delete it")
    parse_meta = read_json(args.parses / META_FILE) if (args.parses / META_FILE).exists() else None
    if parse_meta is None:
        raise SystemExit(f"{args.parses / META_FILE}: not found; run `strae parse-corpus` first")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    seed_everything(args.seed)

    started = time.perf_counter()
    parsed = load_parsed(args.parses, args.max_tokens)
    corpus = select_training(parsed, args.max_sentences, args.sentences_per_book)
    vocab_path = out / "vocab.json"
    if vocab_path.exists():
        vocab = Vocabulary.from_dict(read_json(vocab_path))
    else:  # the most frequent tokens of the whole parse (the paper: of the corpus), not just the trained subset
        vocab = Vocabulary.build(parsed.tokens, args.vocab_size, args.lowercase)
        write_json(vocab_path, vocab.to_dict())
    write_json(out / "parser.json", parse_meta["parser"])
    config = MultiviewConfig(model=args.model, vocab_size=len(vocab.tokens), embedding_dim=args.embedding_dim,
                             hidden=args.hidden)
    model = MultiviewModel(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    n_batches = math.ceil(len(corpus) / args.batch_size)
    total_steps = n_batches if args.max_steps is None else min(n_batches, args.max_steps)
    data_stats = {
        "parses": str(args.parses), "corpus": parse_meta.get("corpus"), "corpus_sha256": parse_meta.get("corpus_sha256"),
        "parse_settings": {k: parse_meta.get(k) for k in ("paragraphs_per_book", "max_sentences", "n_sentences")},
        "sentences_read": parsed.n_read, "sentences_dropped_length": parsed.n_dropped_length,
        "sentences_kept": len(parsed), "sentences_selected": len(corpus), "sentences_trained": min(len(corpus), total_steps * args.batch_size),
        "books": int(len(set(corpus.books.tolist()))), "batches_per_epoch": n_batches,
        "context_pairs_per_epoch": count_context_pairs(corpus.books, corpus.positions, args.batch_size),
        "vocab_size": len(vocab.tokens), "tokens_trained": int(sum(len(t) for t in
                                                                   corpus.tokens[:total_steps * args.batch_size])),
    }
    step, history, train_seconds = 0, [], 0.0
    checkpoint = out / CHECKPOINT_FILE
    if checkpoint.exists():
        state = load_checkpoint(checkpoint)
        # max_steps may grow between runs (extend a time-boxed run); everything else must match
        if {k: v for k, v in state["recipe"].items() if k != "max_steps"} != \
                {k: v for k, v in recipe.items() if k != "max_steps"}:
            raise SystemExit(f"{checkpoint}: made with another recipe; delete it or use another --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng_states(state["rng"])
        step, history, train_seconds = state["step"], state["history"], state["train_seconds"]
        print(f"{out}: resuming at step {step}/{total_steps}")

    record = RunRecord(
        language=args.lang, model=f"multiview_{args.model}", setting=setting, seed=args.seed,
        config={"recipe": recipe, "model": config.to_dict(), "views": list(config.views),
                "objective": "quick-thoughts NLL, inner-product critic, in-batch negatives, context ±1",
                "init": "xavier_uniform weights, zero biases, zero leaf child states",
                "test_vector": "concat(target view, context view)"},
        provenance=provenance(device=describe_device(device), seed=args.seed, command=sys.argv),
        blocks={"data": data_stats, "parser": parse_meta["parser"]},
    )

    def write_train_json() -> None:
        record.history = history[-200:]  # per-step log is long; the last 200 steps + the summary
        record.blocks["summary"] = _summary(history)
        record.timings = {"train_seconds": round(train_seconds, 1), "steps": step, "total_steps": total_steps,
                          "seconds_per_step": round(train_seconds / max(step, 1), 3),
                          "torch_threads": torch.get_num_threads()}
        record.to_disk(out)

    def checkpoint_now() -> None:
        save_checkpoint(checkpoint, {"recipe": recipe, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                     "rng": capture_rng_states(), "step": step, "history": history,
                                     "train_seconds": train_seconds})

    write_train_json()
    model.train()
    bar = tqdm(total=total_steps, initial=step, desc=f"train-multiview {args.model}", unit="batch",
               disable=args.quiet)
    try:
        while step < total_steps:
            t0 = time.perf_counter()
            batch, books, positions = batch_at(corpus, vocab, step * args.batch_size, args.batch_size)
            loss, metrics = model.loss(batch.to(device), torch.from_numpy(books).to(device),
                                       torch.from_numpy(positions).to(device))
            if not torch.isfinite(loss):
                raise TrainingFailed(f"non-finite loss {float(loss)} at step {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            optimizer.step()
            step += 1
            train_seconds += time.perf_counter() - t0
            history.append({"step": step, **{k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()},
                            "grad_norm": round(float(grad_norm), 3)})
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['loss']:.3f}", top1=f"{metrics['context_top1']:.2f}")
            if step % args.checkpoint_every_steps == 0 or step == total_steps:
                checkpoint_now()
                write_train_json()
    except (TrainingFailed, ValueError) as error:  # ValueError: a batch the model refuses (make_batch, loss)
        bar.close()
        write_train_json()
        return record.fail(out, str(error), args.record_failure)
    bar.close()
    save_weights(out, {"config": config.to_dict(), "state_dict": model.state_dict()})
    record.status = "completed"
    write_train_json()
    write_encoder_manifest(out, "multiview", model=f"multiview_{args.model}", setting=setting, language=args.lang,
                           seed=args.seed)
    print(f"{out}: trained {step} steps ({data_stats['sentences_trained']} sentences) in {train_seconds:.0f} s; "
          f"total {time.perf_counter() - started:.0f} s")
    return 0


def _summary(history: list[dict]) -> dict:
    if not history:
        return {}
    tail = history[-50:]
    return {"steps": len(history), "first_loss": history[0]["loss"],
            "last50_mean_loss": round(sum(h["loss"] for h in tail) / len(tail), 4),
            "last50_mean_context_top1": round(sum(h["context_top1"] for h in tail) / len(tail), 4)}


if __name__ == "__main__":
    sys.exit(main())
