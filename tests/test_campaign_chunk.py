"""tools/campaign_chunk.sh and strae.report.progress: a target run in time-boxed chunks, each cut off by its time
limit, leaves snapshot evaluations of the unfinished runs and one archive; the next chunk resumes from the checkpoint.

The end-to-end test trains the e2e overlay's synthetic Banyan run (.test/config.yaml) for many short epochs; the first
chunk's limit is made to run out as soon as the run has written a checkpoint (whatever the machine's speed or load),
and the second chunk finishes it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

from strae import parts, paths, plan
from strae.report import progress
from strae.report import record as record_module
from test_workflow import REPO, copy_workdir, snakemake

RUN = plan.Run("synth", "banyan", "ce_diagonal_entangled_k128_u2", 0)
TARGET = RUN.eval_json("paper")
EPOCHS = 4  # ~44 steps each on the synthetic corpus: the first checkpoint (epoch 1's end) comes epochs before the last
OVERLAY = f"""
scale:
  recipe_overrides: {{epochs: {EPOCHS}}}
experiments:
  synthetic_selfstrae: {{enabled: false}}
"""


def fake_run(results: Path, files: dict[str, str]) -> Path:
    path = results / RUN.run_dir.removeprefix("results/")
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def test_unfinished_means_a_checkpoint_without_completion_mark_or_failure(tmp_path):
    running = fake_run(tmp_path / "a", {"checkpoint.pt": "", "train.json": json.dumps({"status": "running"})})
    assert progress.unfinished(running)
    done = fake_run(tmp_path / "b", {"checkpoint.pt": "", "encoder.json": "{}"})
    assert not progress.unfinished(done)
    failed = fake_run(tmp_path / "c", {"checkpoint.pt": "", "train.json": json.dumps({"status": "failed"})})
    assert not progress.unfinished(failed)
    assert [run for run, _ in progress.run_dirs(tmp_path / "a")] == [RUN]


def test_latest_snapshot_is_the_highest_step_not_the_last_name(tmp_path):
    folder = progress.snapshot_dir(tmp_path, RUN, 0).parent
    folder.mkdir(parents=True)
    for step in (900, 1320):
        (folder / f"step{step}.paper.json").write_text("{}")
    (folder / "step10000").mkdir()  # exported, not evaluated
    assert progress.latest_snapshot(tmp_path, RUN) == (1320, folder / "step1320.paper.json")


def test_a_checkpoint_rewritten_during_its_export_is_exported_again_under_its_own_step(tmp_path, monkeypatch):
    """A stopping trainer rewrote the checkpoint (step 5 -> 9) while step 5 was exported: the mislabelled export is
    removed and step 9 exported and evaluated; a checkpoint that never holds still is given up on, named."""
    results, logs = tmp_path / "results", tmp_path / "logs"
    run_path = fake_run(results, {"checkpoint.pt": ""})
    steps = iter([5, 9, 9])
    monkeypatch.setattr(progress, "checkpoint_progress", lambda path: {"global_step": next(steps)})
    monkeypatch.setattr(progress, "export_command", lambda config, run, path, dest: ["export", str(dest)])
    monkeypatch.setattr(progress, "evaluate_command", lambda config, path, run, dest: ["evaluate", str(dest)])
    holds = iter([9, 9])  # what the checkpoint holds when each export reads it

    def run_logged(command, log, deadline, env):
        dest = Path(command[1])
        if command[0] == "export":
            dest.mkdir(parents=True)
            (dest / "train.json").write_text(json.dumps({"snapshot": {"global_step": next(holds)}}))
            (dest / "encoder.json").write_text("{}")
        else:
            progress.snapshot_scores(dest).write_text("{}")
        return None

    monkeypatch.setattr(progress, "run_logged", run_logged)
    config = {"scale": {}}
    line = progress.snapshot_run(config, tmp_path / "c.yaml", RUN, run_path, results, logs, time.monotonic() + 60)
    assert line.endswith(str(progress.snapshot_scores(progress.snapshot_dir(results, RUN, 9)))), line
    assert not progress.snapshot_dir(results, RUN, 5).exists()

    steps = iter([10, 11, 12, 13])
    holds = iter([11, 12, 13])
    line = progress.snapshot_run(config, tmp_path / "c.yaml", RUN, run_path, results, logs, time.monotonic() + 60)
    assert "changed to step 13 during the export 3 times" in line and "try again" in line
    assert sorted(p.name for p in progress.snapshot_dir(results, RUN, 0).parent.iterdir()) == ["step9",
                                                                                             "step9.paper.json"]


def test_sentence_average_reads_finite_sentence_level_scores_only(tmp_path):
    scores = tmp_path / "e.json"
    scores.write_text(json.dumps({"tasks": {
        "a": {"level": "sentence", "score": 60.0}, "b": {"level": "sentence", "score": 70.0},
        "w": {"level": "word", "score": 10.0}, "nan": {"level": "sentence", "score": float("nan")},
        "missing": {"level": "sentence"}}}))
    assert progress.sentence_average(scores) == (65.0, 2)


def test_archive_brings_records_and_log_tails_never_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = fake_run(Path("results"), {"train.json": "{}", "checkpoint.pt": "x", "model.pt": "x"})
    assert run.exists()
    Path("results/scores.csv").write_text("a\n")
    (run / "curve/step000000").mkdir(parents=True)  # a training-curve point: weights and its snapshot's record
    (run / "curve/step000000/train.json").write_text("{}")
    (run / "curve/step000000/model.pt").write_text("x")
    Path("results/curves/xx").mkdir(parents=True)
    Path("results/curves/xx/seed0.json").write_text("{}")
    Path("logs/train").mkdir(parents=True)
    Path("logs/train/x.log").write_text("".join(f"line {i}\n" for i in range(80)) + "bar 1\rbar 2\n")
    Path("extra.txt").write_text("records\n")
    count = progress.write_archive(Path("out/c.tar.xz"), Path("results"), Path("logs"), [Path("extra.txt")])
    with tarfile.open("out/c.tar.xz") as tar:
        names = set(tar.getnames())
        tail = tar.extractfile("logs/train/x.log.tail").read().decode().splitlines()
    assert names == {f"{RUN.run_dir}/train.json", "results/scores.csv", "results/curves/xx/seed0.json",
                     "logs/train/x.log.tail", "extra.txt"}
    assert count == len(names)
    assert len(tail) == progress.LOG_TAIL_LINES and tail[-2:] == ["bar 1", "bar 2"] and tail[0] == "line 32"


def write_progress(path: Path, step: int, total: int, rate: float, age_s: float = 0.0) -> None:
    (path / "progress.json").write_text(json.dumps({"global_step": step, "total_steps": total,
                                                    "steps_per_second": rate, "updated_unix": time.time() - age_s}))


def test_eta_counts_only_runs_training_now_and_their_evaluation(tmp_path):
    results = tmp_path / "results"
    assert progress.eta(results, 10, 5) == (True, ["no run is training now"])
    path = fake_run(results, {})
    write_progress(path, 990, 1000, 5.0)  # 2 s of training left + 5 s of evaluation
    in_time, lines = progress.eta(results, 10, 5)
    assert in_time and re.search(r"seed0  step 990/1000 at 5\.0 steps/s \(0 s ago\): ends in ~2 s \+ 5 s "
                                 r"evaluation", lines[0])
    assert progress.eta(results, 6, 5)[0] is False  # 7 s needed
    # written 8 s ago at 1 step/s: ~8 of its 10 steps are made since, so ~2 s of training are left, not 10
    write_progress(path, 990, 1000, 1.0, age_s=8)
    in_time, lines = progress.eta(results, 8, 5)
    assert in_time and "(8 s ago): ends in ~2 s + 5 s evaluation" in lines[0], lines
    assert progress.eta(results, 6, 5)[0] is False
    # written 30 s ago: the trainer stalled or died after at most ProgressFile.every_s (10) more steps, so 30
    # are not credited (they would read as "ends in ~0 s")
    write_progress(path, 980, 1000, 1.0, age_s=30)
    in_time, lines = progress.eta(results, 15, 5)
    assert in_time and "(30 s ago): ends in ~10 s + 5 s evaluation" in lines[0], lines
    assert progress.eta(results, 14, 5)[0] is False
    write_progress(path, 10, 1000, 0.0)  # no rate yet: cannot say, so not in time
    assert progress.eta(results, 1e9, 0)[0] is False
    write_progress(path, 10, 1000, 5.0, age_s=progress.LIVE_S + 5)  # a previous chunk's file: no trainer now
    assert progress.eta(results, 1, 0) == (True, ["no run is training now"])
    write_progress(path, 10, 1000, 5.0)
    (path / "encoder.json").write_text("{}")  # completed runs are not waited for
    assert progress.eta(results, 1, 0)[0] is True
    (path / "encoder.json").unlink()
    (path / "progress.json").write_text('{"global_step": 10')  # half-written: not in time, and said so
    in_time, lines = progress.eta(results, 1e9, 0)
    assert not in_time and "progress unreadable" in lines[0]
    # a trainer starting (train.json `running` just written; loading, compiling) has no rate yet: never in time,
    # where it used to read as "no run is training now" and let the chunk skip its cut
    (path / "progress.json").unlink()
    (path / "train.json").write_text(json.dumps({"status": "running"}))
    in_time, lines = progress.eta(results, 1e9, 0)
    assert not in_time and "starting (no progress of this sitting yet)" in lines[0]
    write_progress(path, 10, 1000, 5.0, age_s=progress.LIVE_S + 5)  # the previous sitting's, older than train.json
    old = time.time() - 120
    os.utime(path / "progress.json", (old, old))
    assert progress.eta(results, 1e9, 0)[0] is False
    write_progress(path, 10, 1000, 5.0)  # this sitting's first progress: judged by its rate again
    assert progress.eta(results, 1e9, 0)[0] is True
    old = time.time() - progress.STARTING_S - 5  # a stopped run's leftover train.json: not starting
    os.utime(path / "train.json", (old, old))
    (path / "progress.json").unlink()
    assert progress.eta(results, 1, 0) == (True, ["no run is training now"])


def test_unevaluated_names_the_targets_of_finished_runs_whose_evaluation_is_missing(tmp_path):
    results = tmp_path / "results"
    target = str(paths.eval_json(RUN.language, RUN.model, RUN.setting, RUN.seed, "paper", results=results))
    path = fake_run(results, {"train.json": json.dumps({"status": "running"}), "checkpoint.pt": ""})
    assert progress.unevaluated(results, [target]) == []  # still training: a snapshot's business
    (path / "encoder.json").write_text("{}")
    (path / "train.json").write_text(json.dumps({"status": "completed"}))
    assert progress.unevaluated(results, [target, "other.json"]) == [target]
    assert progress.unevaluated(results, [target.replace("/eval/", "/./eval/")]) == [target.replace("/eval/",
                                                                                                    "/./eval/")]
    assert progress.unevaluated(results, ["other.json"]) == []  # not a target of this chunk
    Path(target).parent.mkdir(parents=True)
    Path(target).write_text("{}")
    assert progress.unevaluated(results, [target]) == []  # evaluated
    Path(target).unlink()
    (path / "train.json").write_text(json.dumps({"status": "failed"}))
    assert progress.unevaluated(results, [target]) == []  # the workflow evaluates a failed run itself


def test_summary_of_a_running_run_says_how_much_training_is_left(tmp_path):
    results = tmp_path / "results"
    path = fake_run(results, {})
    torch.save({"epoch": 1, "batch_in_epoch": 3, "global_step": 47}, path / "checkpoint.pt")
    line = progress.summary_line(results, None, RUN, path)
    assert line.endswith("running  epoch 1 (+3 batches) step 47  no snapshot evaluated"), line  # no progress.json
    write_progress(path, 40, 447, 2.0, age_s=3600)  # the last rate, however old: the checkpoint's step counts
    line = progress.summary_line(results, None, RUN, path)
    assert line.endswith("no snapshot evaluated  ~200 s of training left (400 steps at 2.0 steps/s)"), line


def test_summary_warns_when_a_triton_engine_fell_back_to_torch(tmp_path):
    results = tmp_path / "results"
    levels = {"requested": "auto", "used": "torch",
              "reason": "the Triton levels failed their first-use check: up differs by up to 1 (scale 1)"}
    provenance = {"induction_kernel": {"requested": "auto", "used": "triton", "reason": "auto: CUDA, ..."},
                  "propagation": {"requested": "auto", "mode": "handwritten", "levels": levels}}
    path = fake_run(results, {"train.json": json.dumps({"status": "running", "provenance": provenance})})
    torch.save({"epoch": 0, "batch_in_epoch": 5, "global_step": 5}, path / "checkpoint.pt")
    line = progress.summary_line(results, None, RUN, path)
    assert line.endswith("no snapshot evaluated  WARNING: the Triton levels fell back to torch (the Triton levels "
                         "failed their first-use check: up differs by up to 1 (scale 1))"), line
    provenance["propagation"]["levels"] = {"requested": "auto", "used": "torch", "reason": "the induction runs torch"}
    (path / "train.json").write_text(json.dumps({"status": "running", "provenance": provenance}))
    assert "WARNING" not in progress.summary_line(results, None, RUN, path)  # a CPU run's torch is no fallback


FAKE_SNAKEMAKE = """#!/usr/bin/env bash
# stands in for snakemake: one run training at FAKE_STEP of FAKE_TOTAL steps at 50 steps/s (its progress.json
# rewritten every 0.2 s, as strae train does every 10 s), exiting 0 after FAKE_S seconds unless stopped before
run=results/runs/xx/banyan/s/seed0
mkdir -p "$run"
end=$((SECONDS + FAKE_S))
while ((SECONDS < end)); do
    printf '{"global_step": %s, "total_steps": %s, "steps_per_second": 50.0, "updated_unix": %s}' \
        "$FAKE_STEP" "$FAKE_TOTAL" "$(date +%s.%N)" >"$run/progress.tmp"
    mv "$run/progress.tmp" "$run/progress.json"
    sleep 0.2
done
echo "fake snakemake ended after $FAKE_S s"
"""


@pytest.mark.parametrize("step, expected_rc", [(999, 0), (10, 75)], ids=["ends-in-time", "cut-off"])
def test_a_run_about_to_end_at_the_cut_finishes_in_the_chunk(tmp_path, step, expected_rc):
    """At the cut (CHUNK_S - SNAPSHOT_S = 15 s) the fake run still trains for 7 s more; it is let finish when its
    progress says it ends (evaluation included) before the hard stop (25 s), and stopped at the cut otherwise."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text(FAKE_SNAKEMAKE)
    fake.chmod(0o755)
    env = dict(chunk_env(45), SNAPSHOT_S="30", KILL_S="5", WRAPUP_S="15", FINISH_EVAL_S="1", SNAKEMAKE=str(fake),
               FAKE_S="22", FAKE_STEP=str(step), FAKE_TOTAL="1000")
    started = time.monotonic()
    result = subprocess.run(["bash", "tools/campaign_chunk.sh", "target"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    took = time.monotonic() - started
    assert result.returncode == expected_rc, result.stdout + result.stderr
    snakemake_log = next((tmp_path / "logs/campaign").glob("chunk-*.log")).read_text()
    if expected_rc == 0:
        assert "[snakemake] not cut off at" in result.stdout
        assert "[eta] xx/banyan/s/seed0  step 999/1000" in result.stdout
        assert "fake snakemake ended after 22 s" in snakemake_log and 20 < took < 45  # past the cut (15 s)
    else:
        assert "[eta] xx/banyan/s/seed0  step 10/1000" in result.stdout and "not cut off" not in result.stdout
        assert "[snakemake] stopped after" in result.stdout and "fake snakemake ended" not in snakemake_log
        # stopped, not let finish, is asserted above; the wall-clock bound is only the chunk's own limit (45 s) plus
        # slack for its Python wrap-up on a loaded machine (37 s failed there with a training beside the tests)
        assert took < 45 + 15


def test_a_tail_too_short_to_let_a_run_finish_is_warned_of(tmp_path):
    """SNAPSHOT_S - WRAPUP_S - KILL_S below FINISH_EVAL_S: no run can be let finish at the cut, and the chunk says so
    in its records (the 2026-11-27 call that stopped a run ~7 s short of its end had no such line)."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text(FAKE_SNAKEMAKE)
    fake.chmod(0o755)
    for snapshot_s, warned in (("35", True), ("70", False)):
        env = dict(chunk_env(90), SNAPSHOT_S=snapshot_s, KILL_S="10", WRAPUP_S="20", FINISH_EVAL_S="30",
                   SNAKEMAKE=str(fake), FAKE_S="1", FAKE_STEP="1000", FAKE_TOTAL="1000")
        result = subprocess.run(["bash", "tools/campaign_chunk.sh", "target"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ("[warning] SNAPSHOT_S - WRAPUP_S - KILL_S = 5 s < FINISH_EVAL_S (30 s)" in result.stdout) == warned
        assert ("[warning]" in result.stdout) == warned


def chunk_env(chunk_s: int) -> dict[str, str]:
    # this checkout's sources first: the copied work tree has none, and an installed strae may be another checkout
    return dict(os.environ, CHUNK_S=str(chunk_s), SNAPSHOT_S="40", KILL_S="10", WRAPUP_S="15", SNAPSHOT_JOBS="2",
                PROFILE="profiles/local", PYTHON=sys.executable,
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]))


CHUNK_COMMAND = ["bash", "tools/campaign_chunk.sh", TARGET, "--configfile", ".test/config.yaml", ".test/chunk.yaml"]


def chunk(workdir: Path, chunk_s: int) -> subprocess.CompletedProcess:
    return subprocess.run(CHUNK_COMMAND, cwd=workdir, env=chunk_env(chunk_s), capture_output=True, text=True,
                          timeout=chunk_s + 30)


def chunk_cut_off_once(workdir: Path, ready: Path, wait_s: int = 480) -> subprocess.CompletedProcess:
    """A chunk whose time limit runs out as soon as ``ready`` exists, however slow the machine: a fixed short limit
    failed on a loaded machine (Snakemake had not started training before it ran out). The script's own limit is
    GNU `timeout`'s timer, which fires as SIGALRM; the test sends that signal itself, so the chunk takes exactly the
    path of a limit reached (timeout stops snakemake's process group, exit 124)."""
    process = subprocess.Popen(CHUNK_COMMAND, cwd=workdir, env=chunk_env(wait_s + 120), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ready.exists() and process.poll() is None, f"{ready} never appeared while the chunk ran"
        # the chunk's first step (snakemake under timeout) is the only timeout process in its session now
        timers = subprocess.run(["pgrep", "-s", str(process.pid), "-x", "timeout"], capture_output=True, text=True)
        assert len(timers.stdout.split()) == 1, timers.stdout
        os.kill(int(timers.stdout), signal.SIGALRM)
        stdout, stderr = process.communicate(timeout=wait_s)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(CHUNK_COMMAND, process.returncode, stdout, stderr)


def archived(workdir: Path) -> dict[str, bytes]:
    with tarfile.open(workdir / "campaign-out/campaign.tar.xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.slow
def test_a_chunk_cut_off_mid_training_leaves_a_snapshot_and_the_next_resumes(tmp_path):
    workdir = copy_workdir(tmp_path)
    (workdir / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", workdir / "tools")
    (workdir / ".test/chunk.yaml").write_text(OVERLAY)
    # the data first, so the first chunk is cut off in training
    data = [str(paths.tokenized_file(RUN.language, "train", "json")), str(paths.tokenizer_model(RUN.language))]
    prepared = snakemake(workdir, "--cores", "2", *data, "--configfile", ".test/config.yaml", ".test/chunk.yaml",
                         timeout=300)
    assert prepared.returncode == 0, prepared.stdout[-3000:] + prepared.stderr[-3000:]

    run_dir = workdir / RUN.run_dir
    first = chunk_cut_off_once(workdir, run_dir / "checkpoint.pt")  # cut off mid-training; the tail snapshots it
    assert first.returncode == 75, first.stdout + first.stderr
    assert not (run_dir / "encoder.json").exists() and (run_dir / "checkpoint.pt").exists()
    # the job itself checkpointed where the signal found it (strae train on SIGTERM), not at an earlier checkpoint
    train_log = next((workdir / "logs/train").rglob("seed0.log")).read_text()
    stopped_at = re.search(r"stopped by SIGTERM at epoch \d+, batch \d+, step (\d+); checkpoint written", train_log)
    assert stopped_at, train_log[-2000:]
    assert torch.load(run_dir / "checkpoint.pt", weights_only=False)["global_step"] == int(stopped_at[1])
    latest = progress.latest_snapshot(workdir / "results", RUN)
    assert latest is not None, first.stdout
    step, scores = latest
    assert step > 0 and json.loads(scores.read_text())["tasks"], first.stdout
    snapshot = scores.with_suffix("").with_suffix("")
    snapshot_record = json.loads((snapshot / "train.json").read_text())
    assert not (snapshot / "model.pt").exists() and (snapshot / "encoder.json").exists()  # evaluated: weights gone
    assert snapshot_record["status"] == "running" and snapshot_record["snapshot"]["global_step"] == step
    line = rf"seed0  running  epoch \d+/{EPOCHS}(?: \(\+\d+ batches\))? step {step}  STS avg [\d.]+ .*" \
           rf"snapshot step {step}"
    assert re.search(line, first.stdout), first.stdout
    files = archived(workdir)
    relative = str(scores.relative_to(workdir))
    assert json.loads(files[relative]) == json.loads(scores.read_text())
    assert "campaign.txt" in files and any(name.startswith("logs/train/") for name in files)

    # a later session's fresh box: nothing of this one but the run's state (checkpoint.pt, best.pt: the recipe ends
    # on the best epoch's weights), brought back and carried up again in parts (strae parts, as README says);
    # Snakemake sees no train.json, runs the train job, and strae train resumes from it
    state = [run_dir / "checkpoint.pt", run_dir / "best.pt"]
    assert state[1].exists()  # the first epoch end wrote it
    half_mib = sum(path.stat().st_size for path in state) / 2 / 2 ** 20 + 1e-3
    moved = tmp_path / "moved"
    for call, only in (("call1", "0:1"), ("call2", "1:")):
        parts.split(state, moved / call, half_mib, only, workdir, missing_ok=True)
    fresh = tmp_path / "fresh"
    shutil.copytree(workdir, fresh, ignore=shutil.ignore_patterns("results", "logs", ".snakemake", "campaign-out"))
    assert "joined from 2 parts" in parts.join([moved], fresh)[0]
    resumed = chunk(fresh, 900)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    fresh_record = json.loads((fresh / RUN.run_dir / "train.json").read_text())
    assert fresh_record["status"] == "completed" and fresh_record["timings"]["sessions"][-1]["start_step"] == step

    second = chunk(workdir, 900)  # returns when done; the budget only has to outlast a loaded machine
    assert second.returncode == 0, second.stdout + second.stderr
    # the run resumed on the fresh box ends on the same weights as the one resumed where it stopped
    weights = [torch.load(folder / RUN.run_dir / "model.pt", weights_only=False)["state_dict"]
               for folder in (workdir, fresh)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
    record = json.loads((run_dir / "train.json").read_text())
    assert fresh_record["final_weights"] == record["final_weights"] and "unavailable" not in record["final_weights"]
    assert record["status"] == "completed" and len(record["history"]) == EPOCHS
    sessions = record["timings"]["sessions"]
    # resumed where the first chunk's checkpoint stood (the snapshot's step), not from step 0
    assert sessions[0]["start_step"] == 0 and sessions[-1]["start_step"] == step
    assert [entry["epoch"] for entry in record["history"]] == list(range(1, EPOCHS + 1))
    final_step = record["history"][-1]["global_step"]
    assert step < final_step
    assert re.search(rf"seed0  completed  epoch {EPOCHS}/{EPOCHS} step {final_step}  STS avg .*final",
                     second.stdout), second.stdout
    files = archived(workdir)
    assert {TARGET, f"{RUN.run_dir}/train.json", relative} <= set(files)
    assert files["campaign.txt"].decode().count("# chunk ") == 4  # start and end line of each chunk

    again = chunk(workdir, 300)  # idempotent: nothing to train, nothing to snapshot, the same archive contents
    assert again.returncode == 0 and "[snapshot] no unfinished run" in again.stdout, again.stdout + again.stderr

    # the archive -> a record (tools/campaign_record.sh; a campaign's first record carries nothing)
    shutil.copy2(REPO / "tools/campaign_record.sh", workdir / "tools")
    (workdir / "README.md").write_text(f"# x\n{record_module.README_BEGIN}\n{record_module.README_END}\n")
    # the multi-view paper's evaluations are tools/multiview_record.sh's: left out (not even read: these are no JSON)
    for other in ("multiview_ctl/ctl_h1000_e300/seed0.senteval.json", "random-token/dim256/seed0.paper.json"):
        (workdir / "results/eval" / RUN.language / other).parent.mkdir(parents=True, exist_ok=True)
        (workdir / "results/eval" / RUN.language / other).write_text("not json")
    made = subprocess.run(["bash", "tools/campaign_record.sh", "chunked", "none", "campaign-out/campaign.tar.xz"],
                          cwd=workdir, capture_output=True, text=True, timeout=600,
                          env=dict(chunk_env(300), SNAKEMAKE_ARGS="--configfile .test/config.yaml .test/chunk.yaml"))
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    kept = workdir / "reproductions/chunked"
    assert json.loads((kept / RUN.run_dir.replace("results/", "", 1) / "train.json").read_text())["status"] == \
        "completed"
    rows = (kept / "scores.csv").read_text().splitlines()
    assert any(f",{RUN.language},{RUN.model},{RUN.setting},0,completed," in row for row in rows), rows[:3]
    assert (kept / "campaign/campaign-1.txt").read_text().count("# chunk ") == 6  # the box's records, three chunks
    assert "reproductions/chunked" in (workdir / "README.md").read_text()

    # the same run recorded from the checkout it trained in (tools/local_record.sh), as a CPU run is while other
    # trainings hold that checkout: a fresh clone of HEAD makes the record, this checkout's results/ stay untouched
    shutil.copy2(REPO / "tools/local_record.sh", workdir / "tools")
    shutil.copy2(REPO / ".gitignore", workdir / ".gitignore")
    # the code too, as a checkout has it: the clone runs its own (PYTHONPATH), so the record names the cloned commit
    for name in ("src", "baselines"):
        shutil.copytree(REPO / name, workdir / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(REPO / "pyproject.toml", workdir / "pyproject.toml")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=workdir, check=True, capture_output=True)
    scores = workdir / "results/scores.csv"
    scores_before = (scores.read_bytes(), scores.stat().st_mtime_ns)
    local = subprocess.run(["bash", "tools/local_record.sh", "local", "none", RUN.run_dir + "/"], cwd=workdir,
                           capture_output=True, text=True, timeout=600,
                           env=dict(chunk_env(300), SNAKEMAKE_ARGS="--configfile .test/config.yaml .test/chunk.yaml"))
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    assert "local_record: wrote reproductions/local from 1 run(s)" in local.stdout
    made_here = workdir / "reproductions/local"
    assert (made_here / "scores.csv").read_text() == (kept / "scores.csv").read_text()
    assert json.loads((made_here / RUN.run_dir.replace("results/", "", 1) / "train.json").read_text()) == \
        json.loads((run_dir / "train.json").read_text())
    assert "reproductions/local" in (workdir / "README.md").read_text()  # the generated block, copied back
    cloned = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workdir, capture_output=True, text=True).stdout.strip()
    assert json.loads((made_here / "manifest.json").read_text())["git_sha"] == cloned  # the clone's, not dirty
    assert (scores.read_bytes(), scores.stat().st_mtime_ns) == scores_before
    # a figure drawn here from a model (a retrained run's, which is not evaluated) joins on its own: FIGURES and no
    # run, the carried record's runs and scores unchanged
    drawn = workdir / "results/figures/banyan_fig2_node_counts.png"
    drawn.parent.mkdir(parents=True, exist_ok=True)
    drawn.write_bytes(b"\x89PNG drawn from a model")
    for args in (["add", "reproductions/local", "README.md"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                                "-qm", "the record"]):
        subprocess.run(["git", *args], cwd=workdir, check=True, capture_output=True)
    figures = subprocess.run(["bash", "tools/local_record.sh", "figures", "reproductions/local"], cwd=workdir,
                             capture_output=True, text=True, timeout=600,
                             env=dict(chunk_env(300), FIGURES=str(drawn),
                                      SNAKEMAKE_ARGS="--configfile .test/config.yaml .test/chunk.yaml"))
    assert figures.returncode == 0, figures.stdout[-3000:] + figures.stderr[-3000:]
    with_figure = workdir / "reproductions/figures"
    assert (with_figure / "figures/banyan_fig2_node_counts.png").read_bytes() == drawn.read_bytes()
    assert (with_figure / "scores.csv").read_text() == (made_here / "scores.csv").read_text()
    assert json.loads((with_figure / RUN.run_dir.replace("results/", "", 1) / "train.json").read_text()) == \
        json.loads((run_dir / "train.json").read_text())


def test_campaign_record_checks_its_arguments_before_touching_anything(tmp_path):
    """tools/campaign_record.sh (archives -> a record) refuses, naming why, before it writes anything: too few
    arguments, an existing record name (records are immutable), a carry that is not a record, a missing archive."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_record.sh", tmp_path / "tools")
    (tmp_path / "reproductions/old").mkdir(parents=True)
    (tmp_path / "reproductions/taken").mkdir()
    archive = tmp_path / "campaign.tar.xz"
    archive.write_bytes(b"")

    def record(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "tools/campaign_record.sh", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)

    for args, why in ((("new", "reproductions/old"), "usage"),
                      (("taken", "reproductions/old", str(archive)), "records are immutable"),
                      (("new", "reproductions/old", str(archive)), "not a record"),
                      (("new", "reproductions/old", "nowhere.tar.xz"), "not a record")):
        result = record(*args)
        assert result.returncode == 1 and why in result.stderr, (args, result.stderr)
    for name in ("scores.csv", "manifest.json"):
        (tmp_path / "reproductions/old" / name).write_text("")
    result = record("new", "reproductions/old", "nowhere.tar.xz")
    assert result.returncode == 1 and "nowhere.tar.xz: no such file" in result.stderr
    # a snakemake run holding the checkout (its lock) reads the config step 1 would replace
    (tmp_path / ".snakemake/locks").mkdir(parents=True)
    (tmp_path / ".snakemake/locks/0.input.lock").write_text("")
    result = record("new", "reproductions/old", str(archive))
    assert result.returncode == 1 and "a snakemake run holds this checkout" in result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "reproductions/new").exists()


def test_local_record_checks_its_arguments_before_touching_anything(tmp_path):
    """tools/local_record.sh (runs of this checkout -> a record, in a fresh clone) refuses, naming why, before it
    clones or writes anything: a run outside results/runs, still training, never evaluated; an existing record name;
    FIGURES naming no file; tracked files changed since HEAD (the record names HEAD's commit)."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/local_record.sh", tmp_path / "tools")
    (tmp_path / "reproductions/taken").mkdir(parents=True)
    for name in ("scores.csv", "manifest.json"):
        (tmp_path / "reproductions/taken" / name).write_text("")
    (tmp_path / "reproductions/unfinished").mkdir()
    (tmp_path / "reproductions/unfinished/scores.csv").write_text("")
    (tmp_path / "overlay.yaml").write_text("{}\n")  # not committed
    run = tmp_path / "results/runs/en/banyan/s/seed0"
    run.mkdir(parents=True)
    (run / "train.json").write_text(json.dumps({"status": "running"}))
    (tmp_path / "notes.txt").write_text("v1\n")
    for args in (["init", "-q"], ["add", "notes.txt", "tools", "reproductions"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    def record(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "tools/local_record.sh", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, env={**os.environ, "PYTHON": sys.executable, **env})

    rel = "results/runs/en/banyan/s/seed0"
    for args, env, why in ((("new", "none"), {}, "usage"),
                           (("new", "none"), {"FIGURES": "x.png"}, "no RUN and CARRY none"),
                           (("taken", "none", rel), {}, "records are immutable"),
                           (("new", "reproductions/old", rel), {}, "not a record committed at HEAD"),
                           (("new", "reproductions/unfinished", rel), {}, "(no manifest.json)"),
                           (("new", "none", "elsewhere/seed0"), {}, "not a run directory"),
                           (("new", "none", rel), {}, "status running"),
                           (("new", "none", f"./{rel}/"), {}, "status running"),  # the same run, spelled so
                           (("new", "none", str(run)), {}, "status running"),
                           (("new", "none", rel), {"FIGURES": "results/figures/x.png"}, "x.png: no such file"),
                           (("new", "none", rel), {"SNAKEMAKE_ARGS": "--configfile overlay.yaml"}, "overlay.yaml is "
                            "not committed"),
                           (("new", "none", rel), {"SNAKEMAKE_ARGS": "--configfile=overlay.yaml"}, "overlay.yaml is "
                            "not committed"),
                           (("new", "none", rel), {"PYTHON": "no-such-python"}, "no no-such-python here")):
        result = record(*args, **env)
        assert result.returncode == 1 and why in result.stderr, (args, result.stderr)
    (run / "train.json").write_text("{not json")
    result = record("new", "none", rel)
    assert result.returncode == 1 and "train.json: not readable as JSON" in result.stderr
    (run / "train.json").write_text(json.dumps({"status": "completed"}))
    result = record("new", "reproductions/taken/", rel, SNAKEMAKE_ARGS="--configfile notes.txt --cores 1")
    assert result.returncode == 1 and "no evaluation under results/eval/en/banyan/s[@OPTION]/seed0" in result.stderr
    (tmp_path / "notes.txt").write_text("v2\n")
    result = record("new", "none", rel)
    assert result.returncode == 1 and "tracked files differ from HEAD" in result.stderr
    assert not (tmp_path / "reproductions/new").exists()


def test_campaign_record_refuses_evaluations_no_archive_brought(tmp_path):
    """An evaluation already in results/eval that no archive brought (a run made on this machine) would join the
    GPU record beside the box's runs: listed and refused before the scores are written; KEEP_LOCAL=1 keeps it."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_record.sh", tmp_path / "tools")
    box = tmp_path / "box"
    (box / "results/eval/xx/banyan/a").mkdir(parents=True)
    (box / "results/eval/xx/banyan/a/seed0.paper.json").write_text("{}")
    (box / "results/eval/xx/glove/g@stopword_rm").mkdir(parents=True)  # evaluated only with an option
    (box / "results/eval/xx/glove/g@stopword_rm/seed0.paper.json").write_text("{}")
    (box / "results/runs/xx/glove/g/seed0").mkdir(parents=True)
    (box / "results/runs/xx/glove/g/seed0/train.json").write_text("{}")
    for run in ("a/seed0", "c/seed0"):  # c: trained, its evaluation never made (a chunk cut before it)
        (box / f"results/runs/xx/banyan/{run}").mkdir(parents=True)
        (box / f"results/runs/xx/banyan/{run}/train.json").write_text("{}")
    with tarfile.open(tmp_path / "campaign.tar.xz", "w:xz") as tar:
        tar.add(box / "results", arcname="results")
    local = tmp_path / "results/eval/xx/glove/b/seed1.paper.json"
    local.parent.mkdir(parents=True)
    local.write_text("{}")
    bin_dir = tmp_path / "bin"  # a strae that says it was reached
    bin_dir.mkdir()
    (bin_dir / "strae").write_text("#!/bin/sh\necho strae \"$@\" >>strae-calls.txt\nexit 3\n")
    (bin_dir / "strae").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")

    def record(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "tools/campaign_record.sh", "new", "none", "campaign.tar.xz"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env=dict(env, **extra))

    refused = record()
    assert refused.returncode == 1, refused.stderr
    assert "results/eval/xx/glove/b/seed1.paper.json is in results/eval, but no archive brings it" in refused.stderr
    assert "1 evaluation(s) above were made on this machine" in refused.stderr and "KEEP_LOCAL=1" in refused.stderr
    assert "banyan/a" not in refused.stderr  # the box's own is not listed
    assert not (tmp_path / "strae-calls.txt").exists()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "results").rglob("*") if p.is_file()) \
        == ["results/eval/xx/glove/b/seed1.paper.json"]  # refused before the archive was unpacked into results/
    # a carried record's own evaluation (its scores.csv names it) is not "made on this machine"
    carried = tmp_path / "reproductions/old"
    carried.mkdir(parents=True)
    (carried / "manifest.json").write_text("{}")
    (carried / "scores.csv").write_text("source_json\nresults/eval/xx/glove/b/seed1.paper.json\n")
    accepted = subprocess.run(["bash", "tools/campaign_record.sh", "new", "reproductions/old", "campaign.tar.xz"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert "no archive brings it" not in accepted.stderr and (tmp_path / "strae-calls.txt").exists()
    (tmp_path / "strae-calls.txt").unlink()
    kept = record(KEEP_LOCAL="1")  # goes on to aggregate (here: the stand-in strae, which fails)
    assert "strae aggregate" in (tmp_path / "strae-calls.txt").read_text() and kept.returncode != 0
    # the evaluated run's train.json came with it; the unevaluated one's was left out, and said so
    assert (tmp_path / "results/runs/xx/banyan/a/seed0/train.json").exists()
    assert (tmp_path / "results/runs/xx/glove/g/seed0/train.json").exists()
    assert not (tmp_path / "results/runs/xx/banyan/c").exists()
    assert "results/runs/xx/banyan/c/seed0: no evaluation of it in the archives" in kept.stderr


def test_a_chunk_without_a_target_is_refused_before_snakemake_runs(tmp_path):
    """No target (or a variable of the preparing machine, empty on the box) would run the workflow's every job."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text("#!/bin/sh\ntouch ran\n")
    fake.chmod(0o755)
    for args in ([], ["--configfile", "x.yaml"]):
        result = subprocess.run(["bash", "tools/campaign_chunk.sh", *args], cwd=tmp_path, capture_output=True,
                                text=True, timeout=60, env=dict(chunk_env(90), SNAKEMAKE=str(fake)))
        assert result.returncode == 2 and "no target given" in result.stderr, result.stderr
    result = subprocess.run(["bash", "tools/campaign_chunk.sh", "results/x.json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60,
                            env=dict(chunk_env(90), SNAKEMAKE=str(fake), SNAPSHOT_KEEP_WEIGHTS="yes"))
    assert result.returncode == 2 and "SNAPSHOT_KEEP_WEIGHTS=yes: 0 or 1" in result.stderr, result.stderr
    assert not (tmp_path / "ran").exists()


FAKE_SNAKEMAKE_EVALUATING = """#!/usr/bin/env bash
# stands in for snakemake. First call: run A has finished training and is being evaluated (it never ends), run B
# trains far from its end (at the cut the chunk stops the workflow). Later calls: write the target files they get.
if [ -e first-call-done ]; then
    echo "$@" >>finish-calls.txt
    for arg in "$@"; do case $arg in *.json) mkdir -p "$(dirname "$arg")" && echo '{}' >"$arg" ;; esac; done
    exit 0
fi
touch first-call-done
a=results/runs/xx/banyan/a/seed0 b=results/runs/xx/banyan/b/seed0
mkdir -p "$a" "$b"
echo '{"status": "completed"}' >"$a/train.json"
echo '{}' >"$a/encoder.json"
while :; do
    printf '{"global_step": 0, "total_steps": 100000, "steps_per_second": 50.0, "updated_unix": %s}' \
        "$(date +%s.%N)" >"$b/progress.tmp"
    mv "$b/progress.tmp" "$b/progress.json"
    sleep 0.2
done
"""


@pytest.mark.parametrize("targets, expected_rc", [(["a"], 0), (["a", "b"], 75), (["a", "c"], 0)],
                         ids=["only-a", "a-and-b", "a-and-c-evaluated-before"])
def test_a_finished_run_whose_evaluation_the_cut_stopped_is_evaluated_in_the_tail(tmp_path, targets, expected_rc):
    """Run A ended its training before the cut and was being evaluated; run B would not end in time, so the chunk
    stopped the workflow at the cut, A's evaluation with it. A is not a snapshot (encoder.json is written): before
    this step it came back with no scores, and on a lent box its weights went with the box. C was evaluated by an
    earlier call: with A evaluated, every target is done (exit 0)."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text(FAKE_SNAKEMAKE_EVALUATING)
    fake.chmod(0o755)
    evaluations = {name: f"results/eval/xx/banyan/{name}/seed0.paper.json" for name in ("a", "b", "c")}
    (tmp_path / evaluations["c"]).parent.mkdir(parents=True)
    (tmp_path / evaluations["c"]).write_text("{}")
    # the cut at 10 s (CHUNK_S - SNAPSHOT_S): the fake writes its runs' files within a second of starting
    env = dict(chunk_env(50), SNAPSHOT_S="40", KILL_S="5", WRAPUP_S="15", FINISH_EVAL_S="1", SNAKEMAKE=str(fake))
    result = subprocess.run(["bash", "tools/campaign_chunk.sh", *(evaluations[t] for t in targets), "--configfile",
                             "c.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == expected_rc, result.stdout + result.stderr
    assert "[eta] xx/banyan/b/seed0  step 0/100000" in result.stdout
    assert "[finish] evaluated" in result.stdout and (tmp_path / evaluations["a"]).exists()
    assert not (tmp_path / evaluations["b"]).exists()
    # snakemake on A's evaluation alone, with the chunk's options
    assert (tmp_path / "finish-calls.txt").read_text().split()[-3:] == [evaluations["a"], "--configfile", "c.yaml"]
    assert ("[snakemake] done: every target is up to date" in result.stdout) == (expected_rc == 0)


def test_a_chunk_whose_python_cannot_import_strae_is_refused_before_snakemake_runs(tmp_path):
    """A PYTHON exported for tools/offline_unpack.sh (the box's bare interpreter) would train and then lose the eta,
    snapshot and archive steps: refused first, as is a snakemake that is not there."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text("#!/bin/sh\ntouch ran\n")
    fake.chmod(0o755)
    bare = dict(chunk_env(90), SNAKEMAKE=str(fake), PYTHONPATH="")
    bare["PYTHON"] = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"
    result = subprocess.run(["bash", "tools/campaign_chunk.sh", "results/eval/x.json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env=bare)
    assert result.returncode == 2 and "cannot import strae" in result.stderr, result.stderr
    result = subprocess.run(["bash", "tools/campaign_chunk.sh", "results/eval/x.json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60,
                            env=dict(chunk_env(90), SNAKEMAKE=str(tmp_path / "no-snakemake")))
    assert result.returncode == 2 and "no-snakemake: not found" in result.stderr, result.stderr
    assert not (tmp_path / "ran").exists()


FAKE_SNAKEMAKE_FINISHED = """#!/usr/bin/env bash
# stands in for snakemake: the target run has trained and been evaluated
run=results/runs/xx/banyan/a/seed0
mkdir -p "$run" results/eval/xx/banyan/a
echo '{"status": "completed"}' >"$run/train.json"
echo '{"tasks": {}}' >results/eval/xx/banyan/a/seed0.paper.json
"""

# stands in for the chunk's python: at the summary step the whole call is killed from outside (as the device tool
# does at its time limit), so step 4's archive is never written
KILLED_AT_SUMMARY = """#!/usr/bin/env bash
for arg in "$@"; do
    # the session, not the process group: timeout puts its command in a group of its own
    if [ "$arg" = summary ]; then pkill -KILL -s "$(ps -o sid= $$ | tr -d ' ')"; fi
done
exec "{python}" "$@"
"""


def test_a_call_killed_in_the_tail_still_brings_back_what_snakemake_finished(tmp_path):
    """The early archive copy (step 1b): a box killed after the workflow but before the last archive (the device
    tool's limit) used to bring back campaign.txt only, and with the box went a finished run's weights and scores."""
    (tmp_path / "tools").mkdir()
    shutil.copy2(REPO / "tools/campaign_chunk.sh", tmp_path / "tools")
    fake = tmp_path / "fake-snakemake"
    fake.write_text(FAKE_SNAKEMAKE_FINISHED)
    fake.chmod(0o755)
    python = tmp_path / "python"
    python.write_text(KILLED_AT_SUMMARY.replace("{python}", sys.executable))
    python.chmod(0o755)
    target = "results/eval/xx/banyan/a/seed0.paper.json"
    process = subprocess.Popen(["bash", "tools/campaign_chunk.sh", target], cwd=tmp_path,
                               env=dict(chunk_env(90), SNAKEMAKE=str(fake), PYTHON=str(python), ARCHIVE_S="30"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, stdout + stderr
    assert "[snakemake] done" in stdout and "ends after" not in stdout  # killed before step 4
    names = set(archived(tmp_path))
    assert {"results/runs/xx/banyan/a/seed0/train.json", target} <= names, names


def test_an_archive_stopped_by_sigterm_leaves_no_temp_file(tmp_path):
    """The chunk's `timeout` stops a slow archive with SIGTERM: the half-written temp file is removed, not left in
    $OUT beside the archive (to come back with it)."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "scores.csv").write_bytes(os.urandom(24 * 2**20))  # incompressible: xz takes seconds over it
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "strae.report.progress", "--results", str(results), "--logs",
                                str(tmp_path / "logs"), "archive", str(out / "c.tar.xz")],
                               env=chunk_env(90), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob(".c.tar.xz.*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()  # still writing when stopped
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert not out.exists()  # the directory it made for the archive went with the temp file
