"""`strae parts`: move files too big for one transfer in parts, and join them back exactly.

A lent GPU box (README "Training on an offline GPU box") takes up at most ~64 MiB per call, checkout included, and
gives back at most 8 files of 16 MiB and 64 MiB together per call; a Self-StrAE checkpoint with Adam's state is
~155 MB. A run that cannot finish within one session's device time would be lost with the box. Instead its
resumable state comes back in parts (``checkpoint.pt``, and ``best.pt`` where the recipe keeps the best epoch's
weights: without it a resumed run could not end on them), ``split --only`` picking the parts of each call; it is
joined here, and goes up again in parts in a later session; ``strae train`` then resumes where the run stopped
(same weights, optimizer state, RNG and history).

    strae parts split RUN/checkpoint.pt RUN/best.pt --missing-ok --to $OUT --only 0:4   # call 1 (15.5 MiB parts)
    strae parts split RUN/checkpoint.pt RUN/best.pt --missing-ok --to $OUT --only 4:8   # call 2, ...
    strae parts join DIR [DIR ...]   # here or on the box: every part found, checked, joined at its recorded paths
    strae parts split RUN/checkpoint.pt RUN/best.pt --missing-ok --to transport --part-mib 8 --calls-mib 16,48
                                     # going up again: transport/call1 (beside the bundle), call2, ... one per call

The files given to one ``split`` are cut as one stream (their bytes one after the other), so parts are full-sized
across file boundaries and one manifest covers them: ``<name>.parts.json`` beside the parts, with each file's path
(relative to the checkout), size and sha256, and each part's sha256 (always all of them, whichever parts this call
writes). ``join`` finds manifests under the folders given, checks each part, then each file, and puts the files in
place only when all of them check (a failed join leaves nothing); files already in place with the same sha256 are
left alone.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import sys
from pathlib import Path
from typing import Any

from strae.io import atomic_path, project_root, read_json, sha256_file, write_json

MANIFEST_SUFFIX = ".parts.json"
SCHEMA_VERSION = 2  # 1: one file (path, size, sha256 at the top level); still joined


def part_name(stem: str, index: int) -> str:
    return f"{stem}.part{index:03d}"


def stem_for(relatives: list[Path]) -> str:
    """One flat, portable name per set of files: a file's checkout-relative path with '/' as '.' (the box returns only
    plain names); for several, their common folder's, then their names joined by '-'."""
    if len(relatives) == 1:
        return ".".join(relatives[0].parts)
    common = Path(*[parts[0] for parts in zip(*(r.parent.parts for r in relatives)) if len(set(parts)) == 1])
    return ".".join(common.parts + ("-".join(r.name for r in relatives),))


def _relative(path: Path, root: Path) -> Path:
    path = path.resolve()
    try:
        return path.relative_to(root.resolve())
    except ValueError:
        raise SystemExit(f"strae parts split: {path} is not inside the checkout {root}; join puts a file back at its "
                         "path relative to the checkout") from None


def _blocks(paths: list[Path], part_bytes: int, start: int = 0):
    """The files' bytes as one stream, ``part_bytes`` at a time, from part ``start`` on."""
    skip = start * part_bytes
    pending = b""
    for path in paths:
        size = path.stat().st_size
        if skip >= size:
            skip -= size
            continue
        with open(path, "rb") as handle:
            handle.seek(skip)
            skip = 0
            while chunk := handle.read(part_bytes - len(pending)):
                pending += chunk
                if len(pending) == part_bytes:
                    yield pending
                    pending = b""
    if pending:
        yield pending


def _parse_range(text: str, count: int) -> range:
    start, sep, stop = text.partition(":")
    try:
        first = int(start) if start else 0
        last = (int(stop) if stop else count) if sep else first + 1
    except ValueError:
        raise SystemExit(f"strae parts split: --only {text!r}: expected I, I:J, I: or :J (part indices)") from None
    last = min(last, count)  # like a slice: a fixed stride of calls (0:4, 4:8, ...) ends on a short last call
    if not 0 <= first < last:
        raise SystemExit(f"strae parts split: --only {text!r}: the files have parts 0..{count - 1}")
    return range(first, last)


def split(paths: Path | list[Path], out: Path, part_mib: float, only: str | None, root: Path,
          missing_ok: bool = False) -> dict[str, Any]:
    """Write the manifest and the parts ``only`` names (default all) of ``paths`` (one stream) to ``out``;
    ``missing_ok``: files that do not exist are left out (returned as ``left_out``)."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    left_out = [path for path in paths if missing_ok and not path.exists()]
    paths = [path for path in paths if path not in left_out]
    if not paths:
        raise SystemExit(f"strae parts split: none of {', '.join(map(str, left_out))} exists")
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"strae parts split: {path}: no such file")
    part_bytes = int(part_mib * 2 ** 20)
    if part_bytes < 1:
        raise SystemExit(f"strae parts split: --part-mib {part_mib}: must be positive")
    relatives = [_relative(path, root) for path in paths]
    if len(set(relatives)) < len(relatives):
        raise SystemExit(f"strae parts split: a file is named twice: {', '.join(map(str, paths))}")
    files = [{"path": relative.as_posix(), "size": path.stat().st_size, "sha256": sha256_file(path)}
             for path, relative in zip(paths, relatives)]
    digests = [hashlib.sha256(block).hexdigest() for block in _blocks(paths, part_bytes)]
    manifest = {"schema_version": SCHEMA_VERSION, "files": files, "size": sum(f["size"] for f in files),
                "part_bytes": part_bytes, "parts": digests}
    stem = stem_for(relatives)
    chosen = _parse_range(only, len(digests)) if only else range(len(digests))
    out.mkdir(parents=True, exist_ok=True)
    for index, block in zip(chosen, _blocks(paths, part_bytes, chosen.start)):
        if hashlib.sha256(block).hexdigest() != digests[index]:
            raise SystemExit(f"strae parts split: {', '.join(map(str, paths))} changed while being split (part "
                             f"{index})")
        with atomic_path(out / part_name(stem, index)) as tmp:
            tmp.write_bytes(block)
    write_json(out / f"{stem}{MANIFEST_SUFFIX}", manifest)
    return {"paths": [f["path"] for f in files], "parts": len(digests), "written": list(chosen), "out": str(out),
            "left_out": left_out}


def split_for_calls(paths: list[Path], out: Path, part_mib: float, calls_mib: list[float], root: Path,
                    missing_ok: bool = False) -> list[dict[str, Any]]:
    """All parts of ``paths`` into ``out``/call1, call2, ... (each with the manifest), call N holding at most
    ``calls_mib[N-1]`` MiB of parts (the last value repeats): what each call to a lent box can carry up beside the
    rest of what it needs (the first call: the checkout and a bundle). Carry ``out/callN`` in call N; on the box the
    earlier calls' folders are still there (ignored files stay while the box is warm): ``strae parts join out``."""
    if not calls_mib or any(mib < part_mib for mib in calls_mib):
        raise SystemExit(f"strae parts split: --calls-mib {','.join(map(str, calls_mib))}: every call must hold at "
                         f"least one part of {part_mib} MiB")
    total = sum(path.stat().st_size for path in paths if path.exists())
    count = max(1, -(-total // int(part_mib * 2 ** 20)))  # the stream's parts (split checks each path itself)
    done, start, call = [], 0, 1
    while start < count:
        per_call = int(calls_mib[min(call, len(calls_mib)) - 1] // part_mib)
        stop = min(count, start + per_call)
        done.append(split(paths, out / f"call{call}", part_mib, f"{start}:{stop}", root, missing_ok))
        start, call = stop, call + 1
    return done


def _find_part(folders: list[Path], name: str, digest: str) -> tuple[Path | None, list[Path]]:
    """The first file named ``name`` under ``folders`` with the right sha256, and any with the wrong one."""
    wrong = []
    for folder in folders:
        for candidate in sorted(folder.rglob(name)):
            if sha256_file(candidate) == digest:
                return candidate, wrong
            wrong.append(candidate)
    return None, wrong


def _files_of(manifest: dict[str, Any], manifest_path: Path) -> list[dict[str, Any]]:
    version = manifest.get("schema_version")
    if version == 1:
        return [{key: manifest[key] for key in ("path", "size", "sha256")}]
    if version != SCHEMA_VERSION:
        raise SystemExit(f"strae parts join: {manifest_path}: schema_version {version!r}, this strae reads 1 and "
                         f"{SCHEMA_VERSION}")
    return manifest["files"]


def _in_place(target: Path, entry: dict[str, Any]) -> bool:
    return target.is_file() and target.stat().st_size == entry["size"] and sha256_file(target) == entry["sha256"]


def join_one(manifest_path: Path, folders: list[Path], root: Path, to: Path | None = None) -> str:
    """Put the files ``manifest_path`` describes in place from parts found under ``folders``; returns what it did."""
    manifest = read_json(manifest_path)
    files = _files_of(manifest, manifest_path)
    if to is not None and len(files) > 1:
        raise SystemExit(f"strae parts join: --to names one file, but {manifest_path} holds {len(files)}")
    targets = [to] if to is not None else [root / entry["path"] for entry in files]
    names = ", ".join(entry["path"] for entry in files)
    if all(_in_place(target, entry) for target, entry in zip(targets, files)):
        return f"{', '.join(map(str, targets))}: already in place (sha256 matches)"
    stem = stem_for([Path(entry["path"]) for entry in files])
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
        raise SystemExit(f"strae parts join: {names}: parts {missing} of {len(manifest['parts'])} not found (intact) "
                         f"under {where}{extra}. Bring them (strae parts split --only) and join again.")
    with contextlib.ExitStack() as stack:  # every file renamed into place only if all of them check
        temps = [stack.enter_context(atomic_path(target)) for target in targets]
        stream = (open(part, "rb") for part in found)
        source = next(stream)
        for tmp, entry in zip(temps, files):
            left = entry["size"]
            with open(tmp, "wb") as out:
                while left:
                    chunk = source.read(min(left, 1 << 20))
                    if not chunk:
                        source.close()
                        source = next(stream, None)
                        if source is None:
                            break
                        continue
                    out.write(chunk)
                    left -= len(chunk)
            if tmp.stat().st_size != entry["size"] or sha256_file(tmp) != entry["sha256"]:
                raise SystemExit(f"strae parts join: {entry['path']}: the joined parts do not give the recorded file "
                                 "(size or sha256 differs); nothing was written")
        if source is not None:
            source.close()
    size = sum(entry["size"] for entry in files)
    return f"{', '.join(map(str, targets))}: joined from {len(found)} parts ({size:,} bytes, sha256 checked)"


def join(folders: list[Path], root: Path, to: Path | None = None) -> list[str]:
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"strae parts join: {folder}: no such folder")
    manifests: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.rglob(f"*{MANIFEST_SUFFIX}")):
            manifest = read_json(path)
            key = manifest.get("sha256") or ",".join(f["sha256"] for f in manifest.get("files", [])) or str(path)
            manifests.setdefault(key, path)
    if not manifests:
        raise SystemExit(f"strae parts join: no *{MANIFEST_SUFFIX} under {', '.join(map(str, folders))}")
    if to is not None and len(manifests) > 1:
        raise SystemExit(f"strae parts join: --to names one file, but {len(manifests)} manifests were found")
    return [join_one(path, folders, root, to) for path in manifests.values()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strae parts", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cut = commands.add_parser("split", help="write the manifest and (some of) the parts of files to a folder")
    cut.add_argument("paths", type=Path, nargs="+", help="the files (inside the checkout), cut as one stream: a run's "
                     "checkpoint.pt, and its best.pt where it has one")
    cut.add_argument("--to", type=Path, required=True, help="folder for the parts and the manifest (e.g. $OUT)")
    cut.add_argument("--part-mib", type=float, default=15.5,
                     help="part size in MiB (15.5: four parts and the manifest fit the 64 MiB a lent box gives back "
                     "per call, each under its 16 MiB a file; 8 to carry up beside a bundle)")
    cut.add_argument("--missing-ok", action="store_true",
                     help="leave out files that do not exist (a run's best.pt before its first epoch end) and say so")
    cut.add_argument("--only", default=None, help="the parts to write: I, I:J, I: or :J (default: all)")
    cut.add_argument("--calls-mib", default=None, metavar="FIRST[,NEXT...]",
                     help="instead of --only: every part, into DIR/call1, DIR/call2, ... (each with the manifest), "
                     "call N holding at most the N-th value in MiB (the last repeats), e.g. 12,44 beside a 31 MiB "
                     "bundle and an 18 MiB checkout; carry DIR/callN in call N, then `strae parts join DIR` on the box")
    glue = commands.add_parser("join", help="check the parts found under folders and put each file back in place")
    glue.add_argument("folders", type=Path, nargs="+")
    glue.add_argument("--to", type=Path, default=None, help="write here instead of the recorded path (one file)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = project_root()
    if args.command == "split":
        if args.calls_mib is not None and args.only is not None:
            raise SystemExit("strae parts split: --calls-mib and --only exclude each other")
        if args.calls_mib is not None:
            try:
                calls = [float(value) for value in args.calls_mib.split(",")]
            except ValueError:
                raise SystemExit(f"strae parts split: --calls-mib {args.calls_mib!r}: expected MiB values such as "
                                 "16,48") from None
            done_list = split_for_calls(args.paths, args.to, args.part_mib, calls, root, args.missing_ok)
        else:
            done_list = [split(args.paths, args.to, args.part_mib, args.only, root, args.missing_ok)]
        for path in done_list[0]["left_out"]:
            print(f"{path}: does not exist, left out (--missing-ok)")
        for done in done_list:
            print(f"{', '.join(done['paths'])}: parts {done['written'][0] if done['written'] else '-'}.."
                  f"{done['written'][-1] if done['written'] else '-'} of {done['parts']} written to {done['out']}")
    else:
        for line in join(args.folders, root, args.to):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
