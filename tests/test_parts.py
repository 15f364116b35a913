"""strae parts: a file split for transfers and joined back exactly, or not at all."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from strae import parts


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
    with pytest.raises(SystemExit, match="the file has parts 0..5"):
        parts.split(path, tmp_path / "o", 1024 / 2 ** 20, "3:9", root)


def test_the_command_line_splits_and_joins(checkout, tmp_path, monkeypatch, capsys):
    root, path, payload = checkout
    monkeypatch.setattr(parts, "project_root", lambda: root)
    assert parts.main(["split", str(path), "--to", str(tmp_path / "o"), "--part-mib", "0.002"]) == 0
    assert "parts 0..2 of 3 written" in capsys.readouterr().out
    target = tmp_path / "copy.pt"
    assert parts.main(["join", str(tmp_path / "o"), "--to", str(target)]) == 0
    assert target.read_bytes() == payload
