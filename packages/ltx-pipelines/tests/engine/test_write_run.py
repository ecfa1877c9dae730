"""`write_run`, a command-line run from its final latents to its output: the latents are saved before
decoding and kept when anything after fails, refused (nothing saved or decoded) when not finite, removed
after a successful write unless kept, and kept ones follow the video to a numbered name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
from ltx_pipelines.engine.generation import Generation, NonFiniteLatentsError, RunOutput, write_run
from ltx_pipelines.engine.model_loading import Placement

H, W, F = 32, 48, 3


def final_latents(video: torch.Tensor | None = None) -> FinalLatents:
    return FinalLatents(
        video=torch.randn(1, 128, 1, 1, 2) if video is None else video,
        audio=None,
        shape=VideoPixelShape(1, F, H, W, 24.0),
        checkpoint=Path("/models/ltx.safetensors"),
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=SeededNoise(3),
        prompt="a test pattern",
    )


def decoded(final: FinalLatents) -> Generation:
    frames = torch.linspace(0, 1, F * H * W * 3).reshape(F, H, W, 3)
    return Generation(frames=[frames], num_frames=F, height=H, width=W, frame_rate=24.0, audio=None,
                      audio_sample_rate=None, prompt=final.prompt)  # fmt: skip


def run_output(path: Path, **options) -> RunOutput:
    return RunOutput(path=path, overwrite=False, parameters={"seed": 3}, model_files={}, **options)


def test_the_latents_are_saved_before_decoding_and_removed_after_the_write(tmp_path):
    saved: list[Path] = []

    def decode(final: FinalLatents) -> Generation:
        assert [p.name for p in saved] == ["clip.latents.safetensors"] and saved[0].is_file()
        return decoded(final)

    written = write_run(final_latents(), decode, run_output(tmp_path / "clip.mp4"), saved.append)
    assert written == tmp_path / "clip.mp4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.json", "clip.mp4"]
    assert json.loads((tmp_path / "clip.json").read_text())["parameters"] == {"seed": 3}


def test_a_failed_decode_leaves_only_the_latents(tmp_path):
    def decode(final: FinalLatents) -> Generation:
        raise RuntimeError("simulated out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        write_run(final_latents(), decode, run_output(tmp_path / "clip.mp4"), lambda path: None)
    assert [p.name for p in tmp_path.iterdir()] == ["clip.latents.safetensors"]


def test_non_finite_latents_are_neither_saved_nor_decoded(tmp_path):
    video = torch.randn(1, 128, 1, 1, 2)
    video[0, 0, 0, 0, 0] = float("nan")

    def decode(final: FinalLatents) -> Generation:
        raise AssertionError("decoded")

    with pytest.raises(NonFiniteLatentsError, match="nothing was saved or decoded"):
        write_run(final_latents(video), decode, run_output(tmp_path / "clip.mp4"), lambda path: None)
    assert list(tmp_path.iterdir()) == []


def test_kept_latents_follow_the_video_to_its_numbered_name(tmp_path):
    def decode(final: FinalLatents) -> Generation:
        (tmp_path / "clip.mp4").write_bytes(b"appeared during the run")
        return decoded(final)

    written = write_run(final_latents(), decode, run_output(tmp_path / "clip.mp4", keep_latents=True), print)
    assert written == tmp_path / "clip-1.mp4"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clip-1.json", "clip-1.latents.safetensors", "clip-1.mp4", "clip.mp4",
    ]  # fmt: skip
