"""A run's output written as one transaction (`output_with_sidecar`) and the safeguard file writer
(`write_safetensors`): nothing a user owns is overwritten, no partial file is left as if complete."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_pipelines.io.atomic_files import (
    OutputExistsError,
    numbered_path,
    output_with_sidecar,
    write_safetensors,
)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_file_and_its_sidecar_appear_together_when_the_block_ends(tmp_path):
    with output_with_sidecar(tmp_path / "clip.mp4") as out:
        out.temporary.write_bytes(b"video")
        out.sidecar = {"prompt": "a fox"}
        assert names(tmp_path) == [out.temporary.name], "nothing is published inside the block"
    assert out.published == tmp_path / "clip.mp4" and out.published_sidecar == tmp_path / "clip.json"
    assert names(tmp_path) == ["clip.json", "clip.mp4"]
    assert json.loads(out.published_sidecar.read_text()) == {"output": "clip.mp4", "prompt": "a fox"}


def test_an_error_in_the_block_leaves_no_file_and_the_old_pair_untouched(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"old")
    (tmp_path / "clip.json").write_text("{}")
    with (
        pytest.raises(RuntimeError, match="encoder"),
        output_with_sidecar(tmp_path / "clip.mp4", overwrite=True) as out,
    ):
        out.temporary.write_bytes(b"half a video")
        out.sidecar = {"prompt": "a fox"}
        raise RuntimeError("simulated encoder failure")
    assert names(tmp_path) == ["clip.json", "clip.mp4"]
    assert (tmp_path / "clip.mp4").read_bytes() == b"old" and (tmp_path / "clip.json").read_text() == "{}"


def test_a_block_that_never_said_what_the_sidecar_records_publishes_nothing(tmp_path):
    with pytest.raises(ValueError, match="without its sidecar"), output_with_sidecar(tmp_path / "clip.mp4") as out:
        out.temporary.write_bytes(b"video")
    assert names(tmp_path) == []


def test_an_existing_output_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "clip.json").write_text("{}")
    entered = False
    with pytest.raises(OutputExistsError, match="clip.json"), output_with_sidecar(tmp_path / "clip.mp4"):
        entered = True
    assert not entered and names(tmp_path) == ["clip.json"]


def test_a_name_taken_during_a_checked_run_moves_the_pair_to_a_numbered_name(tmp_path):
    with output_with_sidecar(tmp_path / "clip.mp4", checked_at_start=True) as out:
        (tmp_path / "clip.mp4").write_bytes(b"someone else's")
        out.temporary.write_bytes(b"video")
        out.sidecar = {}
    assert out.published == tmp_path / "clip-1.mp4"
    assert json.loads((tmp_path / "clip-1.json").read_text())["output"] == "clip-1.mp4"
    assert (tmp_path / "clip.mp4").read_bytes() == b"someone else's"


def test_leftovers_of_killed_runs_are_removed_when_an_output_is_opened(tmp_path):
    stale = tmp_path / ".clip.mp4.ab12cd34.partial.mp4"
    stale.write_bytes(b"killed")
    os.utime(stale, (0, 0))
    with output_with_sidecar(tmp_path / "clip.mp4") as out:
        assert not stale.exists()
        out.temporary.write_bytes(b"video")
        out.sidecar = {}


def test_numbered_names_keep_a_long_suffix_last():
    assert numbered_path(Path("clip.mp4"), 2) == Path("clip-2.mp4")
    assert numbered_path(Path("a/clip.latents.safetensors"), 3, ".latents.safetensors") == Path(
        "a/clip-3.latents.safetensors"
    )
    assert numbered_path(Path("clip.latents.safetensors"), 0, ".latents.safetensors") == Path(
        "clip.latents.safetensors"
    )


def test_safetensors_go_to_the_first_free_numbered_name_never_over_a_file(tmp_path):
    taken = tmp_path / "clip.latents.safetensors"
    taken.write_bytes(b"someone else's")
    tensors = {"x": torch.arange(4.0)}
    path = write_safetensors(taken, tensors, {"name": "a", "record": {"seed": 3, "path": Path("/p")}},
                             first_free_suffix=".latents.safetensors")  # fmt: skip
    assert path == tmp_path / "clip-1.latents.safetensors"
    assert taken.read_bytes() == b"someone else's"
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        assert torch.equal(f.get_tensor("x"), tensors["x"])
    assert metadata["name"] == "a" and json.loads(metadata["record"]) == {"seed": 3, "path": "/p"}
    with pytest.raises(OutputExistsError):
        write_safetensors(taken, tensors, {})
    assert names(tmp_path) == ["clip-1.latents.safetensors", "clip.latents.safetensors"]
