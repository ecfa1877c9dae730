"""The pipeline class of `python -m ltx_pipelines.ti2vid_two_stages_hq`
(what it does: that module's docstring)."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import res2s_denoising_loop
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader import LoraSpec
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoLatentShape, VideoPixelShape
from ltx_pipelines.engine.defaults import (
    DEFAULT_MAX_BATCH_SIZE,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_1,
    HQ_DISTILLED_LORA_STRENGTH_STAGE_2,
    LTX_2_3_HQ_DEFAULTS,
    TWO_STAGE_SPATIAL_MULTIPLE,
)
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generated_keyframes import (
    GeneratedKeyframes,
    generated_keyframe_positions,
    require_keyframe_embedding,
)
from ltx_pipelines.engine.guided import (
    GuidanceSettings,
    checked_max_batch_size,
    checked_stage_sigmas,
    guided_inputs,
    guided_prompt_call,
    resolve_guidance,
    stage_sigmas_or,
)
from ltx_pipelines.engine.noise_sources import NoiseSource
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stage_blocks import ImageCondition, SamplingLoop
from ltx_pipelines.engine.two_stage_runner import StagePlan, guided_two_stages, half_size, refinement_sigmas

if TYPE_CHECKING:
    from typing_extensions import Unpack


logger = logging.getLogger(__name__)


# The reference runs res2s with its default SDE noise seed (not the run's seed): the step noise
# generator starts from this seed and the substep one from it + 10000, on the run's device.
RES2S_NOISE_SEED = -1


class TI2VidTwoStagesHQPipeline(PromptPipeline):
    """The HQ variant: res2s on both stages, the distilled LoRA in both, token-count-shifted sigmas.

    `distilled_lora` is the LoRA file (or a LoraSpec, whose key rules are kept and strength replaced
    by the per-stage strengths); None runs both stages without it (the demo).
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE
    stage_names = ("stage_1", "stage_2")
    """The denoising stages, as named in noise draws, latents and `stage_sigmas`."""

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
        self.max_batch_size = checked_max_batch_size(max_batch_size)
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        if distilled_lora is None:
            logger.warning("no distilled LoRA: stage 2 refines with the plain full model")
        self.distilled_lora = (
            distilled_lora if isinstance(distilled_lora, LoraSpec) or distilled_lora is None
            else LoraSpec(Path(distilled_lora))
        )  # fmt: skip
        self.distilled_lora_strengths = (float(distilled_lora_strength_stage_1), float(distilled_lora_strength_stage_2))
        self.sde_noise_seed = sde_noise_seed

    # ---- settings ----------------------------------------------------------------------------------

    def guidance_settings(
        self,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
    ) -> GuidanceSettings:
        """The given values, with the HQ preset for those left as None (whatever the checkpoint's generation)."""
        settings = resolve_guidance(LTX_2_3_HQ_DEFAULTS, num_inference_steps, video_guidance, audio_guidance)
        if settings.num_inference_steps < 2:
            # One step leaves res2s no interval to take its midpoint in (its noise scale is 0/0).
            raise ValueError(f"num_inference_steps {settings.num_inference_steps}: the res2s sampler needs at least 2")
        return settings

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
        """LoRAs fused into the stage-1 and the stage-2 transformer: the distilled LoRA at each stage's strength."""
        if self.distilled_lora is None:
            return self.loras, self.loras
        stage_1, stage_2 = (
            (*self.loras, dataclasses.replace(self.distilled_lora, strength=strength))
            for strength in self.distilled_lora_strengths
        )
        return stage_1, stage_2

    def default_stage_1_sigmas(self, settings: GuidanceSettings, stage_1_shape: VideoPixelShape) -> torch.Tensor:
        # Unlike the other pipelines, HQ shifts the schedule for the stage-1 latent's token count.
        latent_shape = VideoLatentShape.from_pixel_shape(stage_1_shape)
        return LTX2Scheduler().sigmas(settings.num_inference_steps, tokens=latent_shape.token_count)

    def default_stage_2_sigmas(self) -> torch.Tensor:
        """The distilled stage-2 sigmas (over tiles: the reference's tiled schedule)."""
        return refinement_sigmas(self)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        # Fresh SDE generators per stage (seeded `sde_noise_seed`, as the reference), unless a
        # noise source is given: its draws are named `<stage>.res2s.<step>.<substep|step>.<modality>`.
        return functools.partial(
            res2s_denoising_loop, noise_seed=self.sde_noise_seed, noise=sde_noise, noise_name_prefix=f"{stage}."
        )

    # ---- the calls ---------------------------------------------------------------------------------

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
        negative_prompt: str | None = None,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        generated_keyframes: GeneratedKeyframes = 0,
    ) -> FinalLatents:
        """Generate from a prompt; the same seed and settings give the same result. None: the default
        negative prompt and the checkpoint generation's step count and guidance. `generated_keyframes`: see
        `latents_from_contexts`."""
        self.output_shape(height, width, num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, video_guidance, audio_guidance)  # before Gemma runs
        require_keyframe_embedding(self.checkpoint_path, generated_keyframes)
        generated_keyframe_positions(generated_keyframes, num_frames)
        return guided_prompt_call(
            self, prompt, seed=seed, images=images, enhance_prompt=enhance_prompt, negative_prompt=negative_prompt,
            settings=settings, height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            generated_keyframes=generated_keyframes,
        )  # fmt: skip

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        noise: NoiseSource,
        images: Sequence[ImageCondition] = (),
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
        sde_noise: NoiseSource | None = None,
        generated_keyframes: GeneratedKeyframes = 0,
    ) -> FinalLatents:
        """Both stages, from given contexts (batch 1 each) and a noise source (the parity seam).

        `negative_contexts` may be None only when neither modality uses CFG. `stage_sigmas` replaces the
        schedule of the named stages (`stage_1`, `stage_2`). `sde_noise` feeds res2s's draws while sampling
        (by default it uses its own seeded generators, as the reference does). `generated_keyframes`: stage-1
        keyframe slots (a count of evenly spaced interior frames or explicit frame indices; needs a transformer
        with the keyframe embedding), kept as `stage_1.video_generated_keyframes`; stage 2 gets none.
        """
        shape = self.output_shape(height, width, num_frames, frame_rate)
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        settings = self.guidance_settings(num_inference_steps, video_guidance, audio_guidance)
        loras_1, loras_2 = self.stage_loras()
        half = half_size(shape)
        stage_1_sigmas = stage_sigmas_or(given, "stage_1", lambda: self.default_stage_1_sigmas(settings, half))
        stage_2_sigmas = stage_sigmas_or(given, "stage_2", self.default_stage_2_sigmas)
        inputs = guided_inputs(settings, contexts, negative_contexts, self.placement)
        return guided_two_stages(
            self, self.spatial_upsampler_path, shape, noise, inputs,
            stage_1=StagePlan(loras_1, stage_1_sigmas, self.sampling_loop("stage_1", sde_noise)),
            stage_2=StagePlan(loras_2, stage_2_sigmas, self.sampling_loop("stage_2", sde_noise)),
            max_batch_size=self.max_batch_size, images=images, generated_keyframes=generated_keyframes,
        )  # fmt: skip


@dataclass(frozen=True)
class HqLoraStrengths:
    stage_1: float
    stage_2: float
