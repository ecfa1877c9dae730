"""`Generation.save` and `Generation.frames_array`: the Python API's way to write and look at a result.

A Generation holds decoded frames (the decode step ran before it exists): they can be shown and saved
any number of times, saving never builds a model, and kept latents follow the video's name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.io.atomic_files import OutputExistsError

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


def test_frames_array_is_uint8_frames_and_reads_the_source_once(tmp_path):
    source = CountingFrames()
    generation = fake_generation(source)
    frames = generation.frames_array()
    expected = (torch.cat(source.chunks) * 255).round().to(torch.uint8).numpy()
    assert frames.dtype == np.uint8 and frames.shape == (F, H, W, 3)
    np.testing.assert_array_equal(frames, expected)
    np.testing.assert_array_equal(generation.frames_array(), expected)
    saved = generation.save(tmp_path / "clip.mp4")
    assert source.taken == 2, "the frame source was read more than once"
    assert mp4_frames(saved.video).shape == (F, H, W, 3)
    sidecar = json.loads(saved.sidecar.read_text())
    assert sidecar["parameters"] == {"seed": 1} and sidecar["prompt"] == "a test pattern"
    assert saved.latents is None


def test_a_generation_saves_the_same_file_twice_and_still_shows_its_frames(tmp_path):
    generation = fake_generation(CountingFrames())
    first = generation.save(tmp_path / "clip.mp4")
    second = generation.save(tmp_path / "again.mp4")
    assert first.video.read_bytes() == second.video.read_bytes()
    assert generation.frames_array().shape == (F, H, W, 3)


def test_save_refuses_an_existing_output(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"mine")
    generation = fake_generation(CountingFrames())
    with pytest.raises(OutputExistsError, match="overwrite"):
        generation.save(tmp_path / "clip.mp4")
    assert (tmp_path / "clip.mp4").read_bytes() == b"mine"
    saved = generation.save(tmp_path / "clip.mp4", overwrite=True)
    assert mp4_frames(saved.video).shape[0] == F


def test_keep_latents_needs_latents(tmp_path):
    with pytest.raises(ValueError, match="no final latents"):
        fake_generation(CountingFrames()).save(tmp_path / "clip.mp4", keep_latents=True)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_pipeline_generation_is_decoded_and_saving_builds_no_model(demo_model_files, tmp_path, monkeypatch):
    from ltx_pipelines.cli.command import DEMO_SIZE
    from ltx_pipelines.distilled import DistilledPipeline
    from ltx_pipelines.engine.generation import decode_video_generation
    from ltx_pipelines.engine.model_loading import Placement

    pipeline = DistilledPipeline(
        demo_model_files.checkpoint,
        demo_model_files.spatial_upsampler,
        demo_model_files.gemma_root,
        device="cpu",
        dtype=torch.float32,
        progress=False,
    )
    from ltx_pipelines.engine.requests import VideoRequest

    generation = pipeline("a red kite over a beach", seed=5, video=VideoRequest(frame_rate=24.0, **DEMO_SIZE))
    assert generation.final is not None
    again = decode_video_generation(generation.final)  # the decode step repeats: the same frames
    np.testing.assert_array_equal(again.frames_array(), generation.frames_array())

    def no_model(*args, **kwargs):
        raise AssertionError("saving built a model")

    monkeypatch.setattr(Placement, "build", no_model)
    saved = generation.save(tmp_path / "kite.mp4", keep_latents=True)
    assert saved.latents == tmp_path / "kite.latents.safetensors" and saved.latents.is_file()
    sidecar = json.loads(saved.sidecar.read_text())
    assert sidecar["model_files"]["checkpoint"]["path"] == str(demo_model_files.checkpoint)
    frames = generation.frames_array()
    assert frames.shape == (DEMO_SIZE["num_frames"], DEMO_SIZE["height"], DEMO_SIZE["width"], 3)
    np.testing.assert_array_equal(mp4_frames(saved.video).shape, frames.shape)


def with_final(generation: Generation) -> Generation:
    """Give a fake generation final latents (never decoded here: its frames are given)."""
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
    from ltx_pipelines.engine.model_loading import Placement

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


def test_kept_latents_follow_the_video_to_its_numbered_name(tmp_path, monkeypatch):
    from ltx_pipelines.engine import generation as generation_module

    generation = with_final(fake_generation(CountingFrames()))
    target = tmp_path / "clip.mp4"
    real_encode = generation_module.encode_video

    def encode_then_taken(*args, **kwargs):
        written = real_encode(*args, **kwargs)
        target.write_bytes(b"another program")
        return written

    monkeypatch.setattr(generation_module, "encode_video", encode_then_taken)
    saved = generation.save(target, keep_latents=True)
    assert (saved.video.name, saved.sidecar.name) == ("clip-1.mp4", "clip-1.json")
    assert saved.latents == tmp_path / "clip-1.latents.safetensors" and saved.latents.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "clip-1.json", "clip-1.latents.safetensors", "clip-1.mp4", "clip.mp4"
    ]  # fmt: skip


def test_saved_latents_read_back_as_the_run_left_them(tmp_path):
    from ltx_pipelines.engine.denoising_stage import SeededNoise
    from ltx_pipelines.engine.generation import RunRecord, load_latents, save_latents_beside

    generation = with_final(fake_generation(CountingFrames()))
    assert generation.final is not None
    record = RunRecord(prompt="a test pattern", parameters={"seed": 3}, model_files={})
    latents = save_latents_beside(tmp_path / "clip.mp4", generation.final, record)
    assert latents == tmp_path / "clip.latents.safetensors"
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


def test_a_path_checked_when_the_run_began_and_taken_since_gets_a_numbered_name(tmp_path):
    # The command line checks the output path before generating; a file there at writing time appeared
    # during the run, so the writers publish under a numbered name instead of throwing the result away.
    from ltx_pipelines.engine.generation import AudioGeneration, write_audio_generation, write_generation

    video, wav = tmp_path / "clip.mp4", tmp_path / "sound.wav"
    for path in (video, wav):
        path.write_bytes(b"another program's file")
    written, sidecar = write_generation(
        fake_generation(CountingFrames()), video, parameters={}, model_files={}, checked_at_start=True
    )
    assert (written.name, sidecar.name) == ("clip-1.mp4", "clip-1.json")
    sound = AudioGeneration(audio=torch.zeros(2, 4800), sample_rate=48_000, prompt="a test tone")
    written_wav = write_audio_generation(sound, wav, parameters={}, model_files={}, checked_at_start=True)
    assert written_wav.name == "sound-1.wav"
    assert video.read_bytes() == wav.read_bytes() == b"another program's file"
    with pytest.raises(OutputExistsError):  # the Python API's save checks when it starts: refused
        write_generation(fake_generation(CountingFrames()), video, parameters={}, model_files={})


def test_a_shipped_waveform_is_kept_in_the_latents_file(tmp_path):
    # Audio-to-video ships its input track, DFR its cut audio: decoding the file again must write that sound.
    from dataclasses import replace

    from ltx_pipelines.engine.denoising_stage import Waveform
    from ltx_pipelines.engine.generation import RunRecord, load_latents, save_latents_beside

    generation = with_final(fake_generation(CountingFrames()))
    assert generation.final is not None
    track = Waveform(torch.linspace(-0.5, 0.5, 2 * 4800).reshape(2, 4800), 48_000)
    record = RunRecord(prompt="", parameters={}, model_files={})
    shipped = save_latents_beside(tmp_path / "a.mp4", replace(generation.final, shipped_audio=track), record)
    loaded = load_latents(shipped, device=torch.device("cpu")).final.shipped_audio
    assert loaded is not None and loaded.sample_rate == 48_000 and torch.equal(loaded.samples, track.samples)
    plain = save_latents_beside(tmp_path / "b.mp4", generation.final, record)
    assert load_latents(plain, device=torch.device("cpu")).final.shipped_audio is None
