"""The pipeline class of `python -m ltx_pipelines.ti2vid_two_stages_hq`
(what it does: that module's docstring)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ltx_core.components.sampling import res2s_denoising_loop
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader import LoraSpec
from ltx_core.types import VideoLatentShape, VideoPixelShape
from ltx_pipelines.engine.denoising_stage import NoiseSource, SamplingLoop
from ltx_pipelines.engine.guided import GuidanceSettings
from ltx_pipelines.engine.model_versions import (
    DEFAULT_MAX_BATCH_SIZE,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
    LTX_2_3_HQ_DEFAULTS,
    PipelineDefaults,
)
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions
from ltx_pipelines.pipelines.guided import TwoStageGuidedPipeline

if TYPE_CHECKING:
    from typing_extensions import Unpack


# The reference runs res2s with its default SDE noise seed (not the run's seed): the step noise
# generator starts from this seed and the substep one from it + 10000, on the run's device.
RES2S_NOISE_SEED = -1


class TI2VidTwoStagesHQPipeline(TwoStageGuidedPipeline):
    """The HQ variant: res2s on both stages, the distilled LoRA in both, token-count-shifted sigmas and the
    HQ preset's guidance whatever the checkpoint's model version.

    `distilled_lora` is the LoRA file (or a LoraSpec, whose key rules are kept and strength replaced
    by the per-stage strengths); None runs both stages without it (the demo).
    """

    # One step leaves res2s no interval to take its midpoint in (its noise scale is 0/0).
    min_inference_steps = 2

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled_lora: LoraSpec | str | Path | None,
        distilled_lora_strength_stage_1: float = HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
        distilled_lora_strength_stage_2: float = HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
        sde_noise_seed: int = RES2S_NOISE_SEED,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`sde_noise_seed` seeds res2s's own SDE generators (not the run's seed, as in the reference).
        `max_batch_size`: how many guidance passes share one transformer call (None: all); `options`: see
        `PipelineOptions`."""
        if distilled_lora is not None and not isinstance(distilled_lora, LoraSpec):
            distilled_lora = LoraSpec(Path(distilled_lora))
        super().__init__(
            checkpoint_path, spatial_upsampler_path, gemma_root, distilled_lora=distilled_lora,
            max_batch_size=max_batch_size, **options,
        )  # fmt: skip
        self.distilled_lora_strengths = (float(distilled_lora_strength_stage_1), float(distilled_lora_strength_stage_2))
        self.sde_noise_seed = sde_noise_seed

    def guidance_defaults(self) -> PipelineDefaults:
        """The HQ preset, whatever the checkpoint's model version."""
        return LTX_2_3_HQ_DEFAULTS

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], ...]:
        """LoRAs fused into the stage-1 and the stage-2 transformer: the distilled LoRA at each stage's strength."""
        if self.distilled_lora is None:
            return self.loras, self.loras
        return tuple(
            (*self.loras, dataclasses.replace(self.distilled_lora, strength=strength))
            for strength in self.distilled_lora_strengths
        )

    def default_stage_1_sigmas(self, settings: GuidanceSettings, stage_1_shape: VideoPixelShape) -> torch.Tensor:
        # Unlike the other pipelines, HQ shifts the schedule for the stage-1 latent's token count.
        latent_shape = VideoLatentShape.from_pixel_shape(stage_1_shape)
        return LTX2Scheduler().sigmas(settings.num_inference_steps, tokens=latent_shape.token_count)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        # Fresh SDE generators per stage (seeded `sde_noise_seed`, as the reference), unless a
        # noise source is given: its draws are named `<stage>.res2s.<step>.<substep|step>.<modality>`.
        return functools.partial(
            res2s_denoising_loop, noise_seed=self.sde_noise_seed, noise=sde_noise, noise_name_prefix=f"{stage}."
        )


@dataclass(frozen=True)
class HqLoraStrengths:
    stage_1: float
    stage_2: float
