"""The distilled pipeline on the LTX-2.5 split files reproduces `fx_pipeline_ltx25` end to end from the prompt:
Gemma 4 contexts, the Euler-ancestral stage 1 (its own noise stream), upsampling, stage 2, the diffusion VAE
decode and the audio decode; the `auto_duration` run also lets the duration head pick the frame count.

The recorded draws are replayed by name (`draw_meaning` says where each went) and also checked to be what
the run's seeded streams give (seed, and seed + the ancestral offset). Shapes, sizes, seeds, sigmas and
tiling come from the fixture; tolerances are the fixture README's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import ModelFiles
from ltx_core.model.duration_head import DurationRange
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.distilled import DistilledPipeline
from ltx_pipelines.engine.denoising_stage import (
    ANCESTRAL_NOISE_SEED_OFFSET,
    AncestralSampler,
    ReplayedNoise,
    SeededNoise,
    offset_stream,
)
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.prompt_pipeline import predict_frame_count
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]

# The README's tolerances for this fixture: contexts as the text path, pipeline latents, frames, waveform.
CONTEXT_ATOL = 1e-4
LATENT_ATOL = 2e-3
FRAMES_ATOL = 5e-3
WAVEFORM_ATOL = 2e-3


@pytest.fixture(scope="module")
def fx(golden_ltx25_fixture):
    return golden_ltx25_fixture("fx_pipeline_ltx25")


@pytest.fixture(scope="module")
def files(golden_ltx25_split_files: ModelFiles) -> ModelFiles:
    return golden_ltx25_split_files


@pytest.fixture(scope="module")
def upsampler(golden_ltx25_upsampler: Path) -> Path:
    return golden_ltx25_upsampler


_MEANINGS = (
    (re.compile(r"^(stage_\d) initial (video|audio) noise"), lambda m: f"{m[1]}.{m[2]}"),
    (
        re.compile(r"^(stage_\d) euler-ancestral renoise, step (\d+), (video|audio)"),
        lambda m: f"{m[1]}.ancestral.{m[2]}.{m[3]}",
    ),
    (re.compile(r"^(stage_\d) (video|audio) noise \(GaussianNoiser"), lambda m: f"{m[1]}.{m[2]}"),
    (re.compile(r"^diffusion video-VAE decoder draw (\d+)"), lambda m: f"decoder.{m[1]}"),
)  # fmt: skip


def draw_names(meanings: list[str]) -> list[str]:
    """Our name of each recorded draw, from the fixture's `draw_meaning` ("<index>: <what>")."""
    names = []
    for i, meaning in enumerate(meanings):
        index, what = meaning.split(": ", 1)
        assert int(index) == i, f"draw_meaning is out of order at {meaning!r}"
        matches = [to_name(m) for pattern, to_name in _MEANINGS if (m := pattern.match(what))]
        assert len(matches) == 1, f"no draw name for {meaning!r}"
        names.append(matches[0])
    return names


def replayed(fx, run: str) -> tuple[ReplayedNoise, list[str]]:
    names = draw_names(fx.params[run]["draw_meaning"])
    tensors = {name: fx[f"{run}.noise.{i}"] for i, name in enumerate(names)}
    assert f"{run}.noise.{len(names)}" not in fx, f"{run}: more stored draws than draw_meaning lists"
    return ReplayedNoise(tensors), names


def test_sampler_settings_match_the_fixture(fx):
    p = fx.params
    torch.testing.assert_close(distilled_sigmas(), torch.tensor(p["stage_1_sigmas"]), rtol=0, atol=0)
    torch.testing.assert_close(stage_2_distilled_sigmas(), torch.tensor(p["stage_2_sigmas"]), rtol=0, atol=0)
    sampler = AncestralSampler()
    assert (sampler.eta, sampler.s_noise) == (p["ancestral"]["eta"], p["ancestral"]["s_noise"])
    assert p["seed"] + ANCESTRAL_NOISE_SEED_OFFSET == p["ancestral"]["noise_seed"]


def test_seeded_streams_give_the_recorded_draws(fx):
    """`SeededNoise(seed)` and its ancestral stream draw exactly what the reference's generators drew, in the
    pipeline's order (the decoder's draw, whose shape is the decoder's own, is checked by the replay)."""
    run = "t2v"
    noise, names = replayed(fx, run)
    main, ancestral = SeededNoise(fx.params["seed"]), None
    for name in names:
        if name.startswith("decoder."):
            continue
        stored = noise.tensors[name]
        if ".ancestral." in name:
            ancestral = ancestral or offset_stream(main, ANCESTRAL_NOISE_SEED_OFFSET)
            source = ancestral
        else:
            source = main
        drawn = source(name, stored.shape, device=torch.device("cpu"), dtype=torch.float32)
        assert torch.equal(drawn, stored), f"{run}: {name} differs from the seeded stream"


def test_duration_head_picks_the_recorded_length(fx, files):
    """The auto-duration run's frame count, from its prompt's contexts and requested range."""
    run = "auto_duration"
    request = fx.params[run]["num_frames_request"]
    contexts = TextContexts(
        video=fx[f"{run}.video_context"],
        audio=fx[f"{run}.audio_context"],
        mask=torch.ones(fx[f"{run}.video_context"].shape[:2], dtype=torch.int64),
    )
    frames = predict_frame_count(
        files,
        Placement(torch.device("cpu"), torch.float32),
        contexts,
        frame_rate=fx.params["fps"],
        duration_range=DurationRange(request["min_seconds"], request["max_seconds"]),
    )
    assert frames == int(fx[f"{run}.num_frames"][0]) == fx.params[run]["num_frames"]


@pytest.mark.parametrize("run", ["t2v", "auto_duration"])
def test_distilled_ltx25_replays_the_reference(fx, files, upsampler, run, assert_golden_close):
    """Both runs from the prompt: a given frame count (untiled decode), and the length picked by the duration
    head in the requested range (tiled decode, as recorded)."""
    p = fx.params
    request = p[run]["num_frames_request"]
    pipeline = DistilledPipeline(
        files,
        upsampler,
        gemma_root=None,
        device="cpu",
        dtype=torch.float32,
        tiling=TilingConfig.from_dict(p[run]["tiling_config"]) if p[run]["tiling_config"] else None,
        progress=False,
    )
    (contexts,), _ = pipeline.encode_prompts([p["prompt"]], seed=p["seed"], images=(), enhance=False)
    assert_golden_close(contexts.video, fx[f"{run}.video_context"], atol=CONTEXT_ATOL, name=f"{run}.video_context")
    assert_golden_close(contexts.audio, fx[f"{run}.audio_context"], atol=CONTEXT_ATOL, name=f"{run}.audio_context")
    noise, names = replayed(fx, run)
    if "num_frames" in request:
        num_frames = request["num_frames"]
    else:
        num_frames = predict_frame_count(
            files,
            pipeline.placement,
            contexts,
            frame_rate=p["fps"],
            duration_range=DurationRange(request["min_seconds"], request["max_seconds"]),
        )
    assert num_frames == int(fx[f"{run}.num_frames"][0])
    video = VideoRequest(height=p["height"], width=p["width"], num_frames=num_frames, frame_rate=p["fps"])
    generation = pipeline.generate_from_contexts(contexts, video=video, noise=noise)
    for name in (
        "stage_1.video_latent",
        "stage_1.audio_latent",
        "upsampled_video_latent",
        "stage_2.video_latent",
        "stage_2.audio_latent",
    ):
        assert_golden_close(generation.latents[name], fx[f"{run}.{name}"], atol=LATENT_ATOL, name=f"{run}.{name}")
    assert generation.audio_sample_rate == p[run]["audio_sampling_rate"]
    assert_golden_close(generation.audio, fx[f"{run}.audio_waveform"], atol=WAVEFORM_ATOL, name=f"{run}.audio")
    frames = torch.cat(list(generation.frames), dim=0)
    assert_golden_close(frames, fx[f"{run}.video_frames"], atol=FRAMES_ATOL, name=f"{run}.video_frames")
    # Every recorded draw was used once, in the reference's order.
    assert noise.drawn == names, f"{run}: drew {noise.drawn}, recorded {names}"


@pytest.mark.parametrize("run", ["t2v", "auto_duration"])
def test_a_seeded_call_from_the_prompt_matches_the_reference(fx, files, upsampler, run, assert_golden_close):
    """The user's call - prompt, seed, a frame count or a duration range - with no replay: the pipeline's own
    seeded streams (the seed's, and the ancestral seed + 10000) draw what the reference drew, the decoder's
    canvas noise included."""
    p = fx.params
    request = p[run]["num_frames_request"]
    tiling = p[run]["tiling_config"]
    pipeline = DistilledPipeline(
        files,
        upsampler,
        gemma_root=None,
        device="cpu",
        dtype=torch.float32,
        tiling=TilingConfig.from_dict(tiling) if tiling else None,
        progress=False,
    )
    length: dict[str, Any] = {"num_frames": request.get("num_frames")}
    if "min_seconds" in request:
        length["duration"] = DurationRange(request["min_seconds"], request["max_seconds"])
    video = VideoRequest(height=p["height"], width=p["width"], frame_rate=p["fps"], **length)
    generation = pipeline(p["prompt"], seed=p["seed"], video=video)
    assert generation.num_frames == int(fx[f"{run}.num_frames"][0])
    for name in ("stage_1.video_latent", "stage_2.video_latent", "stage_2.audio_latent"):
        assert_golden_close(generation.latents[name], fx[f"{run}.{name}"], atol=LATENT_ATOL, name=f"{run}.{name}")
    assert_golden_close(generation.audio, fx[f"{run}.audio_waveform"], atol=WAVEFORM_ATOL, name=f"{run}.audio")
    frames = torch.cat(list(generation.frames), dim=0)
    assert_golden_close(frames, fx[f"{run}.video_frames"], atol=FRAMES_ATOL, name=f"{run}.video_frames")
