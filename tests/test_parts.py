"""strae parts: a file split for transfers and joined back exactly, or not at all."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from strae import parts
from strae.io import sha256_file, write_json


@pytest.fixture
def checkout(tmp_path) -> tuple[Path, Path, bytes]:
    root = tmp_path / "repo"
    run = root / "results/runs/en/selfstrae/setting/seed0"
    run.mkdir(parents=True)
    payload = os.urandom(5 * 1024 + 17)  # five full 1 KiB parts and a short sixth
    (run / "checkpoint.pt").write_bytes(payload)
    return root, run / "checkpoint.pt", payload


def test_parts_written_over_several_calls_join_back_to_the_same_bytes_at_the_recorded_path(checkout, tmp_path):
    root, path, payload = checkout
    first, second = tmp_path / "call1", tmp_path / "call2"
    part_mib = 1024 / 2 ** 20
    done = parts.split(path, first, part_mib, "0:4", root)
    assert done["parts"] == 6 and done["written"] == [0, 1, 2, 3]
    parts.split(path, second, part_mib, "4:", root)
    names = sorted(p.name for p in second.iterdir())
    stem = "results.runs.en.selfstrae.setting.seed0.checkpoint.pt"
    assert names == [f"{stem}.part004", f"{stem}.part005", f"{stem}.parts.json"]
    # elsewhere (a fresh box): the file is joined where the manifest says, from parts spread over folders
    elsewhere = tmp_path / "box"
    elsewhere.mkdir()
    lines = parts.join([first, second], elsewhere)
    joined = elsewhere / "results/runs/en/selfstrae/setting/seed0/checkpoint.pt"
    assert joined.read_bytes() == payload and "joined from 6 parts" in lines[0]
    assert "already in place" in parts.join([first, second], elsewhere)[0]  # idempotent


def test_a_missing_or_damaged_part_stops_the_join_and_leaves_nothing_behind(checkout, tmp_path):
    root, path, _ = checkout
    out = tmp_path / "out"
    parts.split(path, out, 1024 / 2 ** 20, None, root)
    stem = "results.runs.en.selfstrae.setting.seed0.checkpoint.pt"
    (out / f"{stem}.part002").unlink()
    box = tmp_path / "box"
    box.mkdir()
    with pytest.raises(SystemExit, match=r"parts \[2\] of 6 not found"):
        parts.join([out], box)
    parts.split(path, out, 1024 / 2 ** 20, "2", root)  # brought again
    damaged = out / f"{stem}.part003"
    damaged.write_bytes(b"x" + damaged.read_bytes()[1:])
    with pytest.raises(SystemExit, match=r"parts \[3\] of 6 not found.*wrong sha256.*part003"):
        parts.join([out], box)
    assert not any(p.is_file() for p in box.rglob("*"))  # no partial checkpoint, no temporary file


def test_split_refuses_a_file_outside_the_checkout_and_a_bad_range(checkout, tmp_path):
    root, path, _ = checkout
    outside = tmp_path / "loose.bin"
    outside.write_bytes(b"abc")
    with pytest.raises(SystemExit, match="not inside the checkout"):
        parts.split(outside, tmp_path / "o", 1.0, None, root)
    with pytest.raises(SystemExit, match="the files have parts 0..5"):
        parts.split(path, tmp_path / "o", 1024 / 2 ** 20, "6:9", root)
    # a range running past the last part is cut there, as a slice is: calls of a fixed stride end on a short one
    assert parts.split(path, tmp_path / "last", 1024 / 2 ** 20, "4:8", root)["written"] == [4, 5]


def test_the_command_line_splits_and_joins(checkout, tmp_path, monkeypatch, capsys):
    root, path, payload = checkout
    monkeypatch.setattr(parts, "project_root", lambda: root)
    assert parts.main(["split", str(path), "--to", str(tmp_path / "o"), "--part-mib", "0.002"]) == 0
    assert "parts 0..2 of 3 written" in capsys.readouterr().out
    target = tmp_path / "copy.pt"
    assert parts.main(["join", str(tmp_path / "o"), "--to", str(target)]) == 0
    assert target.read_bytes() == payload


def test_a_checkpoint_and_best_weights_go_as_one_stream_and_come_back_together(checkout, tmp_path):
    """A run's resumable state is checkpoint.pt and best.pt: cut as one stream (a part spans the boundary), over two
    calls; joined, both files are back; with one part damaged neither is written."""
    root, path, payload = checkout
    best = path.with_name("best.pt")
    best_bytes = os.urandom(2 * 1024 + 5)
    best.write_bytes(best_bytes)
    part_mib = 1024 / 2 ** 20
    first, second = tmp_path / "call1", tmp_path / "call2"
    done = parts.split([path, best], first, part_mib, "0:5", root)
    assert done["parts"] == 8 and done["paths"] == [f"results/runs/en/selfstrae/setting/seed0/{n}"
                                                    for n in ("checkpoint.pt", "best.pt")]
    parts.split([path, best], second, part_mib, "5:", root)
    stem = "results.runs.en.selfstrae.setting.seed0.checkpoint.pt-best.pt"
    assert sorted(p.name for p in second.iterdir()) == [f"{stem}.part00{i}" for i in (5, 6, 7)] + [
        f"{stem}.parts.json"]
    assert (second / f"{stem}.part005").read_bytes() == (payload + best_bytes)[5 * 1024:6 * 1024]  # the boundary
    box = tmp_path / "box"
    box.mkdir()
    damaged = second / f"{stem}.part006"
    good = damaged.read_bytes()
    damaged.write_bytes(b"x" + good[1:])
    with pytest.raises(SystemExit, match=r"parts \[6\] of 8 not found"):
        parts.join([first, second], box)
    assert not any(p.is_file() for p in box.rglob("*"))
    damaged.write_bytes(good)
    line = parts.join([first, second], box)[0]
    run = box / "results/runs/en/selfstrae/setting/seed0"
    assert (run / "checkpoint.pt").read_bytes() == payload and (run / "best.pt").read_bytes() == best_bytes
    assert "joined from 8 parts" in line
    with pytest.raises(SystemExit, match="a file is named twice"):
        parts.split([path, path], tmp_path / "o", part_mib, None, root)
    # a run before its first epoch end has no best.pt yet: --missing-ok leaves it out, and says so
    best.unlink()
    with pytest.raises(SystemExit, match="best.pt: no such file"):
        parts.split([path, best], tmp_path / "o", part_mib, None, root)
    done = parts.split([path, best], tmp_path / "o", part_mib, None, root, missing_ok=True)
    assert done["paths"] == ["results/runs/en/selfstrae/setting/seed0/checkpoint.pt"] and done["left_out"] == [best]


def test_a_first_schema_manifest_still_joins(checkout, tmp_path):
    root, path, payload = checkout
    out = tmp_path / "old"
    out.mkdir()
    stem = "results.runs.en.selfstrae.setting.seed0.checkpoint.pt"
    write_json(out / f"{stem}.parts.json", {
        "schema_version": 1, "path": "results/runs/en/selfstrae/setting/seed0/checkpoint.pt", "size": len(payload),
        "sha256": sha256_file(path), "part_bytes": 4096,
        "parts": [hashlib.sha256(payload[i:i + 4096]).hexdigest() for i in range(0, len(payload), 4096)]})
    for index, start in enumerate(range(0, len(payload), 4096)):
        (out / f"{stem}.part{index:03d}").write_bytes(payload[start:start + 4096])
    target = tmp_path / "joined.pt"
    assert "joined from 2 parts" in parts.join([out], root, to=target)[0]
    assert target.read_bytes() == payload


def test_parts_for_calls_fill_numbered_folders_each_carrying_the_manifest(checkout, tmp_path, monkeypatch, capsys):
    root, path, payload = checkout  # 6 parts of 1 KiB
    kib = 1024 / 2 ** 20
    done = parts.split_for_calls([path], tmp_path / "up", kib, [kib, 3 * kib], root)
    assert [d["written"] for d in done] == [[0], [1, 2, 3], [4, 5]]
    stem = "results.runs.en.selfstrae.setting.seed0.checkpoint.pt"
    for call in ("call1", "call2", "call3"):
        assert (tmp_path / "up" / call / f"{stem}.parts.json").is_file()
    box = tmp_path / "box"
    box.mkdir()
    assert "joined from 6 parts" in parts.join([tmp_path / "up"], box)[0]
    assert (box / "results/runs/en/selfstrae/setting/seed0/checkpoint.pt").read_bytes() == payload
    with pytest.raises(SystemExit, match="every call must hold at least one part"):
        parts.split_for_calls([path], tmp_path / "x", kib, [kib / 2], root)
    monkeypatch.setattr(parts, "project_root", lambda: root)
    assert parts.main(["split", str(path), "--to", str(tmp_path / "cli"), "--part-mib", str(kib),
                       "--calls-mib", f"{2 * kib},{4 * kib}"]) == 0
    assert "parts 2..5 of 6 written to" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="exclude each other"):
        parts.main(["split", str(path), "--to", str(tmp_path / "cli"), "--calls-mib", "1", "--only", "0"])
