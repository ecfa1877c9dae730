"""Latents that do not fit beside the output (a full disk) go to the temp folder, then the user cache,
and the run says where; only when no place takes them does the run go on without them."""

from __future__ import annotations

import errno
import logging
import tempfile
from pathlib import Path

import pytest
import torch

from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine import generation
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
from ltx_pipelines.engine.generation import RunRecord, load_latents, save_latents_safely
from ltx_pipelines.engine.model_loading import Placement

RECORD = RunRecord(prompt="a test pattern", parameters={"seed": 3}, model_files={})


def tiny_final() -> FinalLatents:
    return FinalLatents(
        video=torch.randn(1, 128, 2, 2, 3),
        audio=None,
        shape=VideoPixelShape(1, 9, 64, 96, 24.0),
        checkpoint=Path("/models/ltx.safetensors"),
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=SeededNoise(3),
    )


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An output folder, a temp folder and a cache folder of the test's own."""
    out, temp, cache = tmp_path / "out", tmp_path / "tmp", tmp_path / "cache"
    for folder in (out, temp):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return out, temp, cache / "ltx-pipelines" / "latents"


def disk_full_in(monkeypatch, *full: Path) -> None:
    """Saving into any of the `full` folders fails as a full disk does."""
    real = generation.save_latents

    def save(path, *args, **kwargs):
        if Path(path).parent in full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(generation, "save_latents", save)


def test_latents_go_beside_the_output_when_they_fit(places):
    out, _, _ = places
    path = save_latents_safely(out / "clip.mp4", tiny_final(), RECORD)
    assert path == out / "clip.latents.safetensors"


def test_a_full_output_disk_moves_the_latents_to_the_temp_folder_and_says_so(places, monkeypatch, caplog):
    out, temp, _ = places
    disk_full_in(monkeypatch, out)
    final = tiny_final()
    with caplog.at_level(logging.WARNING):
        path = save_latents_safely(out / "clip.mp4", final, RECORD)
    assert path == temp / "clip.latents.safetensors"
    assert torch.equal(load_latents(path, device=torch.device("cpu")).final.video, final.video)
    assert str(path) in caplog.text and "did not fit" in caplog.text
    assert not list(out.iterdir()), "nothing may be left beside the output"


def test_then_the_user_cache(places, monkeypatch, caplog):
    out, temp, cache = places
    disk_full_in(monkeypatch, out, temp)
    with caplog.at_level(logging.WARNING):
        path = save_latents_safely(out / "clip.mp4", tiny_final(), RECORD)
    assert path == cache / "clip.latents.safetensors" and path.is_file()
    assert str(path) in caplog.text


def test_no_place_at_all_goes_on_without_them(places, monkeypatch, caplog):
    out, temp, cache = places
    disk_full_in(monkeypatch, out, temp, cache)
    with caplog.at_level(logging.WARNING):
        assert save_latents_safely(out / "clip.mp4", tiny_final(), RECORD) is None
    assert "continuing without them" in caplog.text
