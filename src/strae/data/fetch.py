"""Place registered data files under ``resources/data/``: resources (verified) -> mirror -> upstream.

Every placement is checksum-verified against the registry, and every write goes to a temp file that is only
renamed into place after the checksum matched, so an interrupted or corrupt fetch never leaves a file that
looks complete. ``strae fetch NAME... | --all | --kind eval``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import logging
import os
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strae import paths
from strae.data import upstream
from strae.data.registry import DEFAULT_REGISTRY, KINDS, RegistryEntry, load_registry
from strae.io import atomic_path, sha256_file

log = logging.getLogger(__name__)

MIRROR_ENV = "STRAE_DATA_MIRROR"
DOWNLOAD_TIMEOUT_S = 30
_CHUNK = 1 << 20


class FetchError(SystemExit):
    """A file could not be placed; the message names the file and what to do."""


class ChecksumError(FetchError):
    pass


def default_mirror() -> Path | None:
    value = os.environ.get(MIRROR_ENV)
    return Path(value) if value else None


def _copy_hashing(src_handle, dst_path: Path) -> str:
    digest = hashlib.sha256()
    with open(dst_path, "wb") as out:
        for block in iter(lambda: src_handle.read(_CHUNK), b""):
            digest.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def _place_verified(dest: Path, expected: str | RegistryEntry, what: str, writer) -> Path:
    """Run ``writer(tmp_path) -> sha256`` into a temp file beside ``dest``; rename only if the file has the expected
    sha256 (a registry entry's: its sha256, or its git blob id where the registry knows only that)."""
    entry = expected if isinstance(expected, RegistryEntry) else None
    kind, expected = entry.checksum if entry else ("sha256", expected)
    with atomic_path(dest) as tmp:
        got = writer(tmp)
        if kind != "sha256":
            got = entry.file_checksum(tmp)
        if got != expected:
            raise ChecksumError(
                f"{what}: {kind} {got} does not match the registry ({expected}); the source is corrupt or a "
                f"different version. Nothing was written to {dest}. Re-sync the mirror or fix config/registry.yaml."
            )
    return dest


def _download(url: str, tmp: Path) -> str:
    request = urllib.request.Request(url, headers={"User-Agent": "strae-fetch"})
    with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
        return _copy_hashing(response, tmp)


def _write_hf_csv(source: dict[str, Any], tmp: Path) -> str:
    """Rebuild an eval CSV from an HF `datasets` id in the mirror's format (header, RFC-4180, LF)."""
    import datasets  # heavy import; only here

    ds = datasets.load_dataset(
        source["hf_dataset"], source.get("config"), split=source.get("split"), revision=source.get("revision")
    )
    columns: dict[str, str] = source["columns"]
    with open(tmp, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(list(columns))
        for row in ds:
            writer.writerow([row[col] for col in columns.values()])
    return sha256_file(tmp)


def _download_bytes(url: str) -> bytes:
    """One upstream file's bytes (through ``_download``, so every download goes the same way)."""
    with tempfile.TemporaryDirectory(prefix="strae-fetch-") as scratch:
        target = Path(scratch) / "download"
        _download(url, target)
        return target.read_bytes()


def _write_derived(source: dict[str, Any], tmp: Path) -> str:
    """Download every upstream file of ``source`` and apply its ``derive`` recipe into ``tmp``; returns sha256."""
    data = upstream.derive(source, _download_bytes)
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return hashlib.sha256(data).hexdigest()


def _fetch_upstream(entry: RegistryEntry, dest: Path, mirror: Path | None) -> Path:
    source = entry.source
    where = f"not in mirror {mirror}" if mirror else f"no mirror configured (${MIRROR_ENV} unset)"
    hint = f"put the file at {dest} or at <mirror>/{entry.path} and set {MIRROR_ENV}"
    errors: list[str] = []
    url = source.get("url")
    if url and source.get("derive"):
        # the pinned upstream file(s) + the recorded derivation rebuild the mirror's bytes (sha256-checked)
        recipe = source["derive"].get("recipe")
        try:
            log.info("fetch %s: rebuilding from upstream (%s, %d file(s))", entry.name, recipe,
                     len(upstream.upstream_urls(source)))
            return _place_verified(dest, entry, f"{entry.name} rebuilt from {url} (derive: {recipe})",
                                   lambda tmp: _write_derived(source, tmp))
        except ChecksumError:
            raise
        except upstream.DeriveError as exc:
            errors.append(f"derive {recipe} from {url}: {exc}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            errors.append(f"download {url}: {exc}")
    elif url and not source.get("transform"):
        try:
            return _place_verified(dest, entry, f"{entry.name} from {url}", lambda tmp: _download(url, tmp))
        except ChecksumError:
            raise
        except (urllib.error.URLError, OSError, ValueError) as exc:
            errors.append(f"download {url}: {exc}")
    elif url:
        # The mirror file was built from these upstream bytes by a conversion that is not recorded as a recipe
        # (see the mirror's PROVENANCE); downloading them cannot reproduce the registered checksum.
        errors.append(f"upstream {url} needs a conversion ({source['transform']}) that the registry records no "
                      f"derive recipe for")
    # an HF datasets copy is the fallback: the pinned file at a commit (above) is the reference
    if source.get("hf_dataset") and source.get("columns"):
        try:
            return _place_verified(dest, entry, f"{entry.name} from HF {source['hf_dataset']}",
                                   lambda tmp: _write_hf_csv(source, tmp))
        except ChecksumError:
            raise
        except Exception as exc:  # offline mode, missing dataset, network: report all attempts at once
            errors.append(f"HF dataset {source['hf_dataset']}: {type(exc).__name__}: {exc}")
    detail = "; ".join(errors) or "the registry entry names no upstream source"
    raise FetchError(f"{entry.name} ({entry.path}): not in resources/, {where}; {detail}. To fix: {hint}.")


def fetch_entry(entry: RegistryEntry, resources_dir: str | Path = paths.DEFAULT_RESOURCES,
                mirror: str | Path | None = None) -> Path:
    dest = paths.data_file(entry.path, resources_dir)
    if dest.exists():
        kind, expected = entry.checksum
        got = entry.file_checksum(dest)
        if got == expected:
            return dest
        raise ChecksumError(
            f"{dest}: {kind} {got} does not match the registry entry {entry.name} ({expected}); "
            f"delete the file and run `strae fetch {entry.name}` again"
        )
    mirror = Path(mirror) if mirror is not None else default_mirror()
    if mirror is not None:
        mirror_file = mirror / entry.path
        if mirror_file.exists():
            def copy(tmp: Path) -> str:
                with open(mirror_file, "rb") as handle:
                    return _copy_hashing(handle, tmp)

            log.info("fetch %s: copying from mirror %s", entry.name, mirror_file)
            return _place_verified(dest, entry, f"{entry.name} (mirror copy {mirror_file})", copy)
        log.info("fetch %s: not in mirror %s; trying upstream", entry.name, mirror)
    return _fetch_upstream(entry, dest, mirror)


def fetch(
    name: str,
    resources_dir: str | Path = paths.DEFAULT_RESOURCES,
    mirror: str | Path | None = None,
    registry: dict[str, RegistryEntry] | str | Path | None = None,
) -> Path:
    """Place ``resources/data/<path>`` for registry NAME (resources -> mirror -> upstream) and return it."""
    if not isinstance(registry, dict):
        registry = load_registry(registry or DEFAULT_REGISTRY)
    if name not in registry:
        close = [n for n in registry if name.split("/")[-1] in n][:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise FetchError(f"{name}: unknown data name; NAME is a key of config/registry.yaml "
                         f"(mirror path without extension).{hint}")
    return fetch_entry(registry[name], resources_dir=resources_dir, mirror=mirror)


def fetch_source(
    spec: dict[str, Any],
    resources_dir: str | Path = paths.DEFAULT_RESOURCES,
    mirror: str | Path | None = None,
    registry: dict[str, RegistryEntry] | str | Path | None = None,
) -> Path:
    """Resolve one language-block source (a corpus entry or an inline eval set's file) to a local file.

    ``{registry: NAME}`` | ``{path: local file, sha256?}`` | ``{url: ..., sha256: ...}`` |
    ``{hf_dataset: id, config?, split?, revision?, text_field?: "text", sha256?}``.
    """
    if not isinstance(spec, dict):
        raise FetchError(f"language-block source {spec!r}: expected a mapping with one of registry/path/url/hf_dataset")
    expected = spec.get("sha256")
    if "registry" in spec:
        return fetch(spec["registry"], resources_dir=resources_dir, mirror=mirror, registry=registry)
    if "path" in spec:
        path = Path(spec["path"])
        if not path.exists():
            raise FetchError(f"language-block source path {path}: file not found; fix the path in the language block "
                             "(corpus or eval_sets)")
        if expected and sha256_file(path) != expected.lower():
            raise ChecksumError(f"{path}: sha256 differs from the language block's sha256; fix one of them")
        return path
    if "url" in spec:
        if not expected:
            raise FetchError(f"language-block source url {spec['url']}: add sha256 (downloads are always verified)")
        name = spec["url"].rstrip("/").rsplit("/", 1)[-1] or "download"
        dest = paths.data_file(Path("external") / f"{expected[:16]}-{name}", resources_dir)
        if dest.exists() and sha256_file(dest) == expected.lower():
            return dest
        try:
            return _place_verified(dest, expected.lower(), spec["url"], lambda tmp: _download(spec["url"], tmp))
        except ChecksumError:
            raise
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise FetchError(
                f"{spec['url']}: download failed ({exc}); download it yourself and use {{path: FILE}}") from exc
    if "hf_dataset" in spec:
        import datasets

        field_name = spec.get("text_field", "text")
        safe = "-".join(str(spec.get(k) or "default") for k in ("config", "split", "revision"))
        dest = paths.data_file(Path("hf") / spec["hf_dataset"].replace("/", "__") / f"{safe}.txt", resources_dir)
        # Trust on first use when the block gives no sha256: the first fetch's checksum is kept beside the text,
        # and a later use of a changed file is an error (delete both files to fetch again); and the hub commit the
        # fetch read, for the record and to pin (`revision:`)
        first_use = dest.with_name(dest.name + ".sha256")
        commit_file = hf_commit_file(dest)
        if dest.exists():
            got = sha256_file(dest)
            want = expected.lower() if expected else (first_use.read_text().strip() if first_use.exists() else got)
            if got != want:
                against = "the language block's sha256" if expected else first_use
                raise ChecksumError(f"{dest}: sha256 {got} differs from {against} ({want}); the fetched text "
                                    f"changed. Delete {dest} and {first_use} to fetch it again")
            return dest
        # the hub's commit for the asked revision first, and the text read at exactly that commit: asked after
        # the load, a moved branch or a stale datasets cache would record a commit the text was not read at
        commit = hf_dataset_commit(spec["hf_dataset"], spec.get("revision"))
        try:
            ds = datasets.load_dataset(spec["hf_dataset"], spec.get("config"), split=spec.get("split") or "train",
                                       revision=commit or spec.get("revision"))
        except Exception as exc:
            raise FetchError(f"HF dataset {spec['hf_dataset']}: could not load ({type(exc).__name__}: {exc}); "
                             f"fetch it on a machine with network access and copy resources/ over") from exc
        with atomic_path(dest) as tmp:
            with open(tmp, "w", encoding="utf-8") as out:
                for row in ds:
                    # raw, one row then a newline, as the reference writes its corpus (B:scripts/get_data.py): a
                    # line break inside a row makes two lines there (its readlines), and so here
                    out.write(str(row[field_name]) + "\n")
            got = sha256_file(tmp)
            if expected and got != expected.lower():
                raise ChecksumError(f"HF dataset {spec['hf_dataset']}: text differs from the language block's sha256")
            with atomic_path(first_use) as tmp_sha:
                tmp_sha.write_text(got + "\n")
            with atomic_path(commit_file) as tmp_commit:
                tmp_commit.write_text((commit or "unknown") + "\n")
            if commit and not spec.get("revision"):
                log.info("fetch %s: read at hub commit %s; `revision: %s` in the source pins it", spec["hf_dataset"],
                         commit, commit)
        return dest
    raise FetchError(f"language-block source {spec!r}: needs one of registry, path, url or hf_dataset")


def hf_commit_file(dest: Path) -> Path:
    """Beside a fetched HF dataset's text: the hub commit it was read at (``unknown`` where it could not be asked)."""
    return dest.with_name(dest.name + ".commit")


#: seconds to wait for the hub's answer (huggingface_hub waits forever by default: a stalled connection would hang
#: prepare-corpus)
HF_HUB_TIMEOUT_S = 15


def hf_dataset_commit(dataset: str, revision: str | None) -> str | None:
    """The commit the hub resolves ``revision`` (None: the default branch) of ``dataset`` to, so a run's corpus names
    the exact version it read even when the language block pins none; None where the hub is not asked (a local
    dataset; HF_HUB_OFFLINE or HF_DATASETS_OFFLINE: the text then comes from a cache of unknown commit) or does not
    answer."""
    import datasets

    if Path(dataset).exists() or datasets.config.HF_HUB_OFFLINE or getattr(datasets.config, "HF_DATASETS_OFFLINE",
                                                                            False):
        return None
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(dataset, revision=revision, timeout=HF_HUB_TIMEOUT_S).sha or None
    except Exception as error:  # any failure only leaves the commit unrecorded; the text is checksummed either way
        log.info("fetch %s: hub commit not known (%s: %s)", dataset, type(error).__name__, error)
        return None


def fetch_url(url: str, dest: str | Path, sha256: str | None = None, mirror_file: str | Path | None = None,
              what: str | None = None) -> Path:
    """Place ``url`` at ``dest``: already there (verified) -> ``mirror_file`` (copied, verified) -> download.

    With ``sha256`` every placement is verified against it. Without one (a file whose checksum cannot be known
    before its first fetch, e.g. a BPEmb model named by language and size), the first placement's checksum is kept
    in ``dest.sha256`` and every later use is verified against it (trust on first use; delete both to fetch again).
    """
    dest = Path(dest)
    what = what or url
    first_use = dest.with_name(dest.name + ".sha256")
    expected = sha256.lower() if sha256 else (first_use.read_text().strip() if first_use.exists() else None)
    if dest.exists():
        got = sha256_file(dest)
        if expected is None or got == expected:
            if not sha256 and not first_use.exists():
                with atomic_path(first_use) as tmp:
                    tmp.write_text(got + "\n")
            return dest
        raise ChecksumError(f"{dest}: sha256 {got} differs from {'the config' if sha256 else first_use} ({expected}); "
                            f"delete {dest} to fetch {what} again")

    def place(writer) -> Path:
        if expected is not None:
            return _place_verified(dest, expected, what, writer)
        with atomic_path(dest) as tmp:
            got = writer(tmp)
            with atomic_path(first_use) as tmp_sha:
                tmp_sha.write_text(got + "\n")
        log.info("%s: no sha256 given; recorded %s in %s (trust on first use)", what, got, first_use)
        return dest

    if mirror_file is not None and Path(mirror_file).exists():
        def copy(tmp: Path) -> str:
            with open(mirror_file, "rb") as handle:
                return _copy_hashing(handle, tmp)

        return place(copy)
    try:
        return place(lambda tmp: _download(url, tmp))
    except ChecksumError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"{what}: not at {dest}{f' or {mirror_file}' if mirror_file else ''}, and downloading {url} "
                         f"failed ({exc}); fetch it on a machine with network access and copy resources/ over") from exc


def fetch_paper_corpus(lang: str, config_path: str | Path,
                       resources_dir: str | Path = paths.DEFAULT_RESOURCES,
                       mirror: str | Path | None = None,
                       registry: dict[str, RegistryEntry] | None = None) -> list[Path]:
    """Place every source of ``languages.<lang>.paper_source`` (train and dev) under resources/; return the files."""
    from strae.data.registry import language_block, load_config

    block = language_block(load_config(config_path), lang, config_path)
    paper = block.get("paper_source")
    if not paper:
        raise FetchError(f"{config_path}: languages.{lang}.paper_source is not defined; nothing to fetch")
    specs = [*(paper.get("corpus") or []), *(paper.get("dev_corpus") or [])]
    return [fetch_source(spec, resources_dir=resources_dir, mirror=mirror, registry=registry) for spec in specs]


#: SimCSE's checkpoint-selection dev set (config/registry.yaml: STS-B dev, sent1,sent2,score; SentEval's
#: sts-dev.csv): read by training itself, so it is placed with the language's evaluation sets
SIMCSE_DEV_SET = "eval/stsb/stsb_dev"


def training_dev_sets(config: dict[str, Any], languages: Iterable[str]) -> list[str]:
    """Registry names that training itself reads: SimCSE's STS-B dev set (its checkpoint selection) when that
    baseline is enabled for one of ``languages``."""
    spec = (config.get("baselines") or {}).get("roberta_simcse") or {}
    if not (spec.get("enabled") and set(spec.get("languages") or []) & set(languages)):
        return []
    return [SIMCSE_DEV_SET]


#: what `strae fetch --language` places, in parts (one fetch job each, so a file one part lacks blocks only the jobs
#: that wait for that part): the evaluation sets every run of the language is scored on; the multi-view paper's
#: corpus, parser wheel and SentEval transfer files; SentEval's probing files (no mirror has them), for its Table 2
FILE_PARTS = ("evaluation", "multiview", "probing")


def scored_variants(config: dict[str, Any], lang: str) -> list[str] | None:
    """The evaluation variants the workflow scores for ``lang``: :func:`strae.plan.eval_variants`, plus the
    multi-view paper's ``sts_variants`` for its languages; None for a config without ``scale`` (a command's own
    partial config: every variant the language lists)."""
    if "scale" not in config:
        return None
    from strae.plan import eval_variants

    variants = eval_variants(config)
    multiview = config.get("multiview") or {}
    if multiview.get("enabled") and lang in (multiview.get("languages") or []):
        variants += [v for v in multiview.get("sts_variants") or [] if v not in variants]
    return variants


def language_files(lang: str, config: dict[str, Any], config_path: str | Path = "config",
                   part: str | None = None) -> dict[str, str | dict[str, Any]]:
    """Every file the configured runs of ``lang`` read beyond its corpus sources and tokenizer (those are the
    prepare-corpus and tokenizer rules' own), or one ``part`` of them (:data:`FILE_PARTS`): ``evaluation``, the sets
    ``languages.<lang>.eval.<variant>`` name for :func:`scored_variants`, with pooled tasks' subset files and inline
    sets, and the dev sets training reads (:func:`training_dev_sets`); ``multiview``, when the multi-view paper runs
    this language, its book corpus, parser wheel and SentEval transfer files; ``probing``, SentEval's probing files
    when its Table 2 is asked for (``multiview.senteval.probing``). ``{data id: registry name or inline file
    spec}``; ``config_path`` names the config in errors."""
    if part is not None and part not in FILE_PARTS:
        raise ValueError(f"part {part!r}: use one of {FILE_PARTS}")
    from strae.data.registry import language_block
    from strae.evaluate.senteval import SUITE, load_senteval_tasks, select_tasks, suite_tasks
    from strae.evaluate.tasks import language_task_files, tasks_file

    language_block(config, lang, config_path)  # an unknown language: the error names the config
    tasks_path = tasks_file(config)
    files: dict[str, str | dict[str, Any]] = {}
    multiview = config.get("multiview") or {}
    runs_multiview = bool(multiview.get("enabled")) and lang in (multiview.get("languages") or [])
    if part in (None, "evaluation"):
        variants = scored_variants(config, lang)
        for task, spec in language_task_files(config, lang, variants, config_path=str(config_path)):
            files[spec if isinstance(spec, str) else task.data_id] = spec  # a file spec is an inline set's own
        files.update((name, name) for name in training_dev_sets(config, [lang]))
    if not runs_multiview:
        return files
    suite = multiview.get("senteval") or {}
    senteval = load_senteval_tasks(tasks_path)
    if part in (None, "multiview"):
        corpus = (multiview.get("corpora") or {}).get(lang) or {}
        wheel = ((multiview.get("parsers") or {}).get(lang) or {}).get("wheel")
        files.update((name, name) for name in (corpus.get("registry"), wheel) if name)
        # exactly the tasks `strae evaluate --suite senteval` scores for this language (a bad name is refused here
        # as there; a language with no configured task of its own scores none and places none)
        chosen = suite_tasks(senteval, lang, suite, tasks_path)
        if chosen:  # and a probing task listed among them refused as there
            chosen = select_tasks(senteval, lang, SUITE, [task.name for task in chosen], tasks_path)
        files.update((name, name) for task in chosen for name in task.files.values())
    if part in (None, "probing") and suite.get("probing"):
        files.update((name, name) for task in senteval.values() if task.group == "probing" and task.language == lang
                     for name in task.files.values())
    return files


def fetch_language_files(lang: str, config_path: str | Path, resources_dir: str | Path | None = None,
                         mirror: str | Path | None = None, registry: dict[str, RegistryEntry] | None = None,
                         part: str | None = None) -> dict[str, dict[str, str]]:
    """Place :func:`language_files` (checksum-verified, resources -> mirror -> upstream); returns
    ``{data id: {file, sha256}}``: what ``snakemake fetch_all`` brings for an air-gapped machine."""
    from strae.data.registry import load_config

    config = load_config(config_path)
    resources_dir = resources_dir or paths.resources_dir(config)
    if registry is None:
        registry = load_registry((config.get("data") or {}).get("registry", DEFAULT_REGISTRY))
    placed = {}
    for data_id, spec in language_files(lang, config, config_path, part).items():
        path = (fetch(spec, resources_dir=resources_dir, mirror=mirror, registry=registry) if isinstance(spec, str)
                else fetch_source(spec, resources_dir=resources_dir, mirror=mirror, registry=registry))
        placed[data_id] = {"file": str(path), "sha256": sha256_file(path)}
    return placed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strae fetch", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="registry NAMEs (keys of config/registry.yaml)")
    parser.add_argument("--all", action="store_true", help="fetch every registered file")
    parser.add_argument("--kind", choices=KINDS, help="fetch every file of this kind")
    parser.add_argument("--resources-dir", default=None,
                        help="default: data.resources_dir of --config (resources without a config file)")
    parser.add_argument("--mirror", default=None, help=f"mirror directory (default: ${MIRROR_ENV})")
    parser.add_argument("--registry", default=DEFAULT_REGISTRY)
    parser.add_argument("--paper-corpus", metavar="LANG", action="append", default=[],
                        help="fetch the language block's paper_source (the authors' corpus; needs a network and "
                             "HF_DATASETS_OFFLINE=0) into resources/ so that `strae prepare-corpus` uses it offline")
    parser.add_argument("--config", default="config/config.yaml", help="config holding the language blocks")
    parser.add_argument("--language", metavar="LANG", action="append", default=[],
                        help="place every file the config's runs of LANG read besides its corpus and tokenizer: its "
                             "evaluation sets (the variants the workflow scores) and, if the multi-view paper runs it, "
                             "its book corpus, parser wheel and SentEval files (the fetch rules)")
    parser.add_argument("--part", choices=FILE_PARTS, default=None,
                        help="with --language: only the evaluation sets, the multi-view paper's files, or SentEval's "
                             "probing files")
    parser.add_argument("--manifest", default=None,
                        help="with --language: write {lang: {data id: {file, sha256}}} here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    registry = load_registry(args.registry)
    if args.resources_dir is None:
        from strae.data.registry import load_config, resolve_project_file

        has_config = resolve_project_file(args.config).exists()
        if not has_config and args.config != parser.get_default("config"):  # only the default may be absent
            raise SystemExit(f"--config {args.config}: not found")
        args.resources_dir = paths.resources_dir(load_config(args.config) if has_config else None)
    for lang in args.paper_corpus:
        for path in fetch_paper_corpus(lang, args.config, resources_dir=args.resources_dir, mirror=args.mirror,
                                       registry=registry):
            print(f"{path}  sha256 {sha256_file(path)} (trust on first use)")
    manifest = {}
    for lang in args.language:
        manifest[lang] = fetch_language_files(lang, args.config, resources_dir=args.resources_dir,
                                              mirror=args.mirror, registry=registry, part=args.part)
        for name, placed in manifest[lang].items():
            print(f"{lang}/{name}: {placed['file']}  sha256 {placed['sha256']}")
    if args.manifest:
        from strae.io import write_json

        write_json(args.manifest, manifest)
    names: Iterable[str] = args.names
    if args.all or args.kind:
        names = [n for n, e in registry.items() if args.all or e.kind == args.kind]
    if not names and (args.paper_corpus or args.language):
        return 0
    if not names:
        parser.error("name at least one registry NAME, or use --all / --kind / --paper-corpus / --language")
    failed = []
    for name in names:
        try:
            path = fetch(name, resources_dir=args.resources_dir, mirror=args.mirror, registry=registry)
        except FetchError as error:  # --all / --kind: every file that can be had is placed, the rest listed
            if not (args.all or args.kind):
                raise
            failed.append(f"{name}: {error}")
            continue
        print(path)
    if failed:
        print(f"strae fetch: {len(failed)} of {len(names)} files could not be placed:\n  " + "\n  ".join(failed),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
