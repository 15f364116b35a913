"""Rebuilding registered files from their pinned upstream (no mirror): every entry has a pinned upstream and a
derivation; each recipe rebuilds upstream-shaped files served by a local HTTP server on 127.0.0.1, byte for byte."""
from __future__ import annotations

import csv
import functools
import hashlib
import io
import lzma
import re
import shutil
import subprocess
import tarfile
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from strae.data import upstream
from strae.data.fetch import ChecksumError, fetch
from strae.data.registry import RegistryEntry, load_registry

REPO_ROOT = Path(__file__).resolve().parents[1]
PINNED_RAW = re.compile(r"^https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/.+")
PINNED_TREE = re.compile(r"^https://github\.com/[^/]+/[^/]+/tree/[0-9a-f]{40}/")  # a folder at a commit
# a released PyPI version (its files can never be replaced): how the parser wheel (kind: package) is pinned
PINNED_PYPI = re.compile(r"^https://pypi\.org/project/[^/]+/[0-9][^/]*/$")
RAW_PREFIX = "https://raw.githubusercontent.com/"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/www laid out like raw.githubusercontent.com."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _put(root: Path, relative: str, data: bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _entry(name: str, expected: bytes, source: dict) -> RegistryEntry:
    return RegistryEntry(name=name, path=f"{name}.out", sha256=hashlib.sha256(expected).hexdigest(), kind="eval",
                         language="xx", license="test", source=source)


def _rebuild(entry: RegistryEntry, tmp_path: Path) -> bytes:
    placed = fetch(entry.name, resources_dir=tmp_path / "res", mirror=tmp_path / "no-mirror",
                   registry={entry.name: entry})
    return placed.read_bytes()


# ----------------------------------------------------------------------------------------- the registry itself
@pytest.fixture(scope="module")
def registry():
    return load_registry(REPO_ROOT / "config" / "registry.yaml")


def test_every_entry_has_a_pinned_upstream_and_a_derivation(registry, capsys):
    unpinned, no_recipe = [], []
    for name, entry in registry.items():
        urls = upstream.upstream_urls(entry.source)
        pinned_hf = entry.source.get("hf_dataset") and entry.source.get("revision")
        pypi = f"|{PINNED_PYPI.pattern}" if entry.kind == "package" else ""
        pinned = PINNED_RAW if entry.source.get("derive") else re.compile(
            f"{PINNED_RAW.pattern}|{PINNED_TREE.pattern}" + pypi)
        if not (urls and all(pinned.match(url) for url in urls)) and not pinned_hf:
            unpinned.append(name)
        recipe = (entry.source.get("derive") or {}).get("recipe")
        if recipe not in upstream.RECIPES:
            # an entry that cannot be rebuilt must say why in the registry, never silently
            if not entry.source.get("not_rebuildable"):
                no_recipe.append(name)
    rebuildable = sum(1 for e in registry.values() if (e.source.get("derive") or {}).get("recipe") in upstream.RECIPES)
    with capsys.disabled():
        print(f"\nupstream coverage: pinned {len(registry) - len(unpinned)}/{len(registry)}, "
              f"rebuildable {rebuildable}/{len(registry)}")
    assert not unpinned, f"entries without an upstream at a fixed commit: {unpinned}"
    assert not no_recipe, f"entries with neither a derive recipe nor a not_rebuildable reason: {no_recipe}"


# ----------------------------------------------------------------------------------------------- each recipe
def test_sts_gold_pastes_input_and_gold_and_drops_unscored(server, tmp_path):
    root, base = server
    _put(root, "o/r/c/STS.input.a.txt", b"A man plays.\tA man is playing.\nNo score here.\tNone.\n")
    _put(root, "o/r/c/STS.gs.a.txt", b"4.400\n\n")
    _put(root, "o/r/c/STS.input.b.txt", b'He said "yes, fine".\tHe agreed\x12.\n')
    _put(root, "o/r/c/STS.gs.b.txt", b"0.800\n")
    expected = (b'sent1,sent2,score\nA man plays.,A man is playing.,4.400\n'
                b'"He said ""yes, fine"".",He agreed\x12.,0.800\n')
    entry = _entry("eval/x/sts", expected, {"url": base + "o/r/c/STS.input.a.txt", "also": [
        base + "o/r/c/STS.gs.a.txt", base + "o/r/c/STS.input.b.txt", base + "o/r/c/STS.gs.b.txt"],
        "derive": {"recipe": "sts_gold"}})
    assert _rebuild(entry, tmp_path) == expected


def test_text_pairs_splits_semrel_text(server, tmp_path):
    root, base = server
    _put(root, "o/r/c/eng_train.csv",
         b'PairID,Text,Score\nENG-0,"It that happens, just pull the plug.\nif that ever happens.",1.0\n'
         b'ENG-1,"A dog.\nA cat.",0.25\n')
    expected = (b'sent1,sent2,score\n"It that happens, just pull the plug.",if that ever happens.,1.0\n'
                b'A dog.,A cat.,0.25\n')
    entry = _entry("eval/x/semrel", expected, {"url": base + "o/r/c/eng_train.csv",
                                               "derive": {"recipe": "text_pairs", "columns": ["Text", "Score"]}})
    assert _rebuild(entry, tmp_path) == expected


def test_table_selects_columns_of_a_tab_file_without_quoting(server, tmp_path):
    root, base = server
    _put(root, "o/r/c/sts-test.csv", b'main\tMSRvid\t2012test\t0024\t2.500\tA "girl" is styling.\tA girl.\n'
                                     b'main\tx\ty\t1\t0.000\ta\tb\textra\tcolumns\n')
    expected = b'sent1,sent2,score\n"A ""girl"" is styling.",A girl.,2.500\na,b,0.000\n'
    entry = _entry("eval/x/stsb", expected, {"url": base + "o/r/c/sts-test.csv", "derive": {
        "recipe": "table", "delimiter": "\t", "header": False, "quoting": "none", "columns": [5, 6, 4],
        "names": ["sent1", "sent2", "score"]}})
    assert _rebuild(entry, tmp_path) == expected


def test_lines_wikiextractor_sample_xz(server, tmp_path):
    root, base = server
    docs = []
    for d in range(2):
        for n in range(3):
            body = "".join(f"<doc id=\"{d}{n}{k}\" title=\"T\">\nTitle words are many here\n\n"
                           f"para  {d} {n} {k} has\tfive tokens or more\nshort line\n</doc>\n" for k in range(4))
            _put(root, f"o/w/c/text/A{d}/wiki_{n:02d}", body.encode())
            docs.append(body)
    paragraphs = [" ".join(line.split()) for body in docs for line in body.split("\n")
                  if line.startswith("para")]
    import random

    order = list(range(len(paragraphs)))
    random.Random(7).shuffle(order)
    chosen, total = [], 0
    for i in order:
        if total >= 50:
            break
        chosen.append(i)
        total += len(paragraphs[i].split())
    text = ("\n".join(paragraphs[i] for i in sorted(chosen)) + "\n").encode()
    source = {"url": base + "o/w/c/text/A0/wiki_00",
              "expand": {"template": base + "o/w/c/text/{dir}/wiki_{n}",
                         "values": {"dir": ["A0", "A1"], "n": "00..02"}},
              "derive": {"recipe": "lines", "wikiextractor": True, "min_tokens": 5, "sample_tokens": 50, "seed": 7,
                         "compress": "xz"}}
    built = upstream.derive(source, lambda url: (root / url[len(base):]).read_bytes())
    assert lzma.decompress(built) == text and 0 < len(chosen) < len(paragraphs)
    entry = _entry("corpora/x", built, source)
    assert _rebuild(entry, tmp_path) == built


def test_lines_tar_members_cat_semantics_ascii_whitespace_dedupe(server, tmp_path):
    root, base = server
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for name, data in [("p.en", b"english side\n"), ("p.af", b"een  twee drie\nvier vyf ses\nlaaste reel")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _put(root, "o/u/c/train.tar.gz", archive.getvalue())
    _put(root, "o/u/c/mono.txt", " sonder\u00a0nuwe reel\neen twee drie\nkort\n".encode())
    # the member has no final newline, so its last line runs into the next file's first line (as `cat` does);
    # the NBSP is not ASCII whitespace and stays
    expected = "een twee drie\nvier vyf ses\nlaaste reel sonder\u00a0nuwe reel\n".encode()
    entry = _entry("corpora/y", expected, {"url": base + "o/u/c/train.tar.gz", "also": [base + "o/u/c/mono.txt"],
                                           "derive": {"recipe": "lines", "tar_member_suffix": ".af",
                                                      "whitespace": "ascii", "min_tokens": 3, "dedupe": True}})
    assert _rebuild(entry, tmp_path) == expected


def test_xz_recipe_matches_xz_threaded_layout_and_round_trips():
    data = b"= Title =\n the text , with <unk> tokens @-@ here\n" * 500
    built = upstream.RECIPES["xz"]({}, [data])
    assert lzma.decompress(built) == data
    header_size = (built[12] + 1) * 4
    assert built[13] & 0xC0 == 0xC0  # block header carries compressed and uncompressed sizes (xz -T0 layout)
    assert header_size == 20  # sized for the threaded encoder's largest block, as xz writes it


def test_tampered_upstream_is_a_checksum_error_and_leaves_nothing(server, tmp_path):
    root, base = server
    _put(root, "o/r/c/w.txt", b"old\tnew\t1.58\n")
    expected = b"word1,word2,score\nold,new,1.58\n"
    spec = {"recipe": "table", "delimiter": "\t", "header": False, "columns": [0, 1, 2],
            "names": ["word1", "word2", "score"]}
    entry = _entry("eval/x/words", expected, {"url": base + "o/r/c/w.txt", "derive": spec})
    _put(root, "o/r/c/w.txt", b"old\tnew\t9.99\n")
    with pytest.raises(ChecksumError, match="does not match the registry"):
        _rebuild(entry, tmp_path)
    assert not any((tmp_path / "res").rglob("*.out*"))


def test_unreachable_upstream_names_the_entry(tmp_path):
    entry = _entry("eval/x/gone", b"x", {"url": "http://127.0.0.1:9/o/r/c/f.csv",
                                          "derive": {"recipe": "table", "columns": [0], "names": ["a"]}})
    with pytest.raises(SystemExit, match="eval/x/gone"):
        _rebuild(entry, tmp_path)


# ------------------------------------------------- the real registry's eval entries, from upstream-shaped files
def _upstream_shape(entry: RegistryEntry, mirror_file: Path) -> dict[str, bytes]:
    """Upstream-shaped files (relative raw.githubusercontent.com paths -> bytes) that the entry's recipe must turn
    back into the mirror file: the inverse of each recipe, built from the mirror's own bytes."""
    spec = entry.source["derive"]
    urls = [urllib.parse.unquote(url[len(RAW_PREFIX):]) for url in upstream.upstream_urls(entry.source)]
    recipe = spec["recipe"]
    if recipe == "copy":
        return {urls[0]: mirror_file.read_bytes()}
    if recipe == "xz":
        return {urls[0]: lzma.decompress(mirror_file.read_bytes())}
    rows = list(csv.reader(io.StringIO(mirror_file.read_text(encoding="utf-8"), newline="")))[1:]
    out = io.StringIO(newline="")
    if recipe == "sts_gold":
        if len(urls) > 2:  # a yearly file: its subsets' entries serve the same (input, gold) files
            return {}
        return {urls[0]: "".join(f"{a}\t{b}\n" for a, b, _ in rows).encode(),
                urls[1]: "".join(f"{s}\n" for _, _, s in rows).encode()}
    if recipe == "text_pairs":
        text_column, score_column = spec["columns"]
        separator = spec.get("separator", "\n")
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(["PairID", text_column, score_column])
        writer.writerows([[f"ID-{i}", a + separator + b, s] for i, (a, b, s) in enumerate(rows)])
        return {urls[0]: out.getvalue().encode()}
    if recipe == "table":
        columns, delimiter = spec["columns"], spec.get("delimiter", ",")
        width = max(c for c in columns if isinstance(c, int)) + 1 if all(isinstance(c, int) for c in columns) \
            else len(columns) + 1
        header = [f"c{i}" for i in range(width)] if all(isinstance(c, int) for c in columns) else \
            ["pair_ID", *columns]
        if spec.get("quoting") == "none":  # fields as they are, quotes included (the STS-B release)
            writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n", quoting=csv.QUOTE_NONE,
                                quotechar=None)
        else:
            writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
        if spec.get("header", True):
            writer.writerow(header)
        for i, row in enumerate(rows):
            line = ["x"] * width
            for value, column in zip(row, columns):
                line[column if isinstance(column, int) else header.index(column)] = value
            if not isinstance(columns[0], int):
                line[0] = str(i)
            writer.writerow(line)
        return {urls[0]: out.getvalue().encode()}
    raise AssertionError(f"no upstream shape for recipe {recipe}")


@pytest.mark.mirror
def test_real_eval_entries_rebuild_from_upstream_shaped_files(registry, mirror, server, tmp_path, monkeypatch):
    """Every eval/tokenizer entry (and the WikiText files), with its registry recipe, from a local server only."""
    root, base = server
    chosen = {n: e for n, e in registry.items() if (e.source.get("derive") or {}).get("recipe") in upstream.RECIPES
              and (e.kind != "corpus" or e.source["derive"]["recipe"] == "xz") and e.sha256}  # sha256: in the mirror
    rewritten = {}
    for name, entry in chosen.items():
        for relative, data in _upstream_shape(entry, mirror / entry.path).items():
            _put(root, relative, data)
        source = dict(entry.source)
        for key in ("url",):
            source[key] = source[key].replace(RAW_PREFIX, base)
        source["also"] = [url.replace(RAW_PREFIX, base) for url in source.get("also") or []]
        source.pop("hf_dataset", None)
        rewritten[name] = RegistryEntry(**{**entry.__dict__, "source": source})
    for name in rewritten:
        placed = fetch(name, resources_dir=tmp_path / "res", mirror=tmp_path / "no-mirror", registry=rewritten)
        assert placed.read_bytes() == (mirror / registry[name].path).read_bytes(), name
    assert len(rewritten) >= 65


def test_an_entry_known_by_its_git_blob_id_is_fetched_and_checked_against_it(registry, server, tmp_path):
    """SentEval's probing files are in no mirror: the registry holds their git blob ids (`git hash-object`), and a
    download is placed only when its bytes have that id."""
    from strae.io import git_blob_sha1_file, sha256_and_git_blob_sha1_file

    real = registry["eval/senteval/probing/sentence_length"]
    assert real.sha256 is None and real.checksum == ("git blob sha1", "9799e50a7579b5b60294b708cedc063aea16f0be")
    assert PINNED_RAW.match(real.source["url"])
    root, base = server
    data = b"tr\t0\tA short one .\nva\t1\tA rather longer sentence here .\nte\t0\tShort again .\n"
    _put(root, "o/r/c/probe.txt", data)
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    (tmp_path / "probe.txt").write_bytes(data)
    assert git_blob_sha1_file(tmp_path / "probe.txt") == blob
    assert sha256_and_git_blob_sha1_file(tmp_path / "probe.txt") == (hashlib.sha256(data).hexdigest(), blob)
    if shutil.which("git"):
        assert subprocess.run(["git", "hash-object", str(tmp_path / "probe.txt")], capture_output=True,
                              text=True, check=True).stdout.strip() == blob
    source = {**real.source, "url": f"{base}o/r/c/probe.txt"}
    entry = RegistryEntry(**{**real.__dict__, "name": "eval/x/probe", "path": "eval/x/probe.txt", "source": source,
                             "git_blob_sha1": blob})
    placed = fetch("eval/x/probe", resources_dir=tmp_path / "res", mirror=tmp_path / "no-mirror",
                   registry={"eval/x/probe": entry})
    assert placed.read_bytes() == data
    # placed again: the copy already there is checked against the same id
    assert fetch("eval/x/probe", resources_dir=tmp_path / "res", registry={"eval/x/probe": entry}) == placed
    wrong = RegistryEntry(**{**entry.__dict__, "name": "eval/x/other", "path": "eval/x/other.txt",
                             "git_blob_sha1": "0" * 40})
    with pytest.raises(ChecksumError, match="git blob sha1 .* does not match"):
        fetch("eval/x/other", resources_dir=tmp_path / "res", mirror=tmp_path / "no-mirror",
              registry={"eval/x/other": wrong})
    assert not (tmp_path / "res" / "data" / "eval" / "x" / "other.txt").exists()


@pytest.mark.parametrize("fields, message", [
    ("  sha256: ab\n  kind: eval\n  source: {url: 'http://x', derive: {recipe: nope}}\n", "eval/x/y.*nope"),
    ("  kind: eval_raw\n  source: {url: 'http://x'}\n", "eval/x/y.*neither sha256 nor git_blob_sha1"),
], ids=["unknown recipe", "no checksum"])
def test_a_bad_registry_entry_is_a_clear_error_naming_it(tmp_path, fields, message):
    from strae.data.registry import RegistryError

    path = tmp_path / "registry.yaml"
    path.write_text("eval/x/y:\n  path: eval/x/y.csv\n  language: xx\n  license: t\n" + fields, encoding="utf-8")
    with pytest.raises(RegistryError, match=message):
        load_registry(path)


def test_xz_single_layout_is_plain_liblzma_output():
    data = "पंक्ति एक दो तीन चार\n".encode() * 300
    built = upstream.RECIPES["xz"]({"xz_layout": "single"}, [data])
    assert built == lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9)
    assert built != upstream.RECIPES["xz"]({}, [data])
