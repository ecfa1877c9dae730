"""The keyframe and IC-LoRA pipelines, driven through their context/noise seam, reproduce the `keyframes`
and `ic_lora` runs of `fx_pipeline_conditioned`.

Each run is replayed through `generate_from_contexts` - the code path the command line takes - from the
stored contexts, the stored media inputs (keyframe pixels per stage size, the reference video) and the
recorded draws; every stored output of the run is compared and every stored draw must be consumed
exactly once, in the recorded order. Sizes, steps, guidance, LoRAs and strengths come from the params.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import LoraSpec
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import ImageCondition, ReplayedNoise
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ic_lora import ICLoraPipeline, VideoReference
from ltx_pipelines.keyframe_interpolation import KeyframeInterpolationPipeline

pytestmark = [pytest.mark.golden, pytest.mark.slow]


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_pipeline_conditioned")


def _contexts(fx, prefix: str) -> TextContexts:
    video, audio = fx[f"{prefix}video_context"], fx[f"{prefix}audio_context"]
    return TextContexts(video=video, audio=audio, mask=torch.ones(video.shape[:2], dtype=torch.int64))


def _guidance(params: dict[str, Any]) -> MultiModalGuiderParams:
    return MultiModalGuiderParams(**{**params, "stg_blocks": tuple(params["stg_blocks"])})


def _loras(p: dict[str, Any], run: str, stage: str, golden_dir) -> list[LoraSpec]:
    return [LoraSpec(golden_dir / f, float(w)) for f, w in p[f"{run}.{stage}_loras"]]


def _check(fx, run: str, generation: Generation, noise: ReplayedNoise, assert_golden_close) -> dict[str, float]:
    p = fx.params
    diffs: dict[str, float] = {}

    def compare(name: str, got: torch.Tensor) -> None:
        key = f"{run}.{name}"
        want = fx[key]
        diffs[key] = float((got.double().cpu() - want.double()).abs().max())
        assert_golden_close(got, want, name=key)

    for name, latent in generation.latents.items():
        if f"{run}.{name}" in fx:
            compare(name, latent)
    frames = torch.cat(list(generation.frames), dim=0)
    assert list(frames.shape) == p[f"{run}.video_frames_shape"], f"{run}: frames {tuple(frames.shape)}"
    assert generation.audio_sample_rate == p[f"{run}.audio_sampling_rate"]
    compare("audio_waveform", generation.audio)

    outputs = {k for k, role in fx.roles.items() if role == "output" and k.startswith(f"{run}.")}
    assert not outputs - set(diffs), f"{run}: stored outputs not produced: {sorted(outputs - set(diffs))}"
    assert not noise.repeated(), f"{run}: draws served more than once: {noise.repeated()}"
    assert not noise.unused(), f"{run}: stored draws never used: {noise.unused()}"
    listed = p[f"{run}.generator_draws"]
    assert [d for d in noise.drawn if d in listed] == [d for d in listed if d in noise.stored], f"{run}: draw order"
    return diffs


def test_keyframe_interpolation_replays_the_reference(
    fx, golden_checkpoint, golden_spatial_upsampler, golden_dir, assert_golden_close
):
    p, run = fx.params, "keyframes"
    settings = p[f"{run}.settings"]
    stage_1 = _loras(p, run, "stage_1", golden_dir)
    distilled = [spec for spec in _loras(p, run, "stage_2", golden_dir) if spec not in stage_1]
    assert len(distilled) == 1, f"{run}: stage 2 adds {distilled}"
    pipeline = KeyframeInterpolationPipeline(
        golden_checkpoint, golden_spatial_upsampler, None,
        distilled_lora=distilled[0], loras=stage_1, device="cpu", dtype=torch.float32,
        tiling=TilingConfig.from_dict(p["tiling_config"]), progress=False,
    )  # fmt: skip
    height, width = p["height"], p["width"]
    sizes = {"stage_1": (height // 2, width // 2), "stage_2": (height, width)}
    images = [
        ImageCondition(
            frame_idx=int(frame_idx),
            strength=float(strength),
            pixels={sizes[s]: fx[f"{run}.image_{i}.{s}"] for s in sizes},
        )
        for i, (frame_idx, strength) in enumerate(settings["keyframes"])
    ]
    noise = ReplayedNoise(fx.tensors, prefix=f"{run}.noise.")
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""), _contexts(fx, "negative_"),
        video=VideoRequest(height=height, width=width, num_frames=p["frames"], frame_rate=p["fps"], images=images),
        noise=noise,
        guidance=GuidanceRequest(
            num_inference_steps=settings["steps"], video=_guidance(settings["video"]),
            audio=_guidance(settings["audio"]),
        ),
    )  # fmt: skip
    diffs = _check(fx, run, generation, noise, assert_golden_close)
    print(f"{run}: max |diff| {max(diffs.values()):.3g} over {len(diffs)} tensors")


def test_ic_lora_replays_the_reference(fx, golden_pipeline_models, golden_dir, assert_golden_close):
    """From the single file and from the diffusers folder of the same weights (IC-LoRA fused into it)."""
    p, run = fx.params, "ic_lora"
    settings = p[f"{run}.settings"]
    assert p[f"{run}.stage_2_loras"] == [], f"{run}: the reference's stage 2 runs without LoRAs"
    checkpoint, upsampler = golden_pipeline_models
    pipeline = ICLoraPipeline(
        checkpoint, upsampler, None,
        ic_loras=_loras(p, run, "stage_1", golden_dir), device="cpu", dtype=torch.float32,
        tiling=TilingConfig.from_dict(p["tiling_config"]), progress=False,
    )  # fmt: skip
    assert pipeline.reference_downscale_factor == p[f"{run}.reference_downscale_factor"]
    assert pipeline.reference_temporal_scale_factor == p[f"{run}.reference_temporal_scale_factor"]
    mask_key = f"{run}.conditioning_attention_mask"
    mask = fx[mask_key] if mask_key in fx.tensors else None  # stored only for runs with a mask
    reference = VideoReference(
        strength=float(settings["reference_strength"]),
        pixels=fx[f"{run}.reference_video"],
    )
    noise = ReplayedNoise(fx.tensors, prefix=f"{run}.noise.")
    video = VideoRequest(
        height=settings["height"], width=settings["width"], num_frames=p["frames"], frame_rate=p["fps"]
    )
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""), video=video, noise=noise, references=[reference],
        attention_strength=float(settings["attention_strength"]),
        attention_mask=mask,
    )  # fmt: skip
    diffs = _check(fx, run, generation, noise, assert_golden_close)
    print(f"{run}: max |diff| {max(diffs.values()):.3g} over {len(diffs)} tensors")
