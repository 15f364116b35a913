"""CUDA graphs for RoBERTa's masked-LM forward and backward (``strae train-roberta --cuda-graphs auto|on``; auto, the
default, is on with a CUDA device).

Why: a RoBERTa-medium step at batch 64 is ~1,600 small kernels (forward 334, backward 1,247 top-level ops counted on
CPU) over ~2k tokens. On an H200 the host needs ~40 ms to launch them while the arithmetic is ~1 ms, so the paper's
200k steps take ~2.2 h (issue 10's goal: 1 h). A CUDA graph replays a captured forward (or backward) as one launch.
Measured on an H100 (2026-11-26, batch 64, bf16): the bare step 19.5 -> 85.0 steps/s, `strae train-roberta` itself
20.5 -> 73.5 steps/s over 600 steps (7 buckets captured, 0.2-0.3 s each; the same final loss), so 200k steps ~45 min.

What a graph needs: the same shapes on every replay and no host syncs inside. So each step's rows are padded up to a
*bucket* (:func:`to_bucket`): rows to a multiple of ``ROW_BUCKET``, columns to a multiple of ``COLUMN_BUCKET`` and
predicted positions to a multiple of ``PREDICTED_BUCKET``. Padding ids are pad with segment -1 (they attend only
among themselves, so every real position sees exactly the keys it saw before); padded predictions point at position
0 with weight 0. The loss is ``sum_i weight_i * CE_i`` with weight 1/n_predicted on real predictions: the eager step's
``sum / n_predicted``, the same function (tested on CPU against :func:`baselines.roberta.train.mlm_token_losses`:
values and gradients equal to rounding). One graph pair (forward, backward) per bucket, captured the first time the
bucket appears (``torch.cuda.make_graphed_callables``); an English batch of 64 sentences packed into rows of 128 ids
meets a handful of buckets. Parameters are updated in place by AdamW outside the graph, which replays then see.

Random numbers: dropout inside a graph draws from the CUDA generator (philox; each replay advances its offset), so a
graphed run is seeded, repeatable and resumable (the capture's warm-up draws are undone by restoring the generator
state), but its dropout masks are not the eager path's: a graphed run and an eager run of the same seed differ the way
two seeds' dropout differs. train.json records the choice (``config.cuda_graphs``).

CPU twin: :class:`WeightedMlmLoss` on a :class:`StaticBatch` is exactly what the graph captures; on a CPU it runs
eagerly (tests), and :func:`host_syncs` lists the ops in it that would force a host sync on CUDA (none, tested).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from baselines.roberta.data import Rows

ROW_BUCKET = 4
COLUMN_BUCKET = 32
PREDICTED_BUCKET = 64
GRAPH_MODES = ("auto", "off", "on")


def resolve_mode(mode: str, device: torch.device) -> str:
    """``--cuda-graphs``: auto = on for a CUDA device (measured on an H100, 2026-11-26: `strae train-roberta` 20.5 ->
    73.5 steps/s, the same loss; graphed = eager with dropout off), off elsewhere; on = refused without CUDA."""
    if mode == "on" and device.type != "cuda":
        raise SystemExit(f"--cuda-graphs on needs a CUDA device (this run's device: {device.type}); "
                         "use --cuda-graphs off (or auto)")
    if mode == "auto":
        return "on" if device.type == "cuda" else "off"
    return mode


def round_up(value: int, multiple: int) -> int:
    return max(multiple, int(math.ceil(value / multiple)) * multiple)


@dataclass(frozen=True)
class StaticBatch:
    """A chunk of rows padded to its bucket: ids and segments (R, L); flat predicted positions, their targets and
    weights (P,)."""

    inputs: torch.Tensor
    segments: torch.Tensor
    predicted: torch.Tensor
    targets: torch.Tensor
    weights: torch.Tensor

    @property
    def bucket(self) -> tuple[int, int, int]:
        return (*self.inputs.shape, self.predicted.shape[0])

    def tensors(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(device, non_blocking=True) for t in
                     (self.inputs, self.segments, self.predicted, self.targets, self.weights))


def to_bucket(rows: Rows, pad_id: int, n_predicted: int, max_length: int) -> StaticBatch:
    """``rows`` (on the CPU, labels -100 where not predicted) padded to its bucket; ``n_predicted``: the whole step's
    count (a chunk of a gradient-accumulated step is weighted against the step, as the eager step divides by it)."""
    n_rows, width = rows.inputs.shape
    bucket_rows = round_up(n_rows, ROW_BUCKET)
    bucket_width = min(round_up(width, COLUMN_BUCKET), max(max_length, width))
    inputs = np.full((bucket_rows, bucket_width), pad_id, dtype=np.int64)
    segments = np.full((bucket_rows, bucket_width), -1, dtype=np.int64)
    inputs[:n_rows, :width] = rows.inputs.numpy()
    segments[:n_rows, :width] = rows.segments.numpy()
    labels = np.full((bucket_rows, bucket_width), -100, dtype=np.int64)
    labels[:n_rows, :width] = rows.labels.numpy()
    flat = labels.reshape(-1)
    predicted = np.flatnonzero(flat != -100)
    size = round_up(len(predicted), PREDICTED_BUCKET)
    index = np.zeros(size, dtype=np.int64)
    index[:len(predicted)] = predicted
    targets = np.zeros(size, dtype=np.int64)
    targets[:len(predicted)] = flat[predicted]
    weights = np.zeros(size, dtype=np.float32)
    weights[:len(predicted)] = 1.0 / n_predicted
    return StaticBatch(*(torch.from_numpy(a) for a in (inputs, segments, index, targets, weights)))


class WeightedMlmLoss(torch.nn.Module):
    """``sum_i weights_i * CE(lm_head(h[predicted_i]), targets_i)`` of a :class:`StaticBatch`: what a graph captures.
    ``autocast_dtype``: bf16 autocast inside (weights cast per call: CUDA graphs forbid autocast's cache) or None."""

    def __init__(self, model: torch.nn.Module, autocast_dtype: torch.dtype | None):
        super().__init__()
        self.model = model
        self.autocast_dtype = autocast_dtype

    def forward(self, inputs, segments, predicted, targets, weights) -> torch.Tensor:
        from baselines.roberta.train import predicted_losses  # the eager step's own loss

        with torch.autocast(device_type=inputs.device.type, dtype=self.autocast_dtype or torch.bfloat16,
                            enabled=self.autocast_dtype is not None, cache_enabled=False):
            losses = predicted_losses(self.model, inputs, segments, predicted, targets)
        return (losses * weights).sum()


class GraphedMlm:
    """The MLM loss through CUDA graphs, one (forward, backward) pair per bucket, captured on first use.
    ``loss(batch)`` returns the loss (requires grad; ``backward()`` replays the backward graph and accumulates the
    parameters' gradients as eager autograd would)."""

    def __init__(self, model: torch.nn.Module, device: torch.device, precision: str,
                 on_capture: Callable[[tuple[int, int, int], float], None] | None = None, *,
                 make_graphed: Callable[..., Any] | None = None):
        """``precision``: the run's resolved precision (bf16 = bf16 autocast inside the graph, fp32 = none)."""
        if make_graphed is None:
            resolve_mode("on", device)  # refused without CUDA
        self.model, self.device = model, device
        self.autocast_dtype = torch.bfloat16 if precision == "bf16" else None
        self.parameters = tuple(model.parameters())
        self.graphs: dict[tuple[int, int, int], Any] = {}
        self.on_capture = on_capture
        # tests stand in a CPU emulation of torch.cuda.make_graphed_callables (its static gradient buffers)
        self.make_graphed = make_graphed or torch.cuda.make_graphed_callables

    def loss(self, batch: StaticBatch) -> torch.Tensor:
        # A gradient that an earlier replay left in .grad may BE that graph's static buffer: autograd adopts a
        # returned gradient without copying it when .grad is empty. The next replay of the same graph (gradient
        # accumulation meeting one bucket twice in a step) would overwrite it and then add it to itself, so such a
        # gradient gets its own memory first. After zero_grad(set_to_none=True), the usual case, nothing is copied.
        for parameter in self.parameters:
            if parameter.grad is not None:
                parameter.grad = parameter.grad.clone()
        tensors = batch.tensors(self.device)
        graphed = self.graphs.get(batch.bucket)
        if graphed is None:
            graphed = self.graphs[batch.bucket] = self._capture(batch.bucket, tensors)
        return graphed(*tensors)

    def _capture(self, bucket: tuple[int, int, int], sample: tuple[torch.Tensor, ...]):
        import time

        started = time.perf_counter()
        # the warm-up passes draw dropout masks: restore the generator so that capturing (which happens whenever a
        # bucket first appears, also after a resume) never shifts the run's random stream
        state = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        try:
            graphed = self.make_graphed(WeightedMlmLoss(self.model, self.autocast_dtype), sample,
                                        allow_unused_input=True)
        except RuntimeError as error:
            raise SystemExit(f"--cuda-graphs on: capturing the MLM step for bucket {bucket} (rows, columns, "
                             f"predicted) failed ({str(error).splitlines()[0]}); rerun with --cuda-graphs off "
                             "(the checkpoint resumes)") from error
        if state is not None:
            torch.cuda.set_rng_state(state, self.device)
        if self.on_capture is not None:
            self.on_capture(bucket, time.perf_counter() - started)
        return graphed


# Ops whose CUDA kernels make the host wait for the device (a value read back, or an output size that depends on the
# data): inside a graph capture they fail. Checked on CPU through the dispatcher (:func:`host_syncs`).
_SYNCING_OPS = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique", "_unique2",
                "repeat_interleave", "bincount", "histc", "item", "equal", "is_nonzero")


def host_syncs(run: Callable[[], Any]) -> list[str]:
    """The aten ops of ``run()`` (forward and backward, run on CPU) that would sync the host on CUDA. It sees the
    ops a step dispatches, not what a CUDA kernel does inside one; capturing on the device is the final check."""
    from torch.utils._python_dispatch import TorchDispatchMode

    found: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in _SYNCING_OPS:
                found.append(name)
            return func(*args, **(kwargs or {}))

    with Watch():
        run()
    return found
