"""`strae train-glove`: count co-occurrences, fit GloVe, save gensim KeyedVectors + a loadable run directory.

Hyper-parameters follow Banyan appendix A (15 epochs, lr 1e-3, window 10) and the GloVe paper
(x_max 100, alpha 0.75, symmetric 1/distance window, word vector = w + w~), dimension 256.

Optimiser: Adam. Banyan appendix A gives only "15 epochs with a learning rate of 1e-3" for GloVe; the same
paragraph trains everything else with Adam, and 1e-3 is Adam's default. The reference GloVe uses AdaGrad
with lr 0.05; AdaGrad at 1e-3 barely moves the (1/dim-scaled) initial vectors in 15 epochs, so "AdaGrad,
lr 1e-3" is an unlikely reading. ``--optimizer adagrad --lr 0.05`` gives the reference recipe.

Tokenisation: ``words`` (default) reproduces the paper: it trained GloVe on WikiText-103, a word-level
corpus (whitespace tokens, punctuation split off), and evaluates words by direct lookup. ``subword`` uses
the language's SentencePiece tokenizer (pieces are the vocabulary, a word = mean of its pieces) for
languages/corpora where a word vocabulary is too sparse.

Run directory: ``vocab.json`` + ``cooccurrence.npz`` (cached counts, reused on resume), ``checkpoint.pt``
(after every epoch: tables, optimiser state, epoch, history), ``vectors.bin`` (gensim word2vec binary of
w + w~), ``tokenizer.model`` (subword only), ``train.json``, and ``encoder.json`` written last.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from tqdm import tqdm

from baselines.glove.cooccurrence import (
    TOKENIZATIONS,
    IdCorpus,
    Vocabulary,
    count_cooccurrences,
    cooccurrence_triples,
    iter_lines,
    subword_corpus,
    words_corpus,
)
from baselines.glove.model import OPTIMIZERS, GloveModel, RowOptimizer, glove_weight
from strae import paths
from strae.data.batching import batch_indices, epoch_order
from strae.io import atomic_open, atomic_path, provenance, read_json, sha256_file, write_json
from strae.runs import (CHECKPOINT_FILE, TOKENIZER_FILE, RunRecord, TrainingFailed, checkpoint_to_export,
                        copy_tokenizer, load_checkpoint, save_checkpoint, snapshot_block)

VECTORS_FILE = "vectors.bin"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae train-glove", description=__doc__.split("\n")[0])
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (labels the run)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--resources-dir", type=Path, default=Path(paths.DEFAULT_RESOURCES),
                   help="the config's data.resources_dir: where --corpus and --tokenizer default to")
    p.add_argument("--corpus", type=Path, help="one sentence per line (default <resources>/corpora/LANG/train.txt)")
    p.add_argument("--corpus-label", help="name of the corpus for reports (default: the corpus path)")
    p.add_argument("--tokenization", choices=TOKENIZATIONS, default="words")
    p.add_argument("--tokenizer", type=Path, help="SentencePiece model for --tokenization subword "
                   "(default <resources>/tokenizers/LANG.model)")
    p.add_argument("--data-dir", type=Path, help="subword mode: use this tokenized corpus "
                   "(<resources>/tokenized/LANG, train split) instead of tokenizing --corpus again")
    p.add_argument("--device", default="cpu", help="accepted for a uniform trainer CLI; GloVe's row-wise updates "
                   "run on the CPU (numpy segment sums), any other value is recorded and ignored")
    p.add_argument("--stopwords-language", help="stop-word list language code for the `stopwords=remove` "
                   "encoder option (default: --lang)")
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    p.add_argument("--x-max", type=float, default=100.0)
    p.add_argument("--alpha", type=float, default=0.75)
    p.add_argument("--batch-size", type=int, default=4096, help="co-occurrence entries per Adam step (lr 1e-3 "
                   "needs many steps: 4096 beat 32768 after one epoch, STS avg 18.9 vs 13.5)")
    p.add_argument("--min-count", type=int, default=5, help="words mode: drop rarer words (GloVe default 5)")
    p.add_argument("--max-vocab", type=int, help="words mode: keep at most this many most frequent words")
    p.add_argument("--max-lines", type=int, help="read only the first N corpus lines (quick runs)")
    p.add_argument("--chunk-tokens", type=int, default=1_000_000, help="co-occurrence counting chunk (memory)")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--setting", help="run setting label (default {tokenization}_w{window}_d{dim})")
    p.add_argument("--export-checkpoint", type=Path, metavar="DIR",
                   help="do not train: export OUT/checkpoint.pt (the last finished epoch) as a loadable run "
                        "directory DIR, labelled as a mid-training snapshot (train.json status 'running')")
    p.add_argument("--record-failure", action="store_true", help="exit 0 after recording a failed run")
    return p


def setting_name(args: argparse.Namespace) -> str:
    return args.setting or f"{args.tokenization}_w{args.window}_d{args.dim}"


def _train_config(args: argparse.Namespace, corpus: Path, corpus_sha: str, tokenizer_sha: str | None) -> dict:
    return {
        "model": "glove", "tokenization": args.tokenization, "corpus": str(corpus),
        "corpus_label": args.corpus_label or str(corpus), "corpus_sha256": corpus_sha,
        "tokenizer": str(args.tokenizer) if args.tokenization == "subword" else None,
        "tokenizer_sha256": tokenizer_sha,
        "tokenized_dir": str(args.data_dir) if args.tokenization == "subword" and args.data_dir else None,
        "window": args.window, "weighting": "1/distance, symmetric",
        "dim": args.dim, "epochs": args.epochs, "lr": args.lr, "optimizer": args.optimizer,
        "x_max": args.x_max, "alpha": args.alpha, "batch_size": args.batch_size,
        "min_count": args.min_count if args.tokenization == "words" else None,
        "max_vocab": args.max_vocab if args.tokenization == "words" else None, "max_lines": args.max_lines,
        "word_vector": "w + w~", "batch_loss": "sum over pairs (GloVe eq. 8)",
    }


def _counts_key(config: dict) -> dict:
    """The config fields the co-occurrence cache depends on (the rest may change on resume)."""
    keys = ("tokenization", "corpus_sha256", "tokenizer_sha256", "tokenized_dir", "window", "min_count",
            "max_vocab", "max_lines")
    return {k: config[k] for k in keys}


def _differences(saved: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Keys whose values differ (a key missing on one side counts as None, so adding an optional
    field to the config does not invalidate older caches/checkpoints)."""
    return sorted(k for k in set(saved) | set(current) if k not in ignore and saved.get(k) != current.get(k))


# Labels only: changing them must not invalidate counts or checkpoints.
LABEL_FIELDS = ("corpus", "corpus_label", "tokenizer")


def load_or_count(args, out: Path, config: dict) -> tuple[list[str], np.ndarray, sp.csr_array, float]:
    """Vocabulary + co-occurrence matrix, from the run directory's cache when it matches the config."""
    vocab_path, matrix_path = out / "vocab.json", out / "cooccurrence.npz"
    if vocab_path.exists() and matrix_path.exists():
        cached = read_json(vocab_path)
        if not _differences(cached.get("counts_key", {}), _counts_key(config)):
            print(f"reusing co-occurrence counts from {matrix_path}")
            return (cached["tokens"], np.asarray(cached["counts"], dtype=np.int64), sp.load_npz(matrix_path),
                    float(cached.get("seconds", 0.0)))  # time the counting took when it was done
        print(f"{vocab_path}: cached counts were made with other settings; recounting")
    start = time.time()
    lines = iter_lines(config["corpus"], max_lines=args.max_lines)
    if args.tokenization == "words":
        corpus, vocab = words_corpus(lines, min_count=args.min_count, max_vocab=args.max_vocab)
    else:
        import sentencepiece

        from strae.data.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
        processor = sentencepiece.SentencePieceProcessor(model_file=str(args.tokenizer))
        names = [processor.id_to_piece(i) for i in range(int(tokenizer.vocab_size))]
        if args.data_dir is not None and (args.data_dir / "train.ids.npy").exists():
            from strae.data.tokenized import TokenizedCorpus

            tokenized = TokenizedCorpus(args.data_dir, "train")
            if args.max_lines is not None:
                raise SystemExit("--max-lines: not supported with --data-dir (pass --corpus only)")
            corpus = IdCorpus(np.asarray(tokenized.ids, dtype=np.int32), np.asarray(tokenized.offsets, np.int64))
            counts = np.bincount(corpus.ids, minlength=len(names)).astype(np.int64)[: len(names)]
            vocab = Vocabulary(names, counts)
        else:
            corpus, vocab = subword_corpus(lines, tokenizer, names)
    if len(vocab) == 0:
        raise SystemExit(f"{config['corpus']}: no token reaches --min-count {args.min_count}; nothing to train")
    matrix = count_cooccurrences(
        corpus.lines(), len(vocab), window=args.window, chunk_tokens=args.chunk_tokens,
        total_tokens=len(corpus.ids),
    )
    seconds = time.time() - start
    with atomic_open(matrix_path, "wb") as handle:  # a file object: save_npz would rename a bare path
        sp.save_npz(handle, matrix)
    write_json(vocab_path, {
        "counts_key": _counts_key(config), "n_tokens": int(len(corpus.ids)), "n_lines": int(len(corpus.offsets) - 1),
        "nnz": int(matrix.nnz), "seconds": round(seconds, 2),
        "tokens": vocab.tokens, "counts": vocab.counts.tolist(),
    })
    return vocab.tokens, vocab.counts, matrix, seconds


def save_vectors(path: Path, tokens: list[str], vectors: np.ndarray, counts: np.ndarray) -> int:
    """gensim KeyedVectors in word2vec binary format (one file; loaded with gensim on read).
    Tokens never seen in the corpus (possible for subword pieces) get no vector: they stay OOV."""
    from gensim.models import KeyedVectors

    seen = np.flatnonzero(counts > 0)
    kv = KeyedVectors(vector_size=vectors.shape[1], dtype=np.float32)
    kv.add_vectors([tokens[i] for i in seen], vectors[seen])
    with atomic_path(path, suffix=".bin") as tmp:
        kv.save_word2vec_format(str(tmp), binary=True)
    return len(seen)


def train_epochs(
    model: GloveModel, optimizer: RowOptimizer, triples, args, start_epoch: int, history: list,
    on_epoch_end,
) -> None:
    rows_all, cols_all, log_counts_all, weights_all = triples
    nnz = len(rows_all)
    for epoch in range(start_epoch, args.epochs):
        started = time.time()
        # Shuffle from (seed, epoch) alone, so a resumed run sees exactly the same order.
        batches = batch_indices(epoch_order(nnz, args.seed, epoch), args.batch_size)
        total_loss, total_seen = 0.0, 0
        with tqdm(total=nnz, unit="pair", unit_scale=True, desc=f"epoch {epoch + 1}/{args.epochs}",
                  mininterval=2.0) as bar:
            for number, indices in enumerate(batches):
                batch = torch.from_numpy(indices)
                # Sorting a batch by word row makes the word-table gather sequential and its duplicate
                # sums a single reduceat (the update is order-independent).
                batch = batch[torch.argsort(rows_all[batch])]
                rows, cols = rows_all[batch], cols_all[batch]
                loss, grad_word, grad_context = model.loss_and_gradients(
                    rows, cols, log_counts_all[batch], weights_all[batch]
                )
                loss_value = float(loss)
                if not math.isfinite(loss_value):
                    raise TrainingFailed(f"non-finite loss {loss_value} in epoch {epoch + 1} at entry "
                                         f"{number * args.batch_size}")
                optimizer.begin_step()
                optimizer.step(0, rows, grad_word, rows_sorted=True)
                optimizer.step(1, cols, grad_context)
                total_loss += loss_value  # summed over the batch; history reports the mean per pair
                total_seen += len(batch)
                bar.update(len(batch))
                bar.set_postfix(loss=f"{total_loss / total_seen:.4f}", refresh=False)
        seconds = time.time() - started
        history.append({"epoch": epoch + 1, "loss": total_loss / max(total_seen, 1), "seconds": round(seconds, 2),
                        "pairs_per_s": round(nnz / max(seconds, 1e-9), 1), "optimizer_steps": optimizer.steps})
        on_epoch_end(epoch)


def write_manifest(dest: Path, args, setting: str, corpus_label: str) -> None:
    from strae.encode import write_encoder_manifest

    write_encoder_manifest(
        dest, "glove", vectors=VECTORS_FILE, tokenization=args.tokenization,
        tokenizer="tokenizer.model" if args.tokenization == "subword" else None,
        language=args.lang, setting=setting, seed=args.seed,
        stopwords_language=args.stopwords_language or args.lang, corpus_label=corpus_label,
    )


def export_checkpoint(args) -> int:
    """Snapshot of a run in progress (or stopped): vectors of the last finished epoch, loadable by
    ``strae evaluate``; train.json keeps status 'running' and says which epoch it is."""
    out, dest = args.out, args.export_checkpoint
    checkpoint_path = checkpoint_to_export(out, "has the first epoch finished?")
    if not (out / "vocab.json").exists():
        raise SystemExit(f"{out / 'vocab.json'}: missing; {checkpoint_path} cannot be exported without it")
    state = load_checkpoint(checkpoint_path)
    config = state["config"]
    vocab = read_json(out / "vocab.json")
    tokens, counts = vocab["tokens"], np.asarray(vocab["counts"], dtype=np.int64)
    model = GloveModel(len(tokens), int(config["dim"]))
    model.load_state_dict(state["model"])
    dest.mkdir(parents=True, exist_ok=True)
    n_saved = save_vectors(dest / VECTORS_FILE, tokens, model.word_vectors(), counts)
    if config["tokenization"] == "subword":
        copy_tokenizer(out / TOKENIZER_FILE if (out / TOKENIZER_FILE).exists() else config["tokenizer"], dest)
    args.tokenization = config["tokenization"]
    setting = setting_name(args) if args.setting else f"{config['tokenization']}_w{config['window']}_d{config['dim']}"
    snapshot = snapshot_block(checkpoint_path, "strae train-glove", epochs_done=state["epoch"] + 1,
                              epochs_planned=config["epochs"])
    RunRecord(language=args.lang, model="glove", setting=setting, seed=args.seed, config=config,
              history=state["history"], timings=state.get("timings", {}), provenance=provenance(seed=args.seed),
              blocks={"data": {"vocab_size": len(tokens), "nnz": vocab.get("nnz"), "n_vectors_saved": n_saved},
                      "snapshot": snapshot}).to_disk(dest)
    write_manifest(dest, args, setting, config.get("corpus_label", config["corpus"]))
    print(f"exported {checkpoint_path} (after epoch {state['epoch'] + 1} of {config['epochs']}) -> {dest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out: Path = args.out
    if args.export_checkpoint is not None:
        return export_checkpoint(args)
    corpus = args.corpus or paths.corpus_file(args.lang, "train", args.resources_dir)
    if not corpus.exists():
        raise SystemExit(f"--corpus {corpus}: file does not exist (run `strae prepare-corpus` or pass --corpus)")
    if args.tokenization == "subword":
        args.tokenizer = args.tokenizer or paths.tokenizer_model(args.lang, args.resources_dir)
        if not args.tokenizer.exists():
            raise SystemExit(f"--tokenizer {args.tokenizer}: file does not exist (run `strae tokenizer`)")
    out.mkdir(parents=True, exist_ok=True)
    if (out / "encoder.json").exists() and (out / "train.json").exists():
        previous = read_json(out / "train.json")
        if previous.get("status") == "completed" and len(previous.get("history", [])) >= args.epochs:
            print(f"{out}: already completed; nothing to do")
            return 0
        # Asked for more epochs than the finished run had: continue from its checkpoint. The manifest goes
        # first, so the directory is not loadable while its vectors are being replaced.
        (out / "encoder.json").unlink()

    config = _train_config(
        args, corpus, sha256_file(corpus),
        sha256_file(args.tokenizer) if args.tokenization == "subword" else None,
    )
    record = RunRecord(language=args.lang, model="glove", setting=setting_name(args), seed=args.seed, config=config,
                       provenance=provenance(seed=args.seed, device="cpu", requested_device=args.device,
                                             torch_threads=torch.get_num_threads()))
    timings, history = record.timings, record.history
    began = time.time()
    record.to_disk(out)
    tokens, counts, matrix, count_seconds = load_or_count(args, out, config)
    timings["cooccurrence_s"] = round(count_seconds, 2)
    rows, cols, values = cooccurrence_triples(matrix)
    del matrix
    triples = (
        torch.from_numpy(rows), torch.from_numpy(cols),
        torch.from_numpy(np.log(values).astype(np.float32)),
        torch.from_numpy(glove_weight(values, args.x_max, args.alpha).astype(np.float32)),
    )
    del rows, cols, values
    data_stats = {"vocab_size": len(tokens), "nnz": int(len(triples[0])), "n_corpus_tokens": int(counts.sum())}
    print(f"GloVe: vocab {len(tokens):,}, non-zero co-occurrences {data_stats['nnz']:,}")
    record.blocks["data"] = data_stats

    generator = torch.Generator().manual_seed(args.seed)
    model = GloveModel(len(tokens), args.dim, generator=generator)
    optimizer = RowOptimizer([model.word.data, model.context.data], kind=args.optimizer, lr=args.lr)
    start_epoch = 0
    checkpoint_path = out / CHECKPOINT_FILE
    if checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path)
        changed = _differences(state["config"], config, ignore=LABEL_FIELDS + ("epochs",))
        if changed:
            raise SystemExit(f"{checkpoint_path}: made with different {', '.join(changed)}; delete the run "
                             f"directory or use another --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history[:] = state["history"]
        start_epoch = state["epoch"] + 1
        timings.update(state.get("timings", {}))
        print(f"resuming from {checkpoint_path} after epoch {start_epoch}")

    train_started = time.time()
    previous_train_s = timings.get("train_s", 0.0)

    def on_epoch_end(epoch: int) -> None:
        timings["train_s"] = round(previous_train_s + time.time() - train_started, 2)
        save_checkpoint(checkpoint_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                          "epoch": epoch, "history": history, "config": config, "timings": timings})
        record.to_disk(out)

    try:
        train_epochs(model, optimizer, triples, args, start_epoch, history, on_epoch_end)
    except TrainingFailed as error:
        return record.fail(out, str(error), args.record_failure, stream=sys.stdout)

    n_saved = save_vectors(out / VECTORS_FILE, tokens, model.word_vectors(), counts)
    if args.tokenization == "subword":
        copy_tokenizer(args.tokenizer, out)
    timings["total_s"] = round(time.time() - began, 2)
    record.status, record.blocks["data"] = "completed", {**data_stats, "n_vectors_saved": n_saved}
    record.to_disk(out)
    write_manifest(out, args, record.setting, config["corpus_label"])
    print(f"GloVe run complete: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
