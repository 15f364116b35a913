"""Several GPUs on one machine: each job takes the GPU the fewest live strae jobs hold (runtime.job_device).

No GPU here: the slot files and their locks are the real mechanism (POSIX flock, as on the GPU box), the CUDA device
count and set_device are stand-ins."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from strae import runtime

fcntl = pytest.importorskip("fcntl")

HOLDER = """
import sys, time
from pathlib import Path
from strae import runtime
index, _ = runtime.claim_gpu(sys.argv[1].split(","), Path(sys.argv[2]))
print(index, flush=True)
time.sleep(600)
"""


@pytest.fixture(autouse=True)
def fresh_process_state(monkeypatch):
    """Each test starts as a process that has claimed nothing, and gives back what it claimed."""
    monkeypatch.setattr(runtime, "_placement", None)
    monkeypatch.setattr(runtime, "_claimed", [])
    yield
    for handle in runtime._claimed:
        handle.close()


def release_all() -> None:
    for handle in runtime._claimed:
        handle.close()
    runtime._claimed.clear()


def hold_in_a_process(keys: list[str], directory: Path) -> tuple[subprocess.Popen, int]:
    """Another job: a process that claims a GPU and keeps it until killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, ",".join(keys), str(directory)], stdout=subprocess.PIPE,
                              text=True)
    return holder, int(holder.stdout.readline())


def test_jobs_spread_over_the_gpus_and_a_finished_job_frees_its_slot(tmp_path):
    keys = ["0", "1", "2"]
    claimed = [runtime.claim_gpu(keys, tmp_path) for _ in range(4)]  # each claim is held (this process's handles)
    assert claimed == [(0, 0), (1, 0), (2, 0), (0, 1)]
    release_all()  # the process ends: every slot is free again
    assert runtime.claim_gpu(keys, tmp_path) == (0, 0)


def test_other_processes_count_and_a_killed_one_gives_its_gpu_back(tmp_path):
    keys = ["0", "1"]
    first, first_gpu = hold_in_a_process(keys, tmp_path)
    second, second_gpu = hold_in_a_process(keys, tmp_path)
    try:
        assert sorted([first_gpu, second_gpu]) == [0, 1]
        assert runtime.claim_gpu(keys, tmp_path) == (0, 1)  # both busy once: the lowest index, shared with one job
        release_all()
        first.kill()  # a crashed job: the kernel drops its lock, no clean-up needed
        first.wait()
        assert runtime.claim_gpu(keys, tmp_path) == (first_gpu, 0)
    finally:
        for holder in (first, second):
            holder.kill()
            holder.wait()


def test_gpu_names_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert runtime.visible_gpu_keys(2) == ["3", "5"]  # physical ids: jobs with other visible lists still agree
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f1e/x")
    assert runtime.visible_gpu_keys(1) == ["GPU-8f1e_x"]  # safe as a file name
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert runtime.visible_gpu_keys(3) == ["0", "1", "2"]


def fake_cuda(monkeypatch, count: int) -> list[int]:
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return chosen


def test_job_device_places_auto_and_cuda_on_a_several_gpu_box_once_per_process(monkeypatch, tmp_path):
    monkeypatch.setenv(runtime.GPU_SLOTS_ENV, str(tmp_path))
    chosen = fake_cuda(monkeypatch, 2)
    runtime.claim_gpu(["0", "1"], tmp_path)  # another job already holds GPU 0 (this process's handle, as if not)
    device = runtime.job_device("auto")
    assert device == torch.device("cuda", 1) and chosen == [1]
    placement = runtime.gpu_placement()
    assert placement == {"gpus_visible": 2, "gpu": 1, "gpu_key": "1", "jobs_already_on_it": 0,
                         "slots_dir": str(tmp_path)}
    # the same process asks again (a benchmark that trains several runs in turn): the same GPU, no second slot
    assert runtime.job_device("cuda") == torch.device("cuda", 1) and len(runtime._claimed) == 2
    assert runtime.job_device("cuda:0") == torch.device("cuda", 0)  # an explicit index is taken as given


def test_job_device_changes_nothing_with_one_gpu_or_none(monkeypatch, tmp_path):
    monkeypatch.setenv(runtime.GPU_SLOTS_ENV, str(tmp_path))
    chosen = fake_cuda(monkeypatch, 1)
    assert runtime.job_device("auto") == torch.device("cuda") and chosen == []
    assert runtime.gpu_placement() is None and runtime.placement_fields() == {} and not list(tmp_path.iterdir())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.job_device("auto") == torch.device("cpu")


def test_a_training_session_records_its_gpu(monkeypatch, tmp_path):
    """train.json's session entry says which GPU the session took (a resumed run may land on another)."""
    from strae import train as trainer
    from tests.test_train import make_tiny_corpus

    data_dir, tokenizer = make_tiny_corpus(tmp_path / "data", n_train=32, n_dev=8)
    placement = {"gpus_visible": 4, "gpu": 2, "gpu_key": "2", "jobs_already_on_it": 1, "slots_dir": "/tmp/x"}
    monkeypatch.setattr(runtime, "_placement", dict(placement))  # as job_device leaves it on a several-GPU box
    out = tmp_path / "run"
    argv = ["--model", "banyan", "--lang", "xx", "--seed", "0", "--out", str(out), "--data-dir", str(data_dir),
            "--tokenizer", str(tokenizer), "--k", "4", "--u", "2", "--batch-size", "16", "--epochs", "1",
            "--device", "cpu"]
    assert trainer.train(argv) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["timings"]["sessions"][-1]["gpu_placement"] == placement


def test_the_holder_script_really_holds(tmp_path):
    """The stand-in job keeps its lock while it lives (what the tests above rely on)."""
    holder, gpu = hold_in_a_process(["0"], tmp_path)
    try:
        slot = next(tmp_path.glob("gpu-0.slot*.lock"))
        with open(slot, "a") as probe:
            with pytest.raises(OSError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.05)
    with open(slot, "a") as probe:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once it is gone


def test_evaluation_places_network_encoders_only(monkeypatch, tmp_path):
    """`strae evaluate` takes a GPU slot for encoders that run a network; GloVe and random-token average numpy
    vectors and leave the GPUs to the others."""
    from strae import encode

    assert encode.runs_a_network("random-token") is False
    for kind, network in (("glove", False), ("strae", True), ("roberta", True), ("multiview", True)):
        run = tmp_path / kind
        run.mkdir()
        (run / "encoder.json").write_text(json.dumps({"kind": kind}))
        assert encode.runs_a_network(str(run)) is network, kind
    assert encode.runs_a_network(str(tmp_path / "not-trained-yet")) is True  # loading will say what is missing

    from strae.evaluate import harness

    class Chosen(Exception):
        """Stops `strae evaluate` once its encoder options are settled."""

    placed, seen = [], {}

    def evaluate(model, lang, variant, encoder_options, **_):
        seen[model] = dict(encoder_options)
        raise Chosen

    monkeypatch.setattr(harness, "job_device", lambda device: placed.append(device) or torch.device("cuda", 1))
    monkeypatch.setattr(harness, "evaluate", evaluate)
    for model in ("random-token", str(tmp_path / "strae")):
        with pytest.raises(Chosen):
            harness.main(["--model", model, "--lang", "en", "--variant", "paper", "--device", "auto"])
    assert placed == ["auto"]  # the network encoder only
    assert seen == {"random-token": {"device": "auto"}, str(tmp_path / "strae"): {"device": "cuda:1"}}


def test_a_slots_folder_without_locks_runs_the_job_unplaced_and_says_so(monkeypatch, tmp_path, capsys):
    """A filesystem that refuses locks (some network mounts) must not stall or stop a job: it runs on the default
    GPU, with a line saying why and what to set."""
    import errno

    monkeypatch.setenv(runtime.GPU_SLOTS_ENV, str(tmp_path))
    fake_cuda(monkeypatch, 2)

    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert runtime.job_device("auto") == torch.device("cuda") and runtime.gpu_placement() is None
    assert "cannot choose among 2 GPUs" in capsys.readouterr().err


def test_an_unknown_device_string_is_a_clear_error():
    from strae.runtime import resolve_device

    with pytest.raises(SystemExit, match="--device gpu: not a device; use auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")
    assert resolve_device("cpu").type == "cpu"


def test_auto_on_a_machine_whose_gpu_torch_cannot_use_says_so(tmp_path, monkeypatch, capsys):
    """--device auto on a GPU box with a CPU-only torch (or a driver it does not match) would quietly train for days
    on the CPU: it still runs there, but says why; a machine without an NVIDIA device file is silent."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.unused_gpu_reason(tmp_path) is None  # no /dev/nvidia0 here
    (tmp_path / "nvidiactl").touch()  # the control file alone is no GPU
    assert runtime.unused_gpu_reason(tmp_path) is None
    (tmp_path / "nvidia0").touch()
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "built without CUDA" in runtime.unused_gpu_reason(tmp_path)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    assert "(CUDA 12.8) cannot use it" in runtime.unused_gpu_reason(tmp_path)
    monkeypatch.setattr(runtime, "unused_gpu_reason", lambda: "this machine has an NVIDIA GPU: …")
    assert runtime.resolve_device("auto").type == "cpu"
    assert "--device auto: running on the CPU although this machine has an NVIDIA GPU" in capsys.readouterr().err
    monkeypatch.setattr(runtime, "unused_gpu_reason", lambda: None)
    assert runtime.resolve_device("auto").type == "cpu" and capsys.readouterr().err == ""
