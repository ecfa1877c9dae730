"""The one two-stage runner every two-stage pipeline goes through: how many transformers it builds, and the
requests it refuses before building anything."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec, build_model, read_checkpoint_config
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.upsampler import LATENT_UPSAMPLER
from ltx_core.model.video_vae import VIDEO_ENCODER, VIDEO_LATENT_STATISTICS
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.prompt_pipeline import Pipeline
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.engine.two_stage_runner import StagePlan, run_two_stages, simple_denoiser
from ltx_pipelines.ic_lora import ICLoraPipeline
from ltx_pipelines.lipdub import LipDubPipeline, LipDubReference
from ltx_pipelines.pipelines.distilled import DistilledPipeline

CPU = {"device": "cpu", "dtype": torch.float32, "progress": False}
VIDEO = VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0)


def _contexts(checkpoint: Path) -> TextContexts:
    transformer = read_checkpoint_config(checkpoint)["transformer"]
    g = torch.Generator().manual_seed(4)
    video = torch.randn(1, 16, transformer["cross_attention_dim"], generator=g)
    audio = torch.randn(1, 16, transformer["audio_cross_attention_dim"], generator=g)
    return TextContexts(video=video, audio=audio, mask=torch.ones(1, 16, dtype=torch.int64))


@pytest.fixture
def builds(monkeypatch) -> list[tuple[str, ...]]:
    """The LoRAs of every stage transformer a pipeline builds, in order."""
    seen: list[tuple[str, ...]] = []
    build = Pipeline.transformer

    @contextmanager
    def counting(self, loras, cache=None):
        seen.append(tuple(str(lora.path) for lora in loras))
        with build(self, loras, cache) as model:
            yield model

    monkeypatch.setattr(Pipeline, "transformer", counting)
    return seen


@pytest.mark.slow
def test_distilled_builds_one_transformer_for_both_stages(tiny_checkpoint, tiny_spatial_upsampler, builds):
    built: list[str] = []

    def recording(spec, path, **options):
        built.append(spec.name)
        return build_model(spec, path, **options)

    pipeline = DistilledPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, model_builder=recording, **CPU)
    final = pipeline.latents_from_contexts(_contexts(tiny_checkpoint), video=VIDEO, noise=SeededNoise(1))
    assert builds == [()]
    assert {"stage_1.video_latent", "upsampled_video_latent", "stage_2.video_latent"} <= set(final.stage_latents)
    # Without images no video encoder is built: the upsampling reads the latent statistics with the upsampler.
    assert built == [AV_TRANSFORMER.name, LATENT_UPSAMPLER.name, VIDEO_LATENT_STATISTICS.name]


def test_the_latent_statistics_read_alone_are_the_encoders(tiny_checkpoint):
    options = {"device": torch.device("cpu"), "dtype": torch.bfloat16}
    alone = build_model(VIDEO_LATENT_STATISTICS, tiny_checkpoint, **options).state_dict()
    encoder = build_model(VIDEO_ENCODER, tiny_checkpoint, **options).per_channel_statistics.state_dict()
    assert alone.keys() == encoder.keys() == {"std-of-means", "mean-of-means"}
    for name, tensor in encoder.items():
        assert alone[name].dtype == tensor.dtype
        torch.testing.assert_close(alone[name], tensor, rtol=0, atol=0, msg=name)


def test_ic_lora_refuses_bad_generated_keyframes_before_the_prompt_is_encoded(tiny_checkpoint, tiny_spatial_upsampler):
    pipeline = ICLoraPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, **CPU)  # no Gemma: never reached
    video = VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0, generated_keyframes=[20])
    with pytest.raises(ValueError, match="generated.keyframes"):
        pipeline.generate("p", seed=1, video=video)


@pytest.mark.slow
def test_ic_lora_builds_a_transformer_per_stage_and_stops_after_stage_1_when_asked(
    tiny_checkpoint, tiny_spatial_upsampler, builds, write_tiny_lora, tmp_path
):
    lora = write_tiny_lora(tiny_checkpoint, tmp_path / "ic.safetensors", scale=0.3)
    pipeline = ICLoraPipeline(tiny_checkpoint, tiny_spatial_upsampler, None, ic_loras=[LoraSpec(lora, 1.0)], **CPU)
    pipeline.latents_from_contexts(_contexts(tiny_checkpoint), video=VIDEO, noise=SeededNoise(1))
    assert builds == [(str(lora),), ()]  # the IC-LoRA in stage 1 only
    builds.clear()
    half = pipeline.latents_from_contexts(
        _contexts(tiny_checkpoint), video=VIDEO, noise=SeededNoise(1), skip_stage_2=True
    )
    assert builds == [(str(lora),)]
    assert half.shape.height == 32 and not any(name.startswith(("stage_2", "upsampled")) for name in half.stage_latents)


def test_a_shared_transformer_needs_the_same_loras_in_both_stages(tmp_path):
    class Unbuilt:  # nothing past the check may be reached: no model file, no placement
        checkpoint_path = tmp_path / "never-read.safetensors"

    contexts = TextContexts(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1), torch.ones(1, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"share_transformer: stage 1 fuses \[\] and stage 2 \['d.safetensors'\]"):
        run_two_stages(
            Unbuilt(), tmp_path / "up.safetensors", VideoPixelShape(1, 9, 64, 64, 24.0), SeededNoise(1),  # type: ignore[arg-type]
            stage_1=StagePlan((), distilled_sigmas()),
            stage_2=StagePlan((LoraSpec("d.safetensors", 1.0),), stage_2_distilled_sigmas()),
            stage_1_denoiser=simple_denoiser(contexts), refine_contexts=contexts, share_transformer=True,
        )  # fmt: skip


def test_pipelines_whose_length_is_a_frame_count_refuse_a_duration_range(
    tiny_checkpoint, tiny_spatial_upsampler, tmp_path
):
    from ltx_core.model.duration_head import DurationRange

    gemma = tmp_path / "gemma"
    gemma.mkdir()  # exists (checked when the pipeline is made), never read
    video = VideoRequest(duration=DurationRange())
    ic = ICLoraPipeline(tiny_checkpoint, tiny_spatial_upsampler, gemma)
    with pytest.raises(ValueError, match=r"ICLoraPipeline takes a frame count \(num_frames\), not a duration range"):
        ic.generate("p", seed=1, video=video)
    dub = LipDubPipeline(tiny_checkpoint, tiny_spatial_upsampler, gemma, lip_dub_lora=None)
    with pytest.raises(ValueError, match=r"LipDubPipeline takes a frame count"):
        dub.generate("p", seed=1, video=video, reference=LipDubReference(None))  # type: ignore[arg-type]
