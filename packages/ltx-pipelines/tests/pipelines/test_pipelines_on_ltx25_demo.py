"""Every pipeline that runs on LTX-2.5 files runs its `--demo --demo-family ltx-2.5` on the CPU: the tiny
LTX-2.5 component files (keyframe position embedding, no FF biases, packed Gemma 4, diffusion VAE decoder)
through each pipeline's own command line, writing its output and a sidecar that names the 2.5 files. The
distilled, DFR and DubIt demos have their own tests; parity on 2.5 is in the `*_ltx25_golden` tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ltx_pipelines import (
    a2vid_two_stage,
    ic_lora,
    keyframe_interpolation,
    retake,
    t2a_one_stage,
    ti2vid_one_stage,
    ti2vid_two_stages,
    ti2vid_two_stages_hq,
)
from ltx_pipelines.io.video_writer import encode_video

pytestmark = pytest.mark.slow

SMALL = ["--height", "64", "--width", "64", "--num-frames", "9", "--device", "cpu"]
STEPS = ["--num-inference-steps", "1"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """A 17-frame 64x64 clip with a stereo track: the media input of a2vid, retake and IC-LoRA."""
    path = tmp_path_factory.mktemp("media") / "clip.mp4"
    frames = torch.rand(17, 64, 64, 3, generator=torch.Generator().manual_seed(0))
    t = torch.arange(48_000) / 48_000
    tone = torch.stack([torch.sin(2 * torch.pi * 220 * t), torch.sin(2 * torch.pi * 330 * t)]) * 0.3
    encode_video(path, frames, fps=24, audio=tone, audio_sample_rate=48_000, container_suffix=".mp4")
    return path


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    from PIL import Image

    path = tmp_path_factory.mktemp("media") / "red.png"
    Image.new("RGB", (64, 64), (200, 30, 60)).save(path)
    return path


def _cases(clip: Path, image: Path) -> dict[str, tuple[Callable[[list[str]], int], list[str], str]]:
    return {
        "ti2vid_one_stage": (ti2vid_one_stage.main, [*SMALL, *STEPS], ".mp4"),
        "ti2vid_two_stages": (ti2vid_two_stages.main, [*SMALL, *STEPS], ".mp4"),
        "ti2vid_two_stages_hq": (ti2vid_two_stages_hq.main, [*SMALL, "--num-inference-steps", "2"], ".mp4"),
        "keyframe_interpolation": (
            keyframe_interpolation.main,
            [*SMALL, *STEPS, "--image", str(image), "0", "1.0", "--image", str(image), "8", "1.0"],
            ".mp4",
        ),
        "t2a_one_stage": (t2a_one_stage.main, ["--num-frames", "9", "--device", "cpu", *STEPS], ".wav"),
        "a2vid_two_stage": (a2vid_two_stage.main, [*SMALL, *STEPS, "--audio-path", str(clip)], ".mp4"),
        "retake": (
            retake.main,
            ["--device", "cpu", "--video-path", str(clip), "--start-time", "0.1", "--end-time", "0.3"],
            ".mp4",
        ),
        "ic_lora": (ic_lora.main, [*SMALL, "--video-conditioning", str(clip), "1.0"], ".mp4"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "ti2vid_one_stage",
        "ti2vid_two_stages",
        "ti2vid_two_stages_hq",
        "keyframe_interpolation",
        "t2a_one_stage",
        "a2vid_two_stage",
        "retake",
        "ic_lora",
    ],
)
def test_pipeline_runs_its_demo_on_the_ltx25_files(
    name, clip, image, ltx25_demo, ltx25_demo_home, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(ltx25_demo_home))
    main, extra, suffix = _cases(clip, image)[name]
    output = tmp_path / f"out{suffix}"
    argv = ["--demo", "--demo-family", "ltx-2.5", "--prompt", "a cat", "--seed", "3", "--output-path", str(output)]
    assert main([*argv, *extra]) == 0
    assert output.is_file() and output.stat().st_size > 0
    sidecar = json.loads(output.with_suffix(".json").read_text())
    assert sidecar["parameters"]["model_version"] == "2.5.1"
    assert sidecar["model_files"]["transformer"]["path"] == str(ltx25_demo.transformer)
