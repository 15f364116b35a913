"""Rebuild a registered file from its pinned upstream bytes: the derivation recipes of ``source.derive``.

A registry entry's ``source`` names the upstream files (``url`` then ``also: [...]``, each at a fixed commit or
release) and, when the mirror file is not those bytes, ``derive: {recipe: NAME, ...}``. ``derive(source, get)``
returns the rebuilt file's bytes, where ``get(url) -> bytes`` downloads one upstream file; the caller checks the
sha256 against the registry, so a recipe that drifts from the mirror's build is caught, never trusted.

Recipes (all write UTF-8, header row, RFC-4180 quoting as Python's csv module does, LF line ends):

- ``copy``: the first file, byte for byte.
- ``xz``: the first file, xz-compressed as ``xz -9 -T0`` (XZ Utils 5.4) writes it: liblzma's preset-9 LZMA2 data
  and CRC64 check in one block whose header carries both sizes (the threaded encoder's layout; plain ``xz -9``
  and Python's ``lzma.compress`` omit the sizes, so their bytes differ; ``xz_layout: single`` gives that form).
- ``table``: rows of a delimited file -> the chosen columns (by header name or 0-based index) under new names.
- ``sts_gold``: SemEval STS releases: each (``STS.input.*``, ``STS.gs.*``) pair of files pasted line by line,
  pairs without a gold score dropped; several pairs are concatenated in the listed (SentEval) order.
- ``text_pairs``: one column holds both sentences separated by a newline (or ``separator``): SemRel-2024.
- ``lines``: a text corpus: the files concatenated as ``cat`` does (a file without a final newline runs into the
  next; ``join: files`` takes each file's own lines instead: UTF-16 files recognised by their BOM, a .docx file's
  paragraphs with ``<w:br>`` breaks as lines), members of
  ``.tar.gz`` files chosen by ``tar_member_suffix``; ``remove_chars`` deleted; optionally WikiExtractor markup dropped
  (``<doc>``/``</doc>`` lines and each article's title line); whitespace collapsed (``unicode``: every Unicode space,
  as ``str.split``; ``ascii``: space, tab, CR, VT, FF only); lines under ``min_tokens`` whitespace tokens dropped;
  lines whose letters are less than ``script_ratio`` in ``script`` (a Unicode name prefix, e.g. LATIN) dropped;
  exact duplicates dropped keeping the first (``dedupe``); a uniform sample of lines up to ``sample_tokens`` tokens
  (``random.Random(seed).shuffle`` over the line indices, lines taken until the total reaches the budget, original
  order restored); LF line ends; ``compress: xz`` as the ``xz`` recipe.

A source may list many files by a template: ``expand: {template: ".../text/{dir}/wiki_{n}", values: {dir: [AA, AB],
n: "00..99"}}`` (cartesian product, first key outermost; ``"00..99"`` is a zero-padded range).
"""
from __future__ import annotations

import csv
import io
import lzma
import re
import struct
import zlib
from collections.abc import Callable
from typing import Any

Getter = Callable[[str], bytes]
RECIPES: dict[str, Callable[[dict[str, Any], list[bytes]], bytes]] = {}


class DeriveError(ValueError):
    """An upstream file does not have the shape the recipe expects (names the file and the problem)."""


def recipe(name: str):
    def register(function):
        RECIPES[name] = function
        return function

    return register


def _expand(spec: dict[str, Any]) -> list[str]:
    import itertools

    keys, choices = [], []
    for key, values in spec["values"].items():
        if isinstance(values, str) and ".." in values:
            low, high = values.split("..")
            values = [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
        keys.append(key)
        choices.append([str(v) for v in values])
    return [spec["template"].format(**dict(zip(keys, combo))) for combo in itertools.product(*choices)]


def upstream_urls(source: dict[str, Any]) -> list[str]:
    """Every upstream file of an entry, in derivation order: ``expand`` (if any), else ``url`` then ``also``."""
    if source.get("expand"):
        return _expand(source["expand"])
    return [source["url"], *(source.get("also") or [])] if source.get("url") else list(source.get("also") or [])


def derive(source: dict[str, Any], get: Getter) -> bytes:
    spec = source.get("derive") or {"recipe": "copy"}
    name = spec.get("recipe")
    if name not in RECIPES:
        raise DeriveError(f"derive.recipe {name!r} is unknown; known: {sorted(RECIPES)}")
    urls = upstream_urls(source)
    if not urls:
        raise DeriveError("source names no upstream url")
    files = []
    for url in urls:
        data = get(url)
        if url.endswith(".tar.gz") and spec.get("tar_member_suffix"):
            data = _tar_members(data, spec["tar_member_suffix"], url)
        files.append(data)
    return RECIPES[name](spec, files)


def _tar_members(data: bytes, suffix: str, url: str) -> bytes:
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = [m for m in archive.getmembers() if m.isfile() and m.name.endswith(suffix)]
        if not members:
            raise DeriveError(f"{url}: no member ending in {suffix!r}")
        return b"".join(archive.extractfile(m).read() for m in members)


def _csv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def _text(data: bytes, spec: dict[str, Any]) -> str:
    text = data.decode(spec.get("encoding", "utf-8"))
    return text[1:] if text.startswith("\ufeff") else text


def _select(row: list[str], columns: list[Any], names: dict[str, int] | None, where: str) -> list[str]:
    out = []
    for column in columns:
        index = column if isinstance(column, int) else (names or {}).get(column)
        if index is None or index >= len(row):
            raise DeriveError(f"{where}: column {column!r} not in row {row!r}")
        out.append(row[index])
    return out


def _rows(data: bytes, spec: dict[str, Any]) -> tuple[dict[str, int] | None, list[list[str]]]:
    quoting = csv.QUOTE_NONE if spec.get("quoting") == "none" else csv.QUOTE_MINIMAL
    reader = csv.reader(io.StringIO(_text(data, spec), newline=""), delimiter=spec.get("delimiter", ","),
                        quoting=quoting)
    rows = [row for row in reader if row]
    if spec.get("header", True):
        return {name: i for i, name in enumerate(rows[0])}, rows[1:]
    return None, rows


@recipe("copy")
def _copy(spec: dict[str, Any], files: list[bytes]) -> bytes:
    return files[0]


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buffer: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buffer[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def xz_threaded_layout(data: bytes, preset: int = 9) -> bytes:
    """``xz -9 -T0`` output for ``data`` (one block): liblzma's own LZMA2 stream and CRC64, re-framed with the
    block header the threaded encoder writes (compressed + uncompressed size, header sized for its largest block)."""
    single = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=preset)
    header_size = (single[12] + 1) * 4
    backward_size = (struct.unpack("<I", single[-8:-4])[0] + 1) * 4
    index_start = len(single) - 12 - backward_size
    if single[index_start + 1] != 1:
        raise DeriveError("xz: expected exactly one block")
    check = single[index_start - 8:index_start]
    unpadded, _ = _read_varint(single, index_start + 2)
    compressed_size = unpadded - header_size - 8
    compressed = single[12 + header_size:12 + header_size + compressed_size]
    properties = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA2, "preset": preset})
    largest_block = 3 * lzma._decode_filter_properties(lzma.FILTER_LZMA2, properties)["dict_size"]
    if len(data) > largest_block:
        raise DeriveError(f"xz: {len(data)} bytes need several blocks, which this recipe does not write")
    filters = _varint(0x21) + _varint(len(properties)) + properties
    body = bytes([0x40 | 0x80]) + _varint(compressed_size) + _varint(len(data)) + filters
    reserved = 1 + 1 + 2 * len(_varint(largest_block)) + len(filters)
    size = max(1 + len(body), reserved) + 4
    size += (-size) % 4
    header = bytes([size // 4 - 1]) + body
    header += b"\x00" * (size - 4 - len(header))
    header += struct.pack("<I", zlib.crc32(header))
    flags = b"\x00\x04"  # CRC64
    out = bytearray(b"\xfd7zXZ\x00" + flags + struct.pack("<I", zlib.crc32(flags)))
    out += header + compressed + b"\x00" * ((-compressed_size) % 4) + check
    index = b"\x00" + _varint(1) + _varint(len(header) + compressed_size + 8) + _varint(len(data))
    index += b"\x00" * ((-len(index)) % 4)
    index += struct.pack("<I", zlib.crc32(index))
    backward = struct.pack("<I", len(index) // 4 - 1)
    out += index + struct.pack("<I", zlib.crc32(backward + flags)) + backward + flags + b"YZ"
    if lzma.decompress(bytes(out)) != data:  # never hand back a stream that does not round-trip
        raise DeriveError("xz: re-framed stream does not decompress to its input")
    return bytes(out)


def _compress_xz(data: bytes, spec: dict[str, Any]) -> bytes:
    """``xz_layout: threaded`` (default; ``xz -9 -T0``) or ``single`` (``xz -9 -T1``, no sizes in the block header:
    what Python's lzma writes)."""
    preset = int(spec.get("preset", 9))
    layout = spec.get("xz_layout", "threaded")
    if layout == "single":
        return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=preset)
    if layout != "threaded":
        raise DeriveError(f"xz_layout {layout!r}; use threaded or single")
    return xz_threaded_layout(data, preset=preset)


@recipe("xz")
def _xz(spec: dict[str, Any], files: list[bytes]) -> bytes:
    return _compress_xz(files[0], spec)


@recipe("table")
def _table(spec: dict[str, Any], files: list[bytes]) -> bytes:
    names, rows = _rows(files[0], spec)
    return _csv_bytes(list(spec["names"]), [_select(row, spec["columns"], names, "table") for row in rows])


@recipe("text_pairs")
def _text_pairs(spec: dict[str, Any], files: list[bytes]) -> bytes:
    names, rows = _rows(files[0], spec)
    separator = spec.get("separator", "\n")
    text_column, score_column = spec["columns"]
    out = []
    for row in rows:
        text, score = _select(row, [text_column, score_column], names, "text_pairs")
        parts = text.split(separator)
        if len(parts) != 2:
            raise DeriveError(f"text_pairs: {text!r} does not split into two sentences on {separator!r}")
        out.append([parts[0], parts[1], score])
    return _csv_bytes(list(spec.get("names", ["sent1", "sent2", "score"])), out)


@recipe("sts_gold")
def _sts_gold(spec: dict[str, Any], files: list[bytes]) -> bytes:
    if len(files) % 2:
        raise DeriveError("sts_gold: files come in (input, gold) pairs")
    out = []
    for inputs, gold in zip(files[0::2], files[1::2]):
        input_lines = _text(inputs, spec).split("\n")
        gold_lines = _text(gold, spec).split("\n")
        if input_lines and input_lines[-1] == "":
            input_lines.pop()
        if gold_lines and gold_lines[-1] == "":
            gold_lines.pop()
        if len(input_lines) != len(gold_lines):
            raise DeriveError(f"sts_gold: {len(input_lines)} input lines but {len(gold_lines)} gold lines")
        for line, score in zip(input_lines, gold_lines):
            score = score.strip()
            if not score:  # the official releases leave some pairs unscored
                continue
            fields = line.rstrip("\r").split("\t")
            out.append([fields[0], fields[1], score])
    return _csv_bytes(list(spec.get("names", ["sent1", "sent2", "score"])), out)


_ASCII_SPACE = re.compile(r"[ \t\r\v\f]+")


def _decode_text_file(data: bytes) -> str:
    """UTF-16 when the file starts with a UTF-16 byte-order mark, else UTF-8."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16")
    return data.decode("utf-8")


_WORD = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _docx_lines(data: bytes) -> list[str]:
    """One line per ``<w:p>`` of word/document.xml (text of ``<w:t>``, ``<w:tab>`` as a tab), ``<w:br>`` and
    ``<w:cr>`` starting a new line."""
    import xml.etree.ElementTree as ET
    import zipfile

    root = ET.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml"))
    lines = []
    for paragraph in root.iter(_WORD + "p"):
        current: list[str] = []
        for element in paragraph.iter():
            if element.tag == _WORD + "t":
                current.append(element.text or "")
            elif element.tag == _WORD + "tab":
                current.append("\t")
            elif element.tag in (_WORD + "br", _WORD + "cr"):
                lines.append("".join(current))
                current = []
        lines.append("".join(current))
    return lines


def _file_lines(data: bytes) -> list[str]:
    if data[:4] == b"PK\x03\x04":  # a .docx (zip) file
        return _docx_lines(data)
    return _decode_text_file(data).splitlines()


def _script_share_ok(line: str, script: str, ratio: float) -> bool:
    """At least ``ratio`` of the line's letters (str.isalpha) have Unicode names starting with ``script``."""
    import unicodedata

    letters = [ch for ch in line if ch.isalpha()]
    if not letters:
        return False
    return sum(1 for ch in letters if unicodedata.name(ch, "").startswith(script)) / len(letters) >= ratio


@recipe("lines")
def _lines(spec: dict[str, Any], files: list[bytes]) -> bytes:
    if spec.get("join", "cat") == "cat":
        lines = b"".join(files).decode("utf-8").split("\n")  # `cat`: a missing final newline joins two files' lines
        if lines and lines[-1] == "":
            lines.pop()
    else:  # "files": each file's own lines (str.splitlines; UTF-16 by BOM; .docx paragraphs)
        lines = [line for data in files for line in _file_lines(data)]
    if spec.get("remove_chars"):
        table = {ord(ch): None for ch in spec["remove_chars"]}
        lines = [line.translate(table) for line in lines]
    if spec.get("wikiextractor"):
        kept, title_next = [], False
        for line in lines:
            if line.startswith("<doc ") or line.startswith("<doc>"):
                title_next = True
            elif line.startswith("</doc>"):
                continue
            elif title_next:
                title_next = False
            else:
                kept.append(line)
        lines = kept
    whitespace = spec.get("whitespace", "unicode")
    if whitespace == "unicode":
        lines = [" ".join(line.split()) for line in lines]
    elif whitespace == "ascii":
        lines = [_ASCII_SPACE.sub(" ", line).strip(" ") for line in lines]
    else:
        raise DeriveError(f"lines: whitespace {whitespace!r}; use unicode or ascii")
    minimum = int(spec.get("min_tokens", 1))
    lines = [line for line in lines if len(line.split()) >= minimum]
    if spec.get("script"):
        lines = [line for line in lines if _script_share_ok(line, spec["script"], float(spec["script_ratio"]))]
    if spec.get("dedupe"):
        seen: set[str] = set()
        lines = [line for line in lines if not (line in seen or seen.add(line))]
    if spec.get("sample_tokens"):
        import random

        order = list(range(len(lines)))
        random.Random(int(spec["seed"])).shuffle(order)
        chosen, total = [], 0
        for index in order:
            if total >= int(spec["sample_tokens"]):
                break
            chosen.append(index)
            total += len(lines[index].split())
        lines = [lines[i] for i in sorted(chosen)]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if spec.get("compress") == "xz":
        data = _compress_xz(data, spec)
    return data
