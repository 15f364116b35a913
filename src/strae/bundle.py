"""`strae bundle`: carry what an offline GPU box needs to train, evaluate and report, in one folder.

The box (docs: README "Training on an offline GPU box") has Python, torch and a few scientific packages but no
network, no data mirror and room for a few tens of MiB. ``strae bundle`` writes, from a machine that prepared the
languages' resources, an ignored folder (default ``bundle/``) holding:

- ``resources/``: each language's tokenised corpus, tokenizer (model + record) and corpus ``meta.json``, as
  ``.xz`` files (a tokenised English corpus is 56 MB raw, 15 MB compressed). The prepared corpus text is not
  carried (the tokenised corpus is what trains); ``--unpack`` puts an EMPTY stand-in with the original's mtime in
  its place, so Snakemake sees the preparation steps done and schedules nothing before training. A stand-in that
  is ever tokenised again is refused (its checksum is not the prepared one; it has no sentence).
  ``--with-corpus-text`` carries the real text instead.
- ``mirror/``: the evaluation files of those languages' ``eval.<variant>`` task lists, in the data mirror's layout
  (byte-identical after decompression: the fetch layer checks them against config/registry.yaml).
- ``wheels/``: every Python package of the train/evaluate/report/Snakemake path that the box lacks, for its
  Python (``--python``: an interpreter of the box's version, which resolves and builds them).
- ``manifest.json``: every file with its sha256, size and mtime; written last, and only when the folder fits.

``strae bundle --unpack [DIR]`` (run by tools/offline_unpack.sh on the box, after the wheels are installed)
restores the resources with their mtimes, decompresses the mirror and places its files under resources/data
through the fetch layer (checksums verified). It is idempotent: files already in place are checked, not copied.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from strae import paths
from strae.io import atomic_path, git_sha, project_root, read_json, sha256_file, write_json

SCHEMA_VERSION = 1
DEFAULT_OUT = "bundle"
MANIFEST = "manifest.json"
ENV_SH = "env.sh"  # the environment of the campaign's commands on the box (env_script)
BOX_CARRY_MIB = 64.0  # all that travels to the box: the checkout's files (tracked, untracked-not-ignored) + bundle
DEFAULT_MAX_MIB = 60.0  # the bundle's limit where the checkout's size cannot be read (no git)
BOX_PYTHON = "3.12"
# Projects the box has installed (with torch 2.11 + CUDA); their wheels are never carried, so pip keeps the box's own.
BOX_PACKAGES = ("torch", "triton", "numpy", "scipy", "pandas", "sentencepiece", "tqdm", "pyyaml", "transformers")
# What the campaign path imports beyond the box's packages (traced on the workflow's own end-to-end run:
# prepare/tokenize/train/evaluate/aggregate/measure/report and snakemake itself); pins come from pyproject.toml.
# nltk: the Treebank pretokenisation of languages with `pretokenize: treebank`; sentencex: strae.data.segment,
# imported by evaluation; psutil: snakemake and `strae measure`.
CAMPAIGN_PACKAGES = ("snakemake", "jsonschema", "sentencex", "nltk", "psutil")
# Dependencies left out on purpose, with why. Their dependents are installed with --no-deps (their other
# dependencies are listed as requirements instead).
DROPPED = {"pulp": "16 MB of CBC binaries; without it Snakemake warns and uses its greedy scheduler "
                   "(snakemake/api.py: 'Falling back to greedy scheduler')"}
# The oldest glibc a carried binary wheel may need: torch 2.11's own wheels need manylinux_2_28.
MAX_GLIBC = (2, 28)
XZ_PRESET = 6  # measured on English ids: 9 + extreme saves 3 % at twice the time; uint16 ids save 2.5 %


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------------------------- what to carry
def campaign_languages(config: dict[str, Any]) -> list[str]:
    """The languages the config's enabled experiments train (what ``results/table2.csv`` needs, via scores.csv)."""
    from strae import plan

    languages = {run.language for run in plan.model_runs(config)}
    for name in config.get("baselines") or {}:
        languages.update(run.language for run in plan.baseline_runs(config, name))
    return sorted(languages)


def text_readers(config: dict[str, Any], languages: list[str]) -> list[str]:
    """Enabled baselines that train on a carried language's corpus text (which a stand-in would leave empty)."""
    return sorted(f"baselines.{name}" for name, spec in (config.get("baselines") or {}).items()
                  if spec.get("enabled") and set(spec.get("languages") or []) & set(languages))


def resource_files(lang: str, resources: Path, with_text: bool) -> tuple[list[Path], list[Path]]:
    """(files carried, corpus texts replaced by stand-ins) of one language, all under ``resources``."""
    carried = [paths.tokenized_file(lang, split, suffix, resources)
               for split in paths.SPLITS for suffix in paths.TOKENIZED_SUFFIXES]
    model = paths.tokenizer_model(lang, resources)
    carried += [model, model.with_suffix(".json"), paths.corpus_meta(lang, resources)]
    texts = [paths.corpus_file(lang, split, resources) for split in paths.SPLITS]
    if with_text:
        return carried + texts, []
    return carried, texts


def eval_registry_names(config: dict[str, Any], languages: list[str], variants: list[str] | None) -> list[str]:
    """Registry names of every file the languages' evaluation task lists read (pooled tasks: their subsets too),
    for ``variants``, or (None) for the variants the workflow scores per language: with
    :func:`strae.data.fetch.training_dev_sets` (the bundle adds those), what the box's `fetch_language_files` job
    (part evaluation) asks for, so it finds every one."""
    from strae.data.fetch import scored_variants
    from strae.evaluate.tasks import language_task_files

    names: set[str] = set()
    for lang in languages:
        chosen = variants if variants is not None else scored_variants(config, lang)
        for task, spec in language_task_files(config, lang, chosen):
            if isinstance(spec, dict):  # an inline set given by url or path
                if "url" in spec or Path(spec["path"]).is_absolute():
                    raise SystemExit(f"languages.{lang}.eval_sets.{task.name}: only a registry entry or a path "
                                     "inside the repository travels to the box; give it as one of those")
                continue  # a path in the checkout: it travels with the tracked files
            names.add(spec)  # a registry name (catalogue task, pooled task's subset, or inline registry set)
    return sorted(names)


def _missing_resources_error(missing: list[Path], resources: Path) -> SystemExit:
    listed = "\n  ".join(str(p) for p in missing)
    target = paths.tokenized_file("LANG", "train", "ids.npy", resources)
    return SystemExit(f"not prepared here (bundle carries prepared resources):\n  {listed}\n"
                      f"prepare them first, e.g. `snakemake --cores 2 {target}`")


# ----------------------------------------------------------------------------------------------- writing
def _store(source: Path, stored: Path) -> str:
    """Write ``source`` as ``stored`` + ``.xz`` (or as is when xz gains little); returns the mode used."""
    data = source.read_bytes()
    packed = lzma.compress(data, preset=XZ_PRESET)
    mode, payload = ("xz", packed) if len(packed) < 0.9 * len(data) else ("copy", data)
    target = stored.with_name(stored.name + ".xz") if mode == "xz" else stored
    with atomic_path(target) as tmp:
        tmp.write_bytes(payload)
    return mode


def _entry(source: Path, stored_rel: str, out: Path, **fields: Any) -> dict[str, Any]:
    mode = _store(source, out / stored_rel)
    stat = source.stat()
    return {**fields, "stored": stored_rel + (".xz" if mode == "xz" else ""), "mode": mode,
            "sha256": sha256_file(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def bundle_resources(languages: list[str], resources: Path, out: Path, with_text: bool) -> dict[str, list]:
    carried, standins = [], []
    for lang in languages:
        files, texts = resource_files(lang, resources, with_text)
        missing = [p for p in files + texts if not p.exists()]
        if missing:
            raise _missing_resources_error(missing, resources)
        carried += files
        standins += texts
    entries = []
    for path in carried:
        rel = path.relative_to(resources).as_posix()
        print(f"  resources/{rel}", flush=True)
        entries.append(_entry(path, f"resources/{rel}", out, path=rel))
    stand = [{"path": p.relative_to(resources).as_posix(), "size": p.stat().st_size,
              "mtime_ns": p.stat().st_mtime_ns} for p in standins]
    return {"resources": entries, "standins": stand}


def _eval_source(entry, resources: Path, mirror: Path | None) -> Path:
    """The local copy of a registry file: resources/data (already fetched here) first, then the mirror."""
    for candidate in (paths.data_file(entry.path, resources), mirror / entry.path if mirror else None):
        if candidate is not None and candidate.exists():
            kind, expected = entry.checksum
            got = entry.file_checksum(candidate)
            if got != expected:
                raise SystemExit(f"{candidate}: {kind} {got} is not the registry's ({entry.name}: {expected})")
            return candidate
    raise SystemExit(f"{entry.name} ({entry.path}): in neither {paths.data_file(entry.path, resources)} nor the "
                     f"mirror {mirror}; run `strae fetch {entry.name}` here first or pass --mirror")


def bundle_eval(names: list[str], registry_path: str, resources: Path, mirror: Path | None, out: Path) -> list:
    from strae.data.registry import load_registry

    registry = load_registry(registry_path)
    entries = []
    for name in names:
        entry = registry[name]
        entries.append(_entry(_eval_source(entry, resources, mirror), f"mirror/{entry.path}", out,
                              name=name, path=entry.path))
    return entries


# ------------------------------------------------------------------------------------------------ wheels
def pinned_requirements(packages: list[str], pyproject: Path) -> list[str]:
    """``name==version`` of each package from pyproject.toml's dependencies (the project's one source of pins)."""
    import tomllib

    pins = {}
    for spec in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]:
        name = re.split(r"[<>=!~ \[;]", spec, maxsplit=1)[0]
        pins[_canonical(name)] = spec.split(";")[0].strip()
    unknown = [p for p in packages if _canonical(p) not in pins]
    if unknown:
        raise SystemExit(f"{pyproject}: no pinned dependency {', '.join(unknown)} (--extra-package names one)")
    return [pins[_canonical(p)] for p in packages]


def _python_version(python: str) -> str:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"--python {python}: cannot run it ({error}); give an interpreter of the box's Python "
                         f"{BOX_PYTHON} (it resolves and builds the wheels), or --no-wheels") from None
    return out.stdout.strip()


def _pip(python: str, *args: str) -> None:
    try:
        subprocess.run([python, "-m", "pip", *args], check=True)
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"{python} -m pip {args[0]}: failed (exit {error.returncode}, pip's message above)") from None


def resolve(python: str, requirements: list[str], scratch: Path) -> list[dict[str, Any]]:
    """pip's resolution of ``requirements`` for ``python`` (its --report ``install`` items), nothing installed."""
    report = scratch / "report.json"
    _pip(python, "install", "--quiet", "--dry-run", "--ignore-installed", "--report", str(report), *requirements)
    return json.loads(report.read_text(encoding="utf-8"))["install"]


def _glibc_ok(filename: str) -> bool:
    """A wheel that runs on the box: pure, or manylinux x86_64 needing at most MAX_GLIBC."""
    platforms = filename[:-len(".whl")].split("-")[-1].split(".")
    for tag in platforms:
        if tag == "any":
            return True
        legacy = {"manylinux1_x86_64": (2, 5), "manylinux2010_x86_64": (2, 12), "manylinux2014_x86_64": (2, 17)}
        match = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
        glibc = legacy.get(tag) or (tuple(int(g) for g in match.groups()) if match else None)
        if glibc is not None and glibc <= MAX_GLIBC:
            return True
    return False


def _requires(item: dict[str, Any]) -> list[str]:
    """An install item's unconditional requirements (extras' requirements left out)."""
    return [spec for spec in item["metadata"].get("requires_dist") or [] if "extra ==" not in spec]


def _dependency_name(spec: str) -> str:
    return _canonical(re.split(r"[<>=!~ \[;(]", spec, maxsplit=1)[0])


def bundle_wheels(python: str, requirements: list[str], out: Path) -> dict[str, Any]:
    version = _python_version(python)
    if version != BOX_PYTHON:
        raise SystemExit(f"--python {python} is Python {version}; the box runs {BOX_PYTHON} (wheels are "
                         "version-specific)")
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    skip = {_canonical(p) for p in (*BOX_PACKAGES, *DROPPED)}
    with tempfile.TemporaryDirectory(prefix="strae-bundle-") as scratch:
        items = resolve(python, requirements, Path(scratch))
    keep = [item for item in items if _canonical(item["metadata"]["name"]) not in skip]
    pins = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in keep]
    _pip(python, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), *pins)
    files = sorted(p.name for p in wheels.glob("*.whl"))
    foreign = [name for name in files if not _glibc_ok(name)]
    if foreign:
        raise SystemExit(f"wheels the box cannot install (glibc > {MAX_GLIBC}): {', '.join(foreign)}")
    return _install_plan(items, requirements, wheels, files, version)


def _install_plan(items: list[dict], requirements: list[str], wheels: Path, files: list[str],
                  version: str) -> dict[str, Any]:
    """requirements.txt (resolved on the box against its own packages) and the --no-deps list: a package with a
    dropped dependency is installed alone, its other dependencies go to requirements.txt."""
    dropped = {_canonical(name) for name in DROPPED}
    top = {_dependency_name(spec) for spec in requirements}
    no_deps, extra = [], []
    for item in items:
        needs = _requires(item)
        if _canonical(item["metadata"]["name"]) in top and any(_dependency_name(s) in dropped for s in needs):
            no_deps.append(f"{item['metadata']['name']}=={item['metadata']['version']}")
            extra += [s for s in needs if _dependency_name(s) not in dropped]
    held_back = {_dependency_name(spec) for spec in no_deps}
    lines = [spec for spec in requirements if _dependency_name(spec) not in held_back] + extra
    (wheels / "requirements.txt").write_text("\n".join(dict.fromkeys(lines)) + "\n", encoding="utf-8")
    (wheels / "no-deps.txt").write_text("\n".join(no_deps) + "\n", encoding="utf-8")
    return {"python": version, "requirements": requirements, "no_deps": no_deps, "dropped": DROPPED,
            "box_packages": list(BOX_PACKAGES), "files": files}


# ------------------------------------------------------------------------------------------------- sizes
def checkout_root(folder: Path) -> Path:
    """The git checkout holding ``folder`` (a bundle written to results/bundle travels with the whole checkout,
    not with results/), or ``folder`` itself outside one."""
    try:
        top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                             check=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return folder
    return Path(top) if top else folder


def checkout_bytes(root: Path) -> int | None:
    """Bytes of the files of the git checkout at ``root`` that travel to the box beside the bundle (tracked, and
    untracked but not ignored); None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = (root / name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name)
    return sum(path.stat().st_size for path in files if path.is_file())


def default_max_mib(root: Path) -> tuple[float, str]:
    """(the bundle's size limit, why): the box's 64 MiB minus what the checkout at ``root`` carries beside it, with
    0.5 MiB to spare for files committed after the bundle is written."""
    checkout = checkout_bytes(root)
    if checkout is None:
        return DEFAULT_MAX_MIB, f"{root} is not a git checkout: {DEFAULT_MAX_MIB:.0f} MiB"
    limit = BOX_CARRY_MIB - checkout / 2**20 - 0.5
    return limit, f"{BOX_CARRY_MIB:.0f} MiB to the box minus the checkout's {_mib(checkout)} and 0.5 to spare"


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def size_report(out: Path) -> dict[str, int]:
    return {part.name: folder_size(part) for part in sorted(out.iterdir()) if part.is_dir()}


def _prepare_out(out: Path) -> None:
    """Start from an empty folder; refuse to clear one that is not a bundle."""
    marker = out / ".strae-bundle"
    if out.exists() and any(out.iterdir()) and not marker.exists():
        raise SystemExit(f"{out}: exists and is not a strae bundle; give another --out or remove it")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    marker.write_text("written by `strae bundle`; cleared by the next run\n", encoding="utf-8")


def write_bundle(args: argparse.Namespace) -> int:
    from strae.data.registry import load_config

    config = load_config(args.config)
    languages = args.langs.split(",") if args.langs else campaign_languages(config)
    unknown = [lang for lang in languages if lang not in (config.get("languages") or {})]
    if unknown:
        raise SystemExit(f"--langs {args.langs}: no block languages.{unknown[0]} in {args.config}")
    # default: per language, the variants the workflow scores (the evaluation fetch job's own list)
    variants = args.variants.split(",") if args.variants else None
    resources = Path(args.resources_dir) if args.resources_dir else paths.resources_dir(config)
    mirror = Path(args.mirror) if args.mirror else None
    out = Path(args.out)
    readers = text_readers(config, languages)
    if readers and not args.with_corpus_text:
        raise SystemExit(f"{args.config}: {', '.join(readers)} enabled; they train on the corpus text, which the "
                         "bundle replaces by empty stand-ins: pass --with-corpus-text")
    from strae.data.fetch import scored_variants, training_dev_sets

    names = sorted(set(eval_registry_names(config, languages, variants)) | set(training_dev_sets(config, languages)))
    _prepare_out(out)

    scored = sorted({v for lang in languages for v in scored_variants(config, lang) or []})
    print(f"strae bundle: languages {', '.join(languages)}; evaluation ({', '.join(variants or scored)}): "
          f"{len(names)} files")
    manifest: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                "git_sha": git_sha(), "config": str(args.config), "languages": languages,
                                "variants": variants or scored, "resources_dir": str(resources)}
    manifest.update(bundle_resources(languages, resources, out, args.with_corpus_text))
    registry = (config.get("data") or {}).get("registry") or "config/registry.yaml"
    manifest["eval"] = bundle_eval(names, registry, resources, mirror, out)
    if not args.no_wheels:
        packages = [*CAMPAIGN_PACKAGES, *args.extra_package]
        print(f"strae bundle: wheels for {', '.join(packages)} (Python {BOX_PYTHON}, via {args.python})", flush=True)
        manifest["wheels"] = bundle_wheels(args.python, pinned_requirements(packages, Path(args.pyproject)), out)
    if args.max_mib is None:
        max_mib, why = default_max_mib(checkout_root(out.resolve().parent))
    else:
        max_mib, why = args.max_mib, "--max-mib"
    return _finish(out, manifest, max_mib, why)


def env_script(bundle_dir: Path | None = None, venv: Path | None = None) -> str:
    """``env.sh``, the environment of the campaign's commands on the box: the offline venv activated, the bundle's
    mirror and offline Hugging Face settings exported. ``strae bundle`` writes it with paths found relative to the
    file (the documented layout: the bundle in the checkout's root, the venv at .venv-offline beside it), so a box
    whose bundle folder is copied over again after unpacking (a lending tool's `carry` replaces the whole folder on
    every call) still has a working one; ``strae bundle --unpack`` rewrites it with the box's own paths."""
    if bundle_dir is not None and venv is not None:
        return (f"# written by `strae bundle --unpack` (tools/offline_unpack.sh): source it before running strae / "
                f"snakemake on this box\nsource \"{venv}/bin/activate\"\n"
                f"export STRAE_DATA_MIRROR=\"{bundle_dir}/mirror\" {_OFFLINE_EXPORTS}\n")
    return f"""\
# written by `strae bundle`: on the box, after `bash tools/offline_unpack.sh`, source it before strae / snakemake
_strae_bundle=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
_strae_venv=${{STRAE_OFFLINE_VENV:-$(dirname "$_strae_bundle")/.venv-offline}}
if [ -f "$_strae_venv/bin/activate" ]; then
    source "$_strae_venv/bin/activate"
    export STRAE_DATA_MIRROR="$_strae_bundle/mirror" {_OFFLINE_EXPORTS}
    unset _strae_bundle _strae_venv
else
    echo "$_strae_bundle/env.sh: no venv at $_strae_venv: run \\`bash tools/offline_unpack.sh\\` first" >&2
    unset _strae_bundle _strae_venv
    return 1 2>/dev/null || exit 1
fi
"""


_OFFLINE_EXPORTS = "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1"


def _finish(out: Path, manifest: dict[str, Any], max_mib: float, why: str) -> int:
    (out / ENV_SH).write_text(env_script(), encoding="utf-8")
    sizes = size_report(out)
    total = folder_size(out)
    for part, size in sizes.items():
        print(f"  {part + '/':<12} {_mib(size):>10}")
    print(f"  {'total':<12} {_mib(total):>10}  (limit {max_mib:.1f} MiB: {why})")
    if total > max_mib * 2**20:
        raise SystemExit(f"{out}: {_mib(total)} is over the {max_mib:.1f} MiB limit ({why}); carry fewer "
                         "languages (--langs) or packages. No manifest written: the folder cannot be unpacked.")
    manifest["sizes"] = {**sizes, "total": total}
    write_json(out / MANIFEST, manifest)  # last: a folder with a manifest is complete
    print(f"wrote {out}/ ({_mib(total)}); on the box: bash tools/offline_unpack.sh {out}")
    return 0


# ---------------------------------------------------------------------------------------------- unpacking
def _restore(source: Path, mode: str, dest: Path, sha256: str, mtime_ns: int | None) -> str:
    """Place ``dest`` from a stored file unless it is already there; returns what was done."""
    if dest.exists():
        if sha256_file(dest) != sha256:
            raise SystemExit(f"{dest}: exists with other content than the bundle's (sha256 {sha256}); "
                             "move it away to restore the bundle's copy")
        done = "present"
    else:
        with atomic_path(dest) as tmp:
            tmp.write_bytes(lzma.decompress(source.read_bytes()) if mode == "xz" else source.read_bytes())
            if sha256_file(tmp) != sha256:
                raise SystemExit(f"{source}: decompresses to other bytes than recorded (sha256 {sha256}); "
                                 "the bundle is damaged, write it again")
        done = "restored"
    if mtime_ns is not None:
        os.utime(dest, ns=(mtime_ns, mtime_ns))
    return done


def _stand_in(dest: Path, mtime_ns: int) -> str:
    """An empty corpus text dated like the original, unless a real one is there."""
    if dest.exists() and dest.stat().st_size > 0:
        return "real file kept"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.touch()
    os.utime(dest, ns=(mtime_ns, mtime_ns))
    return "stand-in"


def unpack(bundle: Path, resources: Path, registry: str) -> dict[str, int]:
    """Restore a bundle's resources and evaluation files (idempotent); returns counts per action."""
    manifest_path = bundle / MANIFEST
    if not manifest_path.exists():
        raise SystemExit(f"{manifest_path}: missing; the bundle is incomplete (write it again with `strae bundle`)")
    manifest = read_json(manifest_path)  # a manifest cut short in transfer is named, with where it breaks
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if version != SCHEMA_VERSION:
        raise SystemExit(f"{manifest_path}: schema_version {version}, this strae reads "
                         f"{SCHEMA_VERSION}; write the bundle with the same checkout")
    lacking = [key for key in ("resources", "standins", "eval") if not isinstance(manifest.get(key), list)]
    if lacking:
        raise SystemExit(f"{manifest_path}: no {', '.join(lacking)} list; the bundle is damaged (write it again with "
                         "`strae bundle`)")
    counts: dict[str, int] = {}
    for entry in manifest["resources"]:
        done = _restore(bundle / entry["stored"], entry["mode"], resources / entry["path"], entry["sha256"],
                        entry["mtime_ns"])
        counts[done] = counts.get(done, 0) + 1
    for entry in manifest["standins"]:
        done = _stand_in(resources / entry["path"], entry["mtime_ns"])
        counts[done] = counts.get(done, 0) + 1
    counts.update(_unpack_eval(bundle, manifest["eval"], resources, registry))
    return counts


def _unpack_eval(bundle: Path, entries: list[dict[str, Any]], resources: Path, registry: str) -> dict[str, int]:
    """Decompress the mirror copy, then place each file under resources/data through the fetch layer."""
    from strae.data.fetch import fetch

    mirror = bundle / "mirror"
    for entry in entries:
        _restore(bundle / entry["stored"], entry["mode"], mirror / entry["path"], entry["sha256"], None)
        fetch(entry["name"], resources_dir=resources, mirror=mirror, registry=registry)
    return {"evaluation files": len(entries)}


def unpack_main(args: argparse.Namespace) -> int:
    from strae.data.registry import load_config

    config = load_config(args.config)
    resources = Path(args.resources_dir) if args.resources_dir else paths.resources_dir(config)
    registry = (config.get("data") or {}).get("registry") or "config/registry.yaml"
    counts = unpack(Path(args.unpack), resources, registry)
    print(f"unpacked {args.unpack} into {resources}/: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
    if sys.prefix != sys.base_prefix:  # run from the offline venv (tools/offline_unpack.sh): its own paths
        (Path(args.unpack) / ENV_SH).write_text(env_script(Path(args.unpack).absolute(), Path(sys.prefix)),
                                                encoding="utf-8")
    return 0


# ---------------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strae bundle", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--resources-dir", help="default: data.resources_dir of --config")
    parser.add_argument("--unpack", metavar="DIR", nargs="?", const=DEFAULT_OUT,
                        help="on the box: restore the bundle DIR (default bundle) into resources/")
    parser.add_argument("--langs", help="comma-separated; default: the languages the enabled experiments train")
    parser.add_argument("--variants", help="evaluation variants (default: per language the variants the workflow "
                                           "scores, scale.eval_variants plus the multi-view paper's sts_variants)")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--mirror", default=os.environ.get("STRAE_DATA_MIRROR") or "../shared/data",
                        help="data mirror for evaluation files not yet under resources/data (default "
                             "$STRAE_DATA_MIRROR, else ../shared/data)")
    parser.add_argument("--with-corpus-text", action="store_true",
                        help="carry the prepared corpus text too (default: empty stand-ins on the box)")
    parser.add_argument("--no-wheels", action="store_true", help="leave the Python packages out")
    parser.add_argument("--python", default=f"python{BOX_PYTHON}",
                        help=f"a Python {BOX_PYTHON} with pip ON THIS MACHINE: resolves and builds the wheels for the "
                             "box (on the box, tools/offline_unpack.sh finds its own; leave PYTHON unset there)")
    parser.add_argument("--extra-package", action="append", default=[],
                        help="another pyproject.toml dependency to carry (e.g. matplotlib for figures)")
    parser.add_argument("--pyproject", default=str(project_root() / "pyproject.toml"), help="where the pins are")
    parser.add_argument("--max-mib", type=float, default=None,
                        help="the bundle's size limit (default: 64 MiB minus what the git checkout around --out "
                             "carries to the box beside it)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.unpack:
        return unpack_main(args)
    return write_bundle(args)


if __name__ == "__main__":
    sys.exit(main())
