"""The benchmark scripts run end to end on tiny synthetic input and print their one line of figures."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def test_train_throughput_prints_its_line_with_the_objective_bound(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "train_throughput.py"), "--model", "banyan", "--synthetic",
         "--batch-size", "8", "--steps", "1", "--warmup", "1", "--threads", "1", "--device", "cpu",
         "--host-profile", "host/profile.txt"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # the host profile of the timed steps: strae train's own step and the graph building under it, by own time
    profile = (tmp_path / "host/profile.txt").read_text()
    assert "tottime" in profile, profile[:2000]
    # strae's own functions are listed whatever their rank (on a busy machine torch's ops fill the top 30)
    own = profile.split("# strae's own functions, by cumulative time\n", 1)[1]
    assert "training_step" in own and "build_graph" in own, own[:2000]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    fields = dict(re.findall(r"(\S+)=(\S+)", lines[0]))
    for key in ("tokens/s", "s/step", "peak_rss", "objective_gflop/step", "gemm_gflop/s", "bound_tokens/s",
                "split_ms"):
        assert key in fields, (key, lines[0])
    # where the time goes: five phases, milliseconds, induction and the forward pass take some
    assert fields["induction_kernel"] == "torch"  # auto on CPU: the torch loop (never the Triton interpreter)
    split = [float(v) for v in fields["split_ms"].split("(")[0].split("/")]
    assert len(split) == 5 and all(v >= 0 for v in split) and split[0] > 0
    # 8 sentences: CE over <= 8*200 leaves x 256 x 25000, three products -> a few GFLOP at most, and > 0.
    assert 0 < float(fields["gemm_gflop/s"].replace(",", ""))
    assert float(fields["bound_tokens/s"].replace(",", "")) > 0


def load_script(name: str):
    """A benchmark script as a module (they are scripts, not a package), so a test can call its main()."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_concurrent_throughput_prints_one_aggregate_per_group(capsys):
    script = load_script("concurrent_throughput")
    status = script.main(["--runs", "1,2", "--timeout", "240", "--", "--model", "banyan", "--synthetic",
                          "--batch-size", "4", "--steps", "1", "--warmup", "1", "--split-steps", "0", "--threads", "1",
                          "--device", "cpu"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert status == 0 and len(lines) == 1, lines
    header, *groups = lines[0].split(" | ")
    assert "model=banyan" in header and "induction_kernel=torch" in header and "device=cpu:" in header
    assert [group.split()[0] for group in groups] == ["N=1", "N=2"]
    for group in groups:
        fields = dict(re.findall(r"(\S+)=(\S+)", group))
        aggregate = float(fields["aggregate_tokens/s"].replace(",", ""))
        slowest = float(fields["slowest_tokens/s"].replace(",", ""))
        # the group's rate over the longest window: at least the slowest copy's, at most the copies' sum
        assert 0 < slowest <= aggregate


def test_concurrent_throughput_measures_another_command_alone_and_beside(capsys, tmp_path):
    """--beside: the other command alone, then N copies alone and N with it beside them, each side's own rate."""
    script = load_script("concurrent_throughput")
    tiny = ["--synthetic", "--batch-size", "4", "--steps", "1", "--warmup", "1", "--split-steps", "0",
            "--threads", "1", "--device", "cpu"]
    status = script.main(["--runs", "1", "--timeout", "240", "--log-dir", str(tmp_path),
                          "--beside", " ".join(["--model", "selfstrae", "--objective", "ceco", *tiny]), "--",
                          "--model", "banyan", *tiny])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert status == 0 and len(lines) == 1, lines
    header, *groups = lines[0].split(" | ")
    assert "model=banyan,selfstrae" in header
    assert [group.split(" tokens/s")[0].split()[0:2] for group in groups][0] == ["beside", "alone"]
    assert [group.split()[0] for group in groups[1:]] == ["N=1", "N=1+beside"]
    together = dict(re.findall(r"(\S+)=(\S+)", groups[2]))
    main_rate, beside_rate, total = (float(together[k].replace(",", ""))
                                     for k in ("main_tokens/s", "beside_tokens/s", "aggregate_tokens/s"))
    assert 0 < main_rate <= total and 0 < beside_rate <= total
    # each copy's log names its group: the beside copy is the last of its group
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "concurrent-N1-beside-copy0.log", "concurrent-N1-beside-copy1.log", "concurrent-N1-copy0.log",
        "concurrent-beside-copy0.log"]
    assert "model=selfstrae" in (tmp_path / "concurrent-N1-beside-copy1.log").read_text()
    with pytest.raises(SystemExit):  # a seed of its own would collide with the copies' (--seed-base)
        script.parse_args(["--beside", "--model banyan --seed 3", "--", "--model", "banyan"])


def test_concurrent_throughput_reports_a_failed_copy_with_its_stderr(capsys):
    script = load_script("concurrent_throughput")
    status = script.main(["--runs", "1", "--", "--model", "no-such-model", "--device", "cpu"])
    line = capsys.readouterr().out.strip()
    assert status == 1 and "\n" not in line
    assert "N=1 FAILED copy 0 rc=2" in line and "no-such-model" in line and "tokens/s" not in line


CHECK_ARGS = ["--device", "cpu", "--threads", "1", "--batch-size", "16", "--steps", "8",
              "--checkpoint-every-steps", "3", "--interrupt-at", "5", "--tiny-sentences", "96", "--dev-sentences", "32"]


@pytest.fixture
def torch_threads():
    """cuda_checks runs in this process and --threads 1 sets torch's threads: give the other tests theirs back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def check_fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\S+?)=('[^']*'|\S+)", line))


def test_cuda_checks_on_cpu_finds_identical_reruns_and_resume(capsys, torch_threads):
    status = load_script("cuda_checks").main(CHECK_ARGS)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    fields = check_fields(lines[0])
    assert status == 0, lines[0]
    assert fields["determinism"] == "identical" and fields["resume"] == "identical", lines[0]
    assert fields["sigterm"] == "identical", lines[0]
    assert float(fields["determinism_s"]) > 0 and float(fields["resume_s"]) > 0 and float(fields["sigterm_s"]) > 0
    assert fields["torch"] == torch.__version__ and fields["device"].startswith("cpu:")
    assert json.loads(fields["provenance.determinism"])["deterministic"] is True
    assert fields["provenance.induction_kernel"] == "torch"


def test_cuda_checks_reports_runs_that_differ(capsys, torch_threads):
    # --perturb: the second run gets another seed and the checkpoint is altered before the resume. --level-tail sets
    # the engine constants for these runs only (on a CPU the levels are torch's: nothing else changes)
    from strae.models import propagation

    before = propagation.LEVEL_TAIL_NODES, propagation.LINEAR_LEVEL_TAIL_NODES
    status = load_script("cuda_checks").main([*CHECK_ARGS, "--perturb", "--level-tail", "8"])
    fields = check_fields(capsys.readouterr().out)
    assert (propagation.LEVEL_TAIL_NODES, propagation.LINEAR_LEVEL_TAIL_NODES) == before
    assert status == 1
    assert fields["determinism"] == "differs" and float(fields["determinism_max_abs_diff"]) > 0
    assert fields["resume"] == "differs" and float(fields["resume_max_abs_diff"]) > 0
    assert fields["sigterm"] == "differs" and float(fields["sigterm_max_abs_diff"]) > 0


ROBERTA_CHECK_ARGS = ["--device", "cpu", "--steps", "6", "--batch-size", "8", "--simcse-steps", "4",
                      "--tiny-sentences", "200", "--simcse-arg=--batch-size=8", "--simcse-arg=--threads=1", "--",
                      "--layers", "2", "--heads", "2", "--hidden", "32", "--ffn", "64", "--threads", "1",
                      "--precision", "fp32"]


@pytest.mark.parametrize("perturb", [False, True])
def test_roberta_checks_on_cpu_trains_each_trainer_twice_and_resumes(capsys, torch_threads, perturb):
    """The trainers themselves: same seed twice, SIGTERM mid-run and resumed, --nondeterministic's speed, SimCSE
    twice. --perturb gives the second MLM run another seed: the check must say the runs differ."""
    script = load_script("roberta_checks")
    status = script.main((["--perturb"] if perturb else []) + ROBERTA_CHECK_ARGS)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("roberta_checks")]
    assert len(lines) == 1, lines
    fields = check_fields(lines[0])
    assert fields["sigterm"] == "identical" and fields["simcse"] == "identical", lines[0]
    assert float(fields["cost_steps_per_s_deterministic"]) > 0 and "crashed" not in lines[0]
    assert json.loads(fields["provenance.determinism"]) == {"deterministic": True, "device_type": "cpu"}
    if perturb:
        assert status == 1 and fields["determinism"] == "differs", lines[0]
        assert float(fields["determinism_max_abs_diff"]) > 0
    else:
        assert status == 0 and fields["determinism"] == "identical", lines[0]
        assert fields["nondeterministic_vs_first"] == "identical"  # CPU kernels are deterministic either way


def test_torch_profile_table_is_written(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    script = load_script("train_throughput")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (torch.randn(64, 64) @ torch.randn(64, 64)).relu().sum()
    script.write_torch_profile(tmp_path / "p/torch.txt", prof, 1, torch.device("cpu"))
    text = (tmp_path / "p/torch.txt").read_text()
    assert "by own host time" in text and "aten::mm" in text and "device time" not in text
    assert "by call site" not in text
    # with stacks (--profile-stacks): the ops again, grouped by the Python lines that ran them
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 experimental_config=torch.profiler._ExperimentalConfig(verbose=True)) as prof:
        _two_products()
    script.write_torch_profile(tmp_path / "p/stacks.txt", prof, 1, torch.device("cpu"), stacks=True)
    text = (tmp_path / "p/stacks.txt").read_text()
    assert "by call site" in text and "_two_products" in text.split("by call site")[1]


def _two_products():
    return (torch.randn(64, 64) @ torch.randn(64, 64)) @ torch.randn(64, 64)


def _synchronizing_call(times: int) -> None:  # stands in for a torch op that warns under set_sync_debug_mode
    import warnings
    for _ in range(times):
        warnings.warn("called a synchronizing CUDA operation (Triggered internally at CUDAFunctions.h:1.)",
                      stacklevel=1)  # as torch's C++ warning handler: the caller's line


def test_sync_report_counts_each_sync_by_its_call_site_and_passes_other_warnings_on(tmp_path):
    script = load_script("train_throughput")

    def step(ids, lengths):
        _synchronizing_call(2)
        _synchronizing_call(1)
        import warnings
        warnings.warn("an unrelated warning", stacklevel=1)

    with pytest.warns(UserWarning, match="an unrelated warning"):
        per_step = script.write_sync_report(tmp_path / "s/syncs.txt", step, [(None, None)] * 3, torch.device("cpu"))
    assert per_step == 3.0  # 2 + 1 syncs in each of the 3 steps
    text = (tmp_path / "s/syncs.txt").read_text()
    assert text.startswith("# 3 steps on cpu: 3.0 host syncs per step"), text
    rows = [line.split(None, 2) for line in text.splitlines()[2:]]
    # two sites (the two calls in step), innermost frame first, the more frequent first
    assert [(row[0], row[1]) for row in rows] == [("2.00", "6"), ("1.00", "3")], text
    assert all(row[2].startswith("test_benchmark_scripts.py:") and "(_synchronizing_call) <- " in row[2]
               and "(step)" in row[2] for row in rows), text


def test_level_tail_comparison_alternates_the_engine_constant_and_restores_it():
    from strae.models import propagation

    script = load_script("train_throughput")
    seen = []

    def step(ids, lengths):
        seen.append((propagation.LEVEL_TAIL_NODES, propagation.LINEAR_LEVEL_TAIL_NODES))

    batches = [(None, torch.tensor([3, 4]))] * 2  # 7 tokens a step
    before = propagation.LEVEL_TAIL_NODES, propagation.LINEAR_LEVEL_TAIL_NODES
    rates = script.compare_level_tails(step, batches, torch.device("cpu"), (0, 32), rounds=2)
    assert [diagonal for diagonal, _ in seen] == [0, 0, 32, 32, 0, 0, 32, 32] and all(a == b for a, b in seen)
    assert set(rates) == {0, 32} and all(r > 0 for r in rates.values())
    assert (propagation.LEVEL_TAIL_NODES, propagation.LINEAR_LEVEL_TAIL_NODES) == before


def test_fill_comparison_alternates_torchs_fill_and_restores_it():
    script = load_script("train_throughput")
    seen = []

    def step(ids, lengths):
        seen.append(torch.utils.deterministic.fill_uninitialized_memory)

    before = torch.utils.deterministic.fill_uninitialized_memory
    rates = script.compare_fill(step, [(None, torch.tensor([3, 4]))], torch.device("cpu"), rounds=2)
    assert seen == [True, False, True, False]
    assert set(rates) == {"on", "off"} and all(r > 0 for r in rates.values())
    assert torch.utils.deterministic.fill_uninitialized_memory == before


def test_engine_choices_says_which_settings_get_the_triton_engines_and_fails_a_fallback(capsys, monkeypatch):
    pytest.importorskip("triton")  # the interpreter (conftest.py) stands in for CUDA
    script = load_script("engine_choices")
    only = ["--only", "ceco_linear_sentential_k256_u1", "--only", "ce_diagonal_entangled_k128_u2"]
    assert script.main(["--device", "cpu", "--vocab-size", "50", *only]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("fast=yes" in line and "levels=triton" in line for line in lines[:2]), lines
    assert lines[2].startswith("settings=2 fast=2 fallback=0 interpreter=True"), lines[2]

    import strae.models.model as model_module  # the levels' first-use check fails: the setting falls back
    monkeypatch.setattr(model_module, "levels_self_check", lambda model, device: "up differs by up to 1 (scale 1)")
    assert script.main(["--device", "cpu", "--vocab-size", "50", "--only", "ce_diagonal_entangled_k128_u2"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "fast=no" in lines[0] and "failed their first-use check: up differs" in lines[0], lines
    assert lines[1].startswith("settings=1 fast=0 fallback=1 (banyan/ce_diagonal_entangled_k128_u2)"), lines[1]


def test_gpu_measure_script_parses_and_runs_every_benchmark_it_names():
    script = ROOT / "tools" / "gpu_measure.sh"
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    text = script.read_text()
    for name in ("train_throughput", "concurrent_throughput", "cuda_checks", "roberta_throughput", "engine_choices",
                 "roberta_graphs_check", "threaded_throughput", "roberta_loop", "objective_precision",
                 "roberta_checks"):
        assert (ROOT / "benchmarks" / f"{name}.py").exists() and f"benchmarks/{name}.py" in text, name


def test_threaded_throughput_prints_one_line_per_thread_count():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "threaded_throughput.py"), "--runs", "1,2",
                             "--", "--model", "banyan", "--device", "cpu", "--batch-size", "4", "--steps", "1",
                             "--warmup", "1", "--synthetic"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "| 1: aggregate_tokens/s=" in lines[0] and "| 2: aggregate_tokens/s=" in lines[0]
    assert "FAILED" not in lines[0]


def test_roberta_loop_runs_the_trainer_and_reads_its_record(tmp_path, mirror):
    resources = tmp_path / "resources"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat number {i} sat on the mat with {i % 7} friends .\n" for i in range(40)))
    tokenizer = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "roberta_loop.py"), "--modes", "off,on",
                             "--steps", "4", "--log-every", "2", "--device", "cpu", "--extra",
                             f"--layers 1 --batch-size 4 --threads 1 --corpus {corpus} --tokenizer {tokenizer} "
                             f"--resources-dir {resources}"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout + result.stderr[-2000:]
    assert "off: " in lines[0] and "steps/s whole run" in lines[0] and "last 2 steps" in lines[0], lines[0]
    assert "on: FAILED" in lines[0] and "needs a CUDA device" in lines[0]  # a CPU refuses graphs, and says so
    assert result.returncode == 1


def test_objective_precision_prints_each_precision_with_its_error():
    """On a CPU every precision is fp32 arithmetic: each error is at fp32 rounding against the float64 reference.
    A precision it does not time (bf16 here) is refused by name, not timed as fp32 under that name."""
    script = [sys.executable, str(ROOT / "benchmarks" / "objective_precision.py"), "--device", "cpu"]
    result = subprocess.run(script + ["--rows", "300", "--size", "32", "--vocab", "500", "--pairs", "400",
                                      "--repeats", "1"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and all(f"{p}: ce " in lines[0] for p in ("fp32", "tf32")), lines
    errors = [float(e) for e in re.findall(r"err ([0-9.e+-]+)", lines[0])]
    assert len(errors) == 4 and max(errors) < 1e-5, lines[0]
    refused = subprocess.run(script + ["--precisions", "fp32,bf16"], capture_output=True, text=True, timeout=300,
                             cwd=ROOT)
    assert refused.returncode == 2 and "unknown bf16" in refused.stderr and not refused.stdout, refused.stderr


def test_gpu_measure_runs_each_throughput_step_again_with_the_baseline_code(tmp_path):
    """BASELINE=<checkout folder>: a throughput step runs twice, the second time as STEP-baseline with that folder's
    src/ and benchmarks/ (here a copy of this checkout's, told apart by a marker the copy's benchmark prints)."""
    baseline = tmp_path / "baseline"
    shutil.copytree(ROOT / "src", baseline / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "benchmarks", baseline / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    script = baseline / "benchmarks" / "train_throughput.py"
    script.write_text(script.read_text().replace('if __name__ == "__main__":',
                                                 'if __name__ == "__main__":\n    print("baseline-copy", end=" ")'))
    out = tmp_path / "out"
    env = dict(os.environ, DEVICE="cpu", BATCH="2", STEPS="1", WARMUP="1", ONLY="banyan-torch", OUT=str(out),
               BASELINE=str(baseline), LANG_KEY="none", PYTHON=sys.executable,
               GPU_MEASURE_LOGS=str(tmp_path / "logs"))
    result = subprocess.run(["bash", str(ROOT / "tools" / "gpu_measure.sh")], env=env, capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (out / "gpu_measure.txt").read_text().splitlines()
    assert any(line.startswith("# baseline ") for line in lines), lines
    ours = [line for line in lines if line.startswith("[banyan-torch] ")]
    theirs = [line for line in lines if line.startswith("[banyan-torch-baseline] ")]
    assert len(ours) == 1 and "tokens/s=" in ours[0] and "baseline-copy" not in ours[0], lines
    assert len(theirs) == 1 and "baseline-copy" in theirs[0] and "tokens/s=" in theirs[0], lines
    assert not [line for line in lines if "FAILED" in line], lines
    # what comes back from a lent box: two files, the step logs packed in one archive (not a folder of dozens)
    assert sorted(path.name for path in out.iterdir()) == ["gpu_measure-logs.tar.xz", "gpu_measure.txt"]
    with tarfile.open(out / "gpu_measure-logs.tar.xz") as tar:
        names = {Path(name).name for name in tar.getnames()}
    assert {"banyan-torch.out", "banyan-torch.err", "banyan-torch-baseline.out"} <= names, names


def test_multiview_throughput_prints_a_line_per_model_with_the_trainers_step(capsys, torch_threads, tmp_path):
    """The multi-view trainer's own step on synthetic trees shaped like ELTeC's parse; the loss is a real loss (near
    ln(batch) at the start), the levels the batches' Tree-LSTM depth."""
    script = load_script("multiview_throughput")
    assert script.main(["--device", "cpu", "--batch-size", "12", "--steps", "2", "--warmup", "1", "--hidden", "16",
                        "--embedding-dim", "8", "--vocab-size", "60", "--threads", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("multiview_throughput")]
    assert [check_fields(line)["model"] for line in lines] == ["ctl", "cl"], lines
    for line in lines:
        fields = check_fields(line)
        assert float(fields["sentences/s"].replace(",", "")) > 0 and float(fields["s/step"]) > 0
        assert 3 <= float(fields["levels"]) <= 64 and abs(float(fields["loss"]) - np.log(11)) < 0.5, line
    corpus = script.synthetic_corpus(300, 60)
    for heads in corpus.heads:  # one root, every head inside the sentence: trees the trainer accepts
        assert sum(h < 0 for h in heads) == 1 and all(-1 <= h < len(heads) for h in heads)
