"""Shared file helpers: atomic writes, checksums, JSON, and provenance records.

Every output strae writes goes through these helpers so an interrupted step never leaves a file that
looks complete (write to a temp file in the same directory, fsync, then rename).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def current_umask() -> int:
    """The process umask (os.umask can only be read by setting it, so set it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    Use for writers that want a file name (np.save, torch.save, sentencepiece, pandas).
    """
    path = Path(path)
    created = [parent for parent in path.parents if not parent.exists()]  # deepest first
    for attempt in range(3):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
            break
        except FileNotFoundError:
            # another writer's failed write removed the directory it had created, empty, between the mkdir and
            # here: make it again
            if attempt == 2:
                raise
    os.close(fd)
    tmp_path = Path(tmp)
    done = False
    try:
        yield tmp_path
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 minus the umask), so group
        # members on a shared cluster can read results
        os.chmod(tmp_path, 0o666 & ~current_umask())
        os.replace(tmp_path, path)
        done = True
    finally:
        if tmp_path.exists():
            tmp_path.unlink()
        if not done:  # a failed write (a download that failed) leaves no empty directory behind either
            for parent in created:
                with contextlib.suppress(OSError):  # not empty (another writer's file): kept
                    parent.rmdir()


def _check_parent(path: Path, flag: str, writable: bool) -> None:
    """The nearest existing ancestor of ``path`` must be a directory (and, when ``writable``, one this user can
    create files in); else SystemExit naming ``flag``."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise SystemExit(f"{flag} {path}: {parent} is a file, not a directory")
            if writable and not os.access(parent, os.W_OK | os.X_OK):
                raise SystemExit(f"{flag} {path}: cannot write in {parent}")
            return


def check_output_file(path: str | os.PathLike, flag: str = "--out") -> None:
    """Refuse an output path that could not be written, before the work that makes it (an evaluation may run for
    hours): an existing directory, or a file where a parent directory must go."""
    path = Path(path)
    if path.is_dir():
        raise SystemExit(f"{flag} {path}: is a directory; give the file to write (e.g. {path / 'scores.json'})")
    _check_parent(path, flag, writable=True)


def make_output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Create an output directory (a run's), refusing with the flag's name what ``mkdir`` would raise on: an
    existing file in its place or above it, or a parent this user cannot write in."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SystemExit(f"{flag} {path}: is a file, not a directory")
    _check_parent(path, flag, writable=not path.exists())
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[Any]:
    """``open`` that writes to a temp file and renames it into place on success."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_open(path, "w", encoding="utf-8") as handle:
        json.dump(obj, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")


def text_lines(path: str | os.PathLike) -> Iterator[str]:
    """``path``'s lines exactly as ``open(path, encoding="utf-8")`` gives them; a file that is not UTF-8 is an error
    naming it and its first such line, not a bare UnicodeDecodeError (for corpora: hand-made ones, re-saved ones)."""
    with open(path, encoding="utf-8") as handle:
        try:
            yield from handle
        except UnicodeDecodeError as error:
            # text mode decodes by blocks, so the error's position says nothing of the line: read it again with
            # the same line splitting (universal newlines), undecodable bytes as surrogates, to find the line
            with open(path, encoding="utf-8", errors="surrogateescape") as again:
                line_no = next((n for n, line in enumerate(again, 1) if _UNDECODED.search(line)), "?")
            raise SystemExit(f"{path}:{line_no}: not UTF-8 text ({error.reason}); the file must be UTF-8, one "
                             "sentence per line") from None


_UNDECODED = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of a byte that is not UTF-8


class JSONFileError(SystemExit, ValueError):
    """A JSON file that does not parse, named with the place it breaks: a user-facing error (SystemExit) that a
    caller tolerating a bad file still catches as the ValueError it always was."""


def read_json(path: str | os.PathLike) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise JSONFileError(f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); a "
                            "truncated or hand-edited file? Write it again with the command that made it") from error
    except UnicodeDecodeError as error:
        raise JSONFileError(f"{path}: not a UTF-8 JSON file ({error})") from error


def _digest_file(path: str | os.PathLike, *digests, chunk_size: int = 1 << 20) -> list[str]:
    """Each of ``digests`` (hashlib objects) fed the file's bytes, in one read; their hex digests."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            for digest in digests:
                digest.update(block)
    return [digest.hexdigest() for digest in digests]


def _git_blob_digest(path: str | os.PathLike):
    return hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())


def sha256_file(path: str | os.PathLike) -> str:
    return _digest_file(path, hashlib.sha256())[0]


def sha256_json(value: Any) -> str:
    """sha256 of a JSON-able value written with sorted keys: the identity of parsed settings, whatever the key order
    or formatting of the file they came from (a YAML config merged from overlays is rewritten in another order)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def git_blob_sha1_file(path: str | os.PathLike) -> str:
    """The file's git blob id (``git hash-object FILE``): sha1 of ``blob <size>\\0`` + the bytes. The identity a
    file has when only its repository's tree is known (a registry entry whose sha256 nobody could compute)."""
    return _digest_file(path, _git_blob_digest(path))[0]


def sha256_and_git_blob_sha1_file(path: str | os.PathLike) -> tuple[str, str]:
    """``(sha256_file(path), git_blob_sha1_file(path))`` in one read of the file."""
    sha256, blob = _digest_file(path, hashlib.sha256(), _git_blob_digest(path))
    return sha256, blob


def project_root() -> Path:
    """The repository root (where pyproject.toml lives) for an editable install; else the CWD."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists():
            return parent
    return Path.cwd()


_CODE_SHA: list[str | None] = []  # the first answer of git_sha() in this process


def git_sha() -> str | None:
    """The commit of the code this process runs (``SHA``, ``SHA-dirty``, ``SHA-unchecked`` when `git status` failed;
    None outside a git checkout or when git failed, kept for the process like any answer). Read once,
    at the first call (`strae` makes it when a command starts), and kept: a result written an hour later names the code
    that computed it, not a commit made meanwhile."""
    if not _CODE_SHA:
        _CODE_SHA.append(_read_git_sha())
    return _CODE_SHA[0]


def _read_git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=project_root(), capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    sha = out.stdout.strip()
    try:  # --no-optional-locks: many jobs starting at once must not hold the index lock a user's `git add` needs
        status = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
                                cwd=project_root(), capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return f"{sha}-unchecked"  # the commit, with changes to it neither seen nor ruled out
    if status.returncode != 0:  # e.g. an unreadable index: its empty output says nothing about changes
        return f"{sha}-unchecked"
    return sha + ("-dirty" if status.stdout.strip() else "")


def provenance(**extra: Any) -> dict[str, Any]:
    """Who/what/where made a result: package + library versions, git sha, host, time, plus ``extra``."""
    import numpy
    import torch

    from strae import __version__

    record: dict[str, Any] = {
        "strae_version": __version__,
        "git_sha": git_sha(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu_kernels": cpu_kernels(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    record.update(extra)
    return record


def cpu_kernels() -> dict[str, Any]:
    """Which CPU kernels this process' numeric libraries chose: torch's vector ISA (``AVX512``, ``AVX2``, ...) and,
    for every BLAS loaded so far (numpy's and scipy's OpenBLAS, via threadpoolctl), its kernel architecture.

    Why it is recorded: OpenBLAS picks its kernels per CPU at load time (``DYNAMIC_ARCH``), and they round
    differently. A SentEval classifier refit that stops at ``max_iter`` unconverged carries that rounding into the
    score: the same features scored SICK-E 70.23 with the ``SkylakeX`` kernels and 69.33 with ``Haswell``/``Zen``
    (reproductions/senteval-blas-kernels-cpu-2026-11-30). ``OPENBLAS_CORETYPE=Haswell`` pins the kernels."""
    import torch
    from threadpoolctl import threadpool_info

    kernels: dict[str, Any] = {"torch": torch.backends.cpu.get_cpu_capability(), "blas": []}
    for pool in threadpool_info():
        if pool.get("user_api") == "blas":
            kernels["blas"].append({"library": Path(pool.get("filepath") or "").name or pool.get("prefix"),
                                    **{key: pool.get(key) for key in ("internal_api", "version", "architecture")}})
    kernels["blas"].sort(key=lambda blas: str(blas["library"]))  # the order libraries loaded in varies
    if os.environ.get("OPENBLAS_CORETYPE"):
        kernels["openblas_coretype"] = os.environ["OPENBLAS_CORETYPE"]
    return kernels


def package_versions(*names: str) -> dict[str, str | None]:
    """{distribution: installed version or None}: the libraries that decide a data file beside torch and numpy
    (the sentence segmenter, the pretokeniser, SentencePiece), for its provenance."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
