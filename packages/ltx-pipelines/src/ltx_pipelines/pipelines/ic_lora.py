"""The pipeline class of `python -m ltx_pipelines.ic_lora`
(what it does: that module's docstring)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ltx_core.components.denoisers import SimpleDenoiser
from ltx_core.components.schedulers import distilled_sigmas, stage_2_distilled_sigmas
from ltx_core.loader import LoraSpec, StateDictCache
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import TWO_STAGE_SPATIAL_MULTIPLE
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.ic_references import (
    ReferenceFactors,
    VideoReference,
    check_attention_mask,
    reference_conditionings,
    reference_factors,
)
from ltx_pipelines.engine.noise_sources import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stage_blocks import ImageCondition, run_denoising_stage
from ltx_pipelines.engine.stage_steps import contexts_on, encode_conditioning_images, upsample_between_stages

if TYPE_CHECKING:
    from typing_extensions import Unpack


__all__ = ["ICLoraPipeline", "VideoReference"]


logger = logging.getLogger(__name__)


class ICLoraPipeline(PromptPipeline):
    """Distilled two-stage generation guided by IC reference videos through stage-1 IC-LoRAs.

    `ic_loras` are fused into the stage-1 transformer only; `loras` (the options) into both stages.
    The reference downscale and temporal scale factors are read from the IC-LoRAs' metadata when the
    pipeline is constructed (1 where absent; LoRAs that disagree are refused).
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE

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
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
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
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
        references: Sequence[VideoReference] = (),
        attention_strength: float = 1.0,
        attention_mask: torch.Tensor | None = None,
        skip_stage_2: bool = False,
    ) -> FinalLatents:
        """Generate from a prompt and the reference videos (no guidance); the same seed gives the same result."""
        self.output_shape(height, width, num_frames, frame_rate)
        (contexts,), final_prompt = self.encode_prompts([prompt], seed=seed, images=images, enhance=enhance_prompt)
        final = self.latents_from_contexts(
            contexts, height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            noise=SeededNoise(seed), images=images, references=references, attention_strength=attention_strength,
            attention_mask=attention_mask, skip_stage_2=skip_stage_2,
        )  # fmt: skip
        return replace(final, prompt=final_prompt)

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
        references: Sequence[VideoReference] = (),
        attention_strength: float = 1.0,
        attention_mask: torch.Tensor | None = None,
        skip_stage_2: bool = False,
    ) -> FinalLatents:
        """Both stages (or stage 1 only), to the final latents, from given contexts and a noise source.

        `attention_mask`: (1, 1, F, h, w) in [0, 1] over the stage-1 frames, times `attention_strength`,
        weights the attention between generated and reference tokens.
        """
        full = self.output_shape(height, width, num_frames, frame_rate)
        half = VideoPixelShape(1, num_frames, height // 2, width // 2, frame_rate)
        if not 0.0 <= attention_strength <= 1.0:
            raise ValueError(f"attention_strength must be in [0, 1], got {attention_strength}")
        if attention_mask is not None:
            check_attention_mask(attention_mask)
        device, dtype = self.placement.device, self.placement.dtype
        positive = contexts_on(contexts, self.placement)

        def encode_references(encoder: torch.nn.Module) -> list[list[Any]]:
            stage_1 = reference_conditionings(
                references, encoder, height=half.height, width=half.width, num_frames=num_frames,
                factors=self.factors, device=device, dtype=dtype,
                attention_strength=attention_strength, attention_mask=attention_mask,
            )  # fmt: skip
            return [stage_1, []]  # stage 2 refines without the references

        encoded = encode_conditioning_images(
            images, self.checkpoint_path, self.placement, [half, full],
            keep_latent_statistics=not skip_stage_2, also_encode=encode_references,
        )  # fmt: skip
        stage_1_items, stage_2_items = encoded.per_stage

        # On the CPU the two transformer builds share one read of the file (see TI2VidTwoStagesPipeline).
        cache = StateDictCache() if device.type == "cpu" and not skip_stage_2 else None
        latents: dict[str, torch.Tensor] = {}
        with self.transformer((*self.loras, *self.ic_loras), cache) as transformer:
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, positive.audio)
            stage_1 = run_denoising_stage(
                denoiser, half, distilled_sigmas(), noise, "stage_1", device, dtype,
                conditionings=stage_1_items, progress=self.progress,
            )  # fmt: skip
        latents.update(stage_1.named("stage_1"))
        if skip_stage_2:
            return self.finished(half, stage_1.video_latent, stage_1.audio_latent, noise, latents)

        assert encoded.latent_statistics is not None
        upsampled = upsample_between_stages(
            stage_1.video_latent, self.spatial_upsampler_path, encoded.latent_statistics, self.placement
        )
        latents["upsampled_video_latent"] = upsampled
        with self.transformer(self.loras, cache) as transformer:
            if cache is not None:
                cache.clear()
            denoiser = SimpleDenoiser(X0Model(transformer), positive.video, positive.audio)
            stage_2 = run_denoising_stage(
                denoiser, full, stage_2_distilled_sigmas(), noise, "stage_2", device, dtype,
                conditionings=stage_2_items, initial_video=upsampled, initial_audio=stage_1.audio_latent,
                progress=self.progress,
            )  # fmt: skip
        latents.update(stage_2.named("stage_2"))
        return self.finished(full, stage_2.video_latent, stage_2.audio_latent, noise, latents)
