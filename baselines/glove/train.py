"""`strae train-glove`: count co-occurrences, fit GloVe, save gensim KeyedVectors + a loadable run directory.

Hyper-parameters follow Banyan appendix A (15 epochs, lr 1e-3, window 10) and the GloVe paper
(x_max 100, alpha 0.75, symmetric 1/distance window, word vector = w + w~), dimension 256.

Optimiser: Adam. Banyan appendix A gives only "15 epochs with a learning rate of 1e-3" for GloVe; the same
paragraph trains everything else with Adam, and 1e-3 is Adam's default. The reference GloVe uses AdaGrad
with lr 0.05; AdaGrad at 1e-3 barely moves the (1/dim-scaled) initial vectors in 15 epochs, so "AdaGrad,
lr 1e-3" is an unlikely reading. ``--optimizer adagrad --lr 0.05`` is close to the reference recipe (textbook
AdaGrad with glove.c's initial accumulators; glove.c's own update differs in its details: model.py).

Tokenisation: ``words`` (default) reproduces the paper: it trained GloVe on WikiText-103, a word-level
corpus (whitespace tokens, punctuation split off), and evaluates words by direct lookup. ``subword`` uses
the language's SentencePiece tokenizer (pieces are the vocabulary, a word = mean of its pieces) for
languages/corpora where a word vocabulary is too sparse.

Run directory: ``vocab.json`` + ``cooccurrence.npz`` (cached counts, reused on resume), ``checkpoint.pt``
(after every epoch: tables, optimiser state, epoch, history), ``vectors.bin`` (gensim word2vec binary of
w + w~), ``tokenizer.model`` (subword only), ``train.json``, and ``encoder.json`` written last.

Stops: SIGTERM / SIGINT / SIGHUP end the run at the next batch with exit status 128 + signal. An epoch is
GloVe's unit of resumption, so a stop mid-epoch drops that epoch's partial work and keeps the last epoch's
checkpoint (the same command resumes after it); a stop that lands while an epoch ends loses nothing.
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
    cooccurrence_triples,
    count_cooccurrences,
    iter_lines,
    subword_corpus,
    words_corpus,
)
from baselines.glove.model import OPTIMIZERS, GloveModel, RowOptimizer, glove_weight
from strae import paths
from strae.argtypes import nonnegative_float, nonnegative_int, positive_float, positive_int
from strae.data.batching import batch_indices, epoch_order
from strae.data.pretokenize import PRETOKENIZERS
from strae.io import atomic_open, atomic_path, make_output_dir, provenance, read_json, sha256_file, write_json
from strae.runs import (
    CHECKPOINT_FILE,
    ENCODER_MANIFEST,
    TOKENIZER_FILE,
    TRAIN_JSON,
    RunRecord,
    TrainingFailed,
    checkpoint_to_export,
    copy_tokenizer,
    load_checkpoint,
    lock_run_dir,
    save_checkpoint,
    snapshot_block,
)
from strae.runtime import StoppedBySignal, StopRequest

VECTORS_FILE = "vectors.bin"
VOCAB_FILE = "vocab.json"  # the co-occurrence cache: vocabulary + its key
COUNTS_FILE = "cooccurrence.npz"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae train-glove", description=__doc__.split("\n")[0])
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (labels the run)")
    p.add_argument("--seed", type=nonnegative_int, required=True)
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
    p.add_argument("--window", type=positive_int, default=10)
    p.add_argument("--dim", type=positive_int, default=256)
    p.add_argument("--epochs", type=positive_int, default=15)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    p.add_argument("--x-max", type=positive_float, default=100.0)
    p.add_argument("--alpha", type=nonnegative_float, default=0.75)
    p.add_argument("--batch-size", type=positive_int, default=4096, help="co-occurrence entries per Adam step (lr 1e-3 "
                   "needs many steps: 4096 beat 32768 after one epoch, STS avg 18.9 vs 13.5)")
    p.add_argument("--pretokenize", choices=PRETOKENIZERS, default="none",
                   help="words mode: split each corpus line as this pretokeniser does first, keeping PTB clitics "
                        "('s, n't, ...) whole words - how the paper's WikiText-103 and the paper-variant evaluation "
                        "files are tokenised; the encoder then reads text the same way (default none: raw lines)")
    p.add_argument("--min-count", type=positive_int, default=5, help="words mode: drop rarer words (GloVe default 5)")
    p.add_argument("--max-vocab", type=positive_int, help="words mode: keep at most this many most frequent words")
    p.add_argument("--max-lines", type=positive_int, help="read only the first N corpus lines (quick runs)")
    p.add_argument("--chunk-tokens", type=positive_int, default=1_000_000, help="co-occurrence counting chunk (memory)")
    p.add_argument("--threads", type=positive_int, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--setting", help="run setting label (default {tokenization}_w{window}_d{dim}, + _treebank "
                                     "for a words run with --pretokenize treebank)")
    p.add_argument("--export-checkpoint", type=Path, metavar="DIR",
                   help="do not train: export OUT/checkpoint.pt (the last finished epoch) as a loadable run "
                        "directory DIR, labelled as a mid-training snapshot (train.json status 'running')")
    p.add_argument("--record-failure", action="store_true", help="exit 0 after recording a failed run")
    return p


def setting_name(args: argparse.Namespace) -> str:
    return args.setting or default_setting(args.tokenization, args.window, args.dim,
                                           getattr(args, "pretokenize", None))


def default_setting(tokenization: str, window: int, dim: int, pretokenize: str | None) -> str:
    """``{tokenization}_w{window}_d{dim}``, with ``_{pretokenize}`` for a pretokenised words run."""
    return (f"{tokenization}_w{window}_d{dim}"
            + (f"_{pretokenize}" if tokenization == "words" and pretokenize not in (None, "none") else ""))


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
        # how raw text is pretokenised before the run's tokenisation (absent: none, the lines as they are - so a
        # default run's config is the one runs before the setting wrote, and they resume): words mode, --pretokenize
        # before word_tokenize; subword with --data-dir, the tokenised corpus' own (its train.json), which the
        # evaluation's tokenizer must apply too
        **({"pretokenize": pretokenize} if (pretokenize := run_pretokenize(args)) != "none" else {}),
        "min_count": args.min_count if args.tokenization == "words" else None,
        "max_vocab": args.max_vocab if args.tokenization == "words" else None, "max_lines": args.max_lines,
        "word_vector": "w + w~", "batch_loss": "sum over pairs (GloVe eq. 8)",
        "seed": args.seed,  # the tables' initialisation and every epoch's shuffle
    }


def run_pretokenize(args: argparse.Namespace) -> str:
    """The pretokeniser raw text goes through before this run's tokenisation: ``--pretokenize`` (words mode); the
    ``pretokenize`` of --data-dir's tokenised split (subword; its pieces were encoded from text so split); else none
    (subword from --corpus: tokenised here, and evaluated, with none)."""
    if args.tokenization == "words":
        return args.pretokenize
    if args.data_dir is not None:
        from strae.data.pretokenize import check_kind

        meta = args.data_dir / "train.json"
        if not meta.is_file():  # refused, by name, where the split is read (tokenized_corpus)
            return "none"
        try:
            return check_kind(read_json(meta).get("pretokenize") or "none", f"{meta}: pretokenize")
        except ValueError as error:  # PretokenizeError: a split written by another version, or edited
            raise SystemExit(str(error)) from None
    return "none"


def _counts_key(config: dict) -> dict:
    """The config fields the co-occurrence cache depends on (the rest may change on resume)."""
    keys = ("tokenization", "corpus_sha256", "tokenizer_sha256", "tokenized_dir", "window", "min_count",
            "max_vocab", "max_lines")
    key = {k: config[k] for k in keys}
    # words mode: the split changes the counts (a cache from before the setting: none, the same key); a subword
    # --data-dir run's counts are its tokenised_dir's ids whatever the pretokeniser recorded beside them
    if config["tokenization"] == "words" and config.get("pretokenize") not in (None, "none"):
        key["pretokenize"] = config["pretokenize"]
    return key


def _differences(saved: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Keys whose values differ (a key missing on one side counts as None, so adding an optional
    field to the config does not invalidate older caches/checkpoints)."""
    return sorted(k for k in set(saved) | set(current) if k not in ignore and saved.get(k) != current.get(k))


# Labels only: changing them must not invalidate counts or checkpoints.
LABEL_FIELDS = ("corpus", "corpus_label", "tokenizer")


def load_or_count(args, out: Path, config: dict) -> tuple[list[str], np.ndarray, sp.csr_array, float]:
    """Vocabulary + co-occurrence matrix (+ the seconds counting took), from the run directory's cache when it
    matches the config: counting is most of a small run's time, and a resumed or extended run needs the same
    counts anyway."""
    cached = cached_counts(out, config)
    if cached is not None:
        return cached
    start = time.time()
    corpus, vocab = read_corpus(args, config)
    if len(vocab) == 0:
        raise SystemExit(f"{config['corpus']}: no token reaches --min-count {args.min_count}; nothing to train")
    matrix = count_cooccurrences(
        corpus.lines(), len(vocab), window=args.window, chunk_tokens=args.chunk_tokens,
        total_tokens=len(corpus.ids),
    )
    if matrix.nnz == 0:  # every line a single token (or shorter than its window's reach): untrained vectors
        raise SystemExit(f"{config['corpus']}: no two tokens co-occur within --window {args.window} (lines of one "
                         "token?); nothing to train")
    seconds = time.time() - start
    save_counts(out, config, corpus, vocab, matrix, seconds)
    return vocab.tokens, vocab.counts, matrix, seconds


def cached_counts(out: Path, config: dict) -> tuple[list[str], np.ndarray, sp.csr_array, float] | None:
    vocab_path, matrix_path = out / VOCAB_FILE, out / COUNTS_FILE
    if not (vocab_path.exists() and matrix_path.exists()):
        return None
    cached = read_json(vocab_path)
    if _differences(cached.get("counts_key", {}), _counts_key(config)):
        print(f"{vocab_path}: cached counts were made with other settings; recounting")
        return None
    print(f"reusing co-occurrence counts from {matrix_path}")
    return (cached["tokens"], np.asarray(cached["counts"], dtype=np.int64), sp.load_npz(matrix_path),
            float(cached.get("seconds", 0.0)))  # time the counting took when it was done


def save_counts(out: Path, config: dict, corpus: IdCorpus, vocab: Vocabulary, matrix: sp.csr_array,
                seconds: float) -> None:
    """The cache :func:`cached_counts` reads: the matrix first, the vocabulary (which holds the key that validates
    it) last. The old vocabulary goes before the matrix is replaced: a run killed in between must leave no key at
    all (a recount), never the old key beside the new matrix, which a rerun with the old settings would accept."""
    (out / VOCAB_FILE).unlink(missing_ok=True)
    with atomic_open(out / COUNTS_FILE, "wb") as handle:  # a file object: save_npz would rename a bare path
        sp.save_npz(handle, matrix)
    write_json(out / VOCAB_FILE, {
        "counts_key": _counts_key(config), "n_tokens": int(len(corpus.ids)), "n_lines": int(len(corpus.offsets) - 1),
        "nnz": int(matrix.nnz), "seconds": round(seconds, 2),
        "tokens": vocab.tokens, "counts": vocab.counts.tolist(),
    })


def read_corpus(args, config: dict) -> tuple[IdCorpus, Vocabulary]:
    """The corpus as ids and its vocabulary: whitespace words (rare ones dropped) or the tokenizer's pieces."""
    lines = iter_lines(config["corpus"], max_lines=args.max_lines)
    if args.tokenization == "words":
        return words_corpus(lines, min_count=args.min_count, max_vocab=args.max_vocab, pretokenize=args.pretokenize)
    import sentencepiece

    from strae.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(args.tokenizer)
    # every piece is a vocabulary entry, named as SentencePiece spells it (the encoder looks pieces up by name)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(args.tokenizer))
    names = [processor.id_to_piece(i) for i in range(int(tokenizer.vocab_size))]
    if args.data_dir is not None:
        return tokenized_corpus(args, names)
    return subword_corpus(lines, tokenizer, names)


def tokenized_corpus(args, names: list[str]) -> tuple[IdCorpus, Vocabulary]:
    """--data-dir: the language's tokenized training split, as the other trainers see it (not re-tokenised)."""
    from strae.data.tokenized import TokenizedCorpus

    meta_path = args.data_dir / "train.json"
    if not (args.data_dir / "train.ids.npy").exists() or not meta_path.exists():
        raise SystemExit(f"--data-dir {args.data_dir}: no tokenised training split (train.ids.npy, train.json); "
                         "`strae tokenize-corpus` writes one, or drop --data-dir to tokenise --corpus")
    made_with = read_json(meta_path).get("tokenizer_sha256")
    if made_with and made_with != sha256_file(args.tokenizer):  # ids of another tokenizer, named by this one's pieces
        raise SystemExit(f"--data-dir {args.data_dir}: tokenised with another tokenizer (sha256 {made_with[:12]}…) "
                         f"than --tokenizer {args.tokenizer}")
    tokenized = TokenizedCorpus(args.data_dir, "train")
    if args.max_lines is not None:
        raise SystemExit("--max-lines: not supported with --data-dir (pass --corpus only)")
    corpus = IdCorpus(np.asarray(tokenized.ids, dtype=np.int32), np.asarray(tokenized.offsets, np.int64))
    counts = np.bincount(corpus.ids, minlength=len(names)).astype(np.int64)[: len(names)]
    return corpus, Vocabulary(names, counts)


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
    on_epoch_end, stop: StopRequest,
) -> None:
    """Epochs ``start_epoch`` .. --epochs, each checkpointed by ``on_epoch_end``. Raises TrainingFailed when the
    tables stop being finite, StoppedBySignal on a stop (module docstring)."""
    for epoch in range(start_epoch, args.epochs):
        started = time.time()
        loss = run_epoch(model, optimizer, triples, args, epoch, stop)
        seconds = time.time() - started
        # glove_step checks each loss before its update, so the epoch's last update is checked only here: the
        # checkpoint (and so vectors.bin, written from these tables) never holds diverged weights
        if not all(torch.isfinite(table).all() for table in (model.word, model.context)):
            raise TrainingFailed(f"non-finite word/context tables after the last update of epoch {epoch + 1}")
        history.append({"epoch": epoch + 1, "loss": loss, "seconds": round(seconds, 2),
                        "pairs_per_s": round(len(triples[0]) / max(seconds, 1e-9), 1),
                        "optimizer_steps": optimizer.steps})
        on_epoch_end(epoch)
        if stop.requested and epoch + 1 < args.epochs:
            raise StoppedBySignal(stop, stop.stopped_line(args.out, f"the end of epoch {epoch + 1}/{args.epochs}"))


def stopped_mid_epoch(stop: StopRequest, args, epoch: int, entry: int) -> StoppedBySignal:
    """A stop inside an epoch: the checkpoint stays the previous epoch's (resume is per epoch, not per batch)."""
    kept = (f"the same command resumes after epoch {epoch} from {args.out / CHECKPOINT_FILE}" if epoch
            else "no epoch had finished: the same command starts again from epoch 1")
    return StoppedBySignal(stop, f"{args.out}: stopped by {stop.name} in epoch {epoch + 1}/{args.epochs} at entry "
                                 f"{entry}; this epoch's work is dropped (GloVe resumes at epoch boundaries), {kept}")


def run_epoch(model: GloveModel, optimizer: RowOptimizer, triples, args, epoch: int, stop: StopRequest) -> float:
    """One pass over every non-zero co-occurrence; the mean loss per pair."""
    nnz = len(triples[0])
    # Shuffle from (seed, epoch) alone, so a resumed run sees exactly the same order.
    batches = batch_indices(epoch_order(nnz, args.seed, epoch), args.batch_size)
    total_loss, total_seen = 0.0, 0
    with tqdm(total=nnz, unit="pair", unit_scale=True, desc=f"epoch {epoch + 1}/{args.epochs}",
              mininterval=2.0) as bar:
        for number, indices in enumerate(batches):
            if stop.requested:
                raise stopped_mid_epoch(stop, args, epoch, number * args.batch_size)
            total_loss += glove_step(model, optimizer, triples, indices,
                                     f"epoch {epoch + 1} at entry {number * args.batch_size}")
            total_seen += len(indices)
            bar.update(len(indices))
            bar.set_postfix(loss=f"{total_loss / total_seen:.4f}", refresh=False)
    return total_loss / max(total_seen, 1)


def glove_step(model: GloveModel, optimizer: RowOptimizer, triples, indices: np.ndarray, where: str) -> float:
    """One update on the co-occurrence entries ``indices``; the batch's summed loss (GloVe eq. 8)."""
    rows_all, cols_all, log_counts_all, weights_all = triples
    batch = torch.from_numpy(indices)
    # Sorting a batch by word row makes the word-table gather sequential and its duplicate
    # sums a single reduceat (the update is order-independent).
    batch = batch[torch.argsort(rows_all[batch])]
    rows, cols = rows_all[batch], cols_all[batch]
    loss, grad_word, grad_context = model.loss_and_gradients(rows, cols, log_counts_all[batch], weights_all[batch])
    loss_value = float(loss)
    if not math.isfinite(loss_value):
        raise TrainingFailed(f"non-finite loss {loss_value} in {where}")
    optimizer.begin_step()
    optimizer.step(0, rows, grad_word, rows_sorted=True)
    optimizer.step(1, cols, grad_context)
    return loss_value


def write_manifest(dest: Path, args, setting: str, config: dict) -> None:
    from strae.encode import write_encoder_manifest

    write_encoder_manifest(
        dest, "glove", vectors=VECTORS_FILE, tokenization=args.tokenization,
        tokenizer=TOKENIZER_FILE if args.tokenization == "subword" else None,
        language=args.lang, setting=setting, seed=args.seed,
        stopwords_language=args.stopwords_language or args.lang,
        corpus_label=config.get("corpus_label", config["corpus"]),
        # the encoder applies it before its tokenisation, as the run's training text had it
        pretokenize=config.get("pretokenize") or ("none" if args.tokenization == "words" else None),
    )


def export_checkpoint(args) -> int:
    """Snapshot of a run in progress (or stopped): vectors of the last finished epoch, loadable by
    ``strae evaluate``; train.json keeps status 'running' and says which epoch it is."""
    out, dest = args.out, args.export_checkpoint
    if Path(dest).resolve() == Path(out).resolve() or Path(out).resolve() in Path(dest).resolve().parents:
        raise SystemExit(f"--export-checkpoint {dest}: inside the run directory {out}, whose train.json and "
                         "encoder.json it would overwrite; export to a folder of its own")
    state, sha256, checkpoint_path = checkpoint_to_export(out, "has the first epoch finished?")
    if not (out / VOCAB_FILE).exists():
        raise SystemExit(f"{out / VOCAB_FILE}: missing; {checkpoint_path} cannot be exported without it")
    config = state["config"]
    vocab = read_json(out / VOCAB_FILE)
    model = GloveModel(len(vocab["tokens"]), int(config["dim"]))
    model.load_state_dict(state["model"])
    make_output_dir(dest, "--export-checkpoint")
    n_saved = save_vectors(dest / VECTORS_FILE, vocab["tokens"], model.word_vectors(),
                           np.asarray(vocab["counts"], dtype=np.int64))
    if config["tokenization"] == "subword":
        copy_tokenizer(out / TOKENIZER_FILE if (out / TOKENIZER_FILE).exists() else config["tokenizer"], dest)
    write_snapshot_record(args, dest, state, vocab, n_saved, checkpoint_path, sha256)
    print(f"exported {checkpoint_path} (after epoch {state['epoch'] + 1} of {config['epochs']}) -> {dest}")
    return 0


def write_snapshot_record(args, dest: Path, state: dict, vocab: dict, n_saved: int, checkpoint_path: Path,
                          sha256: str) -> None:
    """The snapshot's train.json (status running, a ``snapshot`` block) and encoder.json. Its labels are the
    checkpoint's own settings, not this command's defaults: the export command need not repeat the run's flags."""
    config = state["config"]
    args.tokenization = config["tokenization"]
    args.pretokenize = config.get("pretokenize") or "none"  # the run's, not this export command's default
    setting = setting_name(args) if args.setting else default_setting(
        config["tokenization"], config["window"], config["dim"], config.get("pretokenize"))
    snapshot = snapshot_block(checkpoint_path, sha256, "strae train-glove", epochs_done=state["epoch"] + 1,
                              epochs_planned=config["epochs"])
    RunRecord(language=args.lang, model="glove", setting=setting, seed=args.seed, config=config,
              history=state["history"], timings=state.get("timings", {}), provenance=provenance(seed=args.seed),
              blocks={"data": {"vocab_size": len(vocab["tokens"]), "nnz": vocab.get("nnz"),
                               "n_vectors_saved": n_saved}, "snapshot": snapshot}).to_disk(dest)
    write_manifest(dest, args, setting, config)


def corpus_source(corpus: Path, corpus_sha256: str) -> dict[str, str]:
    """Which of its language block's sources a prepared corpus came from (``corpus_source`` in the meta.json `strae
    prepare-corpus` writes beside it: the authors' corpus or the mirror's substitute), for the tables' notes as
    every strae run's data block carries it; nothing for a text file of another origin, or one that is not the
    split the meta.json describes (its sha256)."""
    meta_file = corpus.parent / "meta.json"
    if not meta_file.is_file():
        return {}
    meta = read_json(meta_file)
    described = {(meta.get(split) or {}).get("sha256") for split in ("train", "dev")}
    source = meta.get("corpus_source")
    return {"corpus_source": source} if source and corpus_sha256 in described else {}


# ------------------------------------------------------------------------------------------ strae train-glove
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.pretokenize != "none" and args.tokenization != "words":
        raise SystemExit(f"--pretokenize {args.pretokenize}: splits the lines of --tokenization words; subword runs "
                         "read the language's tokenised corpus, already pretokenised as its config says")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.export_checkpoint is not None:  # needs only the run directory, not the corpus
        return export_checkpoint(args)
    corpus = resolve_inputs(args)
    make_output_dir(args.out)
    # two processes on one --out would interleave checkpoints and train.json (a rerun beside a running job)
    lock = lock_run_dir(args.out, "strae train-glove")  # noqa: F841 - held until this function returns
    record = new_record(args, corpus)
    refuse_unresumable(args, record)  # before anything in the directory changes
    if already_completed(args):
        return 0
    began = time.time()
    # the corpus read and counted first: one that cannot train (no token kept, nothing co-occurring) leaves no
    # train.json behind, as `running` or otherwise
    tokens, counts, triples = load_data(args, record)
    record.to_disk(args.out)
    model, optimizer = build_model(args, len(tokens))
    start_epoch = resume(args.out, record, model, optimizer)
    try:
        # the training loop only: counting (above) is not resumable part-way anyway
        with StopRequest("after the current batch, keeping the last finished epoch's checkpoint") as stop:
            train_epochs(model, optimizer, triples, args, start_epoch, record.history,
                         epoch_checkpointer(args.out, record, model, optimizer, stop), stop)
    except TrainingFailed as error:
        return record.fail(args.out, str(error), args.record_failure, stream=sys.stdout)
    except StoppedBySignal as stopped:  # train.json stays as the last epoch left it (status running)
        print(stopped, file=sys.stderr)
        return stopped.exit_status
    return finish(args, record, tokens, counts, model, began)


def resolve_inputs(args) -> Path:
    """The corpus (and, for subword runs, the tokenizer: set on ``args``) under --resources-dir unless given."""
    corpus = args.corpus or paths.corpus_file(args.lang, "train", args.resources_dir)
    if not corpus.exists():
        raise SystemExit(f"--corpus {corpus}: file does not exist (run `strae prepare-corpus` or pass --corpus)")
    if args.tokenization == "subword":
        args.tokenizer = args.tokenizer or paths.tokenizer_model(args.lang, args.resources_dir)
        if not args.tokenizer.exists():
            raise SystemExit(f"--tokenizer {args.tokenizer}: file does not exist (run `strae tokenizer`)")
    return corpus


def _compared_away(saved: dict) -> tuple[str, ...]:
    """What a resume does not compare: labels, epochs (they may grow), and the seed where the saved config predates
    it (2026-11-29)."""
    # a subword run's pretokenize is --data-dir's (its train.json), a property of the ids that tokenized_dir names
    # and the counts key compares, not a setting of its own: a run from before it was recorded (2026-11-30), or one
    # whose split is gone (a completed run rerun), resumes on the same ids
    subword = saved.get("tokenization") == "subword"
    return LABEL_FIELDS + ("epochs",) + (() if "seed" in saved else ("seed",)) + (("pretokenize",) if subword else ())


def refuse_unresumable(args, record: RunRecord) -> None:
    """The run directory's checkpoint, or its completed run, made with other settings (labels and epochs aside), or
    already past --epochs, is refused before this command writes anything: it would otherwise drop the completed
    run's manifest and rewrite its train.json first, then refuse, leaving a finished run unusable."""
    out, saved, done = args.out, None, 0
    if (out / CHECKPOINT_FILE).exists():
        try:  # the config and epoch only: the tables stay on disk (mmap)
            state = torch.load(out / CHECKPOINT_FILE, map_location="cpu", weights_only=False, mmap=True)
        except Exception as error:
            raise SystemExit(f"{out / CHECKPOINT_FILE}: unreadable checkpoint ({error}); delete the run directory "
                             "or use another --out") from error
        saved, done = state["config"], state["epoch"] + 1
    elif (out / ENCODER_MANIFEST).exists() and (out / TRAIN_JSON).exists():
        previous = RunRecord.from_disk(out)
        saved, done = previous.config, len(previous.history)
    if saved is None:
        return
    changed = _differences(saved, record.config, ignore=_compared_away(saved))
    if changed:
        raise SystemExit(f"{out}: made with different {', '.join(changed)}; delete the run directory or use another "
                         "--out (nothing in it was changed)")
    if done > args.epochs:
        raise SystemExit(f"{out}: trained {done} epochs, past this command's --epochs {args.epochs}; ask for at least "
                         "that many, or delete the run directory to train it again")


def already_completed(args) -> bool:
    """True when this run finished with at least --epochs epochs. A finished run asked for more epochs continues
    from its checkpoint; its manifest goes first, so the directory is not loadable while its vectors change."""
    out = args.out
    if not ((out / ENCODER_MANIFEST).exists() and (out / TRAIN_JSON).exists()):
        return False
    previous = RunRecord.from_disk(out)
    if previous.status == "completed" and len(previous.history) >= args.epochs:
        manifest = read_json(out / ENCODER_MANIFEST)
        wanted = args.stopwords_language or args.lang
        updates = {}
        if manifest.get("stopwords_language") != wanted:
            # an evaluation label, not a training setting (the vectors do not depend on it): a changed
            # languages.<lang>.stopwords_language reaches the run's evaluations, as the workflow's rerun intends
            updates["stopwords_language"] = wanted
        split_with = run_pretokenize(args)
        if args.tokenization == "subword" and split_with not in ("none", manifest.get("pretokenize")):
            # a subword --data-dir run completed before its split's pretokeniser was recorded (2026-11-30): its
            # encoder must apply it, as the ids it trained on had it (the vectors do not change)
            updates["pretokenize"] = split_with
        if updates:
            write_json(out / ENCODER_MANIFEST, {**manifest, **updates})
        done = ", ".join(f"encoder.json's {key} set to {value!r}" for key, value in updates.items())
        print(f"{out}: already completed; {done or 'nothing to do'}")
        return True
    (out / ENCODER_MANIFEST).unlink()
    return False


def new_record(args, corpus: Path) -> RunRecord:
    """train.json of this command (status running); GloVe's row-wise updates always run on the CPU."""
    tokenizer_sha = sha256_file(args.tokenizer) if args.tokenization == "subword" else None
    config = _train_config(args, corpus, sha256_file(corpus), tokenizer_sha)
    return RunRecord(language=args.lang, model="glove", setting=setting_name(args), seed=args.seed, config=config,
                     provenance=provenance(seed=args.seed, device="cpu", requested_device=args.device,
                                           torch_threads=torch.get_num_threads(), command=sys.argv))


def load_data(args, record: RunRecord) -> tuple[list[str], np.ndarray, tuple[torch.Tensor, ...]]:
    """(tokens, their corpus counts, the training triples: row, column, log count, GloVe weight per entry)."""
    tokens, counts, matrix, count_seconds = load_or_count(args, args.out, record.config)
    record.timings["cooccurrence_s"] = round(count_seconds, 2)
    rows, cols, values = cooccurrence_triples(matrix)
    del matrix  # the triples hold the same entries: keep one copy in memory, not two
    triples = (
        torch.from_numpy(rows), torch.from_numpy(cols),
        torch.from_numpy(np.log(values).astype(np.float32)),
        torch.from_numpy(glove_weight(values, args.x_max, args.alpha).astype(np.float32)),
    )
    del rows, cols, values
    source = corpus_source(Path(record.config["corpus"]), record.config.get("corpus_sha256") or "")
    record.blocks["data"] = {"vocab_size": len(tokens), "nnz": int(len(triples[0])),
                             "n_corpus_tokens": int(counts.sum()), **source}
    print(f"GloVe: vocab {len(tokens):,}, non-zero co-occurrences {record.blocks['data']['nnz']:,}")
    return tokens, counts, triples


def build_model(args, n_tokens: int) -> tuple[GloveModel, RowOptimizer]:
    """The word and context tables, initialised from their own generator (--seed alone decides them), and the
    row-wise optimiser that updates only the rows a batch touches."""
    model = GloveModel(n_tokens, args.dim, generator=torch.Generator().manual_seed(args.seed))
    return model, RowOptimizer([model.word.data, model.context.data], kind=args.optimizer, lr=args.lr)


def resume(out: Path, record: RunRecord, model: GloveModel, optimizer: RowOptimizer) -> int:
    """The first epoch to train: 0, or the one after checkpoint.pt's (tables, optimiser, history restored).
    Labels and --epochs may change between sessions; anything else was held to the checkpoint by refuse_unresumable."""
    checkpoint_path = out / CHECKPOINT_FILE
    if not checkpoint_path.exists():
        return 0
    state = load_checkpoint(checkpoint_path)  # its settings were checked before anything was written
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    record.history[:] = state["history"]
    record.timings.update(state.get("timings", {}))
    print(f"resuming from {checkpoint_path} after epoch {state['epoch'] + 1}")
    return state["epoch"] + 1


def epoch_checkpointer(out: Path, record: RunRecord, model: GloveModel, optimizer: RowOptimizer,
                       stop: StopRequest | None = None):
    """``on_epoch_end(epoch)``: checkpoint.pt after every epoch (an epoch is GloVe's unit of resumption: the
    shuffle is per epoch), then train.json — not once ``stop`` has a signal: train.json is the train rule's declared
    output, which a Snakemake stopped by the same signal deletes meanwhile (strae.train.stopped). ``train_s`` adds
    this session's time to the earlier sessions'."""
    train_started, previous_train_s = time.time(), record.timings.get("train_s", 0.0)

    def on_epoch_end(epoch: int) -> None:
        record.timings["train_s"] = round(previous_train_s + time.time() - train_started, 2)
        save_checkpoint(out / CHECKPOINT_FILE, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
            "history": record.history, "config": record.config, "timings": record.timings})
        if stop is None or not stop.requested:
            record.to_disk(out)

    return on_epoch_end


def finish(args, record: RunRecord, tokens: list[str], counts: np.ndarray, model: GloveModel,
           began: float) -> int:
    """vectors.bin (w + w~), the tokenizer copy, train.json (completed), then encoder.json last."""
    n_saved = save_vectors(args.out / VECTORS_FILE, tokens, model.word_vectors(), counts)
    if args.tokenization == "subword":
        copy_tokenizer(args.tokenizer, args.out)
    record.timings["total_s"] = round(time.time() - began, 2)
    record.status, record.blocks["data"] = "completed", {**record.blocks["data"], "n_vectors_saved": n_saved}
    record.to_disk(args.out)
    write_manifest(args.out, args, record.setting, record.config)
    print(f"GloVe run complete: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
