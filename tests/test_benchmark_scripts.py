"""The benchmark scripts run end to end on tiny synthetic input and print their one line of figures."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_train_throughput_prints_its_line_with_the_objective_bound(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "train_throughput.py"), "--model", "banyan", "--synthetic",
         "--batch-size", "8", "--steps", "1", "--warmup", "1", "--threads", "1", "--device", "cpu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
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
