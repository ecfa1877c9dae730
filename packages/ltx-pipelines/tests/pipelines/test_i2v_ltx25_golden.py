"""Image-to-video on the LTX-2.5 split files: the distilled pipeline with a first-frame image reproduces the
`i2v` run of `fx_pipeline_ltx25_more` (the image encoded by the 2.5 conv video encoder at both stage sizes,
latent frame 0 conditioned, Euler-ancestral stage 1, stage 2, diffusion-decoder frames, audio).

The stored per-stage images stand in for the media loader (what it returned at each stage size); the recorded
draws are replayed by name. Shapes, sizes, seeds and strengths come from the fixture; tolerances are the
fixture README's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from ltx_core.loader import ModelFiles
from ltx_core.types import VideoPixelShape
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import ImageCondition, ReplayedNoise, encode_conditioning_images
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]

RUN = "i2v"
# The README's tolerances for `fx_pipeline_ltx25_more`.
IMAGE_LATENT_ATOL = 1e-4
LATENT_ATOL = 2e-3
FRAMES_ATOL = 5e-3
WAVEFORM_ATOL = 2e-3


@pytest.fixture(scope="module")
def fx(golden_ltx25_fixture):
    return golden_ltx25_fixture("fx_pipeline_ltx25_more")


@pytest.fixture(scope="module")
def files(golden_ltx25_split_files: ModelFiles) -> ModelFiles:
    return golden_ltx25_split_files


@pytest.fixture(scope="module")
def upsampler(golden_ltx25_upsampler: Path) -> Path:
    return golden_ltx25_upsampler


_STAGE_CALL = re.compile(r"^stage call (\d+): GaussianNoiser (video|audio) noise")
_ANCESTRAL = re.compile(r"^(stage_\d) euler-ancestral renoise \(per step: video, then audio\) draw (\d+)")
_DECODER = re.compile(r"^diffusion video-VAE decoder draw (\d+)")


def draw_names(meanings: list[str]) -> list[str]:
    """Our name of each recorded draw, from the run's `draw_meaning` ("<index>: <what>"): stage call k is our
    stage k+1; the ancestral draws alternate video, audio per step."""
    names = []
    for i, meaning in enumerate(meanings):
        index, what = meaning.split(": ", 1)
        assert int(index) == i, f"draw_meaning is out of order at {meaning!r}"
        if m := _STAGE_CALL.match(what):
            names.append(f"stage_{int(m[1]) + 1}.{m[2]}")
        elif m := _ANCESTRAL.match(what):
            step, which = divmod(int(m[2]), 2)
            names.append(f"{m[1]}.ancestral.{step}.{('video', 'audio')[which]}")
        elif m := _DECODER.match(what):
            names.append(f"decoder.{m[1]}")
        else:
            raise AssertionError(f"no draw name for {meaning!r}")
    return names


def replayed(fx) -> tuple[ReplayedNoise, list[str]]:
    names = draw_names(fx.params[RUN]["draw_meaning"])
    tensors = {name: fx[f"{RUN}.noise.{i}"] for i, name in enumerate(names)}
    assert f"{RUN}.noise.{len(names)}" not in fx, f"{RUN}: more stored draws than draw_meaning lists"
    return ReplayedNoise(tensors), names


def stored_images(fx) -> list[ImageCondition]:
    """The run's images, each with the loader's stored result at both stage sizes (keyed by its size)."""
    stages = [fx[f"{RUN}.image.stage_1"], fx[f"{RUN}.image.stage_2"]]
    pixels = {(int(t.shape[-2]), int(t.shape[-1])): t for t in stages}
    requests = fx.params[RUN]["image_loader_requests"]
    assert sorted(pixels) == sorted((r["height"], r["width"]) for r in requests)
    (image,) = fx.params[RUN]["images"]
    return [ImageCondition(frame_idx=image["frame_idx"], strength=image["strength"], crf=image["crf"], pixels=pixels)]


def test_image_latents_from_the_25_encoder(fx, files):
    """The 2.5 conv video encoder gives the recorded conditioning latent at each stage size."""
    s = fx.params[RUN]["settings"]
    shapes = [
        VideoPixelShape(1, s["num_frames"], s["height"] // 2, s["width"] // 2, s["fps"]),
        VideoPixelShape(1, s["num_frames"], s["height"], s["width"], s["fps"]),
    ]
    pipeline = DistilledPipeline(files, Path("unused"), gemma_root=None, device="cpu", dtype=torch.float32)
    encoded = encode_conditioning_images(stored_images(fx), files, pipeline.placement, shapes)
    for k, items in enumerate(encoded.per_stage, start=1):
        (item,) = items
        assert item.strength == fx.params[RUN]["images"][0]["strength"]
        name = f"{RUN}.stage_{k}.image_latent"
        torch.testing.assert_close(item.latent, fx[name], atol=IMAGE_LATENT_ATOL, rtol=0, msg=name)


def test_i2v_ltx25_replays_the_reference(fx, files, upsampler, assert_golden_close):
    p, s = fx.params, fx.params[RUN]["settings"]
    assert s["tiling"] is None
    pipeline = DistilledPipeline(files, upsampler, gemma_root=None, device="cpu", dtype=torch.float32, tiling=None)
    (contexts,), _ = pipeline.encode_prompts([p["prompt"]], seed=p["seed"], images=(), enhance=False)
    assert_golden_close(contexts.video, fx[f"{RUN}.video_context"], atol=1e-4, name=f"{RUN}.video_context")
    assert_golden_close(contexts.audio, fx[f"{RUN}.audio_context"], atol=1e-4, name=f"{RUN}.audio_context")
    noise, names = replayed(fx)
    generation = pipeline.generate_from_contexts(
        contexts,
        video=VideoRequest(s["height"], s["width"], s["num_frames"], s["fps"], images=stored_images(fx)),
        noise=noise,
    )  # fmt: skip
    assert generation.num_frames == int(fx[f"{RUN}.num_frames"][0])
    for name in (
        "stage_1.video_latent",
        "stage_1.audio_latent",
        "upsampled_video_latent",
        "stage_2.video_latent",
        "stage_2.audio_latent",
    ):
        assert_golden_close(generation.latents[name], fx[f"{RUN}.{name}"], atol=LATENT_ATOL, name=f"{RUN}.{name}")
    assert generation.audio_sample_rate == p[RUN]["audio_sampling_rate"]
    assert_golden_close(generation.audio, fx[f"{RUN}.audio_waveform"], atol=WAVEFORM_ATOL, name=f"{RUN}.audio")
    frames = torch.cat(list(generation.frames), dim=0)
    assert_golden_close(frames, fx[f"{RUN}.video_frames"], atol=FRAMES_ATOL, name=f"{RUN}.video_frames")
    assert noise.drawn == names, f"{RUN}: drew {noise.drawn}, recorded {names}"
