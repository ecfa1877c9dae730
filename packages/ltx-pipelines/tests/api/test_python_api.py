"""The Python API a notebook user expects: the common types at the top level, a missing Gemma folder refused
when the pipeline is made, size/length/frame rate defaulting as on the command line (the duration head's
choice where the files have one), and `Generation.save` writing the sidecar the command line writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import ltx_pipelines
from ltx_core.loader import CheckpointError


def test_common_types_are_exported_from_ltx_pipelines():
    from ltx_core.loader import ModelFiles
    from ltx_core.model.duration_head import DurationRange
    from ltx_pipelines.dfr import DFRPipeline

    assert ltx_pipelines.DFRPipeline is DFRPipeline
    assert ltx_pipelines.DurationRange is DurationRange
    assert ltx_pipelines.ModelFiles is ModelFiles


def test_readme_shows_the_ltx25_demo_set():
    readme = (Path(__file__).resolve().parents[4] / "README.md").read_text()
    assert 'ensure_demo_assets(family="ltx-2.5")' in readme


def test_a_gemma_path_that_does_not_exist_is_refused_when_the_pipeline_is_made(demo_model_files, tmp_path):
    missing = tmp_path / "gemma-3-12b"
    with pytest.raises(CheckpointError, match=rf"gemma_root '{missing}' does not exist"):
        ltx_pipelines.DistilledPipeline(demo_model_files.checkpoint, demo_model_files.spatial_upsampler, missing)


def _cli_video(command, argv: list[str]):
    return command.parse(argv).video


def _filled(pipeline, given: dict) -> dict:
    """What a call leaving out the rest of size, length and rate runs with: its `VideoRequest`, filled."""
    video = pipeline.filled_video(ltx_pipelines.VideoRequest(**given))
    return {"height": video.height, "width": video.width, "num_frames": video.num_frames,
            "frame_rate": video.frame_rate, "duration": video.duration}  # fmt: skip


def test_left_out_size_length_and_rate_are_the_command_lines_defaults(demo_model_files, tmp_path, monkeypatch):
    from ltx_pipelines import distilled, ti2vid_one_stage
    from ltx_pipelines.cli import command

    # The full default size may not fit this machine's memory; only the defaults are compared here.
    monkeypatch.setattr(command, "check_fits_in_memory", lambda run: run)

    files = demo_model_files
    for module, pipeline, flag in (
        (distilled, ltx_pipelines.DistilledPipeline(files.checkpoint, files.spatial_upsampler, files.gemma_root),
         "--distilled-checkpoint-path"),
        (ti2vid_one_stage, ltx_pipelines.TI2VidOneStagePipeline(files.checkpoint, files.gemma_root),
         "--checkpoint-path"),
    ):  # fmt: skip
        argv = [flag, str(files.checkpoint), "--gemma-root", str(files.gemma_root), "--prompt", "p",
                "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu"]  # fmt: skip
        if module is distilled:
            argv += ["--spatial-upsampler-path", str(files.spatial_upsampler)]
        cli = _cli_video(module.COMMAND, argv)
        filled = _filled(pipeline, {})
        assert (filled["height"], filled["width"], filled["num_frames"], filled["frame_rate"]) == (
            cli.height,
            cli.width,
            cli.num_frames,
            cli.frame_rate,
        ), module.__name__
        assert _filled(pipeline, {"height": 64})["height"] == 64  # what is given stays


def test_left_out_length_is_the_duration_heads_choice_on_files_with_a_head(ltx25_demo, tmp_path):
    from ltx_core.loader import ModelFiles
    from ltx_pipelines import distilled

    demo = ltx25_demo
    files = ModelFiles.split(
        transformer=demo.transformer, text_encoder=demo.text_encoder, video_vae=demo.video_vae,
        audio_vae=demo.audio_vae, duration_head=demo.duration_head,
    )  # fmt: skip
    pipeline = ltx_pipelines.DistilledPipeline(files, demo.spatial_upsampler, None)
    argv = ["--transformer-path", str(demo.transformer), "--text-encoder-path", str(demo.text_encoder),
            "--video-vae-path", str(demo.video_vae), "--audio-vae-path", str(demo.audio_vae),
            "--duration-head-path", str(demo.duration_head), "--spatial-upsampler-path", str(demo.spatial_upsampler),
            "--prompt", "p", "--output-path", str(tmp_path / "o.mp4"), "--device", "cpu",
            "--height", "128", "--width", "192"]  # fmt: skip
    cli = _cli_video(distilled.COMMAND, argv)
    filled = _filled(pipeline, {})
    assert filled["num_frames"] is None and filled["duration"] == cli.duration is not None


@pytest.mark.slow
def test_generation_save_writes_the_seed_and_every_parameter(demo_model_files, tmp_path):
    files = demo_model_files
    pipeline = ltx_pipelines.DistilledPipeline(
        files.checkpoint, files.spatial_upsampler, files.gemma_root, device="cpu", dtype=torch.float32, progress=False
    )
    video = ltx_pipelines.VideoRequest(height=128, width=192, num_frames=9)  # frame rate left out
    generation = pipeline("a fox", seed=7, video=video)
    saved = generation.save(tmp_path / "fox.mp4")
    sidecar = json.loads(saved.sidecar.read_text())
    parameters = sidecar["parameters"]
    assert parameters["seed"] == 7 and parameters["prompt"] == "a fox"
    assert (parameters["height"], parameters["width"], parameters["num_frames"]) == (128, 192, 9)
    assert parameters["frame_rate"] == 24.0 and parameters["dtype"] == "float32"
    assert sidecar["model_files"]["checkpoint"]["path"] == str(files.checkpoint)
    assert sidecar["model_files"]["gemma_root"]["path"] == str(files.gemma_root)


@pytest.mark.slow
def test_generate_left_without_size_length_and_rate_takes_the_defaults(demo_model_files, monkeypatch):
    """`generate` itself (not only `__call__`) fills what a call leaves out, from the same defaults the command
    line reads; they are shrunk here so the run stays tiny."""
    import dataclasses

    from ltx_pipelines.engine import model_versions

    small = dataclasses.replace(
        model_versions.defaults_for_checkpoint(demo_model_files.checkpoint),
        height=64, width=64, num_frames=9, frame_rate=12.0,
    )  # fmt: skip
    monkeypatch.setattr(model_versions, "defaults_for_checkpoint", lambda path: small)
    files = demo_model_files
    pipeline = ltx_pipelines.DistilledPipeline(
        files.checkpoint, files.spatial_upsampler, files.gemma_root, device="cpu", dtype=torch.float32, progress=False
    )
    final = pipeline.generate("a fox", seed=3)
    shape = final.shape
    # The distilled pipeline is two-stage: its default output is twice the stage-1 size.
    assert (shape.height, shape.width, shape.frames, shape.fps) == (128, 128, 9, 12.0)
