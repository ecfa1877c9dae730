"""The audio pipelines of `fx_pipeline_conditioned` (`t2a`, `a2vid`, `retake`), replayed through the
seam their command lines take (`generate_from_contexts`) from the stored contexts, media inputs and
recorded draws; every draw must be served exactly once. Settings, shapes and schedules all come
from the fixture's params (the keyframe and IC-LoRA runs belong to their own pipelines' tests).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import LTX2Scheduler, distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec, selected_keys
from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER, VIDEO_ONLY_TRANSFORMER
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import ReplayedNoise
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest

pytestmark = [pytest.mark.golden, pytest.mark.slow]


@pytest.fixture(scope="module")
def fx(golden_fixture):
    return golden_fixture("fx_pipeline_conditioned")


def _contexts(fx, prefix: str) -> TextContexts:
    video, audio = fx[f"{prefix}video_context"], fx[f"{prefix}audio_context"]
    return TextContexts(video=video, audio=audio, mask=torch.ones(video.shape[:2], dtype=torch.int64))


def _guidance(params: dict[str, Any]) -> MultiModalGuiderParams:
    return MultiModalGuiderParams(**{**params, "stg_blocks": tuple(params["stg_blocks"])})


def _sigmas(p: dict[str, Any], key: str) -> torch.Tensor:
    return torch.tensor(p[key], dtype=torch.float32)


def _common(p: dict[str, Any]) -> dict[str, Any]:
    return {"device": "cpu", "dtype": torch.float32, "progress": False}


def _require_run(p: dict[str, Any], run: str, golden_lacks: Callable[[str], None]) -> None:
    if f"{run}.pipeline" not in p:
        golden_lacks(f"fx_conditioned_pipelines: the {run!r} run")


class Compared:
    def __init__(self, fx, run: str, assert_golden_close) -> None:
        self.fx, self.run, self.check = fx, run, assert_golden_close
        self.diffs: dict[str, float] = {}

    def __call__(self, name: str, got: torch.Tensor) -> None:
        key = f"{self.run}.{name}"
        want = self.fx[key]
        self.diffs[key] = float((got.double().cpu() - want.double()).abs().max())
        self.check(got, want, name=key)

    def all_outputs_compared(self) -> None:
        outputs = {k for k, role in self.fx.roles.items() if role == "output" and k.startswith(f"{self.run}.")}
        unchecked = sorted(outputs - set(self.diffs))
        assert not unchecked, f"{self.run}: stored outputs not reproduced: {unchecked}"
        print(f"{self.run} max |diff|: " + ", ".join(f"{k}={v:.2e}" for k, v in self.diffs.items()))


def _check_draws(p: dict[str, Any], run: str, noise: ReplayedNoise) -> None:
    assert not noise.repeated(), f"{run}: draws served more than once: {noise.repeated()}"
    assert not noise.unused(), f"{run}: stored draws never used: {noise.unused()}"
    listed = p[f"{run}.generator_draws"]
    assert [d for d in noise.drawn if d in listed] == [d for d in listed if d in noise.stored], f"{run}: draw order"


def test_text_to_audio_replays_the_reference(fx, golden_checkpoint, assert_golden_close, read_keys, golden_lacks):
    from ltx_pipelines.t2a_one_stage import T2AOneStagePipeline

    p = fx.params
    _require_run(p, "t2a", golden_lacks)
    settings = p["t2a.settings"]
    pipeline = T2AOneStagePipeline(golden_checkpoint, None, **_common(p))
    # The pipeline's own schedule is the recorded one.
    own = LTX2Scheduler().sigmas(settings["steps"])
    torch.testing.assert_close(own, _sigmas(p, "t2a.stage_1_sigmas"), rtol=0, atol=1e-6)

    noise = ReplayedNoise(fx.tensors, prefix="t2a.noise.")
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""),
        _contexts(fx, "negative_"),
        video=VideoRequest(num_frames=settings["frames"], frame_rate=p["fps"]),
        noise=noise,
        guidance=GuidanceRequest(num_inference_steps=settings["steps"], audio=_guidance(settings["audio"])),
    )
    compare = Compared(fx, "t2a", assert_golden_close)
    for name, latent in generation.latents.items():
        compare(name, latent)
    assert generation.sample_rate == p["t2a.audio_sampling_rate"]
    compare("audio_waveform", generation.audio)
    compare.all_outputs_compared()
    _check_draws(p, "t2a", noise)
    # No video weight was read; every audio-stream weight was.
    video_keys = set(selected_keys(golden_checkpoint, VIDEO_ONLY_TRANSFORMER.ops))
    audio_keys = set(selected_keys(golden_checkpoint, AUDIO_ONLY_TRANSFORMER.ops))
    assert not video_keys & set(read_keys), sorted(video_keys & set(read_keys))[:5]
    assert audio_keys <= set(read_keys)


def _stage_loras(p: dict[str, Any], run: str, stage: str, folder: Path) -> list[LoraSpec]:
    return [LoraSpec(folder / name, float(strength)) for name, strength in p[f"{run}.{stage}_loras"]]


def test_audio_to_video_replays_the_reference(fx, golden_checkpoint, golden_spatial_upsampler, golden_dir,
                                              assert_golden_close, golden_lacks):  # fmt: skip
    from ltx_pipelines.a2vid_two_stage import A2VidPipelineTwoStage, AudioInput

    p = fx.params
    _require_run(p, "a2vid", golden_lacks)
    settings = p["a2vid.settings"]
    assert not p["a2vid.stage_1_loras"], "stage 1 runs without LoRAs here"
    (distilled,) = _stage_loras(p, "a2vid", "stage_2", golden_dir)
    pipeline = A2VidPipelineTwoStage(
        golden_checkpoint, golden_spatial_upsampler, None, distilled_lora=distilled,
        tiling=TilingConfig.from_dict(p["tiling_config"]), **_common(p),
    )  # fmt: skip
    torch.testing.assert_close(
        LTX2Scheduler().sigmas(settings["steps"]), _sigmas(p, "a2vid.stage_1_sigmas"), rtol=0, atol=1e-6
    )
    torch.testing.assert_close(stage_2_distilled_sigmas(), _sigmas(p, "a2vid.stage_2_sigmas"), rtol=0, atol=1e-6)
    wave = fx["a2vid.input_waveform"]
    noise = ReplayedNoise(fx.tensors, prefix="a2vid.noise.")
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""),
        _contexts(fx, "negative_"),
        audio=AudioInput(wave, settings["wave_rate"]),
        video=VideoRequest(height=p["height"], width=p["width"], num_frames=p["frames"], frame_rate=p["fps"]),
        noise=noise,
        guidance=GuidanceRequest(num_inference_steps=settings["steps"], video=_guidance(settings["video"])),
    )
    compare = Compared(fx, "a2vid", assert_golden_close)
    for name, latent in generation.latents.items():
        compare(name, latent)
    compare.all_outputs_compared()
    frames = torch.cat(list(generation.frames))
    assert list(frames.shape) == p["a2vid.video_frames_shape"]
    # The shipped audio is the input itself (cut to the video), at its own rate: no VAE round trip.
    assert generation.audio_sample_rate == p["a2vid.audio_sampling_rate"]
    seconds = p["frames"] / p["fps"]
    assert torch.equal(generation.audio, wave[0, :, : round(seconds * settings["wave_rate"])])
    encoded = generation.latents["encoded_audio_latent"]
    assert encoded.shape[2] == p["a2vid.audio_latent_frames_trimmed_to"]
    for stage in ("stage_1", "stage_2"):
        assert torch.equal(generation.latents[f"{stage}.audio_latent"], encoded), f"{stage} changed the audio"
    _check_draws(p, "a2vid", noise)


def test_retake_replays_the_reference(fx, golden_checkpoint, assert_golden_close, golden_lacks):
    from ltx_core.types import VideoPixelShape
    from ltx_pipelines.retake import RetakePipeline, RetakeRegion, RetakeSource

    p = fx.params
    _require_run(p, "retake", golden_lacks)
    settings = p["retake.settings"]
    assert not p["retake.stage_1_loras"], "the retake run fuses no LoRA"
    pipeline = RetakePipeline(
        golden_checkpoint, None, distilled=settings["distilled"], tiling=TilingConfig.from_dict(p["tiling_config"]),
        **_common(p),
    )  # fmt: skip
    own = distilled_sigmas() if settings["distilled"] else LTX2Scheduler().sigmas(settings["steps"])
    torch.testing.assert_close(own, _sigmas(p, "retake.stage_1_sigmas"), rtol=0, atol=1e-6)
    source_video, source_audio = fx["retake.source_video_latent"], fx["retake.source_audio_latent"]
    source = RetakeSource(
        VideoPixelShape(1, settings["frames"], p["height"], p["width"], p["fps"]),
        video_latent=source_video,
        audio_latent=source_audio,
    )
    noise = ReplayedNoise(fx.tensors, prefix="retake.noise.")
    guided = {} if settings["distilled"] else {
        "negative_contexts": _contexts(fx, "negative_"),
        "guidance": GuidanceRequest(
            num_inference_steps=settings["steps"], video=_guidance(settings["video"]),
            audio=_guidance(settings["audio"]),
        ),
    }  # fmt: skip
    generation = pipeline.generate_from_contexts(
        _contexts(fx, ""),
        source=source,
        region=RetakeRegion(
            settings["start_time"], settings["end_time"], settings["regenerate_video"], settings["regenerate_audio"]
        ),
        noise=noise,
        **guided,
    )
    compare = Compared(fx, "retake", assert_golden_close)
    for name in ("stage_1.video_latent", "stage_1.audio_latent"):
        compare(name, generation.latents[name])
    assert generation.audio_sample_rate == p["retake.audio_sampling_rate"]
    compare("audio_waveform", generation.audio)
    compare.all_outputs_compared()
    frames = torch.cat(list(generation.frames))
    assert list(frames.shape) == p["retake.video_frames_shape"]
    # Outside the region the result is the source bit for bit, exactly where the reference's is.
    unchanged = p["retake.latent_frames_bitwise_unchanged"]
    for modality, source_latent in (("video", source_video), ("audio", source_audio)):
        got = generation.latents[f"stage_1.{modality}_latent"]
        same = [bool(torch.equal(got[:, :, i], source_latent[:, :, i])) for i in range(got.shape[2])]
        assert same == unchanged[modality], f"{modality}: unchanged steps {same} vs {unchanged[modality]}"
    _check_draws(p, "retake", noise)
