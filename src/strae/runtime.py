"""Device selection and seeding, shared by every trainer and encoder."""
from __future__ import annotations

import contextlib
import os
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch


def resolve_device(requested: str | None = "auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU (said on stderr when the machine has an NVIDIA GPU this torch cannot
    use: a CPU-only wheel, or a driver it does not match). An explicit ``cuda`` without a GPU is an error."""
    if requested in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        unused = unused_gpu_reason()
        if unused:
            print(f"--device auto: running on the CPU although {unused}", file=sys.stderr, flush=True)
        return torch.device("cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise SystemExit(f"--device {requested}: not a device; use auto, cpu, cuda or cuda:N") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {requested}: CUDA was requested but torch.cuda.is_available() is False")
    return device


def unused_gpu_reason(dev: str | os.PathLike = "/dev") -> str | None:
    """Why a machine with an NVIDIA GPU (a ``/dev/nvidia<N>`` device file) gets none from torch, or None when it has
    none (or torch sees it). On a GPU box, ``--device auto`` quietly training on the CPU would take days."""
    if torch.cuda.is_available() or not any(Path(dev).glob("nvidia[0-9]*")):
        return None
    if torch.version.cuda is None:
        return (f"this machine has an NVIDIA GPU: this torch ({torch.__version__}) is built without CUDA; install a "
                "CUDA build of the same version (or pass --device cpu to mean it)")
    return (f"this machine has an NVIDIA GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) cannot use it "
            "(driver, CUDA_VISIBLE_DEVICES); pass --device cuda to make that an error, --device cpu to mean it")


# Where jobs on one machine agree which GPU each one took (job_device); STRAE_GPU_SLOTS names another folder (e.g. one
# shared by several users' jobs on the same machine).
GPU_SLOTS_ENV = "STRAE_GPU_SLOTS"
_claimed: list[Any] = []  # this process's slot lock(s), held open until it exits
_placement: dict[str, Any] | None = None


def gpu_slots_dir() -> Path:
    configured = os.environ.get(GPU_SLOTS_ENV)
    if configured:
        return Path(configured)
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"strae-gpu-slots-{uid}"


def visible_gpu_keys(count: int) -> list[str]:
    """A name per visible GPU that every job on the machine agrees on: the entries of CUDA_VISIBLE_DEVICES (physical
    indices or UUIDs) when it lists them, else the indices 0..count-1."""
    listed = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    keys = listed[:count] if len(listed) >= count else [str(index) for index in range(count)]
    return [re.sub(r"[^A-Za-z0-9_.-]", "_", key) for key in keys]


def try_lock(path: str | os.PathLike, mode: str = "a") -> Any | None:
    """The open handle of ``path`` holding an exclusive ``flock``, or None when a live process holds it. The lock
    lasts as long as the handle; the kernel drops it when the holder exits or crashes. Other errors (a filesystem
    without locks) go up. POSIX only."""
    import fcntl

    handle = open(path, mode)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    except OSError:
        handle.close()
        raise
    return handle


def claim_gpu(keys: list[str], directory: Path) -> tuple[int, int]:
    """(index, jobs holding it before this one): the GPU of ``keys`` that the fewest live jobs hold, claimed.

    Each job holds an exclusive ``flock`` on one slot file of its GPU for as long as it lives; the kernel drops the
    locks of a process that exits or crashes, so a slot is free exactly when no live job holds it. Counting and
    claiming happen under one machine-wide lock, so jobs starting together spread over the GPUs (ties: the lowest
    index)."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "choose.lock", "a") as chooser:
        fcntl.flock(chooser, fcntl.LOCK_EX)
        held = []
        for key in keys:
            busy = 0
            for slot in directory.glob(f"gpu-{key}.slot*.lock"):
                handle = try_lock(slot)  # a live job's slot: None
                if handle is None:
                    busy += 1
                else:
                    handle.close()  # free: closing drops the probe's lock
            held.append(busy)
        index = min(range(len(keys)), key=lambda i: (held[i], i))
        slot_number = 0
        while (handle := try_lock(directory / f"gpu-{keys[index]}.slot{slot_number}.lock")) is None:
            slot_number += 1
    _claimed.append(handle)
    return index, held[index]


def job_device(requested: str | None = "auto") -> torch.device:
    """The device of one job (`strae train`, `strae evaluate`, the baselines' trainers): :func:`resolve_device`, and
    on a machine with several visible GPUs, for ``auto`` or ``cuda`` without an index, the GPU the fewest other strae
    jobs hold (:func:`claim_gpu`), made this process's current device. So `snakemake --profile profiles/gpu
    --resources gpu=N` on a box with G GPUs runs N jobs spread G ways instead of all on GPU 0. ``cuda:N`` is taken
    as given; one GPU (or none) changes nothing. :func:`gpu_placement` says what was chosen (train.json records it)."""
    global _placement
    device = resolve_device(requested)
    if device.type != "cuda" or device.index is not None:
        return device
    if _placement is not None:  # a process trains or evaluates on one GPU, however many jobs it runs in turn
        return torch.device("cuda", _placement["gpu"])
    count = torch.cuda.device_count()
    if count <= 1:
        return device
    try:
        import fcntl  # noqa: F401  (POSIX only)
    except ImportError:
        return device
    keys = visible_gpu_keys(count)
    try:
        index, sharing = claim_gpu(keys, gpu_slots_dir())
    except OSError as error:  # e.g. a slots folder on a filesystem without locks: run, just not spread
        print(f"strae: cannot choose among {count} GPUs ({gpu_slots_dir()}: {error}); using the default one. Set "
              f"{GPU_SLOTS_ENV} to a local folder to spread jobs over the GPUs", file=sys.stderr)
        return device
    torch.cuda.set_device(index)
    _placement = {"gpus_visible": count, "gpu": index, "gpu_key": keys[index], "jobs_already_on_it": sharing,
                  "slots_dir": str(gpu_slots_dir())}
    return torch.device("cuda", index)


def gpu_placement() -> dict[str, Any] | None:
    """What :func:`job_device` chose in this process (None when it did not choose: one GPU, none, or cuda:N)."""
    return None if _placement is None else dict(_placement)


def placement_fields() -> dict[str, Any]:
    """``{"gpu_placement": ...}`` for a record when :func:`job_device` chose a GPU, else nothing."""
    placement = gpu_placement()
    return {} if placement is None else {"gpu_placement": placement}


def host_to_device(array: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host array as a tensor on ``device``, without making the host wait for the GPU.

    ``torch.from_numpy(a).to("cuda")`` copies from pageable memory, which torch does as cudaMemcpyAsync followed by
    cudaStreamSynchronize: the host stops until every kernel queued so far has run, and the GPU then idles until
    the host queues more. A training step makes ~18 such copies (the graph's index arrays, built on the host), so
    they were most of its ~18 host syncs (H100 profile, 2026-11-26). Copied from pinned memory, the copy is queued
    on the stream like a kernel; torch's caching host allocator keeps the pinned block until the copy has run, so
    ``array`` may change as soon as this returns. On CPU: the array itself, as a tensor (no copy)."""
    tensor = _host_tensor(array)
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def _host_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A host array as a tensor sharing its memory (made contiguous first if it is not)."""
    return array if isinstance(array, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(array))


# Byte boundary every array of a packed copy starts on: Triton specialises a kernel on whether each pointer argument
# is 16-byte aligned, and misaligned index slices made it compile new variants batch after batch (docs/GPU.md).
PACK_ALIGNMENT = 16


def pack_bytes(tensors: list[torch.Tensor], pin: bool = False) -> tuple[torch.Tensor, list[tuple]]:
    """The tensors' bytes in one uint8 buffer (pinned with ``pin``), each starting on a ``PACK_ALIGNMENT`` boundary;
    with the layout :func:`unpack_bytes` reads them back by (offset, bytes, dtype, shape)."""
    layout, total = [], 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        layout.append((total, nbytes, tensor.dtype, tuple(tensor.shape)))
        total += -(-nbytes // PACK_ALIGNMENT) * PACK_ALIGNMENT
    buffer = torch.empty(max(total, PACK_ALIGNMENT), dtype=torch.uint8, pin_memory=pin)
    for tensor, (offset, nbytes, _, _) in zip(tensors, layout):
        if nbytes:
            buffer[offset:offset + nbytes].copy_(tensor.contiguous().reshape(-1).view(torch.uint8))
    return buffer, layout


def unpack_bytes(buffer: torch.Tensor, layout: list[tuple]) -> list[torch.Tensor]:
    """The tensors :func:`pack_bytes` packed, as views of ``buffer`` (on whatever device it now is)."""
    return [buffer[offset:offset + nbytes].view(dtype).view(shape) for offset, nbytes, dtype, shape in layout]


def host_to_device_many(arrays: list[np.ndarray | torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Several host arrays on ``device`` in ONE queued copy: :func:`host_to_device` for a step's small index
    arrays, which otherwise cost a pinned staging buffer and a copy launch each (~10 per training step). On CUDA
    each result is a view of one device buffer, 16-byte aligned; on CPU the arrays themselves, as tensors."""
    tensors = [_host_tensor(array) for array in arrays]
    if device.type != "cuda":
        return [tensor.to(device) for tensor in tensors]
    buffer, layout = pack_bytes(tensors, pin=True)
    return unpack_bytes(buffer.to(device, non_blocking=True), layout)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{os.cpu_count()}cores:{torch.get_num_threads()}threads"


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) from one integer; seeds are always explicit."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# torch's fill of fresh buffers under deterministic mode (configure_determinism): a debugging aid strae does not need
FILL_UNINITIALIZED_MEMORY = False


def configure_determinism(device: torch.device, enabled: bool = True) -> dict[str, Any]:
    """Deterministic kernels on CUDA (same seed twice -> same weights), returned as a record for train.json.

    CPU kernels are deterministic already. On CUDA, atomics-based scatters (index_add_, the backward of advanced
    indexing) may sum in any order; torch's deterministic mode swaps in sort-based implementations, and cuBLAS
    needs a fixed workspace (CUBLAS_WORKSPACE_CONFIG, read when its handle is created: call this before the model
    touches the GPU). ``warn_only``: an op without a deterministic kernel warns instead of stopping a run. On an
    H100 (2026-11-25) and an H200 (2026-11-26) the same seed twice gave identical weights; on the H200 it cost 11%
    of a Banyan step with the handwritten passes (608k vs 684k tokens/s) and 12% with autograd's (180k vs 205k).
    Under this mode torch also fills every fresh buffer (NaN / int max, so that a read of unwritten memory repeats):
    the likely source of the ~200 unattributed fill kernels counted per Banyan step on the H100 (their time not yet
    measured apart: benchmarks/train_throughput.py --compare-fill). No engine reads unwritten memory
    (tests/test_uninitialized_memory.py trains with the fill on and off: the same weights bit for bit), so the fill
    is off (``FILL_UNINITIALIZED_MEMORY``), recorded.
    """
    record: dict[str, Any] = {"deterministic": bool(enabled), "device_type": device.type}
    if device.type != "cuda":
        return record
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        record["cublas_workspace_config"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    torch.use_deterministic_algorithms(enabled, warn_only=True)
    if enabled:
        torch.utils.deterministic.fill_uninitialized_memory = FILL_UNINITIALIZED_MEMORY
        record["fill_uninitialized_memory"] = FILL_UNINITIALIZED_MEMORY
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = not enabled
    return record


def configure_float32_matmul() -> dict[str, str]:
    """fp32 matrix products in full fp32 (no TF32), as in both references (torch 2.1, whose default this is), so a
    recipe's ``loss_precision: fp32`` means fp32 everywhere. Some CUDA containers turn TF32 on for every process
    (``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``), which would change every fp32 product silently; the record says what
    was found and what is used (train.json / evaluation JSON ``provenance.float32_matmul``)."""
    found = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    return {"found": found, "used": torch.get_float32_matmul_precision()}


@contextlib.contextmanager
def tf32_products(enabled: bool = True):
    """fp32 matrix products on TF32 tensor cores inside the block when ``enabled`` (a CUDA setting; the objective's
    ``loss_precision: tf32``, through ``Objective.matmul_precision``), the process setting (full fp32,
    :func:`configure_float32_matmul`) restored after."""
    if not enabled:
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def bf16_autocast_supported(device: torch.device) -> bool:
    """bf16 autocast pays off on CUDA and on CPUs with AMX/AVX512-BF16; elsewhere keep fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # pragma: no cover - very old torch
        return False
    return "AMX" in capability.upper() or "AVX512" in capability.upper()


def capture_rng_states(device: torch.device | None = None) -> dict[str, Any]:
    """Every RNG a training step may draw from (python, numpy, torch CPU, and the CUDA generator of the run's
    ``device``), for exact resume."""
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if device is not None and torch.device(device).type == "cuda":
        # the run's own GPU only: with several GPUs a resumed job may be placed on another one (job_device), and
        # its dropout must continue this generator there, not that GPU's own
        states["cuda_device"] = torch.cuda.get_rng_state(device)
    return states


def restore_rng_states(states: dict[str, Any], device: torch.device | None = None) -> None:
    """:func:`capture_rng_states`' states back; the CUDA one onto ``device``, whichever GPU the resumed run got."""
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if device is None or torch.device(device).type != "cuda":
        return
    if "cuda_device" in states:
        torch.cuda.set_rng_state(states["cuda_device"], device)
    elif states.get("cuda"):  # a checkpoint written before 2026-11-29: every GPU's state, by index
        saved = states["cuda"]
        index = torch.device(device).index or 0
        torch.cuda.set_rng_state(saved[min(index, len(saved) - 1)], device)


class StoppedBySignal(Exception):
    """A training loop stopped by SIGTERM / SIGINT (:class:`StopRequest`) after checkpointing where it stood,
    raised where the loop cannot return the command's exit status itself; the message is
    :meth:`StopRequest.stopped_line`."""

    def __init__(self, stop: StopRequest, message: str):
        super().__init__(message)
        self.exit_status = stop.exit_status


def _detach_from_terminal() -> None:
    """Point stdout/stderr that are a terminal at /dev/null (after a hang-up, writing to it raises EIO); output
    redirected to a file (a workflow log) stays where it is."""
    for fd in (1, 2):
        try:
            if os.isatty(fd):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
        except OSError:
            pass


class StopRequest:
    """SIGTERM / SIGINT / SIGHUP ask a training loop to stop at its next step boundary instead of dying mid-step.

    Why: a time-boxed chunk (tools/campaign_chunk.sh's `timeout`, a SLURM wall-time, Ctrl-C) used to lose every
    step since the last periodic checkpoint. With this, the loop checkpoints where it stands and exits 128 +
    signal; rerunning the same command resumes from exactly there. After the first signal, Ctrl-C is no longer
    intercepted (a second one stops the process at once, the way a person expects), while further SIGTERMs are
    ignored: a supervisor may send more than one (to the process and to its group), and its way to insist is
    SIGKILL (`timeout --kill-after`, SLURM's KillWait). Handlers are only installed from the main thread (Python
    allows no other), and restored on exit."""

    # SIGHUP: the terminal of an interactive run went away (an ssh session dropped outside tmux); unless the run
    # was started to ignore it (nohup), it stops as for SIGTERM instead of dying between checkpoints
    SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")

    def __init__(self, stopping: str = "after the current step, with a checkpoint there") -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}
        self.stopping = stopping  # what the first signal's banner says the loop will do (a trainer's own unit)

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def name(self) -> str:
        import signal

        return signal.Signals(self.signal).name if self.signal is not None else ""

    @property
    def exit_status(self) -> int:
        """128 + signal: the shell's convention for a process a signal stopped."""
        return 128 + int(self.signal)

    def stopped_line(self, run_dir: Any, position: str) -> str:
        """What a loop reports once it has checkpointed at ``position`` after the signal (every trainer alike)."""
        return (f"{run_dir}: stopped by {self.name} at {position}; checkpoint written: the same command resumes "
                "from there")

    def _handle(self, signum: int, frame: Any) -> None:
        import signal
        import sys

        first = self.signal is None
        self.signal = self.signal or signum
        self._restore(only=signal.SIGINT)
        if signum == getattr(signal, "SIGHUP", None):
            _detach_from_terminal()  # its terminal is gone: a write there would fail the loop before its checkpoint
        if first:
            try:
                print(f"\n{self.name}: stopping {self.stopping} (Ctrl-C again stops at once, losing the work since "
                      "the last checkpoint)", file=sys.stderr, flush=True)
            except OSError:
                pass

    def _restore(self, only: int | None = None) -> None:
        import signal

        for signum in [only] if only is not None else list(self._previous):
            if signum in self._previous:
                signal.signal(signum, self._previous.pop(signum))

    def __enter__(self) -> StopRequest:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                signum = getattr(signal, name, None)
                if signum is None or (signum == getattr(signal, "SIGHUP", None)
                                      and signal.getsignal(signum) is signal.SIG_IGN):
                    continue  # (no SIGHUP on Windows; nohup's choice to ignore it is kept)
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._restore()
