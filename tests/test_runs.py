"""strae.runs: the train.json record every trainer writes (and every older schema still reads), checkpoints, lock."""
from __future__ import annotations

import copy
import json
import shutil
import time

import pytest
import torch

from strae import runs
from strae.runs import RunRecord, Sessions

# train.json as each trainer wrote it before strae.runs (trimmed to the fields readers use; layouts as written).
STRAE_V1 = {  # strae train before recipes: recipe values inside config.model, no recipe block
    "schema_version": 1, "status": "completed", "failure_reason": None,
    "run": {"language": "xx", "model": "selfstrae", "setting": "ceco_linear_sentential_k16_u16", "seed": 2},
    "config": {"model": {"model": "selfstrae", "k": 16, "u": 16, "temperature": 1.2}, "training": {"lr": 1e-3}},
    "history": [{"epoch": 1, "train": {"loss": 3.1}}], "timings": {"train_seconds": 5.0},
    "provenance": {"device": "cpu"}, "data": {"dir": "resources/tokenized/xx"}, "parameters": {"total": 10},
}
GLOVE_V1 = {  # strae train-glove (a --export-checkpoint snapshot)
    "schema_version": 1, "status": "running", "failure_reason": None,
    "run": {"language": "xx", "model": "glove", "setting": "words_w10_d256", "seed": 0},
    "config": {"model": "glove", "dim": 256, "epochs": 15}, "history": [{"epoch": 1, "loss": 0.5}], "timings": {},
    "data": {"vocab_size": 22, "nnz": 255, "n_vectors_saved": 22},
    "snapshot": {"epochs_done": 1, "epochs_planned": 15, "note": "mid-training export"},
    "provenance": {"seed": 0},
}
ROBERTA_V1 = {  # strae train-roberta stopped by its time budget (the same layout for train-simcse)
    "schema_version": 1, "status": "running", "failure_reason": None,
    "run": {"language": "xx", "model": "roberta", "setting": "medium_mlm", "seed": 1},
    "config": {"objective": "mlm", "steps": 4}, "history": [{"step": 1, "loss": 9.9}],
    "timings": {"device": "cpu", "steps_done": 1}, "provenance": {"argv": []},
    "stopped_reason": "time budget (--max-minutes) reached; rerun the same command to resume",
}
FAILED_SIMCSE_V1 = {
    "schema_version": 1, "status": "failed", "failure_reason": "non-finite loss nan at step 3",
    "run": {"language": "xx", "model": "roberta_simcse", "setting": "medium_mlm_simcse", "seed": 0},
    "config": {"objective": "simcse_unsup", "recipe": "official"}, "history": [], "timings": {}, "provenance": {},
}
OLD_RECORDS = {"strae_v1": STRAE_V1, "glove_v1": GLOVE_V1, "roberta_v1": ROBERTA_V1, "simcse_v1": FAILED_SIMCSE_V1}
# records written by `strae train` (schema 2) and `strae train-multiview` (schema 1), committed in reproductions/
RECORDED = {"strae_v2": "reproductions/fidelity-ablation-cpu-2026-11-23/steps160/a0_strae_0_1/train.json",
            "multiview_v1": "reproductions/multiview-cpu-2026-11-23/train.json"}


def _old_records(repo_root, tmp_path):
    for name, record in OLD_RECORDS.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.json").write_text(json.dumps(record))
    for name, path in RECORDED.items():
        (tmp_path / name).mkdir()
        shutil.copy(repo_root / path, tmp_path / name / "train.json")
    return {name: tmp_path / name for name in [*OLD_RECORDS, *RECORDED]}


def test_every_older_schema_reads_and_round_trips(repo_root, tmp_path):
    for name, run_dir in _old_records(repo_root, tmp_path).items():
        original = json.loads((run_dir / "train.json").read_text())
        record = RunRecord.from_disk(run_dir)
        assert record.schema_version == runs.SCHEMA_VERSION
        # every field and trainer block comes back as it was; only the schema version is the current one
        assert record.to_dict() == {**original, "schema_version": runs.SCHEMA_VERSION}, name
        info = record.run_info()
        assert {key: info[key] for key in ("language", "model", "setting", "seed")} == original["run"], name
        assert (info["status"], info["failure_reason"]) == (original["status"], original["failure_reason"]), name
        record.to_disk(tmp_path / "rewritten")
        assert RunRecord.from_disk(tmp_path / "rewritten") == record


def test_run_info_labels(repo_root, tmp_path):
    dirs = _old_records(repo_root, tmp_path)
    strae = RunRecord.from_disk(dirs["strae_v2"]).run_info()
    assert (strae["recipe"], strae["recipe_overrides"], strae["corpus_source"]) == ("strae_0_1", "", None)
    # before recipes: no recipe record (the model.pt's config implies strae_0_1; strae.recipes.legacy)
    assert RunRecord.from_disk(dirs["strae_v1"]).run_info()["recipe"] is None
    glove = RunRecord.from_disk(dirs["glove_v1"]).run_info(setting_suffix="stopword_rm")
    assert glove["setting"] == "words_w10_d256@stopword_rm" and glove["status"] == "running"
    # a record without labels or status (an encoder without train.json) falls back; it was a finished run
    bare = RunRecord.from_dict({}).run_info(fallback={"model": "banyan", "setting": "s"})
    assert (bare["model"], bare["setting"], bare["seed"], bare["status"]) == ("banyan", "s", None, "completed")


def test_unknown_schema_is_refused_with_the_file(tmp_path):
    (tmp_path / "train.json").write_text(json.dumps({**ROBERTA_V1, "schema_version": 99}))
    with pytest.raises(SystemExit, match=r"train.json: schema_version 99"):
        RunRecord.from_disk(tmp_path)
    assert RunRecord.from_disk(tmp_path / "nowhere") is None


@pytest.mark.parametrize("record_failure", [True, False])
def test_fail_records_the_reason_and_the_exit_code(tmp_path, record_failure):
    record = RunRecord.from_dict(copy.deepcopy(ROBERTA_V1))
    assert record.fail(tmp_path, "non-finite loss", record_failure) == (0 if record_failure else 1)
    written = json.loads((tmp_path / "train.json").read_text())
    assert written["status"] == "failed" and written["failure_reason"] == "non-finite loss"
    assert written["stopped_reason"] == ROBERTA_V1["stopped_reason"]


def test_checkpoints_are_read_onto_the_cpu(monkeypatch, tmp_path):
    # a CUDA run's RNG states must come back as CPU ByteTensors (map_location=device breaks torch.set_rng_state)
    from strae.runtime import capture_rng_states, restore_rng_states

    seen = {}
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_load(*args, **kwargs)

    runs.save_checkpoint(tmp_path / "checkpoint.pt", {"rng": capture_rng_states()})
    monkeypatch.setattr(torch, "load", spy)
    state = runs.load_checkpoint(tmp_path / "checkpoint.pt")
    assert seen["map_location"] == "cpu" and state["rng"]["torch"].device.type == "cpu"
    restore_rng_states(state["rng"])
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit, match=r"broken.pt: unreadable checkpoint .*; pass --restart"):
        runs.load_checkpoint(tmp_path / "broken.pt", "pass --restart")


def test_a_cuda_run_saves_its_own_gpus_generator_and_restores_it_onto_the_gpu_it_resumes_on(monkeypatch):
    """With several GPUs a resumed job may be placed on another one (job_device): the dropout generator it continues
    is the one it drew from, put onto the GPU it now runs on (per-index restore gave it that GPU's unused state)."""
    from strae.runtime import capture_rng_states, restore_rng_states

    generators = {0: torch.tensor([0], dtype=torch.uint8), 1: torch.tensor([1], dtype=torch.uint8)}
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: generators[torch.device(device).index].clone())

    def set_state(state, device):
        generators[torch.device(device).index] = state.clone()

    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    saved = capture_rng_states(torch.device("cuda", 1))
    assert "cuda" not in saved and saved["cuda_device"].tolist() == [1]
    restore_rng_states(saved, torch.device("cuda", 0))
    assert generators[0].tolist() == [1]
    # a checkpoint from before: every GPU's state by index, restored by the resuming GPU's index
    old = {key: value for key, value in saved.items() if key != "cuda_device"}
    old["cuda"] = [torch.tensor([7], dtype=torch.uint8), torch.tensor([8], dtype=torch.uint8)]
    restore_rng_states(old, torch.device("cuda", 1))
    assert generators[1].tolist() == [8]
    cpu = capture_rng_states(torch.device("cpu"))
    assert "cuda_device" not in cpu
    restore_rng_states(cpu, torch.device("cpu"))  # no CUDA call on a CPU run


def test_a_checkpoint_write_removes_a_killed_writers_temp_file(tmp_path):
    """A process killed mid-write leaves its hidden temp file (~150 MB for a checkpoint with Adam's state): the
    next write of the same file removes it; other files' temp files are not touched."""
    import os

    stale = tmp_path / ".checkpoint.pt.abc123.pt.tmp"
    stale.write_bytes(b"half")
    old = time.time() - runs.STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    recent = tmp_path / ".checkpoint.pt.def456.pt.tmp"  # a concurrent writer's, still being written
    recent.write_bytes(b"being written")
    other = tmp_path / ".model.pt.xyz.pt.tmp"
    other.write_bytes(b"other")
    os.utime(other, (old, old))
    runs.save_checkpoint(tmp_path / "checkpoint.pt", {"step": 3})
    assert not stale.exists() and recent.exists() and other.exists()
    assert runs.load_checkpoint(tmp_path / "checkpoint.pt") == {"step": 3}


def test_a_second_trainer_on_the_same_run_directory_is_refused(tmp_path):
    held = runs.lock_run_dir(tmp_path, "strae train")
    with pytest.raises(SystemExit, match="another `strae train` process"):
        runs.lock_run_dir(tmp_path, "strae train")
    held.close()
    runs.lock_run_dir(tmp_path, "strae train").close()


def test_progress_file_rate_cadence_and_first_mark(tmp_path, monkeypatch):
    clock = {"now": 100.0}
    monkeypatch.setattr(runs.time, "monotonic", lambda: clock["now"])
    progress = runs.ProgressFile(tmp_path, 50)
    path = tmp_path / runs.PROGRESS_FILE
    progress.update(1)  # the session's first step: a mark only (start-up never enters the rate)
    assert not path.exists()
    clock["now"] += 4.0
    progress.update(2)  # within every_s: nothing
    assert not path.exists()
    clock["now"] += 8.0
    progress.update(7)  # 6 steps in 12 s
    written = json.loads(path.read_text())
    assert (written["global_step"], written["total_steps"], written["steps_per_second"]) == (7, 50, 0.5)


def test_sessions_from_a_checkpoint_close_what_died_and_name_what_is_unknown():
    """A checkpoint without sessions (older strae) starts with an `unrecorded` one; a session the checkpoint left
    open (its process died after it) is closed at the checkpoint's step as lost; a closed session is never
    reopened or closed twice."""
    from strae.runs import Sessions

    assert Sessions.from_checkpoint(None, 7).entries == [{"start_step": 0, "end_step": 7, "unrecorded": True}]
    assert Sessions.from_checkpoint([], 7).entries[0]["unrecorded"] is True
    saved = [{"started": 1.0, "start_step": 0, "device": "cpu", "git_sha": None}]
    sessions = Sessions.from_checkpoint(saved, 4)
    assert sessions.entries[0]["end_step"] == 4 and sessions.entries[0]["lost_after_checkpoint"] is True
    assert "end_step" not in saved[0]  # the checkpoint's own list is not changed
    sessions.open(4, "cpu")
    sessions.close(9, "SIGTERM")
    sessions.close(12)
    assert (sessions.entries[1]["end_step"], sessions.entries[1]["stopped_by"]) == (9, "SIGTERM")
    first, second = sessions.history_lines()  # what a resumed trainer prints first
    assert first == ("  session 1: steps 0→4, started 1970-01-01 00:00 UTC on cpu at ?; died after its last "
                     "checkpoint (its later steps were redone)")
    assert second.startswith("  session 2: steps 4→9, started ") and second.endswith("; stopped by SIGTERM")
    assert Sessions.from_checkpoint(None, 7).history_lines() == [
        "  session 1: steps 0→7 (before sessions were recorded)"]


@pytest.mark.parametrize("before, now, warned", [
    ({"device": "cpu:2cores:1threads", "cpu_isa": "CURRENT"}, "cpu:2cores:1threads", False),
    ({"device": "cpu:16cores:1threads", "cpu_isa": "CURRENT"}, "cpu:2cores:1threads", False),  # cores only
    ({"device": "cpu:2cores:1threads"}, "cpu:2cores:1threads", False),  # a session before cpu_isa was recorded
    ({"device": "cpu:2cores:1threads", "cpu_isa": "AVX2-OTHER"}, "cpu:2cores:1threads", True),
    ({"device": "cpu:2cores:2threads", "cpu_isa": "CURRENT"}, "cpu:2cores:1threads", True),  # threads round too
    ({"device": "cuda:NVIDIA H100 80GB HBM3"}, "cuda:NVIDIA H200", True),
    ({"device": "cuda:NVIDIA H200", "cpu_isa": "AVX2-OTHER"}, "cuda:NVIDIA H200", False),  # the card decides
])
def test_a_session_resumed_on_other_kernels_says_so(caplog, before, now, warned):
    import torch

    isa = torch.backends.cpu.get_cpu_capability()
    before = {key: (isa if value == "CURRENT" else value) for key, value in before.items()}
    sessions = Sessions([{"started": 1.0, "start_step": 0, "git_sha": None, "end_step": 5, **before}])
    with caplog.at_level("WARNING", logger="strae.runs"):
        sessions.open(5, now)
    assert bool([r for r in caplog.records if "will not repeat bitwise" in r.getMessage()]) == warned
    assert sessions.entries[-1]["cpu_isa"] == isa and len(sessions.entries) == 2
