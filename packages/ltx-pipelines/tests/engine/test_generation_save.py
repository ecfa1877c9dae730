"""`Generation.save` and `Generation.frames_array`: the Python API's way to write and look at a result.

Frames are a one-shot iterator: `frames_array()` keeps what it decodes so `save()` reuses it; after a
`save()` the frames come from decoding the final latents again (the same frames), and a Generation
without latents says so instead of returning nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from ltx_pipelines.engine.generation import FramesConsumedError, Generation
from ltx_pipelines.media.atomic_files import OutputExistsError

H, W, F = 64, 96, 9


class CountingFrames:
    """A frame source that counts the chunks taken from it."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1)
        self.chunks = [torch.rand(5, H, W, 3, generator=g), torch.rand(4, H, W, 3, generator=g)]
        self.taken = 0

    def __iter__(self) -> Iterator[torch.Tensor]:
        for chunk in self.chunks:
            self.taken += 1
            yield chunk


def fake_generation(source: CountingFrames) -> Generation:
    return Generation(
        frames=iter(source),
        num_frames=F,
        height=H,
        width=W,
        frame_rate=24.0,
        audio=None,
        audio_sample_rate=None,
        prompt="a test pattern",
        parameters={"seed": 1},
    )


def mp4_frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def test_frames_array_is_uint8_frames_and_decodes_once(tmp_path):
    source = CountingFrames()
    generation = fake_generation(source)
    frames = generation.frames_array()
    expected = (torch.cat(source.chunks) * 255).round().to(torch.uint8).numpy()
    assert frames.dtype == np.uint8 and frames.shape == (F, H, W, 3)
    np.testing.assert_array_equal(frames, expected)
    np.testing.assert_array_equal(generation.frames_array(), expected)
    saved = generation.save(tmp_path / "clip.mp4")
    assert source.taken == 2, "the frames were decoded more than once"
    assert mp4_frames(saved.video).shape == (F, H, W, 3)
    sidecar = json.loads(saved.sidecar.read_text())
    assert sidecar["parameters"] == {"seed": 1} and sidecar["prompt"] == "a test pattern"
    assert saved.latents is None


def test_frames_consumed_by_save_cannot_be_shown_without_latents(tmp_path):
    generation = fake_generation(CountingFrames())
    generation.save(tmp_path / "clip.mp4")
    with pytest.raises(FramesConsumedError, match="frames_array"):
        generation.frames_array()
    with pytest.raises(FramesConsumedError):
        generation.save(tmp_path / "again.mp4")
    assert not (tmp_path / "again.mp4").exists()


def test_save_refuses_an_existing_output_before_decoding(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"mine")
    source = CountingFrames()
    generation = fake_generation(source)
    with pytest.raises(OutputExistsError, match="overwrite"):
        generation.save(tmp_path / "clip.mp4")
    assert source.taken == 0 and (tmp_path / "clip.mp4").read_bytes() == b"mine"
    saved = generation.save(tmp_path / "clip.mp4", overwrite=True)
    assert mp4_frames(saved.video).shape[0] == F


@pytest.mark.slow
def test_a_pipeline_generation_decodes_again_after_save(demo_model_files, tmp_path):
    from ltx_pipelines.cli.command import DEMO_SIZE
    from ltx_pipelines.distilled import DistilledPipeline

    pipeline = DistilledPipeline(
        demo_model_files.checkpoint,
        demo_model_files.spatial_upsampler,
        demo_model_files.gemma_root,
        device="cpu",
        dtype=torch.float32,
        progress=False,
    )
    generation = pipeline("a red kite over a beach", seed=5, frame_rate=24.0, **DEMO_SIZE)
    saved = generation.save(tmp_path / "kite.mp4", keep_latents=True)
    assert saved.latents == tmp_path / "kite.latents.safetensors" and saved.latents.is_file()
    sidecar = json.loads(saved.sidecar.read_text())
    assert sidecar["model_files"]["checkpoint"]["path"] == str(demo_model_files.checkpoint)

    frames = generation.frames_array()  # consumed by save: decoded again from the final latents
    assert generation.final is not None
    again = torch.cat(list(generation.final.decode_frames()))
    np.testing.assert_array_equal(frames, (again.clamp(0, 1) * 255).round().to(torch.uint8).numpy())
    assert frames.shape == (DEMO_SIZE["num_frames"], DEMO_SIZE["height"], DEMO_SIZE["width"], 3)
    # The kept frames are the ones the first save encoded: saving them again gives the same file.
    again_saved = generation.save(tmp_path / "kite-again.mp4")
    assert again_saved.video.read_bytes() == saved.video.read_bytes()


def with_final(generation: Generation) -> Generation:
    """Give a fake generation final latents (never decoded here: its frames are given)."""
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.engine.final_latents import FinalLatents
    from ltx_pipelines.engine.model_loading import Placement
    from ltx_pipelines.engine.noise import SeededNoise

    noise = SeededNoise(3)
    noise("stage_1.video", (2, 5), device=torch.device("cpu"), dtype=torch.float32)  # denoising's draws
    generation.final = FinalLatents(
        video=torch.randn(1, 128, 2, H // 32, W // 32),
        audio=torch.randn(1, 8, 9, 16),
        shape=VideoPixelShape(1, F, H, W, 24.0),
        checkpoint=Path("/models/ltx.safetensors"),
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=noise,
    )
    return generation


def test_kept_latents_follow_the_video_to_its_numbered_name(tmp_path):
    source = CountingFrames()
    generation = with_final(fake_generation(source))
    target = tmp_path / "clip.mp4"
    chunks = iter(source)

    def frames_then_taken() -> Iterator[torch.Tensor]:
        yield next(chunks)
        target.write_bytes(b"another program")
        yield from chunks

    generation.frames = frames_then_taken()
    saved = generation.save(target, keep_latents=True)
    assert (saved.video.name, saved.sidecar.name) == ("clip-1.mp4", "clip-1.json")
    assert saved.latents == tmp_path / "clip-1.latents.safetensors" and saved.latents.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clip-1.json", "clip-1.latents.safetensors", "clip-1.mp4", "clip.mp4"
    ]  # fmt: skip


def test_a_failed_encode_keeps_the_latents_and_says_where(tmp_path, monkeypatch):
    from ltx_pipelines.engine.final_latents import saved_latents_of
    from ltx_pipelines.engine.latents_file import load_latents
    from ltx_pipelines.engine.noise import SeededNoise

    generation = with_final(fake_generation(CountingFrames()))
    monkeypatch.setattr(
        "ltx_pipelines.engine.generation.encode_video", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "full"))
    )
    with pytest.raises(OSError, match="full") as info:
        generation.save(tmp_path / "clip.mp4", parameters={"seed": 3})
    latents = tmp_path / "clip.latents.safetensors"
    assert saved_latents_of(info.value) == latents
    assert sorted(p.name for p in tmp_path.iterdir()) == [latents.name]
    loaded = load_latents(latents, device=torch.device("cpu"))
    assert loaded.record.parameters == {"seed": 3} and loaded.record.prompt == "a test pattern"
    assert torch.equal(loaded.final.video, generation.final.video)
    assert torch.equal(loaded.final.audio, generation.final.audio)
    assert loaded.final.shape == generation.final.shape and loaded.final.checkpoint == generation.final.checkpoint
    # The decoder noise resumes where the run's stood (after denoising's draws): the same next draw.
    draw = dict(shape=(4,), device=torch.device("cpu"), dtype=torch.float32)
    expected = generation.final.noise("decoder.0", **draw)
    assert torch.equal(loaded.final.noise("decoder.0", **draw), expected)
    assert not torch.equal(SeededNoise(3)("decoder.0", **draw), expected), "the state was not restored"
