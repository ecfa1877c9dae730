"""DFRPipeline on the LTX-2.5 split files reproduces the `dfr` run of `fx_pipeline_ltx25_more`: stage 1 with
keyframe slots, the detailing stage, the temporal round's tile and the stitched, trimmed latent, the frames
and the audio. The recorded draws are replayed by name (`draw_meaning` says where each went); settings,
files and layout come from the fixture; tolerances are the README's (dfr: latents 3e-3, frames 1e-2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from ltx_core.loader import LoraSpec, ModelFiles
from ltx_pipelines.dfr import TILE_SEED_STRIDE, DFRPipeline
from ltx_pipelines.engine import dfr_layout
from ltx_pipelines.engine.denoising_stage import ReplayedNoise, SeededNoise, offset_stream
from ltx_pipelines.engine.requests import VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]

CONTEXT_ATOL = 1e-4
LATENT_ATOL = 3e-3
FRAMES_ATOL = 1e-2
WAVEFORM_ATOL = 2e-3
RUN = "dfr"
_NOT_LATENTS = ("video_context", "audio_context", "video_frames", "audio_waveform", "num_frames")

# The reference's stage calls in order, by our stage names (its `stage_calls`).
_STAGES = {0: "stage_1", 1: "stage_2"}
_MEANINGS = (
    (re.compile(r"^stage\w* call (\d+): GaussianNoiser (video|audio) noise"), "call"),
    (re.compile(r"^temporal round (\d+) tile (\d+) euler-ancestral .* per step draw (\d+)"), "ancestral"),
    (re.compile(r"^diffusion video-VAE decoder draw (\d+)"), "decoder"),
)


def tile_stage_names(settings: dict[str, Any]) -> list[str]:
    """Our names of the temporal tiles, round by round, as the layout plans them for the run's settings."""
    canvas = dfr_layout.plan_canvas(settings["num_frames"])
    return [
        f"round_{plan.index}.tile_{t}"
        for plan in dfr_layout.plan_rounds(canvas, settings["temporal_upsample_rounds"])
        for t in range(len(plan.tiles))
    ]


def draw_names(meanings: list[str], calls: list[dict[str, Any]], settings: dict[str, Any]) -> list[str]:
    """Our name of each recorded draw. Stage calls after the two spatial stages are the round tiles, in order."""
    tiles = tile_stage_names(settings)
    assert len(calls) == len(_STAGES) + len(tiles), f"{len(calls)} stage calls recorded for the tiles {tiles}"
    call_names = {index: _STAGES.get(index) or tiles[index - len(_STAGES)] for index in range(len(calls))}
    names = []
    for i, meaning in enumerate(meanings):
        index, what = meaning.split(": ", 1)
        assert int(index) == i, f"draw_meaning is out of order at {meaning!r}"
        found = [(kind, m) for pattern, kind in _MEANINGS if (m := pattern.match(what))]
        assert len(found) == 1, f"no draw name for {meaning!r}"
        kind, m = found[0]
        if kind == "call":
            names.append(f"{call_names[int(m[1])]}.{m[2]}")
        elif kind == "ancestral":
            names.append(f"round_{m[1]}.tile_{m[2]}.ancestral.{m[3]}.video")
        else:
            names.append(f"decoder.{m[1]}")
    return names


@pytest.fixture(scope="module")
def fx(golden_ltx25_fixture):
    return golden_ltx25_fixture("fx_pipeline_ltx25_more")


def test_dfr_replays_the_reference(
    fx, golden_ltx25_dir: Path, golden_ltx25_manifest, golden_ltx25_dfr_files: ModelFiles, assert_golden_close
):
    p = fx.params[RUN]
    settings = p["settings"]
    names = golden_ltx25_manifest["component_files"]
    assert p["distilled_lora"] == [] and p["loras"] == [] and settings["tiling"] is None
    pipeline = DFRPipeline(
        golden_ltx25_dfr_files,
        golden_ltx25_dir / names["spatial_upsampler"],
        gemma_root=None,
        detailing_lora=[LoraSpec(golden_ltx25_dir / p["detailing_lora"]["file"], p["detailing_lora"]["strength"])],
        temporal_upsampler_path=golden_ltx25_dir / p["temporal_upsampler_file"],
        device="cpu",
        dtype=torch.float32,
        tiling=None,
        progress=False,
    )
    assert pipeline.detailing_downscale == p["dfr_layout"]["detailing_downscale_factor"]
    (contexts,), _ = pipeline.encode_prompts([fx.params["prompt"]], seed=fx.params["seed"], images=(), enhance=False)
    assert_golden_close(contexts.video, fx[f"{RUN}.video_context"], atol=CONTEXT_ATOL, name="video_context")
    assert_golden_close(contexts.audio, fx[f"{RUN}.audio_context"], atol=CONTEXT_ATOL, name="audio_context")
    draws = draw_names(p["draw_meaning"], p["stage_calls"], p["settings"])
    assert f"{RUN}.noise.{len(draws)}" not in fx
    noise = ReplayedNoise({name: fx[f"{RUN}.noise.{i}"] for i, name in enumerate(draws)})
    video = VideoRequest(
        height=settings["height"],
        width=settings["width"],
        num_frames=settings["num_frames"],
        frame_rate=settings["fps"],
    )
    final = pipeline.latents_from_contexts(
        contexts,
        video=video,
        noise=noise,
        seed=fx.params["seed"],
        temporal_upsample_rounds=settings["temporal_upsample_rounds"],
    )
    compared = 0
    for name, expected in fx.tensors.items():
        short = name.removeprefix(f"{RUN}.")
        if not name.startswith(f"{RUN}.") or fx.roles.get(name) != "output" or short in _NOT_LATENTS:
            continue
        assert short in final.stage_latents, f"the pipeline does not record {short}"
        assert_golden_close(final.stage_latents[short], expected, atol=LATENT_ATOL, name=name)
        compared += 1
    # Every stage's latents, and each tile's (with its slots): none may go unchecked.
    assert compared >= 6 + 2 * len(tile_stage_names(settings)), f"only {compared} latents compared"
    assert final.shape.frames == int(fx[f"{RUN}.num_frames"][0])
    assert final.shape.fps == p["dfr_layout"]["playback_fps"]
    generation = pipeline.decode(final)
    frames = torch.cat(list(generation.frames), dim=0)
    assert_golden_close(frames, fx[f"{RUN}.video_frames"], atol=FRAMES_ATOL, name="video_frames")
    assert generation.audio_sample_rate == p["audio_sampling_rate"]
    assert_golden_close(generation.audio, fx[f"{RUN}.audio_waveform"], atol=WAVEFORM_ATOL, name="audio_waveform")
    assert noise.drawn == draws, f"drew {noise.drawn}, recorded {draws}"


def test_seeded_streams_give_the_recorded_draws(fx):
    """`SeededNoise(seed)` draws the stages' noise and each tile's ancestral stream (seed + 1000 * round + tile)
    its re-noise, as the reference's generators did (the decoder's draw is checked by the replay)."""
    p = fx.params[RUN]
    seed = fx.params["seed"]
    main = SeededNoise(seed)
    tile_streams: dict[str, object] = {}
    for i, name in enumerate(draw_names(p["draw_meaning"], p["stage_calls"], p["settings"])):
        stored = fx[f"{RUN}.noise.{i}"]
        if name.startswith("decoder."):
            continue
        if ".ancestral." in name:
            tile = name.split(".ancestral.")[0]
            r, t = (int(x) for x in re.findall(r"\d+", tile))
            source = tile_streams.setdefault(tile, offset_stream(main, TILE_SEED_STRIDE * r + t))
            assert p["draws"][i].startswith(f"{RUN}.noise.{i}: generator seed {seed + TILE_SEED_STRIDE * r + t},")
        else:
            source = main
        drawn = source(name, stored.shape, device=torch.device("cpu"), dtype=torch.float32)
        assert torch.equal(drawn, stored), f"{name} differs from the seeded stream"
