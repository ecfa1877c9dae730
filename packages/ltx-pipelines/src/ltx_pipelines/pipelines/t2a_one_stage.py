"""The pipeline class of `python -m ltx_pipelines.t2a_one_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.model.transformer import AUDIO_ONLY_TRANSFORMER
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import DEFAULT_MAX_BATCH_SIZE, defaults_for_checkpoint
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.guided import (
    GuidanceSettings,
    checked_max_batch_size,
    checked_stage_sigmas,
    guided_inputs,
    negative_prompt_or_default,
    resolve_guidance,
    stage_guided_denoiser,
    stage_sigmas_or,
)
from ltx_pipelines.engine.noise_sources import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stage_blocks import run_denoising_stage

if TYPE_CHECKING:
    from typing_extensions import Unpack


# The audio grid only depends on the frame count and rate; the stage's (never built) video grid gets
# this smallest valid size.
_PLACEHOLDER_SIZE = 32


class T2AOneStagePipeline(PromptPipeline):
    """Text to audio over a full (non-distilled) checkpoint and Gemma, with audio-only guidance.

    Construct with `(checkpoint_path, gemma_root, max_batch_size=..., **PipelineOptions)`; call with a
    prompt (`seed`, `num_frames`, `frame_rate`, and optionally `negative_prompt`, `num_inference_steps`,
    `audio_guidance`) or drive `generate_from_contexts` directly. Returns an `AudioGeneration`
    (`generate` returns the final latents, undecoded).
    """

    transformer_spec = AUDIO_ONLY_TRANSFORMER  # only the audio stream's keys are read from the checkpoint
    stage_names = ("stage_1",)
    """The denoising stage, as named in noise draws, latents and `stage_sigmas`."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        gemma_root: str | Path | None,
        *,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`max_batch_size`: how many guidance passes share one transformer call (None: all); `options`: see
        `PipelineOptions`."""
        self.max_batch_size = checked_max_batch_size(max_batch_size)
        super().__init__(checkpoint_path, gemma_root, **options)

    def guidance_settings(
        self, num_inference_steps: int | None = None, audio_guidance: MultiModalGuiderParams | None = None
    ) -> GuidanceSettings:
        """The given values, with the checkpoint generation's defaults for those left as None. No video
        stream: its guidance is the no-op one, so it never asks for a negative video context."""
        defaults = defaults_for_checkpoint(self.checkpoint_path)
        return resolve_guidance(defaults, num_inference_steps, MultiModalGuiderParams(), audio_guidance)

    def generate(
        self,
        prompt: str,
        *,
        seed: int,
        num_frames: int,
        frame_rate: float,
        negative_prompt: str | None = None,
        num_inference_steps: int | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        enhance_prompt: bool = False,
    ) -> FinalLatents:
        """The latent of audio lasting `num_frames / frame_rate` seconds; the same seed gives the same audio."""
        self.audio_shape(num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, audio_guidance)  # before Gemma runs
        (contexts, negative), final_prompt = self.encode_prompts(
            [prompt, negative_prompt_or_default(negative_prompt)], seed=seed, images=(), enhance=enhance_prompt
        )
        final = self.latents_from_contexts(
            contexts, negative, num_frames=num_frames, frame_rate=frame_rate, noise=SeededNoise(seed),
            num_inference_steps=settings.num_inference_steps, audio_guidance=settings.audio,
        )  # fmt: skip
        return replace(final, prompt=final_prompt)

    @staticmethod
    def audio_shape(num_frames: int, frame_rate: float) -> VideoPixelShape:
        """The run's (placeholder-sized) pixel shape: it carries the duration the audio grid is made for."""
        if num_frames < 1:
            raise ValueError(f"num_frames must be at least 1, got {num_frames}")
        if not frame_rate > 0:
            raise ValueError(f"frame_rate must be positive, got {frame_rate}")
        return VideoPixelShape(1, num_frames, _PLACEHOLDER_SIZE, _PLACEHOLDER_SIZE, frame_rate)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        num_inference_steps: int | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
    ) -> FinalLatents:
        """The guided audio stage's latent from given contexts (batch 1) and a noise source (the
        parity seam). `negative_contexts` may be None only without audio CFG."""
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        shape = self.audio_shape(num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, audio_guidance)
        inputs = guided_inputs(settings, contexts, negative_contexts, self.placement)
        sigmas = stage_sigmas_or(given, "stage_1", lambda: LTX2Scheduler().sigmas(settings.num_inference_steps))
        # No video stream: the cross-modal (isolation) pass does not exist, whatever modality_scale says.
        with self.transformer(self.loras) as transformer:
            denoiser = stage_guided_denoiser(transformer, inputs, self.max_batch_size, self.step_cache)
            result = run_denoising_stage(
                denoiser, shape, sigmas, noise, "stage_1", self.placement.device, self.placement.dtype,
                with_video=False, progress=self.progress,
            )  # fmt: skip
        assert result.audio_latent is not None
        return self.finished(shape, None, result.audio_latent, noise, result.named("stage_1"))
