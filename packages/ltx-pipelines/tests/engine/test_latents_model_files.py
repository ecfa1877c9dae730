"""A latents file of a run on component files (LTX-2.5) records the whole set, so decoding it again finds
each VAE; the record is rebuilt into the same `ModelFiles` value (header reads only, no model built)."""

from __future__ import annotations

import pytest
import torch

from ltx_core.loader import CheckpointError, Component, Layout, ModelFiles
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, SeededNoise
from ltx_pipelines.engine.generation import LatentsFileError, RunRecord, load_latents, save_latents
from ltx_pipelines.engine.model_loading import Placement

pytestmark = pytest.mark.slow

RECORD = RunRecord(prompt="a fox", parameters={"seed": 3}, model_files={})


def final_on(files: ModelFiles) -> FinalLatents:
    noise = SeededNoise(3)
    noise("stage_1.video", (2, 3), device=torch.device("cpu"), dtype=torch.float32)  # a run's draws before decoding
    return FinalLatents(
        video=torch.randn(1, 128, 2, 2, 3),
        audio=torch.randn(1, 8, 9, 16),
        shape=VideoPixelShape(1, 9, 64, 96, 24.0),
        checkpoint=files,  # type: ignore[arg-type]
        placement=Placement(torch.device("cpu"), torch.float32),
        tiling=None,
        noise=noise,
    )


def test_component_files_round_trip_through_a_latents_file(ltx25_demo, tmp_path):
    files = ltx25_demo.model_files()
    final = final_on(files)
    path = save_latents(tmp_path / "clip.latents.safetensors", final, RECORD)
    loaded = load_latents(path, device=torch.device("cpu"))
    assert loaded.final.checkpoint == files and loaded.recorded_checkpoint == files
    assert loaded.final.checkpoint.layout is Layout.SPLIT
    # The decoder's noise resumes where the run left it.
    want = final.noise("decoder.0", (4,), device=torch.device("cpu"), dtype=torch.float32)
    got = loaded.final.noise("decoder.0", (4,), device=torch.device("cpu"), dtype=torch.float32)
    assert torch.equal(got, want)


def test_a_single_file_with_another_video_vae_round_trips(ltx25_demo, demo_model_files):
    files = ModelFiles.single_file(demo_model_files.checkpoint, video_vae=ltx25_demo.video_vae_conv)
    again = ModelFiles.from_dict(files.as_dict())
    assert again == files
    assert again.source(Component.VIDEO_VAE).path == ltx25_demo.video_vae_conv


def test_moved_component_files_are_named(ltx25_demo, tmp_path):
    moved = tmp_path / "moved"
    moved.mkdir()
    copies = {}
    for name in ("transformer", "text_encoder", "video_vae", "audio_vae"):
        source = getattr(ltx25_demo, name)
        copies[name] = moved / source.name
        copies[name].write_bytes(source.read_bytes())
    path = save_latents(tmp_path / "clip.latents.safetensors", final_on(ModelFiles.split(**copies)), RECORD)
    copies["audio_vae"].unlink()
    with pytest.raises(LatentsFileError, match="--audio-vae-path"):
        load_latents(path, device=torch.device("cpu"))
    # Another set given for decoding is used instead of the record.
    loaded = load_latents(path, checkpoint=ltx25_demo.model_files(), device=torch.device("cpu"))
    assert loaded.final.checkpoint == ltx25_demo.model_files()
    with pytest.raises(CheckpointError, match="not a recorded set"):
        ModelFiles.from_dict({"components": {}})


def _moved_run(ltx25_demo, tmp_path):
    """A latents file recording component files that have since moved (the originals are gone)."""
    old, moved = tmp_path / "old", tmp_path / "moved"
    old.mkdir()
    moved.mkdir()
    copies = {}
    for name in ("transformer", "text_encoder", "video_vae", "audio_vae"):
        source = getattr(ltx25_demo, name)
        copies[name] = old / source.name
        copies[name].write_bytes(source.read_bytes())
    path = save_latents(tmp_path / "clip.latents.safetensors", final_on(ModelFiles.split(**copies)), RECORD)
    for name, copy in copies.items():
        copies[name] = copy.rename(moved / copy.name)
    return path, copies


def test_decoding_reads_only_the_decoders_and_takes_their_moved_files(ltx25_demo, tmp_path):
    from ltx_pipelines.decode import decoding_files
    from ltx_pipelines.engine.generation import decodes_audio, read_latents_header

    path, moved = _moved_run(ltx25_demo, tmp_path)
    metadata, keys = read_latents_header(path)
    assert decodes_audio(keys)
    with pytest.raises(CheckpointError, match=r"--video-vae-path: .*not found.*if the model files moved, pass"):
        decoding_files(metadata, None, {}, audio=True)
    given = {Component.VIDEO_VAE: str(moved["video_vae"]), Component.AUDIO_VAE: str(moved["audio_vae"])}
    files = decoding_files(metadata, None, given, audio=True)
    # The decoders alone, from the files given (the moved transformer and text encoder are not looked for).
    assert {s.component for s in files.sources} == {Component.VIDEO_VAE, Component.AUDIO_VAE}
    assert files.source(Component.AUDIO_VAE).path == moved["audio_vae"]
    # A video-only run needs no audio VAE; a file of another kind is named with the flag it was given to.
    only_video = decoding_files(metadata, None, {Component.VIDEO_VAE: str(moved["video_vae"])}, audio=False)
    assert {s.component for s in only_video.sources} == {Component.VIDEO_VAE}
    with pytest.raises(CheckpointError, match=r"--checkpoint-path: .*cannot provide the audio VAE \+ vocoder"):
        decoding_files(metadata, str(moved["video_vae"]), {}, audio=True)
    with pytest.raises(CheckpointError, match=r"--video-vae-path: .*no 'vae' section"):
        decoding_files(metadata, None, {**given, Component.VIDEO_VAE: str(moved["transformer"])}, audio=True)


def test_the_decode_command_takes_the_component_flags(ltx25_demo, tmp_path, capsys):
    """Wrong files end with exit 2 before anything is built; the moved decoders decode the latents."""
    from ltx_pipelines import decode

    path, moved = _moved_run(ltx25_demo, tmp_path)
    argv = ["--latents", str(path), "--output-path", str(tmp_path / "out.mp4"), "--device", "cpu"]
    with pytest.raises(SystemExit) as stopped:
        decode.main([*argv, "--checkpoint-path", str(moved["transformer"])])
    assert stopped.value.code == 2
    assert "cannot provide the video VAE" in capsys.readouterr().err
    flags = ["--video-vae-path", str(moved["video_vae"]), "--audio-vae-path", str(moved["audio_vae"])]
    assert decode.main([*argv, *flags]) == 0
    assert (tmp_path / "out.mp4").stat().st_size > 0
