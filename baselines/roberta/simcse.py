"""`strae train-simcse`: unsupervised SimCSE continuation of a trained RoBERTa run (Gao et al. 2021).

Each sentence is encoded twice with dropout active; the two views are positives and the other sentences of the
batch are negatives: loss = cross-entropy over cos(z_i, z'_j) / temperature, target j = i.

The Banyan paper: "For SimCSE training, we used the default parameters and implementation for unsupervised RoBERTa
training from Gao et al. (2021)". Recipe ``official`` (default) = princeton-nlp/SimCSE's README hyper-parameter table
(unsupervised RoBERTa-base: batch 512, lr 1e-5) with ``run_unsup_example.sh``'s other flags: max sequence length 32,
temperature 0.05, one epoch over 10^6 corpus sentences, ``--pooler_type cls --mlp_only_train`` (z = tanh(W h_<s> + b),
a new dense layer used only in training), HF Trainer defaults (AdamW without weight decay, linear decay from the
peak lr with no warm-up, gradient clipping at 1.0), dropout 0.1 as the only augmentation. Recipe ``mean_b64`` is
strae's earlier one: batch 64, mean pooling in training, no MLP. Each value can be overridden by its flag; the
resolved values are recorded in train.json.

Evaluation pooling (``eval_pooler`` in train.json, the encoder's default; ``--encoder-option pooler=`` overrides):
``mean`` (the Banyan paper: "we generate sentence embeddings through mean pooling"), ``cls_before_pooler`` (what
SimCSE's README prescribes for unsupervised models: the <s> state without the MLP) or ``cls`` (with the trained MLP).

Which weights the run keeps, as SimCSE's script (``--evaluation_strategy steps --eval_steps 125
--metric_for_best_model stsb_spearman --load_best_model_at_end``): every 125 steps the model is scored on STS-B dev
(Spearman of the cosines, SentEval's ``STSBenchmark`` dev split, <s> state before the MLP: its ``sent_emb`` pooling for
``mlp_only_train``) and a completed run ends with the best-scoring weights (``--dev-every 0``: the last step's;
recipe ``mean_b64`` keeps the last). train.json's ``final_weights`` block lists every score and the step kept.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from baselines.roberta.encoder import corpus_pretokenize
from baselines.roberta.train import (
    DevSelection,
    TrainingData,
    adamw,
    adamw_record,
    add_common_arguments,
    configure_device,
    corpus_identity,
    corpus_provenance,
    linear_warmup_decay,
    start_record,
    train_and_finish,
)
from strae import paths
from strae.argtypes import positive_float, positive_int
from strae.data.batching import batch_at_step
from strae.data.fetch import SIMCSE_DEV_SET, fetch
from strae.io import sha256_file
from strae.runs import MODEL_FILE, TOKENIZER_FILE, TRAIN_JSON, RunRecord
from strae.runtime import seed_everything

RECIPES: dict[str, dict[str, object]] = {
    "official": {"batch_size": 512, "lr": 1e-5, "max_length": 32, "temperature": 0.05, "train_pooler": "cls",
                 "eval_pooler": "mean", "dev_every": 125, "dev_pooler": "cls_before_pooler"},
    "mean_b64": {"batch_size": 64, "lr": 1e-5, "max_length": 32, "temperature": 0.05, "train_pooler": "mean",
                 "eval_pooler": "mean", "dev_every": 0, "dev_pooler": "cls_before_pooler"},
}
TRAIN_POOLERS = ("cls", "cls_before_pooler", "mean")


def simcse_loss(model, ids: torch.Tensor, attention: torch.Tensor, temperature: float, pooler: str = "mean",
                mlp: torch.nn.Module | None = None) -> tuple[torch.Tensor, float]:
    """Unsupervised SimCSE loss for one batch (two dropout passes in one forward); also returns top-1 accuracy.

    ``pooler``: ``cls`` (<s> state through ``mlp``, SimCSE's training pooler), ``cls_before_pooler`` or ``mean``."""
    from baselines.roberta.model import encode, pool, segments_from_attention

    doubled_ids = torch.cat([ids, ids])
    doubled_attention = torch.cat([attention, attention])
    hidden = encode(model.roberta, doubled_ids, segments_from_attention(doubled_attention))
    pooled = pool(hidden, doubled_attention, pooler, mlp).float()
    first, second = pooled.chunk(2)
    logits = F.cosine_similarity(first.unsqueeze(1), second.unsqueeze(0), dim=-1) / temperature
    targets = torch.arange(len(ids), device=ids.device)
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    return F.cross_entropy(logits, targets), accuracy


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    recipe, overridden = resolve_recipe(args)
    init = completed_init_run(args.init)
    device, autocast, precision = configure_device(args, int(recipe["max_length"]))
    data = load_data(args, init)
    steps, sentences_per_epoch = schedule(args, int(recipe["batch_size"]), len(data.corpus))
    # seeded before the weights load: the MLP's initialisation and every dropout mask depend on --seed alone
    seed_everything(args.seed)
    shape, model, mlp, modules = build_model(args, recipe, device)
    optimizer, scheduler = build_optimizer(modules, recipe, steps, device)
    config = run_config(args, recipe, overridden, init, data, shape, steps, sentences_per_epoch, device, precision)
    dev = stsb_dev_selection(args, recipe, data.tokenizer_path, corpus_pretokenize(config), shape.special, device,
                             autocast, steps)
    config["best_checkpoint_selection"] = None if dev is None else {
        key: value for key, value in dev.describe().items() if key not in ("evaluations", "step", "score")}
    record = start_record(args, argv, data.tokenizer_path, language=init.language, model="roberta_simcse",
                          setting=args.setting, seed=args.seed, config=config, device=device, precision=precision)
    forward_backward = simcse_step(args, recipe, data.corpus, sentences_per_epoch, shape.special, (model, mlp),
                                   device, autocast)
    return train_and_finish(
        args, record, model=modules, optimizer=optimizer, scheduler=scheduler, total_steps=steps,
        forward_backward=forward_backward, description=f"simcse {init.language} seed{args.seed}",
        signature={"shape": shape.to_dict(), "init_model_sha256": config["init_model_sha256"], "seed": args.seed,
                   "corpus": corpus_identity(config["corpus"]), **{key: recipe[key] for key in sorted(recipe)}},
        weights=lambda: final_weights(shape, model, mlp), dev=dev,
        encoder_fields={"model": "roberta_simcse", "objective": "simcse_unsup"})


def build_parser() -> argparse.ArgumentParser:
    from baselines.roberta.model import ATTENTION_IMPLEMENTATIONS, POOLERS

    parser = argparse.ArgumentParser(prog="strae train-simcse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--init", type=Path, required=True, help="completed `strae train-roberta` run directory")
    parser.add_argument("--data-dir", default=None, help="tokenised corpus (default: the --init run's corpus)")
    parser.add_argument("--resources-dir", default=paths.DEFAULT_RESOURCES,
                        help="the config's data.resources_dir: where the default --dev-file is placed and read")
    parser.add_argument("--setting", default="medium_mlm_simcse")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="official",
                        help="official: SimCSE's unsupervised RoBERTa recipe (default); mean_b64: strae's earlier one")
    parser.add_argument("--lr", type=positive_float, default=None, help="override the recipe's learning rate")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="override the recipe's batch size")
    parser.add_argument("--max-length", type=positive_int, default=None, help="ids per sentence incl. <s> and </s>")
    parser.add_argument("--temperature", type=positive_float, default=None)
    parser.add_argument("--train-pooler", choices=TRAIN_POOLERS, default=None,
                        help="cls: <s> + MLP used only in training (SimCSE --mlp_only_train); cls_before_pooler; mean")
    parser.add_argument("--eval-pooler", choices=POOLERS, default=None,
                        help="the encoder's default sentence pooling for this run (recipe: mean, as Banyan §6)")
    parser.add_argument("--dev-every", type=int, default=None,
                        help="score STS-B dev every N steps and keep the best weights (recipe official: 125, as "
                             "SimCSE's script); 0 keeps the last step's weights")
    parser.add_argument("--dev-pooler", choices=POOLERS, default=None,
                        help="sentence pooling for the dev score (recipe: cls_before_pooler, SimCSE's sent_emb)")
    parser.add_argument("--dev-file", type=Path, default=None,
                        help=f"dev pairs CSV (sent1,sent2,score); default: registry {SIMCSE_DEV_SET} "
                             "(--resources-dir -> mirror)")
    parser.add_argument("--epochs", type=positive_int, default=1)
    parser.add_argument("--sentences", type=positive_int, default=1_000_000,
                        help="sentences per epoch (SimCSE: 10^6 Wikipedia sentences); capped by the corpus size")
    parser.add_argument("--steps", type=positive_int, default=None, help="override the step count (time-boxed runs)")
    parser.add_argument("--attention", choices=ATTENTION_IMPLEMENTATIONS, default="sdpa")
    add_common_arguments(parser)
    return parser


def resolve_recipe(args: argparse.Namespace) -> tuple[dict[str, object], list[str]]:
    """(--recipe with its flags applied, the keys a flag changed). A flag equal to the recipe's value is no
    override, so train.json lists only real departures from the published recipe."""
    recipe = dict(RECIPES[args.recipe])
    overridden = []
    for key in recipe:
        value = getattr(args, key)
        if value is not None and value != recipe[key]:
            recipe[key] = value
            overridden.append(key)
    for flag in ("eval_pooler", "dev_pooler"):
        if recipe[flag] == "cls" and recipe["train_pooler"] != "cls":
            raise SystemExit(f"--{flag.replace('_', '-')} cls needs the MLP that only --train-pooler cls trains")
    if recipe["dev_every"] < 0:
        raise SystemExit(f"--dev-every {recipe['dev_every']}: expected 0 (keep the last weights) or a step count")
    return recipe, overridden


def completed_init_run(init: Path) -> RunRecord:
    """The RoBERTa run SimCSE continues; it must have finished (a stopped run's weights are a mid-training state)."""
    record = RunRecord.from_disk(init)
    if not (init / MODEL_FILE).exists() or record is None:
        raise SystemExit(f"--init {init}: no model.pt/train.json (is the RoBERTa run completed?)")
    if record.status != "completed":
        raise SystemExit(f"{init / TRAIN_JSON}: status {record.status!r}, expected 'completed'")
    return record


def load_data(args: argparse.Namespace, init: RunRecord) -> TrainingData:
    """The --init run's tokenizer and, unless --corpus or --data-dir says otherwise, its training corpus."""
    from baselines.roberta.data import load_corpus
    from strae.data.tokenizer import load_tokenizer

    tokenizer_path = args.init / TOKENIZER_FILE
    tokenizer = load_tokenizer(tokenizer_path)
    data_dir, corpus_file = None, args.corpus
    if corpus_file is None:
        data_dir = args.data_dir or init.config.get("data_dir")
        if data_dir is None:
            corpus_file = init.config.get("corpus_file")
    corpus = load_corpus(data_dir, corpus_file, tokenizer, max_sentences=args.max_sentences)
    return TrainingData(tokenizer_path, tokenizer, data_dir, corpus, corpus_file)


def schedule(args: argparse.Namespace, batch_size: int, n_sentences: int) -> tuple[int, int]:
    """(optimiser steps, sentences per epoch): --epochs passes over the first --sentences corpus sentences."""
    sentences_per_epoch = min(args.sentences, n_sentences)
    # whole batches only (batch_at_step drops an epoch's ragged tail): every step has as many in-batch negatives
    if sentences_per_epoch < batch_size:
        raise SystemExit(f"{sentences_per_epoch} corpus sentences: fewer than one SimCSE batch ({batch_size}); "
                         "lower --batch-size")
    return args.steps or args.epochs * (sentences_per_epoch // batch_size), sentences_per_epoch


def build_model(args: argparse.Namespace, recipe: dict[str, object], device: torch.device):
    """(shape, the --init run's model, SimCSE's MLP or None, both as one module for the optimiser)."""
    from baselines.roberta.encoder import load_weights
    from baselines.roberta.model import SimcseMLP, set_attention_implementation

    shape, model = load_weights(args.init / MODEL_FILE)
    set_attention_implementation(model, args.attention)
    # SimCSE's MLP is a new layer (RobertaForCL.__init__ -> cl_init); it is trained, saved, and used at evaluation
    # only with pooler "cls" (mlp_only_train)
    mlp = SimcseMLP(shape.hidden_size) if recipe["train_pooler"] == "cls" else None
    modules = torch.nn.ModuleDict({"model": model, **({"mlp": mlp} if mlp is not None else {})}).to(device)
    return shape, model, mlp, modules


def build_optimizer(modules: torch.nn.Module, recipe: dict[str, object], steps: int, device: torch.device):
    """AdamW without weight decay, and SimCSE's script's schedule: HF's linear decay from the peak lr to 0 with
    no warm-up (the continued model is already trained)."""
    optimizer = adamw(modules.parameters(), float(recipe["lr"]), 0.0, device)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(steps, 0))


def final_weights(shape, model: torch.nn.Module, mlp: torch.nn.Module | None) -> dict[str, Any]:
    """model.pt: the RoBERTa weights in the MLM run's layout, plus the MLP (None unless it was trained)."""
    return {"shape": shape.to_dict(), "state_dict": model.state_dict(), "objective": "simcse_unsup",
            "simcse_mlp": mlp.state_dict() if mlp is not None else None}


def run_config(args: argparse.Namespace, recipe: dict[str, object], overridden: list[str], init: RunRecord,
               data: TrainingData, shape, steps: int, sentences_per_epoch: int, device: torch.device,
               precision: str) -> dict[str, Any]:
    """train.json ``config``: the resolved recipe, the run it continues and the corpus it reads."""
    return {
        "objective": "simcse_unsup", "init_run": str(args.init),
        "init_model_sha256": sha256_file(args.init / MODEL_FILE), "init_config": init.config,
        "shape": shape.to_dict(), "special_ids": shape.special.to_dict(), "steps": steps,
        "recipe": args.recipe, "recipe_overrides": overridden,
        "lr": recipe["lr"], "schedule": "linear decay to 0, no warm-up", "batch_size": int(recipe["batch_size"]),
        "max_length": recipe["max_length"], "temperature": recipe["temperature"], "epochs": args.epochs,
        "sentences_per_epoch": sentences_per_epoch,
        # what set `steps`: --steps (epochs and sentences_per_epoch then only say which sentences the batches cycle
        # through), or epochs x whole batches of sentences_per_epoch
        "steps_from": "--steps" if args.steps else "epochs",
        "train_pooler": recipe["train_pooler"], "mlp_only_train": recipe["train_pooler"] == "cls",
        "eval_pooler": recipe["eval_pooler"], "attention": args.attention,
        "optimizer": adamw_record(0.0, device), "clip_grad_norm": args.clip_grad_norm, "precision": precision,
        # the word encoder reads word contexts from this corpus (by default the pre-training corpus)
        "data_dir": data.data_dir, "corpus_file": data.corpus_file,
        "corpus": corpus_provenance(data.data_dir, data.corpus_file, "train", len(data.corpus)),
    }


def stsb_dev_selection(args: argparse.Namespace, recipe: dict[str, object], tokenizer_path: Path, pretokenize: str,
                       special, device: torch.device, autocast: Callable[[], Any], steps: int,
                       batch_size: int = 128) -> DevSelection | None:
    """SimCSE's checkpoint selection: Spearman (x100) between the cosines of the pairs' sentence vectors and the
    gold scores. None when switched off or when the run is shorter than one scoring interval. The dev sentences
    (raw text) are split as the training corpus was (``pretokenize``), as the run's encoder will split text."""
    from baselines.roberta.data import collate
    from baselines.roberta.model import encode, pool, segments_from_attention
    from strae.data.tokenizer import load_tokenizer
    from strae.evaluate.metrics import rowwise_cosine, spearman_x100
    from strae.evaluate.tasks import read_pairs

    every = int(recipe["dev_every"])
    if every == 0 or steps < every:
        return None
    path = args.dev_file
    if path is None:
        path = fetch(SIMCSE_DEV_SET, resources_dir=args.resources_dir)
    pairs = read_pairs(path, "sentence")  # the evaluation's own reader: errors name the file, line and format
    first, second, gold = pairs.left, pairs.right, pairs.gold
    # the evaluation's own text -> ids (BPEmb normalisation in encode_batch); SentEval's batcher does not truncate
    tokenizer = load_tokenizer(tokenizer_path, pretokenize=pretokenize)
    rows = [np.asarray(ids, dtype=np.int64) for ids in tokenizer.encode_batch(first + second)]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    pooler = str(recipe["dev_pooler"])

    def score(modules: torch.nn.Module) -> float:
        vectors = torch.empty(len(rows), modules["model"].config.hidden_size)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            ids, attention = collate([rows[i] for i in chunk], special, 512)
            ids, attention = ids.to(device), attention.to(device)
            with autocast():
                hidden = encode(modules["model"].roberta, ids, segments_from_attention(attention))
                vectors[chunk] = pool(hidden, attention, pooler, modules["mlp"] if "mlp" in modules else None
                                      ).float().cpu()
        # the harness's own STS scoring (exact ties for identical vectors); None when undefined (constant cosines)
        vectors = vectors.numpy()
        return spearman_x100(rowwise_cosine(vectors[:len(first)], vectors[len(first):]), gold)[0]

    return DevSelection(every=every, metric="stsb_dev_spearman", score=score,
                        settings={"pooler": pooler, "pretokenize": pretokenize, "file": str(path),
                                  "sha256": sha256_file(path),
                                  "pairs": len(first)})


def simcse_step(args: argparse.Namespace, recipe: dict[str, object], corpus, sentences_per_epoch: int, special,
                modules: tuple[torch.nn.Module, torch.nn.Module | None], device: torch.device,
                autocast: Callable[[], Any]) -> Callable[[int], tuple[torch.Tensor, dict[str, float]]]:
    """``forward_backward(step)`` of :func:`baselines.roberta.train.run_steps` for unsupervised SimCSE."""
    from baselines.roberta.data import collate

    model, mlp = modules
    batch_size, max_length = int(recipe["batch_size"]), int(recipe["max_length"])

    def forward_backward(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        # SimCSE's 10^6 sentences = here the first `sentences_per_epoch` corpus sentences (already a random sample),
        # visited in a seeded order. No gradient accumulation: in-batch negatives need the whole batch at once.
        indices = batch_at_step(sentences_per_epoch, batch_size, args.seed, step)
        ids, attention = collate([corpus[int(i)] for i in indices], special, max_length)
        with autocast():
            loss, accuracy = simcse_loss(model, ids.to(device), attention.to(device), float(recipe["temperature"]),
                                         str(recipe["train_pooler"]), mlp)
        loss.backward()
        return loss.detach(), {"accuracy": accuracy}

    return forward_backward


if __name__ == "__main__":
    sys.exit(main())
