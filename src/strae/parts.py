"""`strae parts`: move a file too big for one transfer in parts, and join it back exactly.

A lent GPU box (README "Training on an offline GPU box") takes up at most ~64 MiB per call, checkout included, and
gives back at most 8 files of 16 MiB per call; a Self-StrAE checkpoint with Adam's state is ~155 MB. A run that
cannot finish within one session's device time would be lost with the box. Instead its ``checkpoint.pt`` comes back
in parts (``split --only`` picks the parts of each call), is joined here, and goes up again in parts in a later
session; ``strae train`` then resumes where the run stopped (same weights, optimizer state, RNG and history).

    strae parts split results/runs/en/.../seed0/checkpoint.pt --to $OUT --part-mib 16 --only 0:7   # call 1
    strae parts split results/runs/en/.../seed0/checkpoint.pt --to $OUT --part-mib 16 --only 7:    # call 2
    strae parts join DIR [DIR ...]   # here or on the box: every part found, checked, joined at its recorded path

Every ``split`` writes ``<name>.parts.json`` beside its parts: the file's path (relative to the checkout), size and
sha256, and each part's sha256 (always all of them, whichever parts this call writes). ``join`` finds manifests
under the folders given, checks each part and the whole against them, and puts the file in place atomically (a
failed join leaves nothing); a file already in place with the same sha256 is left alone.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

from strae.io import atomic_path, project_root, read_json, sha256_file, write_json

MANIFEST_SUFFIX = ".parts.json"
SCHEMA_VERSION = 1


def part_name(stem: str, index: int) -> str:
    return f"{stem}.part{index:03d}"


def stem_for(relative: Path) -> str:
    """One flat, portable name per file: its checkout-relative path with '/' as '.' (the box returns only plain
    names)."""
    return ".".join(relative.parts)


def _relative(path: Path, root: Path) -> Path:
    path = path.resolve()
    try:
        return path.relative_to(root.resolve())
    except ValueError:
        raise SystemExit(f"strae parts split: {path} is not inside the checkout {root}; join puts a file back at its "
                         "path relative to the checkout") from None


def _part_digests(path: Path, part_bytes: int) -> list[str]:
    digests = []
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(part_bytes), b""):
            digests.append(hashlib.sha256(block).hexdigest())
    return digests


def _parse_range(text: str, count: int) -> range:
    start, sep, stop = text.partition(":")
    try:
        first = int(start) if start else 0
        last = (int(stop) if stop else count) if sep else first + 1
    except ValueError:
        raise SystemExit(f"strae parts split: --only {text!r}: expected I, I:J, I: or :J (part indices)") from None
    if not 0 <= first < last <= count:
        raise SystemExit(f"strae parts split: --only {text!r}: the file has parts 0..{count - 1}")
    return range(first, last)


def split(path: Path, out: Path, part_mib: float, only: str | None, root: Path) -> dict[str, Any]:
    """Write the manifest and the parts ``only`` names (default all) of ``path`` to ``out``."""
    if not path.is_file():
        raise SystemExit(f"strae parts split: {path}: no such file")
    part_bytes = int(part_mib * 2 ** 20)
    if part_bytes < 1:
        raise SystemExit(f"strae parts split: --part-mib {part_mib}: must be positive")
    relative = _relative(path, root)
    digests = _part_digests(path, part_bytes)
    manifest = {"schema_version": SCHEMA_VERSION, "path": relative.as_posix(), "size": path.stat().st_size,
                "sha256": sha256_file(path), "part_bytes": part_bytes, "parts": digests}
    stem = stem_for(relative)
    chosen = _parse_range(only, len(digests)) if only else range(len(digests))
    out.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as handle:
        for index in chosen:
            handle.seek(index * part_bytes)
            block = handle.read(part_bytes)
            if hashlib.sha256(block).hexdigest() != digests[index]:
                raise SystemExit(f"strae parts split: {path} changed while it was being split (part {index})")
            with atomic_path(out / part_name(stem, index)) as tmp:
                tmp.write_bytes(block)
    write_json(out / f"{stem}{MANIFEST_SUFFIX}", manifest)
    return {"path": manifest["path"], "parts": len(digests), "written": list(chosen), "out": str(out)}


def _find_part(folders: list[Path], name: str, digest: str) -> tuple[Path | None, list[Path]]:
    """The first file named ``name`` under ``folders`` with the right sha256, and any with the wrong one."""
    wrong = []
    for folder in folders:
        for candidate in sorted(folder.rglob(name)):
            if sha256_file(candidate) == digest:
                return candidate, wrong
            wrong.append(candidate)
    return None, wrong


def join_one(manifest_path: Path, folders: list[Path], root: Path, to: Path | None = None) -> str:
    """Put the file ``manifest_path`` describes in place from parts found under ``folders``; returns what it did."""
    manifest = read_json(manifest_path)
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise SystemExit(f"strae parts join: {manifest_path}: schema_version {manifest.get('schema_version')!r}, "
                         f"this strae reads {SCHEMA_VERSION}")
    target = to if to is not None else root / manifest["path"]
    if target.is_file() and target.stat().st_size == manifest["size"] and sha256_file(target) == manifest["sha256"]:
        return f"{target}: already in place (sha256 matches)"
    stem = stem_for(Path(manifest["path"]))
    found, missing, corrupt = [], [], []
    for index, digest in enumerate(manifest["parts"]):
        part, wrong = _find_part(folders, part_name(stem, index), digest)
        corrupt += wrong
        if part is None:
            missing.append(index)
        else:
            found.append(part)
    if missing:
        where = ", ".join(str(folder) for folder in folders)
        extra = f"; parts with the wrong sha256: {', '.join(map(str, corrupt))}" if corrupt else ""
        raise SystemExit(f"strae parts join: {manifest['path']}: parts {missing} of {len(manifest['parts'])} not found "
                         f"(intact) under {where}{extra}. Bring them (strae parts split --only) and join again.")
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for part in found:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
        if tmp.stat().st_size != manifest["size"] or sha256_file(tmp) != manifest["sha256"]:
            raise SystemExit(f"strae parts join: {manifest['path']}: the joined parts do not give the recorded file "
                             "(size or sha256 differs); nothing was written")
    return f"{target}: joined from {len(found)} parts ({manifest['size']:,} bytes, sha256 checked)"


def join(folders: list[Path], root: Path, to: Path | None = None) -> list[str]:
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"strae parts join: {folder}: no such folder")
    manifests: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.rglob(f"*{MANIFEST_SUFFIX}")):
            manifests.setdefault(read_json(path).get("sha256", str(path)), path)
    if not manifests:
        raise SystemExit(f"strae parts join: no *{MANIFEST_SUFFIX} under {', '.join(map(str, folders))}")
    if to is not None and len(manifests) > 1:
        raise SystemExit(f"strae parts join: --to names one file, but {len(manifests)} manifests were found")
    return [join_one(path, folders, root, to) for path in manifests.values()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strae parts", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cut = commands.add_parser("split", help="write a file's manifest and (some of) its parts to a folder")
    cut.add_argument("path", type=Path, help="the file (inside the checkout), e.g. a run's checkpoint.pt")
    cut.add_argument("--to", type=Path, required=True, help="folder for the parts and the manifest (e.g. $OUT)")
    cut.add_argument("--part-mib", type=float, default=16.0,
                     help="part size in MiB (16: what a lent box gives back per file; 8 to carry up beside a bundle)")
    cut.add_argument("--only", default=None, help="the parts to write: I, I:J, I: or :J (default: all)")
    glue = commands.add_parser("join", help="check the parts found under folders and put each file back in place")
    glue.add_argument("folders", type=Path, nargs="+")
    glue.add_argument("--to", type=Path, default=None, help="write here instead of the recorded path (one file)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = project_root()
    if args.command == "split":
        done = split(args.path, args.to, args.part_mib, args.only, root)
        print(f"{done['path']}: parts {done['written'][0] if done['written'] else '-'}.."
              f"{done['written'][-1] if done['written'] else '-'} of {done['parts']} written to {done['out']}")
    else:
        for line in join(args.folders, root, args.to):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
