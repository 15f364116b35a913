"""strae train: exact resumption, divergence/collapse guard, paper defaults, run-directory layout.

Everything runs on a tiny synthetic corpus (about a hundred sentences, 6 batches per epoch, a 60-piece SentencePiece
model trained here) with k=4, u=2, so each training run takes a second or two on CPU.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("strae.models.model", reason="the model engine (strae.models.model) is not installed yet")
pytest.importorskip("strae.data.tokenized", reason="strae.data.tokenized is not installed yet")

from strae import runs  # noqa: E402
from strae import train as trainer  # noqa: E402
from strae.io import sha256_file  # noqa: E402

WORDS = (
    "the a cat dog sat on mat ran over hill big small red green house tree bird sang under river bank "
    "stone quick slow happy sad old new man woman child ate fish bread milk"
).split()


def make_tiny_corpus(root: Path, n_train: int = 96, n_dev: int = 32, seed: int = 0) -> tuple[Path, Path]:
    """Write a SentencePiece model and a tokenized corpus in the contract layout; return (data_dir, model)."""
    import sentencepiece as spm

    rng = random.Random(seed)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n_train + n_dev)]
    root.mkdir(parents=True, exist_ok=True)
    text = root / "corpus.txt"
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(root / "tok"), vocab_size=60, model_type="bpe",
        character_coverage=1.0, minloglevel=2, num_threads=1,
    )
    model_file = root / "tok.model"
    processor = spm.SentencePieceProcessor(model_file=str(model_file))
    vocab_size = processor.get_piece_size()
    data_dir = root / "tokenized"
    data_dir.mkdir()
    from strae.io import sha256_file

    for split, lines in (("train", sentences[:n_train]), ("dev", sentences[n_train:])):
        encoded = [ids for ids in processor.encode(lines) if 3 < len(ids) <= 200]
        lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
        np.save(data_dir / f"{split}.ids.npy", np.concatenate([np.asarray(i, dtype=np.int32) for i in encoded]))
        np.save(data_dir / f"{split}.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        meta = {"vocab_size": vocab_size, "pad_id": vocab_size, "n_sentences": len(encoded),
                "n_tokens": int(lengths.sum()), "tokenizer_sha256": sha256_file(model_file),
                "length_filter": {"min_exclusive": 3, "max_inclusive": 200}}
        (data_dir / f"{split}.json").write_text(json.dumps(meta))
    return data_dir, model_file


def train_tiny_run(root: Path, seed: int) -> Path:
    """A finished one-epoch Banyan run (k=4, u=2) on the tiny corpus; returns its run directory."""
    data_dir, tokenizer = make_tiny_corpus(root / "data")
    out = root / "run"
    argv = ["--model", "banyan", "--lang", "xx", "--seed", str(seed), "--out", str(out), "--data-dir", str(data_dir),
            "--tokenizer", str(tokenizer), "--k", "4", "--u", "2", "--batch-size", "32", "--epochs", "1",
            "--device", "cpu"]
    assert trainer.train(argv) == 0
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    return make_tiny_corpus(tmp_path_factory.mktemp("tiny"))


def train_args(tiny, out: Path, *extra: str, model: str = "banyan") -> list[str]:
    data_dir, tokenizer = tiny
    return ["--model", model, "--lang", "xx", "--seed", "3", "--out", str(out), "--data-dir", str(data_dir),
            "--tokenizer", str(tokenizer), "--k", "4", "--u", "2", "--batch-size", "16", "--epochs", "2",
            "--device", "cpu", *extra]


def final_state(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "model.pt", weights_only=True)["state_dict"]


class Interrupt(Exception):
    pass


def interrupt_at(step: int):
    def callback(global_step: int) -> None:
        if global_step == step:
            raise Interrupt(f"simulated kill after step {step}")

    return callback


# banyan: killed mid-epoch 1 (2 steps after the step-3 checkpoint), then mid-epoch 2; selfstrae (slower): once.
# Work since the last checkpoint is lost and must be redone identically.
@pytest.mark.parametrize("model,epochs,stops", [("banyan", "2", (5, 9)), ("selfstrae", "1", (5,))])
def test_interrupted_run_resumes_to_identical_weights(tiny, tmp_path, model, epochs, stops):
    reference = tmp_path / "reference"
    options = ("--checkpoint-every-steps", "3", "--epochs", epochs)
    assert trainer.train(train_args(tiny, reference, *options, model=model)) == 0

    resumed = tmp_path / "resumed"
    args = train_args(tiny, resumed, *options, model=model)
    for stop in stops:
        with pytest.raises(Interrupt):
            trainer.train(args, step_callback=interrupt_at(stop))
        record = json.loads((resumed / "train.json").read_text())
        assert record["status"] == "running"
        assert not (resumed / "encoder.json").exists() and not (resumed / "model.pt").exists()
        assert (resumed / "checkpoint.pt").exists()
    assert trainer.train(args) == 0

    expected, got = final_state(reference), final_state(resumed)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    ref_record = json.loads((reference / "train.json").read_text())
    res_record = json.loads((resumed / "train.json").read_text())
    assert [e["train"]["loss"] for e in ref_record["history"]] == [e["train"]["loss"] for e in res_record["history"]]
    assert [e["dev"]["loss"] for e in ref_record["history"]] == [e["dev"]["loss"] for e in res_record["history"]]
    # each killed process is closed by the next at its last checkpoint's step; what it did after that is lost
    sessions = res_record["timings"]["sessions"]
    assert len(sessions) == len(stops) + 1
    assert all(s["lost_after_checkpoint"] and s["end_step"] == after["start_step"] and "ended" not in s
               for s, after in zip(sessions, sessions[1:]))
    assert "lost_after_checkpoint" not in sessions[-1] and "stopped_by" not in sessions[-1]
    assert sessions[-1]["end_step"] == ref_record["timings"]["total_steps"]
    assert {"engine_sha256", "git_sha", "device"} <= sessions[-1].keys()


def test_run_directory_layout_and_paper_defaults(tiny, tmp_path):
    out = tmp_path / "run"
    # a process that allows TF32 (as some CUDA containers do for every process) trains in full fp32 all the same
    torch.set_float32_matmul_precision("high")
    try:
        assert trainer.train(train_args(tiny, out, "--objective", "contrastive")) == 0
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision("highest")
    for name in ("checkpoint.pt", "model.pt", "tokenizer.model", "train.json", "encoder.json"):
        assert (out / name).exists(), name
    # encoder.json is the completion mark: written after everything else
    assert (out / "encoder.json").stat().st_mtime_ns >= (out / "train.json").stat().st_mtime_ns
    assert json.loads((out / "encoder.json").read_text())["kind"] == "strae"
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "completed" and record["failure_reason"] is None
    assert record["schema_version"] == runs.SCHEMA_VERSION
    assert record["run"] == {"language": "xx", "model": "banyan",
                             "setting": "contrastive_diagonal_entangled_k4_u2", "seed": 3}
    training = record["config"]["training"]
    assert training["lr"] == 1e-4 and training["clip_grad_norm"] == 0.0 and training["optimizer"] == "adam"
    assert training["recipe"] == "banyan" and record["recipe"]["values"]["temperature"] == pytest.approx(0.2)
    # --batch-size / --epochs of train_args are recipe overrides, recorded with the recipe's own value
    assert record["recipe"]["overrides"]["batch_size"] == {"value": 16, "recipe_value": 512,
                                                           "source": "strae train --batch-size 16"}
    assert [e["epoch"] for e in record["history"]] == [1, 2]
    for entry in record["history"]:
        assert np.isfinite(entry["dev"]["loss"]) and entry["tokens"] > 0 and entry["tokens_per_second"] > 0
        assert 0 <= entry["collapse"]["mean_pairwise_cosine"] <= 0.999 and entry["collapse"]["relative_spread"] > 0
        # diagonal functions: sigmoid gates, so each map's spectral norm lies in (0, sqrt(2))
        assert 0 < entry["function_gains"]["compose"] < 2 ** 0.5 and 0 < entry["function_gains"]["decompose"] < 2 ** 0.5
    assert record["timings"]["train_seconds"] > 0 and record["provenance"]["torch"] == torch.__version__
    assert record["provenance"]["determinism"] == {"deterministic": True, "device_type": "cpu"}
    assert record["provenance"]["float32_matmul"] == {"found": "high", "used": "highest"}
    # the induction engine: auto on CPU is the torch loop (the Triton kernel is for CUDA)
    assert {k: record["provenance"]["induction_kernel"][k] for k in ("requested", "used")} == {
        "requested": "auto", "used": "torch"}
    # and so auto's up/down passes are autograd's, as every CPU run before the handwritten passes
    propagation = record["provenance"]["propagation"]
    assert (propagation["requested"], propagation["mode"], propagation["levels"]["used"]) == (
        "auto", "autograd", "autograd")

    # rerunning a completed run is a no-op
    before = (out / "model.pt").stat().st_mtime_ns
    assert trainer.train(train_args(tiny, out, "--objective", "contrastive")) == 0
    assert (out / "model.pt").stat().st_mtime_ns == before


def test_selfstrae_paper_defaults(tiny, tmp_path):
    out = tmp_path / "run"
    # a 2-step toy model is untrained: the collapse check would judge initialisation, so it is switched off here
    assert trainer.train(train_args(tiny, out, "--max-steps", "2", "--collapse-cosine", "2", model="selfstrae")) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["config"]["training"]["clip_grad_norm"] == 1.0 and record["config"]["training"]["lr"] == 1e-3
    # the Self-StrAE code's tau: logits = cos * exp(0.2) (the SemEval text's "1.2" is exp(0.2) = 1.22)
    assert record["recipe"]["values"]["temperature"] == pytest.approx(0.2)
    assert record["recipe"]["values"]["decoder_child_order"] == "node_id"
    assert record["run"]["setting"] == "ceco_linear_sentential_k4_u2"


def test_max_steps_then_extend(tiny, tmp_path):
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "4")) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "completed" and record["history"][-1]["partial"] is True
    assert record["history"][-1]["global_step"] == 4
    # a larger budget continues from where it stopped and replaces the outputs
    assert trainer.train(train_args(tiny, out, "--max-steps", "6")) == 0
    assert json.loads((out / "train.json").read_text())["history"][-1]["global_step"] == 6


def test_a_cut_run_extended_to_the_end_has_the_uninterrupted_history_and_weights(tiny, tmp_path):
    """Cut by --max-steps mid-epoch (4, then 9), then run to the end: each partial entry is replaced when its epoch
    completes, so the history, the best-dev-loss pick and model.pt are an uninterrupted run's (the partial entries
    used to stay, as candidates for the final weights no straight run has)."""
    out, reference = tmp_path / "cut", tmp_path / "straight"
    for budget in ("4", "9"):
        assert trainer.train(train_args(tiny, out, "--max-steps", budget)) == 0
    assert trainer.train(train_args(tiny, out)) == 0
    assert trainer.train(train_args(tiny, reference)) == 0
    got, expected = (json.loads((d / "train.json").read_text()) for d in (out, reference))
    assert [(e["epoch"], e["global_step"], e["partial"], e["dev"]["loss"]) for e in got["history"]] == [
        (e["epoch"], e["global_step"], e["partial"], e["dev"]["loss"]) for e in expected["history"]]
    # the replacing entry covers the whole epoch, the batches before each cut included
    for mine, theirs in zip(got["history"], expected["history"]):
        assert (mine["sentences"], mine["tokens"]) == (theirs["sentences"], theirs["tokens"])
        assert mine["train"] == pytest.approx(theirs["train"], rel=1e-6)
    assert got["final_weights"] == expected["final_weights"]
    for name, tensor in final_state(reference).items():
        assert torch.equal(tensor, final_state(out)[name]), name


def test_resuming_with_another_weight_selection_is_refused(tiny, tmp_path):
    """final_weights / dev_loss_average hold for the whole run: epochs averaged one way are not ranked against
    epochs averaged another, and epochs trained under `last` wrote no best.pt for `best_dev_loss` to pick."""
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "4")) == 0
    for change in ("dev_loss_average=sentences", "final_weights=last"):
        with pytest.raises(SystemExit, match=r"different settings \(selection"):
            trainer.train(train_args(tiny, out, "--max-steps", "8", "--set", change))
    assert trainer.train(train_args(tiny, out, "--max-steps", "8")) == 0


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_signal_stops_at_a_step_boundary_with_a_checkpoint_and_resumes_identically(tiny, tmp_path, signame):
    """A time-boxed chunk's SIGTERM (or Ctrl-C, or a dropped terminal's SIGHUP) loses nothing: the run checkpoints
    after the step it is in, exits 128 + signal with train.json still running, and the same command finishes it
    with the weights of an uninterrupted run (the resume is checked for SIGTERM; the others take the same path)."""
    import os
    import signal

    # whatever this process was started with (nohup ignores SIGHUP, which the run would keep): a handler to restore
    started_with = signal.signal(signal.SIGHUP, lambda *a: None) if signame == "SIGHUP" else None
    out = tmp_path / "stopped"
    args = train_args(tiny, out)  # default cadence (every 120 s): no periodic checkpoint in a run this short

    def send(global_step: int) -> None:
        if global_step == 8:  # epoch 2, batch 2 (6 batches per epoch)
            os.kill(os.getpid(), getattr(signal, signame))
            if signame == "SIGTERM":  # a supervisor's second SIGTERM does not escalate (SIGKILL does)
                os.kill(os.getpid(), signal.SIGTERM)
            else:  # a second Ctrl-C does: the usual KeyboardInterrupt
                assert signal.getsignal(signal.SIGINT) is previous

    previous, previous_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert trainer.train(args, step_callback=send) == 128 + getattr(signal, signame)
    assert signal.getsignal(signal.SIGINT) is previous and signal.getsignal(signal.SIGTERM) is previous_term
    if started_with is not None:
        signal.signal(signal.SIGHUP, started_with)
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    # the signal arrives after step 8's bookkeeping; the loop finishes the step it then starts (9) and stops
    assert (saved["global_step"], saved["epoch"], saved["batch_in_epoch"]) == (9, 1, 3)
    assert saved["timings"]["sessions"][-1]["stopped_by"] == signame
    assert saved["timings"]["sessions"][-1]["end_step"] == 9
    # train.json is left as the session's start wrote it (a workflow deletes it as incomplete meanwhile)
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "running" and not (out / "model.pt").exists()
    assert "stopped_by" not in record["timings"]["sessions"][-1]
    if signame != "SIGTERM":
        return
    assert trainer.train(args) == 0
    reference = tmp_path / "reference"
    assert trainer.train(train_args(tiny, reference)) == 0
    expected, got = final_state(reference), final_state(out)
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    resumed = json.loads((out / "train.json").read_text())
    assert [e["dev"]["loss"] for e in resumed["history"]] == [
        e["dev"]["loss"] for e in json.loads((reference / "train.json").read_text())["history"]]
    assert [s.get("stopped_by") for s in resumed["timings"]["sessions"]] == [signame, None]


def test_a_run_stopped_at_its_last_step_ends_that_epoch_when_resumed(tiny, tmp_path):
    """A signal during the --max-steps step stops the run before that partial epoch's dev evaluation; the resumed
    command (nothing left to train) makes it, so its history and final weights are an uninterrupted run's."""
    import os
    import signal

    out = tmp_path / "stopped"
    args = train_args(tiny, out, "--max-steps", "4")

    def send(global_step: int) -> None:
        if global_step == 3:  # the loop finishes the next step (4, the last) and stops there
            os.kill(os.getpid(), signal.SIGTERM)

    assert trainer.train(args, step_callback=send) == 128 + signal.SIGTERM
    assert torch.load(out / "checkpoint.pt", weights_only=False)["global_step"] == 4
    assert trainer.train(args) == 0
    reference = tmp_path / "reference"
    assert trainer.train(train_args(tiny, reference, "--max-steps", "4")) == 0
    resumed, expected = (json.loads((d / "train.json").read_text()) for d in (out, reference))
    assert [(e["global_step"], e["partial"], e["dev"]["loss"]) for e in resumed["history"]] == [
        (e["global_step"], e["partial"], e["dev"]["loss"]) for e in expected["history"]]
    assert resumed["final_weights"]["global_step"] == expected["final_weights"]["global_step"] == 4


def test_checkpoints_by_time_unless_steps_are_given(tiny, tmp_path, monkeypatch):
    """Default cadence: a mid-epoch checkpoint once --checkpoint-every-s seconds have passed since the last one;
    --checkpoint-every-steps N replaces it with every N steps."""
    clock = {"now": 1000.0}
    monkeypatch.setattr(trainer.time, "monotonic", lambda: clock["now"])

    def tick(seconds: float):
        def callback(global_step: int) -> None:
            clock["now"] += seconds
            if global_step == 5:
                raise Interrupt("simulated kill after step 5")
        return callback

    steps_of = {}
    for name, extra, seconds in (("slow", (), 50.0), ("fast", (), 1.0), ("every_s", ("--checkpoint-every-s", "2"), 1.0),
                                 ("steps", ("--checkpoint-every-steps", "4"), 50.0),
                                 ("off", ("--checkpoint-every-s", "0"), 500.0)):
        out = tmp_path / name
        with pytest.raises(Interrupt):
            trainer.train(train_args(tiny, out, *extra), step_callback=tick(seconds))
        path = out / "checkpoint.pt"
        steps_of[name] = torch.load(path, weights_only=False)["global_step"] if path.exists() else None
    # the clock moves after each step's checkpoint check: slow (50 s per step) is due at step 4 (150 s >= 120),
    # fast (1 s) never within 5 steps, every 2 s at steps 3 and 5, every 4 steps at step 4, off never
    assert steps_of == {"slow": 4, "fast": None, "every_s": 5, "steps": 4, "off": None}


def test_progress_file_says_where_a_running_run_stands(tiny, tmp_path, monkeypatch):
    """progress.json (what campaign_chunk.sh's ETA reads): rewritten every ProgressFile.every_s (10 s) of training,
    the first mark after the session's first step; planned steps = epochs x batches, or --max-steps."""
    clock = {"now": 1000.0}
    monkeypatch.setattr(trainer.time, "monotonic", lambda: clock["now"])

    def tick(global_step: int) -> None:  # 6 s per step; killed after step 5
        clock["now"] += 6.0
        if global_step == 5:
            raise Interrupt("simulated kill after step 5")

    for extra, planned in (((), 12), (("--max-steps", "8"), 8)):  # 96 sentences / 16 = 6 batches x 2 epochs
        out = tmp_path / f"run{planned}"
        with pytest.raises(Interrupt):
            trainer.train(train_args(tiny, out, *extra), step_callback=tick)
        written = json.loads((out / runs.PROGRESS_FILE).read_text())
        # marks after steps 1 (t=1000), 3 (t=1012: written), 5 (t=1024: written): 2 steps in 12 s
        assert written["global_step"] == 5 and written["total_steps"] == planned
        assert written["steps_per_second"] == pytest.approx(2 / 12)


def test_changed_settings_refuse_to_resume(tiny, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Interrupt):
        trainer.train(train_args(tiny, out, "--checkpoint-every-steps", "2"), step_callback=interrupt_at(3))
    with pytest.raises(SystemExit, match=r"written with different settings \(lr, recipe\)"):
        trainer.train(train_args(tiny, out, "--lr", "5e-4"))
    # weights that no longer fit the model code (the engine changed) are a clear error, not a traceback
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    state["model"]["bogus.weight"] = torch.zeros(1)
    torch.save(state, out / "checkpoint.pt")
    with pytest.raises(SystemExit, match="does not fit the current model code"):
        trainer.train(train_args(tiny, out))
    # --restart discards the old checkpoint explicitly
    assert trainer.train(train_args(tiny, out, "--lr", "5e-4", "--restart", "--epochs", "1")) == 0


def test_a_checkpoint_past_the_asked_epochs_or_steps_is_refused(tiny, tmp_path):
    """Epochs and max-steps may grow on resume, never shrink: a run stopped at step 4 asked for 3 steps (or a finished
    two-epoch run asked for one) would be finished there and labelled with the smaller budget."""
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "4")) == 0
    with pytest.raises(SystemExit, match=r"step 4: past this command's --epochs 2 --max-steps 3; ask for at least"):
        trainer.train(train_args(tiny, out, "--max-steps", "3"))
    done = tmp_path / "done"
    assert trainer.train(train_args(tiny, done)) == 0
    past = r"trained to epoch 2 \(\+0 batches\), step \d+: past this command's --epochs 1;"
    with pytest.raises(SystemExit, match=past):
        trainer.train(train_args(tiny, done, "--epochs", "1"))
    assert json.loads((done / "train.json").read_text())["status"] == "completed"  # left as it was
    assert trainer.train(train_args(tiny, done)) == 0  # the same request: already completed


def test_the_dev_split_read_is_part_of_what_a_resume_must_match(tiny, tmp_path):
    """The dev loss picks the weights kept: a resume reading another part of the dev split is refused; a checkpoint
    written before the dev split was fingerprinted resumes as before."""
    out = tmp_path / "run"
    with pytest.raises(Interrupt):
        trainer.train(train_args(tiny, out, "--checkpoint-every-steps", "2"), step_callback=interrupt_at(3))
    with pytest.raises(SystemExit, match=r"different settings \(dev\)"):
        trainer.train(train_args(tiny, out, "--dev-max-sentences", "8"))
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    del state["fingerprint"]["dev"]
    torch.save(state, out / "checkpoint.pt")
    assert trainer.train(train_args(tiny, out)) == 0


def _wrapped_model(monkeypatch, *, loss_fn=None, encode_fn=None):
    """The real model with one method replaced (to force a divergence the guard must catch)."""
    config_cls, model_cls = trainer._import_model_classes()

    class Broken(model_cls):
        calls = 0

        def loss(self, ids, lengths, read_back=True):
            loss, metrics = super().loss(ids, lengths, read_back)
            type(self).calls += 1
            return (loss_fn(loss, type(self).calls) if loss_fn else loss), metrics

        def encode(self, ids, lengths):
            roots = super().encode(ids, lengths)
            return encode_fn(roots) if encode_fn else roots

    monkeypatch.setattr(trainer, "_import_model_classes", lambda: (config_cls, Broken))


@pytest.mark.parametrize("record_failure", [False, True])
def test_nan_loss_marks_run_failed(tiny, tmp_path, monkeypatch, record_failure):
    _wrapped_model(monkeypatch, loss_fn=lambda loss, calls: loss * float("nan") if calls >= 4 else loss)
    out = tmp_path / "run"
    extra = ["--record-failure"] if record_failure else []
    assert trainer.train(train_args(tiny, out, *extra)) == (0 if record_failure else 1)
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "failed"
    assert "non-finite training loss" in record["failure_reason"] and "step 4" in record["failure_reason"]
    session = record["timings"]["sessions"][-1]
    assert session["stopped_by"] == "failure" and session["end_step"] < 4 and "ended" in session
    assert not (out / "encoder.json").exists() and not (out / "model.pt").exists()
    # rerunning reports the recorded failure instead of silently training again
    assert trainer.train(train_args(tiny, out, *extra)) == (0 if record_failure else 1)


def test_collapsed_embeddings_mark_run_failed(tiny, tmp_path, monkeypatch):
    # every sentence gets (almost) the same vector: mean pairwise cosine ~ 1
    _wrapped_model(monkeypatch, encode_fn=lambda roots: roots * 1e-3 + 1.0)
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out)) == 1
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "failed" and record["failure_reason"].startswith("collapse: mean pairwise cosine")
    assert not (out / "encoder.json").exists()


def test_collapse_statistics():
    generator = torch.Generator().manual_seed(0)
    spread = torch.randn(200, 16, generator=generator)
    stats = trainer.collapse_statistics(spread)
    assert abs(stats["mean_pairwise_cosine"]) < 0.05 and stats["mean_std"] > 0.5
    same = torch.ones(50, 16)
    stats = trainer.collapse_statistics(same)
    assert stats["mean_pairwise_cosine"] == pytest.approx(1.0) and stats["mean_std"] == 0.0
    # brute-force check of the closed form on a small set
    x = torch.randn(7, 3, generator=generator).double()
    unit = x / x.norm(dim=1, keepdim=True)
    brute = (unit @ unit.T)[~torch.eye(7, dtype=torch.bool)].mean()
    assert trainer.collapse_statistics(x)["mean_pairwise_cosine"] == pytest.approx(float(brute))


def test_export_checkpoint_is_labelled_mid_training(tiny, tmp_path):
    out, export = tmp_path / "run", tmp_path / "export"
    args = train_args(tiny, out, "--checkpoint-every-steps", "2")
    with pytest.raises(SystemExit, match="no checkpoint"):
        trainer.train([*args, "--export-checkpoint", str(export)])
    with pytest.raises(Interrupt):
        trainer.train(args, step_callback=interrupt_at(5))
    assert trainer.train([*args, "--export-checkpoint", str(export)]) == 0
    record = json.loads((export / "train.json").read_text())
    assert record["status"] == "running" and record["snapshot"]["global_step"] == 4
    assert record["snapshot"]["source_sha256"] == sha256_file(out / "checkpoint.pt")
    assert (export / "encoder.json").exists() and not (out / "encoder.json").exists()


def test_a_resumed_epochs_wall_time_counts_every_session(tiny, tmp_path):
    """An epoch trained in two sessions: its history's wall_elapsed includes the first session's part (0.4 s of
    sleep before the checkpoint it resumed from), not only the session that ended it."""
    import time

    out = tmp_path / "run"
    args = train_args(tiny, out, "--checkpoint-every-steps", "2", "--epochs", "1")

    def slow_then_killed(step: int) -> None:
        if step == 1:
            time.sleep(0.4)
        if step == 3:
            raise Interrupt("simulated kill after step 3")
    with pytest.raises(Interrupt):
        trainer.train(args, step_callback=slow_then_killed)
    assert runs.load_checkpoint(out / "checkpoint.pt")["epoch_sums"]["wall"] >= 0.4  # the part resumed from
    assert trainer.train(args) == 0
    entry = json.loads((out / "train.json").read_text())["history"][0]
    assert entry["wall_elapsed"] >= 0.4 and "wall" not in entry["train"]


def test_an_export_names_the_checkpoint_bytes_it_loaded(tmp_path, monkeypatch):
    """The trainer replaces checkpoint.pt (a rename) while an export may be reading it: the export's sha256 is that
    of the bytes it loaded, not of whatever file is there after."""
    run = tmp_path / "run"
    run.mkdir()
    import hashlib

    runs.save_checkpoint(run / "checkpoint.pt", {"global_step": 4})
    real = hashlib.sha256

    class ReplacedOnceHashed:  # the trainer's next checkpoint lands once the export has hashed the bytes
        def __init__(self):
            self.inner = real()

        def update(self, block):
            self.inner.update(block)

        def hexdigest(self):
            runs.save_checkpoint(run / "checkpoint.pt", {"global_step": 6})
            return self.inner.hexdigest()
    monkeypatch.setattr(runs.hashlib, "sha256", ReplacedOnceHashed)
    state, sha256, path = runs.checkpoint_to_export(run)
    monkeypatch.undo()
    assert state["global_step"] == 4 and path == run / "checkpoint.pt"
    runs.save_checkpoint(tmp_path / "four.pt", {"global_step": 4})
    assert sha256 == sha256_file(tmp_path / "four.pt") != sha256_file(run / "checkpoint.pt")


def test_missing_data_is_a_clear_error(tiny, tmp_path):
    with pytest.raises(SystemExit, match="tokenize-corpus"):
        trainer.train(train_args((tmp_path / "nowhere", tiny[1]), tmp_path / "run"))


def test_checkpoints_load_to_the_cpu_whatever_the_device(tiny, tmp_path):
    """A CUDA run's checkpoint must resume: its RNG states have to stay CPU ByteTensors (torch.set_rng_state
    refuses anything else), so checkpoints are loaded to the CPU and load_state_dict moves the weights."""
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "2", "--epochs", "1")) == 0
    state = runs.load_checkpoint(out / "checkpoint.pt")
    assert state["rng"]["torch"].device.type == "cpu" and state["rng"]["torch"].dtype == torch.uint8
    assert all(t.device.type == "cpu" for t in state["model"].values())


# ---------------------------------------------------------------------------------------- final weights
def _scripted_dev_loss(monkeypatch, losses: dict[int, float]) -> None:
    """Dev loss after epoch e (1-based) reads losses[e]; everything else is the real evaluation."""
    real = trainer.evaluate_dev

    def scripted(job, state):
        dev, collapse = real(job, state)
        return {**dev, "loss": losses[state.epoch + 1]}, collapse

    monkeypatch.setattr(trainer, "evaluate_dev", scripted)


def test_final_weights_are_the_lowest_dev_loss_epoch(tiny, tmp_path, monkeypatch):
    # both references save the model only when the dev loss improves: epoch 2's weights here, not epoch 3's
    _scripted_dev_loss(monkeypatch, {1: 3.0, 2: 2.0, 3: 2.5})
    best = tmp_path / "best"
    assert trainer.train(train_args(tiny, best, "--epochs", "3")) == 0
    record = json.loads((best / "train.json").read_text())
    assert record["recipe"]["values"]["final_weights"] == "best_dev_loss"
    assert {k: record["final_weights"][k] for k in ("rule", "epoch", "dev_loss", "last_epoch", "last_dev_loss")} == {
        "rule": "best_dev_loss", "epoch": 2, "dev_loss": 2.0, "last_epoch": 3, "last_dev_loss": 2.5}

    two_epochs = tmp_path / "two"  # the same seed stopped after epoch 2: the weights best.pt must have kept
    assert trainer.train(train_args(tiny, two_epochs, "--epochs", "2")) == 0
    last = tmp_path / "last"
    assert trainer.train(train_args(tiny, last, "--epochs", "3", "--set", "final_weights=last")) == 0
    assert json.loads((last / "train.json").read_text())["final_weights"]["epoch"] == 3
    kept, epoch2, epoch3 = final_state(best), final_state(two_epochs), final_state(last)
    assert all(torch.equal(kept[name], epoch2[name]) for name in kept)
    assert not all(torch.equal(kept[name], epoch3[name]) for name in kept)

    # killed in epoch 3 and resumed: best.pt survives the interruption, so the same weights are kept
    resumed = tmp_path / "resumed"
    args = train_args(tiny, resumed, "--epochs", "3", "--checkpoint-every-steps", "3")
    with pytest.raises(Interrupt):
        trainer.train(args, step_callback=interrupt_at(14))  # 6 batches per epoch: step 14 is in epoch 3
    assert trainer.train(args) == 0
    assert all(torch.equal(final_state(resumed)[name], epoch2[name]) for name in epoch2)


def test_dev_loss_averages_the_batches_as_both_references(monkeypatch):
    # B:src/train.py:36-44 and S:src/train.py:65-73 divide the summed batch losses by len(dataloader): the last,
    # shorter batch counts as much as a full one. strae <= 0.1 (recipe strae_0_1) weighted by sentences.
    class Model(torch.nn.Module):
        def loss(self, ids, lengths):
            return ids.float().mean(), {"sum": ids.float().sum()}

    monkeypatch.setattr(trainer, "collate", lambda dev, indices, pad_id: (
        torch.tensor([dev[i] for i in indices]), torch.ones(len(indices), dtype=torch.long)))
    dev, model = [1.0, 3.0, 5.0, 7.0, 20.0], Model()  # batches of 2: means 2, 6, 20
    by_batch = trainer._evaluate_dev(model, dev, 2, 0, torch.device("cpu"), None, "batches")
    by_sentence = trainer._evaluate_dev(model, dev, 2, 0, torch.device("cpu"), None, "sentences")
    assert by_batch == pytest.approx({"loss": (2 + 6 + 20) / 3, "sum": (4 + 12 + 20) / 3})
    assert by_sentence == pytest.approx({"loss": (2 * 2 + 6 * 2 + 20) / 5, "sum": (4 * 2 + 12 * 2 + 20) / 5})
    assert model.training  # back in training mode


def test_best_weights_missing_keeps_the_last_and_says_so(tiny, tmp_path, monkeypatch):
    # epoch 1's weights were kept as best.pt, which is then lost (a disk clean-up, `strae parts split --missing-ok`)
    # before the run resumes: the last weights are kept and train.json says why (changing final_weights mid-run,
    # the other way best.pt could be missing, is refused: test_resuming_with_another_weight_selection_is_refused)
    _scripted_dev_loss(monkeypatch, {1: 1.0, 2: 2.0})
    out = tmp_path / "run"
    with pytest.raises(Interrupt):
        trainer.train(train_args(tiny, out, "--checkpoint-every-steps", "3"), step_callback=interrupt_at(9))
    (out / runs.BEST_WEIGHTS_FILE).unlink()
    assert trainer.train(train_args(tiny, out)) == 0
    selection = json.loads((out / "train.json").read_text())["final_weights"]
    assert selection["epoch"] == 2 and "missing" in selection["unavailable"]


def test_the_triton_levels_record_how_the_narrow_top_levels_are_launched(tiny, tmp_path, monkeypatch):
    """train.json says whether the narrow top levels shared one launch (models/propagation.py LEVEL_TAIL_NODES); the
    Triton engine runs here on Triton's CPU interpreter (conftest.py)."""
    from strae.models import propagation

    monkeypatch.setattr(propagation, "LEVEL_TAIL_NODES", 8)
    out = tmp_path / "run"
    args = train_args(tiny, out, "--induction-kernel", "triton", "--propagation", "handwritten", "--max-steps", "1",
                      "--dev-max-sentences", "4", "--collapse-sentences", "4", "--batch-size", "4")
    assert trainer.train(args) == 0
    record = json.loads((out / "train.json").read_text())["provenance"]["propagation"]
    assert (record["mode"], record["levels"]["used"], record["level_tail_nodes"]) == ("handwritten", "triton", 8)


def test_a_triton_engine_that_fails_its_first_use_check_is_warned_about(tiny, tmp_path, monkeypatch, capsys):
    """The fallback is correct but far slower (the torch induction ~25x on an H100): a time-boxed GPU chunk's log
    must say so at the start, not only train.json's provenance at the end."""
    from strae.models import model as model_module

    monkeypatch.setattr(model_module, "levels_self_check", lambda model, device: "up differs by up to 1 (scale 1)")
    out = tmp_path / "run"
    args = train_args(tiny, out, "--induction-kernel", "triton", "--propagation", "handwritten", "--max-steps", "1",
                      "--dev-max-sentences", "4", "--collapse-sentences", "4", "--batch-size", "4")
    assert trainer.train(args) == 0
    record = json.loads((out / "train.json").read_text())["provenance"]["propagation"]["levels"]
    assert record["used"] == "torch" and "first-use check" in record["reason"]
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert any("Triton levels engine fell back to torch" in line and "up differs" in line for line in warning)


def test_a_run_directory_without_its_checkpoint_is_never_silently_retrained(tiny, tmp_path):
    """A finished run whose checkpoint.pt was deleted (to save disk) keeps its weights when its command is run
    again, and another run's directory is never taken over: both are refused, naming what differs; --restart
    trains from scratch. A run that stopped before its first checkpoint just starts."""
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "3")) == 0
    (out / "checkpoint.pt").unlink()
    weights = (out / "model.pt").read_bytes()
    with pytest.raises(SystemExit, match="checkpoint.pt is gone"):
        trainer.train(train_args(tiny, out, "--max-steps", "3"))
    other = train_args(tiny, out, "--max-steps", "3")
    other[other.index("--seed") + 1] = "4"
    with pytest.raises(SystemExit, match=r"another run's directory \(seed 3 \(this command: 4\)\)"):
        trainer.train(other)
    assert (out / "model.pt").read_bytes() == weights and (out / "encoder.json").exists()
    assert trainer.train(other + ["--restart"]) == 0
    assert json.loads((out / "train.json").read_text())["run"]["seed"] == 4

    started = tmp_path / "started"  # train.json written at the start, no checkpoint yet: nothing to lose
    with pytest.raises(Interrupt):
        trainer.train(train_args(tiny, started, "--max-steps", "3"), step_callback=interrupt_at(1))
    assert not (started / "checkpoint.pt").exists()
    assert trainer.train(train_args(tiny, started, "--max-steps", "3")) == 0


def test_train_and_dev_splits_from_different_tokenisations_are_refused(tiny, tmp_path):
    import shutil

    data_dir, _ = tiny
    mixed = tmp_path / "mixed"
    shutil.copytree(data_dir, mixed)
    meta = json.loads((mixed / "dev.json").read_text())
    (mixed / "dev.json").write_text(json.dumps({**meta, "pretokenize": "treebank"}))
    args = train_args(tiny, tmp_path / "run")
    args[args.index("--data-dir") + 1] = str(mixed)
    with pytest.raises(SystemExit, match="differ in pretokenize .*re-run `strae tokenize-corpus`"):
        trainer.train(args)
    # splits of two preparations of the corpus (a dev from before a re-prepare with another seed or budget)
    (mixed / "dev.json").write_text(json.dumps({**meta, "corpus_meta_sha256": "b" * 64}))
    train_meta = json.loads((mixed / "train.json").read_text())
    (mixed / "train.json").write_text(json.dumps({**train_meta, "corpus_meta_sha256": "a" * 64}))
    with pytest.raises(SystemExit, match="differ in corpus_meta_sha256"):
        trainer.train(args)


def test_a_finished_run_extended_later_keeps_its_session_finished(tiny, tmp_path, capsys):
    """The last checkpoint of a finished run closes its session, so a larger budget that continues from it lists
    that session as ended (not lost after its checkpoint); a checkpointed directory relabelled by another command
    (--setting is not in the checkpoint's fingerprint) is refused. The resumed session first prints the earlier
    sessions and epochs (the workflow's `> {log}` keeps only the last session's output)."""
    out = tmp_path / "run"
    assert trainer.train(train_args(tiny, out, "--max-steps", "3")) == 0
    first_epoch = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch 1: "))
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    assert saved["timings"]["sessions"][-1]["end_step"] == 3
    assert trainer.train(train_args(tiny, out, "--max-steps", "5")) == 0
    resumed = capsys.readouterr().err.splitlines()
    at = next(i for i, line in enumerate(resumed) if line.startswith("resuming "))
    assert resumed[at + 1].startswith("  session 1: steps 0→3, started ") and resumed[at + 1].endswith("; ended")
    assert resumed[at + 2] == f"  {first_epoch}" and first_epoch.endswith("(partial: --max-steps)")
    first, second = json.loads((out / "train.json").read_text())["timings"]["sessions"]
    assert (first["end_step"], second["start_step"], second["end_step"]) == (3, 3, 5)
    assert "ended" in first and "lost_after_checkpoint" not in first
    with pytest.raises(SystemExit, match="another run's directory \\(setting"):
        trainer.train(train_args(tiny, out, "--max-steps", "7", "--setting", "renamed"))


def test_a_run_started_to_ignore_hangups_keeps_ignoring_them():
    """nohup's SIG_IGN for SIGHUP is the starter's choice: StopRequest leaves it (and restores the others)."""
    import signal

    from strae.runtime import StopRequest

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with StopRequest():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with StopRequest() as stop:
            assert signal.getsignal(signal.SIGHUP) == stop._handle
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, before)


@pytest.mark.parametrize("flag, value", [("--max-steps", "0"), ("--epochs", "0"), ("--lr", "nan"),
                                         ("--collapse-sentences", "0"), ("--dev-max-sentences", "0"),
                                         ("--checkpoint-every-steps", "-1"), ("--temperature", "inf")])
def test_impossible_settings_are_refused_naming_the_option(tiny, tmp_path, capsys, flag, value):
    """Refused when parsed, before anything is written: `--max-steps 0` wrote a "completed" untrained run, and
    `--collapse-sentences 0` / `--dev-max-sentences 0` failed with a traceback after a whole epoch."""
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as error:
        trainer.train(train_args(tiny, out, flag, value))
    assert error.value.code == 2 and f"argument {flag}" in capsys.readouterr().err
    assert not out.exists()


def test_a_non_finite_recipe_value_is_a_config_error_not_a_failed_seed(tiny, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match="temperature must be a finite number"):
        trainer.train(train_args(tiny, out, "--set", "temperature=.nan", "--record-failure"))
    assert not (out / "train.json").exists()


def test_the_workflows_restart_stale_discards_a_checkpoint_of_other_settings(tiny, tmp_path, capsys):
    """A job Snakemake reruns because its settings changed (an edited recipe) finds the old settings' checkpoint:
    without --restart-stale strae train refuses it (the job would fail on every run); with it the checkpoint goes
    and the run trains from scratch to a fresh run's weights. A checkpoint of the same settings still resumes."""
    out, fresh = tmp_path / "run", tmp_path / "fresh"
    assert trainer.train(train_args(tiny, out, "--max-steps", "4", "--set", "temperature=0.3")) == 0
    with pytest.raises(SystemExit, match="different settings"):
        trainer.train(train_args(tiny, out))
    assert trainer.train(train_args(tiny, out, "--restart-stale")) == 0
    assert "discarded with best.pt" in capsys.readouterr().err
    assert trainer.train(train_args(tiny, fresh)) == 0
    for name, tensor in final_state(fresh).items():
        assert torch.equal(tensor, final_state(out)[name]), name
    record = json.loads((out / "train.json").read_text())
    assert record["recipe"]["values"]["temperature"] != 0.3 and len(record["timings"]["sessions"]) == 1
    # the same settings: nothing discarded, the completed run is simply there
    assert trainer.train(train_args(tiny, out, "--restart-stale")) == 0
    assert "discarded" not in capsys.readouterr().err
    # another run's directory (a mistyped --out: another seed) is never discarded, only refused
    other = [a if a != "3" else "4" for a in train_args(tiny, out, "--restart-stale")]
    with pytest.raises(SystemExit, match="different settings"):
        trainer.train(other)
    assert (out / "checkpoint.pt").exists() and (out / "encoder.json").exists()
    assert json.loads((out / "train.json").read_text())["status"] == "completed"


def test_a_partial_entry_before_the_last_is_no_candidate_for_the_kept_weights():
    """Histories written before a completed epoch replaced its cut's partial entry keep both: the cut (a point its
    epoch went past) never wins the best-dev-loss pick; a partial last entry (a run ended by --max-steps) does."""
    history = [{"dev": {"loss": 2.0}}, {"dev": {"loss": 0.5}, "partial": True}, {"dev": {"loss": 1.0}}]
    assert trainer.best_entry(history) is history[2]
    assert trainer.best_entry(history[:2]) is history[1]
