"""What a caller injects into a pipeline: the model builder every model comes from, and a transformer it
already holds in memory (the trainer's, with its current LoRA), used as it is and left to the caller."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

from ltx_core.loader import LoraSpec, build_model
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import SeededNoise
from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest
from ltx_pipelines.ti2vid_one_stage import TI2VidOneStagePipeline

COMMON: dict[str, Any] = {"device": "cpu", "dtype": torch.float32, "progress": False}


def _contexts(seed: int, video_width: int, audio_width: int) -> TextContexts:
    g = torch.Generator().manual_seed(seed)
    return TextContexts(torch.randn(1, 16, video_width, generator=g), torch.randn(1, 16, audio_width, generator=g),
                        torch.ones(1, 16, dtype=torch.int64))  # fmt: skip


def _video_latent(pipeline: TI2VidOneStagePipeline, widths: tuple[int, int]) -> torch.Tensor:
    generation = pipeline.generate_from_contexts(
        _contexts(0, *widths), _contexts(1, *widths),
        video=VideoRequest(height=64, width=64, num_frames=9, frame_rate=24.0),
        noise=SeededNoise(5), guidance=GuidanceRequest(num_inference_steps=2),
    )  # fmt: skip
    assert sum(chunk.shape[0] for chunk in generation.frames) == 9  # the decoder is built while consumed
    return generation.latents["stage_1.video_latent"]


@pytest.fixture(scope="module")
def widths(tiny_checkpoint) -> tuple[int, int]:
    """The context widths the tiny transformer takes: its streams' widths (LTX-2.3 projects in the connector)."""
    config = build_model(AV_TRANSFORMER, tiny_checkpoint, dtype=torch.float32, device="meta").config
    assert config.caption_channels is None, "a checkpoint that projects captions in the transformer"
    return config.video.dim, config.audio.dim


@pytest.fixture
def counting_builder() -> tuple[Counter, Any]:
    built: Counter = Counter()

    def build(spec: Any, path: Any, **options: Any) -> torch.nn.Module:
        built[spec.name] += 1
        return build_model(spec, path, **options)

    return built, build


def test_every_model_comes_from_the_injected_builder(tiny_checkpoint, widths, counting_builder):
    built, builder = counting_builder
    pipeline = TI2VidOneStagePipeline(tiny_checkpoint, None, model_builder=builder, **COMMON)
    _video_latent(pipeline, widths)
    assert built[AV_TRANSFORMER.name] == 1
    assert len(built) >= 2, f"only {dict(built)} came from the builder: the VAE decoder did not"


def test_a_built_transformer_runs_as_it_is_and_stays_the_callers(tiny_checkpoint, widths, counting_builder):
    built, builder = counting_builder
    transformer = build_model(AV_TRANSFORMER, tiny_checkpoint, dtype=torch.float32, device="cpu")
    weight = next(transformer.parameters())
    injected = TI2VidOneStagePipeline(
        tiny_checkpoint, None, built_transformer=transformer, model_builder=builder, **COMMON
    )
    got = _video_latent(injected, widths)
    assert built[AV_TRANSFORMER.name] == 0, "the pipeline built a transformer of its own"
    assert weight.device.type == "cpu" and torch.isfinite(weight).all(), "the caller's transformer was freed"
    want = _video_latent(TI2VidOneStagePipeline(tiny_checkpoint, None, **COMMON), widths)
    assert torch.equal(got, want)


def test_a_built_transformer_takes_no_lora_file(tiny_checkpoint, tmp_path):
    transformer = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="loras cannot apply"):
        TI2VidOneStagePipeline(tiny_checkpoint, None, built_transformer=transformer,
                               loras=[LoraSpec(tmp_path / "lora.safetensors")], **COMMON)  # fmt: skip
