"""The pipeline class of `python -m ltx_pipelines.ic_lora`
(what it does: that module's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.conditioning import ConditioningItem
from ltx_core.loader import LoraSpec
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import FinalLatents, NoiseSource, contexts_on, finished_latents
from ltx_pipelines.engine.ic_references import (
    ReferenceFactors,
    VideoReference,
    check_attention_mask,
    reference_conditionings,
    reference_factors,
)
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, TwoStagePromptPipeline, refuse_duration
from ltx_pipelines.engine.requests import VideoRequest
from ltx_pipelines.engine.two_stage_runner import (
    ConditioningHook,
    StagePlan,
    half_size,
    run_two_stages,
    simple_denoiser,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


__all__ = ["ICLoraPipeline", "VideoReference"]


logger = logging.getLogger(__name__)


class ICLoraPipeline(TwoStagePromptPipeline):
    """Distilled two-stage generation guided by IC reference videos through stage-1 IC-LoRAs.

    `ic_loras` are fused into the stage-1 transformer only; `loras` (the options) into both stages.
    The reference downscale and temporal scale factors are read from the IC-LoRAs' metadata when the
    pipeline is constructed (1 where absent; LoRAs that disagree are refused).
    """

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        ic_loras: Sequence[LoraSpec] = (),
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`options`: see `PipelineOptions`."""
        super().__init__(checkpoint_path, spatial_upsampler_path, gemma_root, **options)
        self.ic_loras = tuple(ic_loras)
        self.factors: ReferenceFactors = reference_factors(self.ic_loras)
        if not self.ic_loras:
            logger.warning("no IC-LoRA given: the references condition a transformer not trained for them")

    @property
    def reference_downscale_factor(self) -> int:
        return self.factors.downscale

    @property
    def reference_temporal_scale_factor(self) -> int:
        return self.factors.temporal

    def generate(
        self,
        prompt: str,
        *,
        seed: int,
        video: VideoRequest = VideoRequest(),  # noqa: B008 - a frozen value
        enhance_prompt: bool = False,
        references: Sequence[VideoReference] = (),
        attention_strength: float = 1.0,
        attention_mask: torch.Tensor | None = None,
        skip_stage_2: bool = False,
    ) -> FinalLatents:
        """Generate from a prompt and the reference videos (no guidance); the same seed gives the same result.
        What `video` leaves unset takes the model version's defaults."""
        refuse_duration(video, type(self).__name__)
        call = self.prompted(prompt, seed=seed, video=video, enhance_prompt=enhance_prompt)
        final = self.latents_from_contexts(
            call.contexts, video=call.video, noise=call.noise, references=references,
            attention_strength=attention_strength, attention_mask=attention_mask, skip_stage_2=skip_stage_2,
        )  # fmt: skip
        return replace(final, prompt=call.prompt)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        *,
        video: VideoRequest,
        noise: NoiseSource,
        references: Sequence[VideoReference] = (),
        attention_strength: float = 1.0,
        attention_mask: torch.Tensor | None = None,
        skip_stage_2: bool = False,
    ) -> FinalLatents:
        """Both stages (or stage 1 only), to the final latents, from given contexts, a filled `video` request and
        a noise source.

        `attention_mask`: (1, 1, F, h, w) in [0, 1] over the stage-1 frames, times `attention_strength`,
        weights the attention between generated and reference tokens.
        """
        full = video.pixel_shape(self.spatial_multiple)
        if not 0.0 <= attention_strength <= 1.0:
            raise ValueError(f"attention_strength must be in [0, 1], got {attention_strength}")
        if attention_mask is not None:
            check_attention_mask(attention_mask)
        positive = contexts_on(contexts, self.placement)
        hook = _StageOneReferences(self, references, attention_strength, attention_mask)
        result = run_two_stages(
            self, self.spatial_upsampler_path, full, noise,
            stage_1=StagePlan((*self.loras, *self.ic_loras), distilled_sigmas()),
            stage_2=None if skip_stage_2 else StagePlan(self.loras, stage_2_distilled_sigmas()),
            stage_1_denoiser=simple_denoiser(positive), stage_2_denoiser=simple_denoiser(positive),
            refine_contexts=positive, images=video.images, generated_keyframes=video.generated_keyframes, hook=hook,
        )  # fmt: skip
        if result.stage_2 is None:
            first = result.stage_1
            return finished_latents(
                self, half_size(full), first.video_latent, first.audio_latent, noise, result.latents
            )
        return finished_latents(
            self, full, result.stage_2.video_latent, result.stage_2.audio_latent, noise, result.latents
        )


@dataclass(frozen=True)
class _StageOneReferences(ConditioningHook):
    """The reference videos, encoded at the stage-1 size: stage 2 refines without them."""

    pipeline: ICLoraPipeline
    references: Sequence[VideoReference]
    attention_strength: float
    attention_mask: torch.Tensor | None
    encodes: bool = True

    def encode(self, encoder: nn.Module, half: VideoPixelShape, full: VideoPixelShape) -> list[list[ConditioningItem]]:
        placement = self.pipeline.placement
        stage_1 = reference_conditionings(
            self.references, encoder, height=half.height, width=half.width, num_frames=half.frames,
            factors=self.pipeline.factors, device=placement.device, dtype=placement.dtype,
            attention_strength=self.attention_strength, attention_mask=self.attention_mask,
        )  # fmt: skip
        return [stage_1, []]
