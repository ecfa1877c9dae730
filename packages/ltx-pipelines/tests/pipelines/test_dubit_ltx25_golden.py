"""Dub-It on the LTX-2.5 split files reproduces the `dubit` run of `fx_pipeline_ltx25_more`: the reference
video encoded at both stage sizes (IC reference tokens), the reference waveform encoded by the audio VAE
(audio reference tokens at negative times), stage 1, the upsampling, stage 2 with the stage-1 audio frozen
and referenced, the diffusion-decoder frames and the stage-1 audio.

The stored per-stage reference videos and the waveform stand in for the media readers. The run is replayed
twice: from its stored contexts with the recorded draws replayed by name, and end to end from its own prompt
(`params.dubit.prompt`, not the i2v/dfr `params.prompt`) and seed through the set's text encoder. Sizes,
timing, strengths and the LoRA come from the fixture; tolerances are the fixture README's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from ltx_core.loader import LoraSpec, ModelFiles, lora_metadata
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.dubit import DubItPipeline, DubItReference
from ltx_pipelines.engine.denoising_stage import FinalLatents, ReplayedNoise, SeededNoise
from ltx_pipelines.engine.ic_references import VideoReference, reference_conditionings
from ltx_pipelines.engine.model_loading import loaded
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.io import AudioClip
from ltx_pipelines.lipdub import snap_to_frame_grid

pytestmark = [pytest.mark.golden, pytest.mark.slow]

RUN = "dubit"
# The README's tolerances for `fx_pipeline_ltx25_more`.
CONTEXT_ATOL = 1e-4
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
def pipeline(fx, files, golden_ltx25_dir: Path, golden_ltx25_manifest: dict[str, Any]) -> DubItPipeline:
    p = fx.params[RUN]
    assert p["settings"]["tiling"] is None
    lora = golden_ltx25_dir / fx.params["files"]["dubit_ic_lora"]
    assert p["ic_lora"]["file"] == lora.name
    upsampler = golden_ltx25_dir / golden_ltx25_manifest["component_files"]["spatial_upsampler"]
    return DubItPipeline(
        files, upsampler, None, ic_lora=LoraSpec(lora, p["ic_lora"]["strength"]),
        device="cpu", dtype=torch.float32, tiling=None, progress=False,
    )  # fmt: skip


_STAGE_CALL = re.compile(r"^stage call (\d+): GaussianNoiser (video|audio) noise")
_DECODER = re.compile(r"^diffusion video-VAE decoder draw (\d+)")


def draw_names(meanings: list[str]) -> list[str]:
    """Our name of each recorded draw, from the run's `draw_meaning`: stage call k is our stage k+1."""
    names = []
    for i, meaning in enumerate(meanings):
        index, what = meaning.split(": ", 1)
        assert int(index) == i, f"draw_meaning is out of order at {meaning!r}"
        if m := _STAGE_CALL.match(what):
            names.append(f"stage_{int(m[1]) + 1}.{m[2]}")
        elif m := _DECODER.match(what):
            names.append(f"decoder.{m[1]}")
        else:
            raise AssertionError(f"no draw name for {meaning!r}")
    return names


def stored_reference(fx) -> DubItReference:
    """The reference clip as the readers returned it: the video at each stage's reference size, the waveform."""
    p = fx.params[RUN]
    stages = [fx[f"{RUN}.reference_video.stage_1"], fx[f"{RUN}.reference_video.stage_2"]]
    sized = {(int(t.shape[-2]), int(t.shape[-1])): t for t in stages}
    assert sorted(sized) == sorted((r["height"], r["width"]) for r in p["reference_video_requests"])
    (waveform,) = fx[f"{RUN}.reference_waveform"]
    assert waveform.shape[0] == p["settings"]["wave_channels"]
    video = VideoReference(p["settings"]["reference_strength"], sized_pixels=sized)
    return DubItReference(video, AudioClip(waveform, p["settings"]["wave_rate"]))


def test_reference_timing_and_downscale(fx, pipeline):
    p = fx.params[RUN]
    assert snap_to_frame_grid(p["reference_metadata"]["frames"]) == p["num_frames"]
    assert p["reference_metadata"]["fps"] == p["frame_rate"]
    assert pipeline.factors.downscale == p["ic_lora"]["reference_downscale_factor"]
    assert (
        int(lora_metadata(pipeline.lip_dub_lora.path).get("reference_downscale_factor", 1))
        == (p["ic_lora"]["reference_downscale_factor"])
    )


def test_reference_audio_latent(fx, pipeline, assert_golden_close):
    latent = pipeline.encode_reference_audio(stored_reference(fx).load_audio())
    name = f"{RUN}.reference_audio_latent"
    assert_golden_close(latent, fx[name], atol=1e-4, name=name)


def test_reference_video_latents_per_stage(fx, files, pipeline, assert_golden_close):
    """The reference video, at each stage's reference size, through the 2.5 conv encoder (IC reference tokens)."""
    p, s = fx.params[RUN], fx.params[RUN]["settings"]
    reference = stored_reference(fx).video
    with loaded(VIDEO_ENCODER, files, pipeline.placement) as encoder:
        for k, (height, width) in enumerate([(s["height"] // 2, s["width"] // 2), (s["height"], s["width"])], 1):
            (item,) = reference_conditionings(
                [reference], encoder, height=height, width=width, num_frames=p["num_frames"],
                factors=pipeline.factors, device=torch.device("cpu"), dtype=torch.float32,
            )  # fmt: skip
            assert item.strength == s["reference_strength"]
            name = f"{RUN}.stage_{k}.reference_video_latent"
            assert_golden_close(item.latent, fx[name], atol=1e-4, name=name)


def _video(fx) -> VideoRequest:
    """The run's size, and its length and frame rate (the reference clip's)."""
    p, s = fx.params, fx.params[RUN]["settings"]
    return VideoRequest(
        height=s["height"], width=s["width"], num_frames=p[RUN]["num_frames"], frame_rate=p[RUN]["frame_rate"]
    )


def assert_outputs_match(fx, pipeline: DubItPipeline, final: FinalLatents, assert_golden_close) -> None:
    """The run's recorded latents, then its decoded frames and stage-1 audio."""
    p = fx.params[RUN]
    for name in (
        "stage_1.video_latent",
        "stage_1.audio_latent",
        "upsampled_video_latent",
        "stage_2.video_latent",
        "stage_2.audio_latent",
    ):
        assert_golden_close(final.stage_latents[name], fx[f"{RUN}.{name}"], atol=LATENT_ATOL, name=f"{RUN}.{name}")
    generation = pipeline.decode(final)
    assert generation.audio_sample_rate == p["audio_sampling_rate"]
    assert_golden_close(generation.audio, fx[f"{RUN}.audio_waveform"], atol=WAVEFORM_ATOL, name=f"{RUN}.audio")
    frames = torch.cat(list(generation.frames), dim=0)
    assert_golden_close(frames, fx[f"{RUN}.video_frames"], atol=FRAMES_ATOL, name=f"{RUN}.video_frames")


def test_dubit_ltx25_replays_the_reference_from_stored_contexts(fx, pipeline, assert_golden_close):
    p = fx.params
    video_context = fx[f"{RUN}.video_context"]
    contexts = TextContexts(video_context, fx[f"{RUN}.audio_context"], torch.ones(video_context.shape[:2]))
    names = draw_names(p[RUN]["draw_meaning"])
    assert f"{RUN}.noise.{len(names)}" not in fx, f"{RUN}: more stored draws than draw_meaning lists"
    noise = ReplayedNoise({name: fx[f"{RUN}.noise.{i}"] for i, name in enumerate(names)})
    final = pipeline.latents_from_contexts(contexts, video=_video(fx), noise=noise, reference=stored_reference(fx))
    assert_outputs_match(fx, pipeline, final, assert_golden_close)
    assert noise.drawn == names, f"{RUN}: drew {noise.drawn}, recorded {names}"


def test_dubit_ltx25_replays_the_reference_from_its_prompt(fx, pipeline, assert_golden_close, golden_lacks):
    """The run's own prompt encodes to its stored contexts, and the pipeline from those contexts and the seed
    (our seeded draws, not the recorded ones: what `generate` runs) gives the run's outputs."""
    p = fx.params
    prompt = p[RUN].get("prompt")
    if prompt is None:
        golden_lacks(f"{fx.path.name}'s params.{RUN}.prompt (the prompt the {RUN} run encoded)")
    (contexts,), _ = pipeline.encode_prompts([prompt], seed=p["seed"], images=(), enhance=False)
    assert_golden_close(contexts.video, fx[f"{RUN}.video_context"], atol=CONTEXT_ATOL, name=f"{RUN}.video_context")
    assert_golden_close(contexts.audio, fx[f"{RUN}.audio_context"], atol=CONTEXT_ATOL, name=f"{RUN}.audio_context")
    # `generate` from here on: the seeded draws, no replayed ones.
    final = pipeline.latents_from_contexts(
        contexts, video=_video(fx), noise=SeededNoise(p["seed"]), reference=stored_reference(fx)
    )
    assert_outputs_match(fx, pipeline, final, assert_golden_close)
