"""Atomic output helpers and the JSON run-parameter sidecar."""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ltx_pipelines.io.atomic_files import (
    OutputExistsError,
    atomic_output,
    check_output_path,
    sidecar_path,
    write_json_atomic,
)


class _Mode(enum.Enum):
    FAST = "fast"


@dataclass(frozen=True)
class _Params:
    steps: int
    blocks: tuple[int, ...]


def test_sidecar_round_trip(tmp_path):
    out = sidecar_path(tmp_path / "runs" / "clip.mp4")
    assert out == tmp_path / "runs" / "clip.json"
    data = {
        "prompt": "a fox",
        "checkpoint": Path("/models/x.safetensors"),
        "params": _Params(8, (28,)),
        "mode": _Mode.FAST,
    }
    written = write_json_atomic(out, data)
    assert written == out
    assert json.loads(out.read_text()) == {
        "prompt": "a fox",
        "checkpoint": "/models/x.safetensors",
        "params": {"steps": 8, "blocks": [28]},
        "mode": "fast",
    }
    assert [p.name for p in out.parent.iterdir()] == ["clip.json"]


def test_sidecar_refuses_to_overwrite(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("{}")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        write_json_atomic(out, {"a": 1})
    assert out.read_text() == "{}"
    write_json_atomic(out, {"a": 1}, overwrite=True)
    assert json.loads(out.read_text()) == {"a": 1}


def test_atomic_output_removes_partial_on_error(tmp_path):
    target = tmp_path / "x.bin"
    with pytest.raises(KeyError), atomic_output(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"half")
        raise KeyError("stop")
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_gets_normal_permissions(tmp_path):
    target = tmp_path / "x.bin"
    with atomic_output(target) as tmp:
        tmp.write_bytes(b"done")
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_check_output_path(tmp_path):
    assert (
        check_output_path(tmp_path / "new" / "deeper" / "a.mp4", overwrite=False)
        == tmp_path / "new" / "deeper" / "a.mp4"
    )
    with pytest.raises(IsADirectoryError):
        check_output_path(tmp_path, overwrite=True)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        check_output_path(blocker / "a.mp4", overwrite=False)
