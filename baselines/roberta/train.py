"""`strae train-roberta`: MLM pre-training of RoBERTa-medium from scratch on a language's corpus.

Paper schedule (Banyan appendix A): 200,000 steps, 10% linear warm-up, peak lr 5e-5, linear decay to 0; 15% masking
with 80/10/10 replacement. The paper does not state the batch size or optimiser details; it used the Transformers
library, so the Trainer defaults are used where the paper is silent (AdamW betas 0.9/0.999, eps 1e-8, weight decay 0,
gradient clipping at norm 1.0). Batch size defaults to 64 sentences. Everything is a flag and lands in train.json.

Speed without changing the objective: the step's sentences are packed several to a row with block-diagonal attention
(``--packing sentences``; ``none`` pads each to the step's longest), attention runs through torch's fused SDPA with
the relative-position scores as its additive mask (``--attention eager`` is the explicit reference), bf16 autocast
where the device supports it (``--precision``), and ``--grad-accumulation N`` splits a step into N forward/backward
passes whose gradients sum to the full batch's exactly (the loss is normalised by the whole step's masked count);
on CUDA, ``--cuda-graphs on`` replays each step's forward and backward as CUDA graphs over rows padded to shape buckets
(``baselines.roberta.graphs``: the same loss; the step stops being bound by launching ~1,600 small kernels).

The step loop (checkpointing, resume, time budget, divergence handling, train.json) is shared with
``baselines.roberta.simcse`` through :func:`run_steps`.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from strae import paths
from strae.argtypes import fraction, nonnegative_float, nonnegative_int, positive_float, positive_int, probability
from strae.data.batching import batch_at_step
from strae.io import make_output_dir, provenance, read_json, sha256_file
from strae.runs import (
    BEST_WEIGHTS_FILE,
    CHECKPOINT_FILE,
    TRAIN_JSON,
    ProgressFile,
    RunRecord,
    Sessions,
    TrainingFailed,
    copy_tokenizer,
    load_checkpoint,
    lock_run_dir,
    save_checkpoint,
    save_weights,
)
from strae.runtime import (
    StoppedBySignal,
    StopRequest,
    bf16_autocast_supported,
    capture_rng_states,
    configure_determinism,
    describe_device,
    job_device,
    placement_fields,
    restore_rng_states,
    seed_everything,
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


def predicted_losses(model, inputs: torch.Tensor, segments: torch.Tensor, predicted: torch.Tensor,
                     targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy at each predicted position (``predicted``: flat indices into the (rows, columns) layout): the
    vocabulary projection runs only on the ~15% predicted positions instead of all of them (the projection dominates
    CPU time)."""
    from baselines.roberta.model import encode

    hidden = encode(model.roberta, inputs, segments)
    logits = model.lm_head(hidden.flatten(0, 1).index_select(0, predicted))
    # the softmax over the vocabulary in fp32 even under bf16 autocast (only the matmuls run in bf16)
    return torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")


def mlm_token_losses(model, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """(cross-entropy per predicted position, its segment id) of ``rows`` (a ``data.Rows``)."""
    predicted = rows.predicted if rows.predicted is not None else rows.predicted_index()
    losses = predicted_losses(model, rows.inputs, rows.segments, predicted, rows.labels.flatten()[predicted])
    return losses, rows.segments.flatten()[predicted]


def mlm_loss(model, rows) -> torch.Tensor:
    """Masked-LM cross-entropy averaged over the predicted positions: the value ``RobertaForMaskedLM(labels=...)``
    gives on the padded batch."""
    return mlm_token_losses(model, rows)[0].mean()


def run_steps(*, run_dir: Path, record: RunRecord, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
              scheduler: torch.optim.lr_scheduler.LRScheduler, total_steps: int,
              forward_backward: Callable[[int], tuple[torch.Tensor, dict[str, float]]], clip_grad_norm: float,
              checkpoint_every_steps: int, log_every: int, max_minutes: float | None, description: str,
              signature: dict[str, Any] | None = None, dev: DevSelection | None = None) -> str:
    """Run optimiser steps ``[start, total_steps)``, resuming from ``run_dir/checkpoint.pt`` when present (refused,
    naming what differs, when written with another ``signature``: the settings that define the optimisation).
    ``forward_backward(step)`` computes the step's loss, calls ``backward`` itself (once per micro-batch under
    gradient accumulation) and returns (detached loss, metrics); this loop zeroes, clips and steps around it.

    ``dev``: every ``dev.every`` steps the model is scored on a dev set and its weights kept in ``best.pt`` when the
    score beats every earlier one; a completed run ends with those weights (the Transformers Trainer's
    ``--load_best_model_at_end``, which SimCSE's script uses). The scores are in the checkpoint, so a resumed run
    selects exactly as an uninterrupted one.

    Returns "completed" or "stopped" (time budget hit; checkpoint saved, rerun the same command to resume).
    Raises :class:`strae.runs.TrainingFailed` on a non-finite loss, and :class:`strae.runtime.StoppedBySignal`
    after SIGTERM / SIGINT, which stop the loop after the current step with a checkpoint there (train.json is then
    left as it was). ``record`` (train.json) is updated in place.
    """
    loop = StepLoop(run_dir, record, model, optimizer, scheduler, total_steps, signature)
    loop.resume()
    loop.sessions.open(loop.step, describe_device(next(model.parameters()).device))
    record.timings["sessions"] = loop.sessions.entries
    if dev is not None:
        if loop.selection:  # resumed: the scores so far must have been made the way the next ones will be
            check_dev_settings(loop.checkpoint_path, loop.selection, dev.describe())
        record.blocks["final_weights"] = loop.selection = loop.selection or dev.describe()
    clock, window = SessionClock(loop.elapsed_before, max_minutes), loop.window
    model.train()
    with StopRequest() as stop, tqdm(total=total_steps, initial=loop.step, desc=description, dynamic_ncols=True,
                                     mininterval=5) as bar:
        while loop.step < total_steps and not stop.requested:
            try:
                loss, metrics = loop.one_step(forward_backward, clip_grad_norm)
            except TrainingFailed:
                loop.sessions.close(loop.step, "failure")  # the caller records the failure in train.json
                raise
            window.add(loss)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            if loop.step % log_every == 0 or loop.step == total_steps:
                record.history.append(window.entry(loop.step, scheduler.get_last_lr()[0], metrics))
            if dev is not None and loop.step % dev.every == 0:
                loop.score_on_dev(dev)
            if loop.step % checkpoint_every_steps == 0 and loop.step < total_steps:
                loop.save(clock.elapsed())
            if clock.over_budget() and loop.step < total_steps:
                break
        if stop.requested and loop.step < total_steps:
            # Inside the with-block: its handlers stay installed while the checkpoint is written, so a supervisor's
            # further SIGTERM is ignored as StopRequest promises instead of killing the save (as strae.train does).
            # train.json is the train rule's declared output, and a Snakemake stopped by the same signal deletes it
            # as incomplete meanwhile: rewritten now, it would look complete to the next run (strae.train.stopped)
            loop.sessions.close(loop.step, stop.name)
            loop.save(clock.elapsed(), write_record=False)
            raise StoppedBySignal(stop, stop.stopped_line(run_dir, f"step {loop.step}/{total_steps}"))
    loop.sessions.close(loop.step, "max_minutes" if loop.step < total_steps else None)
    loop.finish(clock.elapsed())
    if loop.step < total_steps:
        return "stopped"
    if dev is not None:
        loop.load_best()
    return "completed"


@dataclass
class DevSelection:
    """Which weights a step-counted run keeps: ``score(model)`` (higher is better) every ``every`` steps."""

    every: int
    metric: str
    score: Callable[[torch.nn.Module], float | None]
    settings: dict[str, Any] = field(default_factory=dict)  # recorded beside the scores (pooler, file, ...)

    def describe(self) -> dict[str, Any]:
        return {"rule": "best_dev", "metric": self.metric, "every_steps": self.every, **self.settings,
                "evaluations": [], "step": None, "score": None}


def check_dev_settings(checkpoint: Path, saved: dict[str, Any], asked: dict[str, Any]) -> None:
    """A resumed run's dev selection compares its next scores with the checkpoint's: refused when they are not made
    the same way (file, pooler, pretokenisation, ...). A setting the checkpoint's selection predates is not compared
    (``pretokenize``: since 2026-11-29; before, the dev sentences went in as raw text)."""
    progress = ("rule", "evaluations", "step", "score", "last_step")
    differ = sorted(key for key in asked if key not in progress and key in saved and saved[key] != asked[key])
    if "pretokenize" not in saved and asked.get("pretokenize", "none") != "none":
        differ.append("pretokenize (the checkpoint's scores were made on raw text)")
    if differ:
        raise SystemExit(f"{checkpoint}: its dev scores were made with other settings ({', '.join(differ)}); the "
                         "best checkpoint would be chosen among unlike scores. Use another --out")


class SessionClock:
    """Training time: this session's plus earlier sessions' (a resumed run). The --max-minutes budget counts this
    session only, so each resubmission of a time-boxed job (e.g. on a cluster) gets the whole budget again."""

    def __init__(self, elapsed_before: float, max_minutes: float | None):
        self.elapsed_before, self.started = elapsed_before, time.monotonic()
        self.deadline = self.started + max_minutes * 60 if max_minutes is not None else None

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def over_budget(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


@dataclass
class StepLoop:
    """A step-counted run's model, optimiser, schedule and position: what checkpoint.pt holds."""

    run_dir: Path
    record: RunRecord
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    total_steps: int
    signature: dict[str, Any] | None
    step: int = 0
    elapsed_before: float = 0.0  # training seconds of earlier sessions of a resumed run
    selection: dict[str, Any] = field(default_factory=dict)  # DevSelection's scores so far and the best step
    sessions: Sessions = field(default_factory=Sessions)  # train.json timings.sessions: every process's commit
    # the steps since the last history entry: in the checkpoint, so a resume between --log-every boundaries still
    # logs the whole window's mean (not only the resumed steps')
    window: LossWindow = field(default_factory=lambda: LossWindow())
    progress: ProgressFile = field(init=False)  # progress.json: where the run stands, for a time limit's decision

    def __post_init__(self) -> None:
        self.progress = ProgressFile(self.run_dir, self.total_steps)

    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / CHECKPOINT_FILE

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def resume(self) -> None:
        """Continue from checkpoint.pt when there is one: weights, optimiser, schedule, RNG states, history."""
        if not self.checkpoint_path.exists():
            return
        state = load_checkpoint(self.checkpoint_path)
        self.check_resumable(state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        # the RNG streams (dropout) continue where the interrupted run left them: resumed == uninterrupted
        restore_rng_states(state["rng"], self.device)
        self.step, self.elapsed_before = state["step"], state["elapsed_s"]
        self.record.history = state["history"]
        self.selection = state.get("selection") or {}
        self.sessions = Sessions.from_checkpoint(state.get("sessions"), self.step)
        self.window = LossWindow.from_state(state.get("window"))  # (checkpoints before 2026-11-29: an empty one)
        self.record.timings["resumed_from_step"] = self.step
        print(self.sessions.resume_report(f"resuming {self.run_dir} at step {self.step}/{self.total_steps}"),
              file=sys.stderr)

    def check_resumable(self, state: dict[str, Any]) -> None:
        """A checkpoint written with other settings is refused, naming what differs (never silently mixed)."""
        path, signature, saved = self.checkpoint_path, self.signature, state.get("signature")
        if state["total_steps"] != self.total_steps:
            raise SystemExit(
                f"{path}: written for {state['total_steps']} steps, this command asks for {self.total_steps}; "
                "use the same options to resume or a new --out"
            )
        if signature is not None and saved is None:
            raise SystemExit(f"{path}: written by an older strae that did not record its settings; "
                             "it cannot be resumed safely, use a new --out")
        if signature is not None:
            # keys added to the signature later are compared only where the checkpoint has them
            signature = {k: v for k, v in signature.items() if k in saved or k not in ADDED_SIGNATURE_KEYS}
        if signature is not None and saved != signature:
            differ = sorted(k for k in set(signature) | set(saved) if saved.get(k) != signature.get(k))
            raise SystemExit(f"{path}: written with other settings ({', '.join(differ)} differ); "
                             "use the same options to resume or a new --out")

    def one_step(self, forward_backward: Callable[[int], tuple[torch.Tensor, dict[str, float]]],
                 clip_grad_norm: float) -> tuple[float, dict[str, float]]:
        """Zero, forward/backward (the caller's), check, clip, step the optimiser and the schedule."""
        # zeroed before the caller's pass: under gradient accumulation it calls backward() once per micro-batch
        self.optimizer.zero_grad(set_to_none=True)
        loss, metrics = forward_backward(self.step)
        # the step's one read-back, before the update (the checkpoint never holds diverged weights) and not after
        # it: read after the optimizer step, it made the host wait for AdamW before preparing the next batch
        value = float(loss)
        if not math.isfinite(value):
            raise TrainingFailed(f"non-finite loss {value} at step {self.step}")
        if clip_grad_norm > 0:  # 0 = no clipping
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        self.progress.update(self.step)
        return value, metrics

    def save(self, elapsed: float, write_record: bool = True) -> None:
        """checkpoint.pt at the current step, then (``write_record``) train.json: its timings say how far the run
        got."""
        save_checkpoint(self.checkpoint_path, dict(
            model=self.model.state_dict(), optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict(), rng=capture_rng_states(self.device), step=self.step,
            total_steps=self.total_steps, elapsed_s=elapsed, history=self.record.history, signature=self.signature,
            selection=self.selection, sessions=self.sessions.entries, window=self.window.state()))
        # train.json after the checkpoint: it never reports steps a resumed run would not find
        self.record.timings.update(steps_done=self.step, train_seconds=round(elapsed, 1))
        if write_record:
            self.record.to_disk(self.run_dir)

    def score_on_dev(self, dev: DevSelection) -> None:
        """Score the current weights (eval mode, the training RNG streams untouched); best.pt when they are the
        best so far (strictly: the earlier step wins a tie, as the Trainer's ``np.greater``)."""
        device = next(self.model.parameters()).device
        self.model.eval()
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
            score = dev.score(self.model)  # None: undefined (e.g. constant cosines), never the best
        self.model.train()
        self.selection["evaluations"].append({"step": self.step, "score": score})
        best = self.selection["score"]
        if score is not None and (best is None or score > best):
            save_checkpoint(self.run_dir / BEST_WEIGHTS_FILE, {"step": self.step, "score": score,
                                                               "model": self.model.state_dict()})
            self.selection.update(step=self.step, score=score)
        print(f"step {self.step}: {dev.metric} {score} (best {self.selection['score']} at step "
              f"{self.selection['step']})", file=sys.stderr)

    def load_best(self) -> None:
        """End on the best-scoring weights (the last ones when nothing was scored: fewer steps than dev.every)."""
        best, path = self.selection.get("step"), self.run_dir / BEST_WEIGHTS_FILE
        self.selection["last_step"] = self.step
        if best is None or best == self.step:
            return
        saved = load_checkpoint(path) if path.exists() else None
        if saved is None or saved["step"] != best:
            raise SystemExit(f"{path}: missing or not the weights of step {best} (the best dev score); rerun with a "
                             "new --out")
        self.model.load_state_dict(saved["model"])

    def finish(self, elapsed: float) -> None:
        """The session's last checkpoint (a stopped run resumes from it) and its speed."""
        self.save(elapsed)
        self.record.timings["steps_per_s"] = round(self.step / max(elapsed, 1e-9), 4)


@dataclass
class LossWindow:
    """The steps since the last history entry: train.json logs their mean loss every --log-every steps."""

    loss: float = 0.0
    steps: int = 0
    start: float = field(default_factory=time.monotonic)
    seconds_before: float = 0.0  # the window's training seconds in earlier sessions (a resumed run)

    def add(self, loss: float) -> None:
        self.loss += loss
        self.steps += 1

    def entry(self, step: int, lr: float, metrics: dict[str, float]) -> dict[str, Any]:
        """The history entry of the window ending at ``step``; the next window starts now."""
        now = time.monotonic()
        entry = {"step": step, "loss": self.loss / self.steps, "lr": lr,
                 "steps_per_s": self.steps / max(self.seconds_before + now - self.start, 1e-9), **metrics}
        self.loss, self.steps, self.start, self.seconds_before = 0.0, 0, now, 0.0
        return entry

    def state(self) -> dict[str, Any]:
        return {"loss": self.loss, "steps": self.steps,
                "seconds": self.seconds_before + time.monotonic() - self.start}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> LossWindow:
        """The window a checkpoint saved, continuing from now."""
        if not state:
            return cls()
        return cls(loss=float(state["loss"]), steps=int(state["steps"]), seconds_before=float(state["seconds"]))


# exit status of a run the --max-minutes budget stopped (checkpointed, unfinished): sysexits' EX_TEMPFAIL, "try again
# later", the status tools/campaign_chunk.sh gives a stopped chunk whose next call resumes it. Not 0: train.json is
# the workflow's declared output and exists by then, so a 0 would make Snakemake count the unfinished run as trained.
# (A signal's stop exits 128 + signal instead, as in every strae trainer: StopRequest.exit_status.)
RESUME_EXIT_STATUS = 75


def finish_run(run_dir: Path, record: RunRecord, status: str, weights: dict[str, Any], encoder_fields: dict,
               tokenizer: Path) -> int:
    """Write model.pt, tokenizer.model, train.json and (last) encoder.json for a completed run; report a stopped one
    (exit :data:`RESUME_EXIT_STATUS`)."""
    from strae.encode import write_encoder_manifest

    if status == "stopped":  # mid-training weights: no model.pt or encoder.json, so nothing evaluates them
        record.blocks["stopped_reason"] = "time budget (--max-minutes) reached; rerun the same command to resume"
        record.to_disk(run_dir)
        print(f"{run_dir}: stopped at step {record.timings['steps_done']} by the time budget (--max-minutes), "
              f"checkpoint written, not finished: exit {RESUME_EXIT_STATUS}; the same command resumes from there",
              file=sys.stderr)
        return RESUME_EXIT_STATUS
    from baselines.roberta.encoder import check_run_tokenizer

    # copied only now, the resume check passed and the run finished: a command refused for other settings (another
    # --tokenizer) must leave the tokenizer a finished run was trained with, which its encoder loads; and the file
    # must still be the one the run started with (resources/ rewritten during a session would hand it another)
    check_run_tokenizer(Path(tokenizer), record.config, run_dir / TRAIN_JSON,
                        remedy="the file changed while the run trained: put it back and rerun the same command (the "
                               "checkpoint is kept)")
    save_weights(run_dir, weights)
    copy_tokenizer(tokenizer, run_dir)
    record.status = "completed"
    record.to_disk(run_dir)
    write_encoder_manifest(run_dir, "roberta", **encoder_fields)
    return 0


def train_and_finish(args: argparse.Namespace, record: RunRecord, *, weights: Callable[[], dict[str, Any]],
                     encoder_fields: dict[str, Any], **loop: Any) -> int:
    """:func:`run_steps` with the flags every RoBERTa trainer shares, then the run's outputs (``weights()`` is
    called after training); a divergence is recorded as a failed run."""
    try:
        status = run_steps(run_dir=args.out, record=record, clip_grad_norm=args.clip_grad_norm,
                           checkpoint_every_steps=args.checkpoint_every_steps, log_every=args.log_every,
                           max_minutes=args.max_minutes, **loop)
    except TrainingFailed as error:
        return record.fail(args.out, str(error), args.record_failure)
    except StoppedBySignal as stop:
        print(stop, file=sys.stderr)
        return stop.exit_status
    return finish_run(args.out, record, status, weights(), encoder_fields, args.tokenizer_source)


def new_record(*, language: str, model: str, setting: str, seed: int, config: dict[str, Any],
               device: torch.device, precision: str, determinism: dict[str, Any],
               extra_provenance: dict[str, Any]) -> RunRecord:
    return RunRecord(
        language=language, model=model, setting=setting, seed=seed, config=config,
        timings={"device": describe_device(device), "precision": precision, "torch_threads": torch.get_num_threads()},
        provenance=provenance(**extra_provenance, determinism=determinism, **placement_fields()),
    )


def start_record(args: argparse.Namespace, argv: list[str] | None, tokenizer: Path, **labels: Any) -> RunRecord:
    """The run directory with a train.json (status running) before the first step, so a run killed early is still
    recognisable. ``tokenizer`` is copied into it when the run completes (:func:`finish_run`; kept meanwhile as
    ``args.tokenizer_source``). ``labels``: :func:`new_record`'s keywords but argv."""
    make_output_dir(args.out)
    # two processes on one --out would interleave checkpoints and train.json: held (on args) until the command ends
    command = "strae train-simcse" if labels.get("model") == "roberta_simcse" else "strae train-roberta"
    args.run_lock = lock_run_dir(args.out, command)
    args.tokenizer_source = Path(tokenizer)
    record = new_record(**labels, determinism=args.determinism, extra_provenance={"argv": list(argv or sys.argv[1:])})
    # With a checkpoint there, train.json is first rewritten after the resume check passes: a command refused for
    # other settings must not turn a finished run's record back into "running".
    if not (args.out / CHECKPOINT_FILE).exists():
        record.to_disk(args.out)
    return record


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


def configure_device(args: argparse.Namespace, max_length: int) -> tuple[torch.device, Callable[[], Any], str]:
    """(device, autocast context factory, resolved precision) from --threads, --device and --precision; also
    the kernels' determinism (``args.determinism``, train.json ``provenance.determinism``), set before the model
    touches the device (cuBLAS reads its workspace setting when its handle is created). ``max_length``: the run's
    ids per row, which decides the attention backward's key splits."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = job_device(args.device)  # several GPUs: the one the fewest strae jobs hold
    args.determinism = roberta_determinism(device, not args.nondeterministic, args.attention, max_length)
    autocast, precision = autocast_context(device, args.precision)
    return device, autocast, precision


# keys per row up to which SDPA's memory-efficient backward has at most two key splits (roberta_determinism)
SDPA_REPEATABLE_KEYS = 128


def roberta_determinism(device: torch.device, enabled: bool, attention: str, max_length: int) -> dict[str, Any]:
    """:func:`strae.runtime.configure_determinism` (deterministic kernels where torch has them, cuBLAS's fixed
    workspace), plus what it leaves open for this model on CUDA, recorded: SDPA's memory-efficient backward (the
    kernel a float position mask selects) splits the keys and adds the splits' query gradients atomically; torch makes
    it unsplit only in strict mode (``warn_only=False``, which stops a run on any op without a deterministic kernel),
    and strae keeps warn-only. PyTorch's attention_backward.cu sets num_splits_key = ceil(num_keys / kBlockSizeJ)
    when SDPA passes none, and mem_eff_attention/kernel_backward.h has kBlockSizeJ = 64 (read in the source, not in
    this torch build's binary): rows of <= 128 ids (``--max-length``, default 128) give at most two splits, and
    0 + a + b is the same float in either order, so the sum is still repeatable; the
    graphed MLM step gave identical weights twice on an H100 (2026-11-26, benchmarks/roberta_graphs_check.py). The
    whole trainer twice, and the cost of the mode: benchmarks/roberta_checks.py."""
    record = configure_determinism(device, enabled)
    if device.type == "cuda" and enabled and attention == "sdpa":
        if max_length <= SDPA_REPEATABLE_KEYS:
            record["attention_backward"] = (f"memory-efficient SDPA, key splits kept: at most 2 for rows of "
                                            f"{max_length} <= {SDPA_REPEATABLE_KEYS} ids, an order-free sum")
        else:
            record["attention_backward"] = (f"memory-efficient SDPA, key splits kept: rows of {max_length} > "
                                            f"{SDPA_REPEATABLE_KEYS} ids may give more than 2 and sum them in any "
                                            "order (not guaranteed repeatable; --attention eager is)")
            print(f"note: --max-length {max_length} > {SDPA_REPEATABLE_KEYS}: SDPA's backward on CUDA may not "
                  "repeat bit for bit (train.json provenance.determinism); --attention eager does", file=sys.stderr)
    return record


def adamw(parameters, lr: float, weight_decay: float, device: torch.device) -> torch.optim.AdamW:
    """The Transformers Trainer's AdamW (betas 0.9/0.999, eps 1e-8: the papers name no other); fused on CUDA, one
    kernel for all parameters instead of several per tensor (the same update rule)."""
    return torch.optim.AdamW(parameters, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay,
                             fused=device.type == "cuda" or None)


def adamw_record(weight_decay: float, device: torch.device) -> dict[str, Any]:
    """train.json's description of :func:`adamw`."""
    return {"name": "AdamW", "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": weight_decay,
            "fused": device.type == "cuda"}


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=nonnegative_int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="run directory")
    parser.add_argument("--corpus", default=None, help="UTF-8 text file, one sentence per line (instead of --data-dir)")
    parser.add_argument("--max-sentences", type=positive_int, default=None,
                        help="read at most this many --corpus lines")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", default="auto", help="auto (bf16 autocast where supported) | fp32 | bf16")
    # one name across the trainers (strae train, train-multiview); the earlier spelling still parses (recorded argv)
    parser.add_argument("--checkpoint-every-steps", "--checkpoint-every", dest="checkpoint_every_steps",
                        type=positive_int, default=1000, help="steps between resumable checkpoints")
    parser.add_argument("--log-every", type=positive_int, default=50, help="steps per train.json history entry")
    parser.add_argument("--max-minutes", type=nonnegative_float, default=None,
                        help=f"stop after this much wall time (checkpointed, unfinished: exit {RESUME_EXIT_STATUS}; "
                             "the same command resumes)")
    parser.add_argument("--clip-grad-norm", type=nonnegative_float, default=1.0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--record-failure", action="store_true", help="exit 0 on divergence (recorded as failed)")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="on CUDA, allow non-deterministic (atomics) kernels; default: deterministic, recorded")


# ------------------------------------------------------------------------------------------ strae train-roberta
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device, autocast, precision = configure_device(args, args.max_length)
    from baselines.roberta.graphs import resolve_mode

    args.cuda_graphs_requested = args.cuda_graphs
    args.cuda_graphs = resolve_mode(args.cuda_graphs, device)  # refused before anything is loaded or written
    data = load_data(args)
    shape = model_shape(args, data.tokenizer.vocab_size)
    # seeded right before the model is built: the initial weights and dropout depend on --seed alone
    seed_everything(args.seed)
    model, optimizer, scheduler = build_model(args, shape, device)
    config = run_config(args, data, shape, model, device, precision)
    record = start_record(args, argv, data.tokenizer_path, language=args.lang, model="roberta", setting=args.setting,
                          seed=args.seed, config=config, device=device, precision=precision)
    return train_and_finish(
        args, record, model=model, optimizer=optimizer, scheduler=scheduler, total_steps=args.steps,
        forward_backward=mlm_step(args, data.corpus, shape.special, model, device, autocast, precision),
        description=f"roberta-mlm {args.lang} seed{args.seed}", signature=resume_signature(args, config),
        weights=lambda: {"shape": shape.to_dict(), "state_dict": model.state_dict(), "objective": "mlm"},
        encoder_fields={"model": "roberta", "objective": "mlm"})


def build_parser() -> argparse.ArgumentParser:
    from baselines.roberta.graphs import GRAPH_MODES
    from baselines.roberta.model import ATTENTION_IMPLEMENTATIONS, SHAPES

    parser = argparse.ArgumentParser(prog="strae train-roberta", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", required=True)
    parser.add_argument("--resources-dir", default=paths.DEFAULT_RESOURCES,
                        help="the config's data.resources_dir: where --data-dir and --tokenizer default to")
    parser.add_argument("--data-dir", default=None, help="tokenised corpus (default <resources>/tokenized/LANG)")
    parser.add_argument("--tokenizer", default=None,
                        help="SentencePiece model (default <resources>/tokenizers/LANG.model)")
    parser.add_argument("--setting", default="medium_mlm", help="run label (run-directory level under roberta/)")
    parser.add_argument("--steps", type=positive_int, default=200_000)
    parser.add_argument("--warmup-fraction", type=fraction, default=0.1)
    parser.add_argument("--lr", type=positive_float, default=5e-5)
    parser.add_argument("--weight-decay", type=nonnegative_float, default=0.0)
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="sentences per optimiser step (effective batch)")
    parser.add_argument("--max-length", type=int, default=128,
                        help="ids per sentence incl. <s> and </s> (longer ones truncated); also the packed row length")
    parser.add_argument("--mask-probability", type=probability, default=0.15)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="table6",
                        help="table6: hidden 256, Banyan Table 6's ≈10M (default); turc_medium: hidden 512 (25.2M)")
    parser.add_argument("--layers", type=positive_int, default=None, help="override the shape's layer count")
    parser.add_argument("--heads", type=positive_int, default=None, help="override the shape's attention heads")
    parser.add_argument("--hidden", type=positive_int, default=None, help="override the shape's hidden size")
    parser.add_argument("--ffn", type=positive_int, default=None, help="override the shape's feed-forward size")
    parser.add_argument("--packing", choices=("sentences", "none"), default="sentences",
                        help="sentences: several per row, block-diagonal attention; none: pad each to the longest")
    parser.add_argument("--grad-accumulation", type=positive_int, default=1,
                        help="forward/backward passes per step (the effective batch stays --batch-size)")
    parser.add_argument("--attention", choices=ATTENTION_IMPLEMENTATIONS, default="sdpa",
                        help="sdpa: fused kernel, position scores as its additive mask; eager: explicit softmax")
    parser.add_argument("--cuda-graphs", choices=GRAPH_MODES, default="auto",
                        help="on (CUDA only): each step's forward and backward replayed as CUDA graphs, rows padded "
                             "to shape buckets (baselines/roberta/graphs.py; same loss, other dropout draws); "
                             "auto (default): on with a CUDA device, off otherwise")
    add_common_arguments(parser)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.max_length < 3:
        raise SystemExit(f"--max-length {args.max_length}: must be >= 3 (<s>, one piece, </s>)")
    dims = shape_dimensions(args)
    if dims["hidden_size"] % dims["num_attention_heads"]:
        # the attention splits the hidden vector into one slice per head
        raise SystemExit(f"--shape {args.shape} with --hidden/--heads: hidden size {dims['hidden_size']} is not a "
                         f"multiple of {dims['num_attention_heads']} attention heads")
    return args


@dataclass
class TrainingData:
    """The tokenizer and the training sentences (from a tokenised corpus directory or a text file)."""

    tokenizer_path: Path
    tokenizer: Any  # strae.data.tokenizer.Tokenizer
    data_dir: str | Path | None  # None when the sentences come from a text file
    corpus: Any  # baselines.roberta.data.SentenceCorpus
    corpus_file: str | None = None  # that text file


def load_data(args: argparse.Namespace) -> TrainingData:
    from baselines.roberta.data import load_corpus
    from strae.data.tokenizer import load_tokenizer

    tokenizer_path = Path(args.tokenizer or paths.tokenizer_model(args.lang, args.resources_dir))
    if not tokenizer_path.is_file():
        raise SystemExit(f"--tokenizer {tokenizer_path}: not found (run `strae tokenizer` for {args.lang} first)")
    tokenizer = load_tokenizer(tokenizer_path)
    data_dir = None if args.corpus else (args.data_dir or paths.tokenized_dir(args.lang, args.resources_dir))
    corpus = load_corpus(data_dir, args.corpus, tokenizer, max_sentences=args.max_sentences)
    return TrainingData(tokenizer_path, tokenizer, data_dir, corpus, args.corpus)


def shape_dimensions(args: argparse.Namespace) -> dict[str, int]:
    """--shape with any single dimension overridden."""
    from baselines.roberta.model import SHAPES

    dims = dict(SHAPES[args.shape])
    for key, value in (("num_hidden_layers", args.layers), ("num_attention_heads", args.heads),
                       ("hidden_size", args.hidden), ("intermediate_size", args.ffn)):
        if value is not None:
            dims[key] = value
    return dims


def model_shape(args: argparse.Namespace, n_pieces: int):
    """The model's shape; positions cover --max-length (at least RoBERTa's 514)."""
    from baselines.roberta.model import RobertaShape

    dims = shape_dimensions(args)
    return RobertaShape(n_pieces=n_pieces, max_position_embeddings=max(514, args.max_length), **dims)


def build_model(args: argparse.Namespace, shape, device: torch.device):
    """(model, AdamW, linear warm-up/decay schedule) of the paper's recipe."""
    from baselines.roberta.model import build_mlm_model

    model = build_mlm_model(shape, attention=args.attention).to(device)
    optimizer = adamw(model.parameters(), args.lr, args.weight_decay, device)
    schedule = linear_warmup_decay(args.steps, warmup_steps(args))
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def warmup_steps(args: argparse.Namespace) -> int:
    return int(round(args.warmup_fraction * args.steps))


def run_config(args: argparse.Namespace, data: TrainingData, shape, model, device: torch.device,
               precision: str) -> dict[str, Any]:
    """train.json ``config``: every setting of the run, the resolved ones included (precision, corpus)."""
    from baselines.roberta.model import non_embedding_parameter_count

    return {
        "objective": "mlm", "shape_name": args.shape, "shape": shape.to_dict(), "special_ids": shape.special.to_dict(),
        "steps": args.steps, "warmup_steps": warmup_steps(args), "lr": args.lr,
        "schedule": "linear warm-up then linear decay to 0", "optimizer": adamw_record(args.weight_decay, device),
        "batch_size": args.batch_size, "max_length": args.max_length, "mask_probability": args.mask_probability,
        "mask_replacement": {"mask": 0.8, "random": 0.1, "keep": 0.1}, "clip_grad_norm": args.clip_grad_norm,
        "packing": args.packing, "grad_accumulation": args.grad_accumulation, "attention": args.attention,
        "cuda_graphs": cuda_graphs_record(args.cuda_graphs, args.cuda_graphs_requested),
        "precision": precision, "data_dir": data.data_dir, "corpus_file": args.corpus,
        "corpus": corpus_provenance(data.data_dir, args.corpus, "train", len(data.corpus)),
        "tokenizer": {"path": str(data.tokenizer_path), "sha256": sha256_file(data.tokenizer_path)},
        # Banyan Table 6's convention: no embedding matrices, no LM head
        "non_embedding_parameters": non_embedding_parameter_count(model.roberta),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


# signature keys added on 2026-11-29: a checkpoint written before is compared without them
ADDED_SIGNATURE_KEYS = ("seed", "corpus", "tokenizer_sha256")


def corpus_identity(corpus: dict[str, Any]) -> dict[str, Any]:
    """The content of a run's training sentences (:func:`corpus_provenance`), not where they were read from."""
    meta = corpus.get("meta") or {}
    return {"kind": corpus.get("kind"), "sha256": corpus.get("sha256"), "n_sentences": corpus.get("n_sentences"),
            **{key: meta.get(key) for key in ("text_sha256", "n_tokens", "tokenizer_sha256", "pretokenize")}}


def resume_signature(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint must have been written with to be resumed: the optimisation's settings, the seed (batch
    order and masking draw from it) and the data (a re-prepared corpus or another tokenizer is another run). Not the
    packing, attention kernel, precision, accumulation or CUDA graphs: they change how a step is computed (speed,
    rounding), not what is optimised, so a run may switch them between sessions."""
    return {"weight_decay": args.weight_decay, "seed": args.seed, "corpus": corpus_identity(config["corpus"]),
            "tokenizer_sha256": config["tokenizer"]["sha256"],
            **{key: config[key] for key in ("shape", "batch_size", "max_length", "lr", "warmup_steps",
                                            "mask_probability")}}


def cuda_graphs_record(mode: str, requested: str) -> dict[str, Any]:
    """train.json's ``config.cuda_graphs``: the mode used, the one asked for (auto resolves by device) and, when on,
    the shape buckets rows are padded to."""
    from baselines.roberta import graphs

    if mode == "off":
        return {"mode": "off", "requested": requested}
    return {"mode": mode, "requested": requested,
            "bucket_multiples": {"rows": graphs.ROW_BUCKET, "columns": graphs.COLUMN_BUCKET,
                                 "predicted": graphs.PREDICTED_BUCKET}}


def mlm_step(args: argparse.Namespace, corpus, special, model, device: torch.device,
             autocast: Callable[[], Any], precision: str) -> Callable[[int], tuple[torch.Tensor, dict[str, float]]]:
    """``forward_backward(step)`` of :func:`run_steps` for masked-LM pre-training (``--cuda-graphs on``: each chunk
    padded to its shape bucket and run through :class:`baselines.roberta.graphs.GraphedMlm`)."""
    from baselines.roberta.data import collate, mask_for_mlm, pack, padded_rows
    from baselines.roberta.graphs import GraphedMlm, to_bucket

    graphed = None
    if args.cuda_graphs == "on":
        def captured(bucket: tuple[int, int, int], seconds: float) -> None:
            tqdm.write(f"cuda graphs: captured bucket rows x columns x predicted = {bucket} in {seconds:.1f} s "
                       f"({len(graphed.graphs) + 1} so far)")

        graphed = GraphedMlm(model, device, precision, on_capture=captured)

    def host_batch(step: int) -> tuple[list, int, dict[str, int]]:
        """The step's chunks (rows, or bucketed static batches with graphs) prepared on the host, its predicted
        count and metrics: a function of (seed, step) alone."""
        indices = batch_at_step(len(corpus), args.batch_size, args.seed, step)
        ids, attention = collate([corpus[int(i)] for i in indices], special, args.max_length)
        # masking depends only on (seed, step) and is drawn on the padded layout, so resumed runs and both packing
        # modes predict exactly the same positions
        generator = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        inputs, labels = mask_for_mlm(ids, special, generator, args.mask_probability)
        rows = (pack(inputs, labels, special, args.max_length) if args.packing == "sentences"
                else padded_rows(inputs, labels, special))
        n_predicted = int((labels != -100).sum())
        chunks = rows.chunks(args.grad_accumulation)
        if graphed is not None:
            chunks = [to_bucket(chunk, special.pad, n_predicted, args.max_length) for chunk in chunks]
        return chunks, n_predicted, {"tokens": int(attention.sum()), "rows": len(rows),
                                     "row_ids": int(rows.inputs.numel())}

    prepared: dict[int, tuple[list, int, dict[str, int]]] = {}

    def forward_backward(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        chunks, n_predicted, metrics = prepared.pop(step, None) or host_batch(step)
        prepared.clear()
        total = torch.zeros((), device=device)
        for chunk in chunks:
            if graphed is not None:
                chunk_loss = graphed.loss(chunk)
            else:
                with autocast():
                    losses, _ = mlm_token_losses(model, chunk.to(device))
                # the whole step's mean: accumulated gradients equal the single-pass gradient
                chunk_loss = losses.sum() / n_predicted
            chunk_loss.backward()
            total += chunk_loss.detach()
        # the next step's host work (collation, masking, packing: ~2.5 ms for 64 English sentences) while the
        # device runs this one's backward; the loop's loss read-back comes after, so the GPU no longer idles
        # through it between steps
        if step + 1 < args.steps:
            prepared[step + 1] = host_batch(step + 1)
        return total, metrics

    return forward_backward


if __name__ == "__main__":
    sys.exit(main())
