"""Shared pytest fixtures: the offline data mirror (when present) and small helpers."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Tests are CPU-only: Triton kernels run on Triton's CPU interpreter. Triton reads this when its modules are
# imported (its own library functions are decorated then), so it is set before any test can import triton.
os.environ["TRITON_INTERPRET"] = "1"
# One intra-op thread per process unless the caller chose (before torch is imported; subprocesses inherit it): the
# tests' models are tiny, and on a 2-core machine two threads spin-wait whenever another process holds a core (a
# test's own subprocess, a training run beside the suite): a 30-step tiny RoBERTa test took 95 s with two threads
# beside one busy core and under 1 s with one.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _find_mirror() -> Path | None:
    env = os.environ.get("STRAE_DATA_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir() and (candidate / "SHA256SUMS").exists():
            return candidate.resolve()
    return None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The data mirror directory; tests that need it are skipped (with the reason) when it is absent."""
    found = _find_mirror()
    if found is None:
        pytest.skip("offline data mirror not found (set STRAE_DATA_MIRROR or place ../shared/data)")
    # code under test resolves files through $STRAE_DATA_MIRROR, exactly as a user's run would
    os.environ.setdefault("STRAE_DATA_MIRROR", str(found))
    return found
