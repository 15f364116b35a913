"""``strae train-multiview``: Quick-Thoughts-style contrastive training of the multi-view encoder (or CL).

    strae train-multiview --parses resources/parses/L --lang L --seed N --out DIR [--model ctl|cl]
                          [--max-sentences N] [--epochs 1] [--max-steps N] [--hidden 1000] [--embedding-dim 300] ...

Paper §4 defaults: Adam lr 5e-3, gradient clipping 5.0 (total norm), batch 100 consecutive sentences, one epoch,
20k most frequent tokens, embeddings 300, hidden 1000, Xavier weights and zero biases. Batches follow corpus order
(not shuffled): the other sentences of a batch are the negatives, as in Quick-Thoughts. A run trains on the
first ``--max-sentences`` kept sentences of the parse (the budget; the paper itself stopped after 4.6M of 78M
sentences) and can be capped at ``--max-steps``. ``--epochs N`` passes over those sentences N times in the same
order (default 1, the paper's): a corpus smaller than the paper's can be shown as many sentences as the paper's model
saw (ELTeC-eng's 585k sentences x 8 = 4.7M); the run's setting names it (``_ep8``).

Run directory: ``vocab.json``, ``checkpoint.pt`` (every ``--checkpoint-every-steps`` steps: model, optimiser, RNG,
step, history; also where SIGTERM / SIGINT stop the run, after the current step, exit status 128 + signal;
rerunning the same command resumes from it), ``model.pt`` (config + weights), ``parser.json`` (the
spaCy pipeline the parse used; the encoder parses eval sentences with the same one), ``train.json``, and
``encoder.json`` written last. With ``--curve-every N``, ``curve/step<STEP>/`` keeps the weights before the first step
and after every N training sentences (rounded to whole batches), each loadable like the run itself (``model.pt``,
``vocab.json``, ``parser.json``, a ``train.json`` whose ``snapshot`` block names the step, the sentences trained and
the training seconds, ``encoder.json`` last): the points of the paper's Figure 2 (SICK-E and SICK-R during training),
which ``strae evaluate --suite senteval --curve`` scores. The snapshots do not change the weights, so the option is not
part of the recipe.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from baselines.multiview import DEFAULT_EMBEDDING_DIM, DEFAULT_HIDDEN, OWN_VIEW, default_setting
from baselines.multiview.data import Vocabulary, batch_at, count_context_pairs, load_parsed, select_training
from baselines.multiview.model import MODELS, MultiviewConfig, MultiviewModel, bilstm_path
from baselines.multiview.parse import META_FILE, parse_identity, recorded_recipe
from strae.argtypes import nonnegative_int, positive_float, positive_int
from strae.encode import write_encoder_manifest
from strae.io import atomic_path, make_output_dir, provenance, read_json, write_json
from strae.runs import (
    CHECKPOINT_FILE,
    ENCODER_MANIFEST,
    ProgressFile,
    RunRecord,
    Sessions,
    TrainingFailed,
    invalidate_outputs,
    load_checkpoint,
    lock_run_dir,
    save_checkpoint,
    save_weights,
)
from strae.runtime import (
    StopRequest,
    capture_rng_states,
    configure_determinism,
    describe_device,
    job_device,
    placement_fields,
    restore_rng_states,
    seed_everything,
)

# the run directory's folder of training-curve points (--curve-every): the paper's Figure 2
CURVE_DIR = "curve"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae train-multiview", description=__doc__.split("\n\n")[0])
    p.add_argument("--parses", required=True, type=Path, help="directory written by `strae parse-corpus`")
    p.add_argument("--lang", required=True, help="language key of config/config.yaml (labels the run)")
    p.add_argument("--seed", type=nonnegative_int, required=True)
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--model", choices=sorted(MODELS), default="ctl",
                   help="ctl: BiLSTM target vs Tree-LSTM context (the paper's model); cl: BiLSTM vs BiLSTM")
    p.add_argument("--vocab-size", type=positive_int, default=20000)
    p.add_argument("--no-lowercase", dest="lowercase", action="store_false",
                   help="keep case in the vocabulary (default: lowercase tokens)")
    p.add_argument("--embedding-dim", type=positive_int, default=DEFAULT_EMBEDDING_DIM)
    p.add_argument("--hidden", type=positive_int, default=DEFAULT_HIDDEN, help="sentence-vector size of each view")
    p.add_argument("--lr", type=positive_float, default=5e-3)
    p.add_argument("--clip-grad-norm", type=positive_float, default=5.0)
    p.add_argument("--batch-size", type=positive_int, default=100)
    p.add_argument("--max-tokens", type=positive_int, default=64, help="drop longer sentences (kept as context gaps)")
    p.add_argument("--sentences-per-book", type=positive_int, default=None,
                   help="train on each book's first N kept sentences (all books contribute; corpus order kept)")
    p.add_argument("--max-sentences", type=positive_int, default=None, help="then on the first N of those")
    p.add_argument("--epochs", type=positive_int, default=1,
                   help="passes over the selected sentences, each in corpus order (default 1, the paper's)")
    p.add_argument("--own-view", choices=OWN_VIEW, default="excluded",
                   help="a sentence's own other view in the objective: excluded (default; §3.2's Quick-Thoughts "
                        "objective, context sentences only) or positive (the introduction's reading: the views of "
                        "one sentence close too); the setting gets _ownview")
    p.add_argument("--max-steps", type=positive_int, default=None, help="stop after N steps (recorded)")
    p.add_argument("--checkpoint-every-steps", type=positive_int, default=50)
    p.add_argument("--curve-every", type=positive_int, default=None, metavar="SENTENCES",
                   help="also keep the weights before training and every N training sentences (N // batch size "
                        "steps; N at least a batch) "
                        "under OUT/curve/step<STEP>/, for the paper's Figure 2 (`strae evaluate --suite senteval "
                        "--curve`); not part of the recipe")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--setting", default=None,
                   help="run label (default {model}_h{hidden}_e{embedding_dim}, + _ep{N} for --epochs N > 1, "
                        "+ _ownview for --own-view positive)")
    p.add_argument("--record-failure", action="store_true", help="exit 0 after recording a failed run")
    p.add_argument("--quiet", action="store_true")
    return p


def setting_name(args: argparse.Namespace) -> str:
    return args.setting or default_setting(args.model, args.hidden, args.embedding_dim, args.epochs, args.own_view)


def _recipe(args: argparse.Namespace, parse_meta: dict[str, Any]) -> dict:
    """The settings a run directory's checkpoint and completed record must match. The parse is part of it: the
    workflow keeps one run directory per model and seed whatever the parse setting, so a run trained on a quick
    overlay's parse must never pass for one of the full parse (or be resumed on it)."""
    recipe = {k: getattr(args, k) for k in ("model", "vocab_size", "lowercase", "embedding_dim", "hidden", "lr",
                                            "clip_grad_norm", "batch_size", "max_tokens", "sentences_per_book",
                                            "max_sentences", "max_steps", "seed")}
    if args.epochs != 1:  # a one-epoch recipe reads as every run's did before the option (their checkpoints resume)
        recipe["epochs"] = args.epochs
    if args.own_view != "excluded":  # likewise: the default objective reads as before the option
        recipe["own_view"] = args.own_view
    return {**recipe, "parse": parse_identity(parse_meta)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    parse_meta = read_parse_meta(args.parses)
    make_output_dir(args.out)
    lock = lock_run_dir(args.out, "strae train-multiview")  # noqa: F841 - held until this function returns
    recipe = _recipe(args, parse_meta)
    if args.curve_every is not None and args.curve_every < args.batch_size:
        raise SystemExit(f"--curve-every {args.curve_every}: a point every batch at most (--batch-size "
                         f"{args.batch_size}); each point keeps the model's weights")
    if already_trained(args.out, recipe, args):
        check_curve_of_trained(args)
        return 0
    saved = checked_checkpoint(args.out, recipe)  # refused before the parse loads and parser.json is rewritten
    if args.threads:
        torch.set_num_threads(args.threads)
    device = job_device(args.device)  # several GPUs: the one the fewest strae jobs hold
    # before the model touches the GPU (cuBLAS reads its workspace setting then): the Tree-LSTM's child sums are
    # index_add scatters, which sum in any order on CUDA unless deterministic kernels are asked for
    determinism = configure_determinism(device)
    # seeded before anything draws: the Xavier initialisation depends on --seed alone (batches are not shuffled)
    seed_everything(args.seed)
    job = prepare(args, recipe, parse_meta, device)
    progress = resume(job, saved)
    progress.open_session(device)
    job.record = new_record(job, parse_meta, determinism)
    refuse_lost_curve_points(args, progress.step)
    return train(job, progress)


def refuse_lost_curve_points(args: argparse.Namespace, step: int) -> None:
    """A run begun without --curve-every (or at another spacing) and continued at ``step`` with it: the points
    before that step cannot be made (their weights are gone), so the curve could never be scored; refused before
    anything is trained or changed."""
    if args.curve_every is None:
        return
    every = curve_every_steps(args)
    lost = [s for s in range(0, step, every) if not (curve_point_dir(args.out, s) / ENCODER_MANIFEST).exists()]
    if lost:
        raise SystemExit(f"{args.out}: continuing at step {step}, the curve's points at steps {lost} cannot be made "
                         "(their weights are gone); delete the run directory to train it again with its whole "
                         "curve, or train it without --curve-every")


def check_curve_of_trained(args: argparse.Namespace) -> None:
    """A finished run asked for a curve it was trained without (or at another spacing) cannot get it: said, not
    passed over (its points' weights are gone)."""
    if args.curve_every is None:
        return
    kept = (RunRecord.from_disk(args.out).blocks.get("curve") or {}).get("every_sentences")
    if kept != args.curve_every:
        raise SystemExit(f"{args.out}: trained {'without a curve' if kept is None else f'with --curve-every {kept}'}; "
                         f"--curve-every {args.curve_every} needs it trained again: delete the run directory, or "
                         "ask for no curve")


@dataclass
class Job:
    """One resolved ``strae train-multiview`` command: the data, the model and its optimiser, where to write."""

    args: argparse.Namespace
    recipe: dict[str, Any]  # the settings a checkpoint must match (max_steps may grow)
    corpus: Any  # baselines.multiview.data.ParsedCorpus: the training subset, in corpus order
    vocab: Vocabulary
    config: MultiviewConfig
    model: MultiviewModel
    optimizer: torch.optim.Optimizer
    device: torch.device
    total_steps: int
    batches_per_epoch: int
    data_stats: dict[str, Any]
    started: float  # perf_counter when data loading began (the final message's total)
    curve_steps: int | None = None  # --curve-every in whole batches: a curve point every this many steps
    record: RunRecord | None = None

    @property
    def out(self) -> Path:
        return self.args.out


@dataclass
class Progress:
    """Where training stands: what checkpoint.pt holds besides the model, the optimiser and the RNG states."""

    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    train_seconds: float = 0.0
    sessions: Sessions = field(default_factory=Sessions)  # train.json timings.sessions (strae.runs.Sessions)

    def open_session(self, device: torch.device) -> None:
        # the BiLSTM path is per device (packed on CUDA, length groups on the CPU): a run resumed on another device
        # trained its steps on both, so each session names its own (provenance.bilstm: the last session's)
        self.sessions.open(self.step, describe_device(device), bilstm=bilstm_path(device))

    def close_session(self, stopped_by: str | None = None) -> None:
        self.sessions.close(self.step, stopped_by)


def already_trained(out: Path, recipe: dict, args: argparse.Namespace | None = None) -> bool:
    """True for the same command twice; a completed run with another recipe is an error, never overwritten."""
    previous = RunRecord.from_disk(out)
    if not ((out / ENCODER_MANIFEST).exists() and previous is not None and previous.status == "completed"):
        return False
    recorded = recorded_recipe(previous)
    if recorded == recipe:
        print(f"{out}: already trained (train.json status completed)")
        return True
    changed = differing_keys(recorded, recipe)
    if changed == ["max_steps"] and extends(recorded["max_steps"], recipe["max_steps"]):
        if args is not None:  # before its outputs are dropped: a curve it cannot have is refused first
            refuse_lost_curve_points(args, previous.timings.get("steps") or 0)
        # a time-boxed run asked for more steps: it continues from its checkpoint (resume allows max_steps to grow)
        print(f"{out}: extending the completed run from --max-steps {recorded['max_steps']} to "
              f"{recipe['max_steps'] or 'the last epoch'}")
        invalidate_outputs(out)
        return False
    raise SystemExit(f"{out}: holds a completed run with another recipe (differs in: {', '.join(changed)}); "
                     "use another --out or delete it to retrain")


def differing_keys(saved: dict[str, Any], asked: dict[str, Any], ignore: tuple[str, ...] = ()) -> list[str]:
    """The recipe keys whose values differ (a key only one side has counts), sorted."""
    return sorted(key for key in saved.keys() | asked.keys() if key not in ignore and saved.get(key) != asked.get(key))


def extends(done: int | None, asked: int | None) -> bool:
    """True when ``asked`` max_steps continues a run time-boxed at ``done`` (None: to its last epoch)."""
    return done is not None and (asked is None or asked > done)


def read_parse_meta(parses: Path) -> dict[str, Any]:
    """The parse's meta.json: written last by `strae parse-corpus`, so its presence means the parse finished."""
    if not (parses / META_FILE).exists():
        raise SystemExit(f"{parses / META_FILE}: not found; run `strae parse-corpus` first")
    return read_json(parses / META_FILE)


def prepare(args: argparse.Namespace, recipe: dict, parse_meta: dict, device: torch.device) -> Job:
    """Load the training sentences and the vocabulary, build the model and its optimiser."""
    started = time.perf_counter()
    parsed = load_parsed(args.parses, args.max_tokens)
    corpus = select_training(parsed, args.max_sentences, args.sentences_per_book)
    vocab = run_vocabulary(args, parsed)
    # the encoder parses evaluation sentences with the pipeline that parsed the training corpus
    write_json(args.out / "parser.json", parse_meta["parser"])
    config = MultiviewConfig(model=args.model, vocab_size=len(vocab.tokens), embedding_dim=args.embedding_dim,
                             hidden=args.hidden)
    model = MultiviewModel(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    if not len(corpus):
        raise SystemExit(f"{args.parses}: no training sentences left after --max-tokens {args.max_tokens}, "
                         "--sentences-per-book and --max-sentences")
    if count_context_pairs(corpus.books, corpus.positions, args.batch_size) == 0:
        # every step would be skipped (a sentence's context is its neighbours in the same book and batch): a
        # "completed" run of untrained weights otherwise
        raise SystemExit(f"{args.parses}: no sentence has a neighbour of its own book in its batch (--batch-size "
                         f"{args.batch_size}; one-sentence books?): no context pair to train on")
    n_batches = math.ceil(len(corpus) / args.batch_size)
    total_steps = n_batches * args.epochs if args.max_steps is None else min(n_batches * args.epochs, args.max_steps)
    stats = data_stats(args, parse_meta, parsed, corpus, vocab, n_batches, total_steps)
    curve_steps = curve_every_steps(args) if args.curve_every else None
    return Job(args, recipe, corpus, vocab, config, model, optimizer, device, total_steps, n_batches, stats, started,
               curve_steps)


def run_vocabulary(args: argparse.Namespace, parsed) -> Vocabulary:
    """The run's vocabulary: kept in the run directory, so a resumed run maps tokens to the same ids. Read back only
    beside a checkpoint (whose recipe check holds the parse, --vocab-size and --lowercase to the run's); without
    one it is built again: a run killed before its first checkpoint and started with another parse or vocabulary
    setting must not train on the old one."""
    vocab_path = args.out / "vocab.json"
    if vocab_path.exists() and (args.out / CHECKPOINT_FILE).exists():
        return Vocabulary.from_dict(read_json(vocab_path))
    # the most frequent tokens of the whole parse (the paper: of the corpus), not just the trained subset
    vocab = Vocabulary.build(parsed.tokens, args.vocab_size, args.lowercase)
    write_json(vocab_path, vocab.to_dict())
    return vocab


def data_stats(args: argparse.Namespace, parse_meta: dict, parsed, corpus, vocab: Vocabulary, n_batches: int,
               total_steps: int) -> dict[str, Any]:
    """train.json ``data``: what the parse held, what was kept and selected, and what the steps actually read
    (``sentences_trained``, ``tokens_trained``: over every epoch, a sentence counted once a pass)."""
    epochs, rest = divmod(total_steps, n_batches)
    last = min(len(corpus), rest * args.batch_size)  # the sentences of the last, partial pass
    corpus_tokens = sum(len(t) for t in corpus.tokens)
    return {
        "parses": str(args.parses), "corpus": parse_meta.get("corpus"),
        "corpus_sha256": parse_meta.get("corpus_sha256"),
        "parse_settings": {k: parse_meta.get(k) for k in ("paragraphs_per_book", "max_sentences", "n_sentences")},
        "sentences_read": parsed.n_read, "sentences_dropped_length": parsed.n_dropped_length,
        "sentences_kept": len(parsed), "sentences_selected": len(corpus),
        # epochs asked; the steps' own count is sentences_trained (a time-boxed run stops short of them)
        "epochs": args.epochs,
        "sentences_trained": sentences_trained(total_steps, n_batches, args.batch_size, len(corpus)),
        "books": int(len(set(corpus.books.tolist()))), "batches_per_epoch": n_batches,
        "context_pairs_per_epoch": count_context_pairs(corpus.books, corpus.positions, args.batch_size),
        "vocab_size": len(vocab.tokens),
        "tokens_trained": int(epochs * corpus_tokens + sum(len(t) for t in corpus.tokens[:last])),
    }


def sentences_trained(steps: int, n_batches: int, batch_size: int, n_sentences: int) -> int:
    """Training sentences the first ``steps`` steps read: whole passes of ``n_sentences`` (the last batch of a pass
    may be short), then full batches of the pass under way."""
    epochs, rest = divmod(steps, n_batches)
    return epochs * n_sentences + min(n_sentences, rest * batch_size)


def checked_checkpoint(out: Path, recipe: dict[str, Any]) -> dict[str, Any] | None:
    """checkpoint.pt's state when there is one, refused when it was made with another recipe (max_steps may grow
    between runs, to extend a time-boxed run; everything else must match)."""
    checkpoint = out / CHECKPOINT_FILE
    if not checkpoint.exists():
        return None
    state = load_checkpoint(checkpoint)
    saved = dict(state["recipe"])
    if "parser" not in (saved.get("parse") or {}) and (previous := RunRecord.from_disk(out)) is not None:
        # a checkpoint written before the recipe named its parse, or the parse its parser: the run's train.json
        # (written by that session) does
        saved["parse"] = recorded_recipe(previous)["parse"]
    changed = differing_keys(saved, recipe, ignore=("max_steps",))
    if changed:
        raise SystemExit(f"{checkpoint}: made with another recipe (differs in: {', '.join(changed)}); delete it "
                         "or use another --out")
    return state


def resume(job: Job, state: dict[str, Any] | None) -> Progress:
    """Continue from the checkpoint's ``state`` (:func:`checked_checkpoint`) when there is one: weights, optimiser,
    RNG states, step and history."""
    if state is None:
        return Progress()
    checkpoint = job.out / CHECKPOINT_FILE
    if state["step"] > job.total_steps:  # it would be recorded as a shorter run than its weights are
        raise SystemExit(f"{checkpoint}: already at step {state['step']}, past the {job.total_steps} steps asked "
                         "(--max-steps); ask for at least that many, or delete it to start over")
    job.model.load_state_dict(state["model"])
    job.optimizer.load_state_dict(state["optimizer"])
    restore_rng_states(state["rng"], job.device)
    sessions = Sessions.from_checkpoint(state.get("sessions"), state["step"])
    print(sessions.resume_report(f"{job.out}: resuming at step {state['step']}/{job.total_steps}"))
    return Progress(state["step"], state["history"], state["train_seconds"], sessions)


def new_record(job: Job, parse_meta: dict, determinism: dict[str, Any]) -> RunRecord:
    return RunRecord(
        language=job.args.lang, model=f"multiview_{job.args.model}", setting=setting_name(job.args),
        seed=job.args.seed,
        config={"recipe": job.recipe, "model": job.config.to_dict(), "views": list(job.config.views),
                # the objective's every choice, the own view's too (the recipe names it only when not the default)
                "objective": "quick-thoughts NLL, inner-product critic, in-batch negatives, context ±1, own view "
                             + ("a positive" if job.args.own_view == "positive" else "excluded"),
                "init": "xavier_uniform weights, zero biases, zero leaf child states",
                "test_vector": "concat(target view, context view)"},
        provenance=provenance(device=describe_device(job.device), seed=job.args.seed, command=sys.argv,
                              determinism=determinism, bilstm=bilstm_path(job.device), **placement_fields()),
        blocks={"data": job.data_stats, "parser": parse_meta["parser"],
                **({"curve": curve_block(job)} if job.curve_steps else {})},
    )


def train(job: Job, progress: Progress) -> int:
    """The step loop: checkpoint every --checkpoint-every-steps and at the end; a failure is recorded."""
    write_train_json(job, progress)
    if (job.curve_steps and progress.step % job.curve_steps == 0 and progress.step < job.total_steps
            and not (curve_point_dir(job.out, progress.step) / ENCODER_MANIFEST).exists()):
        # the initial weights, or a point a run time-boxed at its step (whose last step was the run itself) and now
        # extended has to keep: the weights are that step's (the checkpoint's)
        save_curve_point(job, progress)
    job.model.train()
    bar = tqdm(total=job.total_steps, initial=progress.step, desc=f"train-multiview {job.args.model}", unit="batch",
               disable=job.args.quiet)
    progress_file = ProgressFile(job.out, job.total_steps)  # progress.json, for a time limit's decision
    try:
        with StopRequest() as stop:
            while progress.step < job.total_steps and not stop.requested:
                metrics = train_step(job, progress)
                progress_file.update(progress.step)
                bar.update(1)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", top1=f"{metrics['context_top1']:.2f}")
                if job.curve_steps and progress.step % job.curve_steps == 0 and progress.step < job.total_steps:
                    # before the step's checkpoint: a run killed between the two makes this step, and its point,
                    # again from the checkpoint before (the same weights: batches and seeds are fixed)
                    save_curve_point(job, progress)
                if progress.step == job.total_steps:
                    progress.close_session()  # before the last checkpoint, which a later --max-steps extends
                if progress.step % job.args.checkpoint_every_steps == 0 or progress.step == job.total_steps:
                    save_progress(job, progress)
            if progress.step < job.total_steps:
                # inside the with-block: its handlers stay installed while the checkpoint is written, so a
                # supervisor's further SIGTERM is ignored as StopRequest promises instead of killing the save
                bar.close()
                return stopped(job, progress, stop)
    except TrainingFailed as error:  # (a programming error elsewhere, a ValueError included, is no run failure)
        bar.close()
        progress.close_session(stopped_by="failure")
        write_train_json(job, progress)
        return job.record.fail(job.out, str(error), job.args.record_failure)
    bar.close()
    return finish(job, progress)


def stopped(job: Job, progress: Progress, stop: StopRequest) -> int:
    """SIGTERM / SIGINT / SIGHUP stopped the loop: checkpoint.pt where it stands, train.json untouched (it is the
    train rule's declared output, and a Snakemake stopped by the same signal deletes it as incomplete meanwhile:
    rewritten now, it would look complete to the next run); exit 128 + signal. Called while ``stop`` still holds
    the signals."""
    progress.close_session(stopped_by=stop.name)
    save_progress(job, progress, write_record=False)
    print(stop.stopped_line(job.out, f"step {progress.step}/{job.total_steps}"), file=sys.stderr)
    return stop.exit_status


def train_step(job: Job, progress: Progress) -> dict[str, Any]:
    """One optimiser step on the next batch of consecutive sentences (its neighbours are the positives)."""
    args, device = job.args, job.device
    t0 = time.perf_counter()
    try:
        # epoch after epoch the same batches in the same order (the negatives are a batch's other sentences)
        start = (progress.step % job.batches_per_epoch) * args.batch_size
        batch, books, positions = batch_at(job.corpus, job.vocab, start, args.batch_size)
        if count_context_pairs(books, positions, len(books)) == 0:
            # no sentence of the batch has its neighbour in it: the corpus' last batch when it holds one sentence
            # (the corpus one more than a multiple of the batch size), or sentences of different books. The loss
            # has nothing to learn from it: skipped (no update), said in the history and summary, not a failure
            progress.step += 1
            progress.history.append({"step": progress.step,
                                     "skipped": f"no context pairs in a batch of {len(books)} sentence(s)"})
            return {"loss": math.nan, "context_top1": math.nan}
        loss, metrics = job.model.loss(batch.to(device), torch.from_numpy(books).to(device),
                                       torch.from_numpy(positions).to(device), args.own_view == "positive")
    except ValueError as error:  # a batch the model refuses: the run's data, recorded as its failure
        raise TrainingFailed(f"step {progress.step}: {error}") from error
    if not torch.isfinite(loss):
        raise TrainingFailed(f"non-finite loss {float(loss)} at step {progress.step}")
    job.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(job.model.parameters(), args.clip_grad_norm)
    job.optimizer.step()
    progress.step += 1
    progress.train_seconds += time.perf_counter() - t0
    progress.history.append({"step": progress.step, **{k: round(v, 4) if isinstance(v, float) else v
                                                       for k, v in metrics.items()},
                             "grad_norm": round(float(grad_norm), 3)})
    return metrics


def save_progress(job: Job, progress: Progress, write_record: bool = True) -> None:
    """checkpoint.pt (the full per-step history), then (``write_record``) train.json."""
    save_checkpoint(job.out / CHECKPOINT_FILE, {
        "recipe": job.recipe, "model": job.model.state_dict(), "optimizer": job.optimizer.state_dict(),
        "rng": capture_rng_states(job.device), "step": progress.step, "history": progress.history,
        "train_seconds": progress.train_seconds, "sessions": progress.sessions.entries})
    if write_record:
        write_train_json(job, progress)


def write_train_json(job: Job, progress: Progress) -> None:
    record, step, seconds = job.record, progress.step, progress.train_seconds
    record.history = progress.history[-200:]  # per-step log is long; the last 200 steps + the summary
    record.blocks["summary"] = _summary(progress.history)
    record.timings = {"train_seconds": round(seconds, 1), "steps": step, "total_steps": job.total_steps,
                      "seconds_per_step": round(seconds / max(step, 1), 3), "torch_threads": torch.get_num_threads(),
                      "sessions": progress.sessions.entries}
    record.to_disk(job.out)


def finish(job: Job, progress: Progress) -> int:
    """model.pt, train.json (completed), then encoder.json last (the 'run is usable' mark)."""
    args, out = job.args, job.out
    progress.close_session()
    save_weights(out, {"config": job.config.to_dict(), "state_dict": job.model.state_dict()})
    job.record.status = "completed"
    write_train_json(job, progress)
    write_encoder_manifest(out, "multiview", model=f"multiview_{args.model}", setting=setting_name(args),
                           language=args.lang, seed=args.seed)
    print(f"{out}: trained {progress.step} steps ({job.data_stats['sentences_trained']} sentences) in "
          f"{progress.train_seconds:.0f} s; total {time.perf_counter() - job.started:.0f} s")
    return 0


def curve_every_steps(args: argparse.Namespace) -> int:
    """--curve-every in whole batches: a curve point every this many steps."""
    return args.curve_every // args.batch_size


def curve_point_dir(out: Path, step: int) -> Path:
    return Path(out) / CURVE_DIR / f"step{step:06d}"


def curve_steps(job: Job) -> list[int]:
    """The steps the curve keeps weights at (the last step's are the run's own model.pt)."""
    return list(range(0, job.total_steps, job.curve_steps)) if job.curve_steps else []


def curve_block(job: Job) -> dict[str, Any]:
    """train.json ``curve``: the curve's points, each a step, the training sentences read by then and its folder
    (relative to the run directory); the last point is the finished run itself. ``strae evaluate --suite senteval
    --curve`` reads this and checks that every point is there."""
    points = [{"step": step, "dir": str(curve_point_dir(Path(), step)),
               "sentences_trained": sentences_trained(step, job.batches_per_epoch, job.args.batch_size,
                                                      len(job.corpus))} for step in curve_steps(job)]
    return {"every_sentences": job.args.curve_every, "every_steps": job.curve_steps, "points": points,
            "final": {"step": job.total_steps, "dir": ".", "sentences_trained": job.data_stats["sentences_trained"]}}


def save_curve_point(job: Job, progress: Progress) -> None:
    """``curve/step<STEP>/``: the weights as they are now, loadable like the finished run (its vocabulary and
    parser copied beside them), ``encoder.json`` last."""
    dest = curve_point_dir(job.out, progress.step)
    dest.mkdir(parents=True, exist_ok=True)
    invalidate_outputs(dest)  # a point being rewritten is not loadable until it is whole again
    save_weights(dest, {"config": job.config.to_dict(), "state_dict": job.model.state_dict()})
    for name in ("vocab.json", "parser.json"):
        with atomic_path(dest / name) as tmp:
            shutil.copyfile(job.out / name, tmp)
    record = RunRecord.from_dict(job.record.to_dict())
    record.history = []
    record.timings = {"train_seconds": round(progress.train_seconds, 1), "steps": progress.step,
                      "total_steps": job.total_steps}
    record.blocks["snapshot"] = {
        "global_step": progress.step, "total_steps": job.total_steps,
        "sentences_trained": sentences_trained(progress.step, job.batches_per_epoch, job.args.batch_size,
                                               len(job.corpus)),
        "train_seconds": round(progress.train_seconds, 1),
        "note": "training-curve point (strae train-multiview --curve-every); not a finished run"}
    record.to_disk(dest)
    write_encoder_manifest(dest, "multiview", model=f"multiview_{job.args.model}", setting=setting_name(job.args),
                           language=job.args.lang, seed=job.args.seed, step=progress.step)


# steps per point of the summary's learning curve (train.json keeps only the last 200 steps themselves)
CURVE_WINDOW = 50


def _mean(steps: list[dict], key: str) -> float | None:
    values = [h[key] for h in steps if key in h]  # (a skipped step has no loss)
    return round(sum(values) / len(values), 4) if values else None


def _summary(history: list[dict]) -> dict:
    """First loss, the last 50 steps' means, and the whole run's learning curve: the mean loss and context top-1 of
    every CURVE_WINDOW consecutive steps (a one-epoch run's batches are all different sentences, so this is also
    how the model does on text it has not seen yet)."""
    if not history:
        return {}
    tail = history[-50:]
    windows = [history[i:i + CURVE_WINDOW] for i in range(0, len(history), CURVE_WINDOW)]
    return {"steps": len(history), "skipped_steps": sum("skipped" in h for h in history),
            "first_loss": next((h["loss"] for h in history if "loss" in h), None),
            "last50_mean_loss": _mean(tail, "loss"), "last50_mean_context_top1": _mean(tail, "context_top1"),
            "curve": [{"first_step": w[0]["step"], "last_step": w[-1]["step"], "mean_loss": _mean(w, "loss"),
                       "mean_context_top1": _mean(w, "context_top1")} for w in windows]}


if __name__ == "__main__":
    sys.exit(main())
