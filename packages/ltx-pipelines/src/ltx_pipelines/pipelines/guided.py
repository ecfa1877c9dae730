"""The guided (full-checkpoint) pipeline, written once: the prompt and the negative prompt in one Gemma batch,
a guided stage 1, and on the two-stage variants an x2 latent upsampling and a distilled refinement.

`GuidedPipeline` holds what every guided pipeline shares: the batch limit of the guidance passes, the guidance
settings (a `GuidanceRequest` over the model version's defaults, or a pipeline's preset), the LoRAs of each
stage, and the `generate` / `latents_from_contexts` calls. What a variant changes is data or a small method:
its stages (`TwoStageGuidedPipeline`), its guidance defaults, its stage LoRAs, its stage-1 sigmas, its sampling
loop, whether images become keyframes and which audio it ships.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader import LoraSpec
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import (
    FinalLatents,
    GuidedDenoiser,
    NoiseSource,
    SamplingLoop,
    StageConditions,
    encode_conditioning_images,
    finished_latents,
    run_denoising_stage,
)
from ltx_pipelines.engine.guided import (
    GuidanceSettings,
    GuidedInputs,
    checked_max_batch_size,
    checked_stage_sigmas,
    frozen_streams_keep_positive_context,
    guided_inputs,
    guided_prompt_call,
    resolve_guidance,
    stage_guided_denoiser,
    stage_sigmas_or,
)
from ltx_pipelines.engine.model_versions import (
    DEFAULT_MAX_BATCH_SIZE,
    TWO_STAGE_SPATIAL_MULTIPLE,
    PipelineDefaults,
    defaults_for_checkpoint,
)
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.requests import (
    GuidanceRequest,
    VideoRequest,
    checked_keyframe_positions,
    generated_keyframe_slots,
)
from ltx_pipelines.engine.two_stage_runner import (
    StagePlan,
    distilled_lora_stages,
    guided_two_stages,
    half_size,
    refinement_sigmas,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)

DEFAULT_VIDEO = VideoRequest()
"""A call's video request when none is given: everything from the model version's defaults."""
DEFAULT_GUIDANCE = GuidanceRequest()
"""A call's guidance request when none is given: the default negative prompt, the pipeline's guidance."""


@dataclass(frozen=True)
class GuidedRun:
    """One guided call as its stages take it: the output shape, the filled video request, the guidance settings
    and contexts placed for the transformer, the noise, the schedules given by name (`stage_sigmas`), the noise
    of samplers that draw while sampling, and caller-encoded stage conditions (one-stage only)."""

    shape: VideoPixelShape
    video: VideoRequest
    inputs: GuidedInputs
    noise: NoiseSource
    sigmas: Mapping[str, torch.Tensor]
    sde_noise: NoiseSource | None = None
    conditions: StageConditions | None = None

    def stage_1_sigmas(self, pipeline: GuidedPipeline, stage_1_shape: VideoPixelShape | None = None) -> torch.Tensor:
        """Stage 1's schedule: the one given, else the pipeline's for `stage_1_shape` (default: the output's)."""
        shape = self.shape if stage_1_shape is None else stage_1_shape
        return stage_sigmas_or(
            self.sigmas, "stage_1", lambda: pipeline.default_stage_1_sigmas(self.inputs.settings, shape)
        )


class GuidedPipeline(PromptPipeline):
    """A guided pipeline over a full (non-distilled) checkpoint and Gemma; as it stands, one guided stage at
    the output resolution (`TwoStageGuidedPipeline` adds the refinement).

    Construct with `(checkpoint_path, gemma_root, max_batch_size=..., **PipelineOptions)`; call with a prompt,
    a `VideoRequest` and a `GuidanceRequest`, or drive `latents_from_contexts` directly.
    """

    stage_names: ClassVar[tuple[str, ...]] = ("stage_1",)
    """The denoising stages, as named in noise draws, latents and `stage_sigmas`."""
    guided_modalities: ClassVar[tuple[str, ...]] = ("video", "audio")
    """The streams a `GuidanceRequest` may guide; any other one runs with the no-op guidance (frozen or
    absent: a request that guides it is refused)."""
    min_inference_steps: ClassVar[int] = 1
    """The fewest steps the guided stage's sampler can take."""
    takes_stage_conditions: ClassVar[bool] = True
    """Whether a call may add caller-encoded `StageConditions` (the one-stage audio-video run only)."""

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

    # ---- what a variant changes ----------------------------------------------------------------------

    def guidance_defaults(self) -> PipelineDefaults:
        """Where the step count and guidance a request leaves unset come from: the checkpoint's model version."""
        return defaults_for_checkpoint(self.checkpoint_path)

    def guidance_settings(self, guidance: GuidanceRequest) -> GuidanceSettings:
        """The request's values, with `guidance_defaults()` for those left as None; a stream this pipeline does
        not guide gets the no-op guidance (a request that sets it is refused)."""
        off = MultiModalGuiderParams()
        given = {"video": guidance.video, "audio": guidance.audio}
        refused = [f"{name} guidance" for name, value in given.items() if value is not None]
        refused = [name for name in refused if name.split()[0] not in self.guided_modalities]
        if refused:
            raise ValueError(
                f"{type(self).__name__} does not guide that stream: {refused} not accepted "
                f"(it guides {list(self.guided_modalities)})"
            )
        settings = resolve_guidance(
            self.guidance_defaults(),
            guidance.num_inference_steps,
            guidance.video if "video" in self.guided_modalities else off,
            guidance.audio if "audio" in self.guided_modalities else off,
        )
        if settings.num_inference_steps < self.min_inference_steps:
            raise ValueError(
                f"num_inference_steps {settings.num_inference_steps}: {type(self).__name__}'s sampler needs at "
                f"least {self.min_inference_steps}"
            )
        return settings

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], ...]:
        """LoRAs fused into each stage's transformer (one tuple per stage): `loras` everywhere."""
        return (self.loras,) * len(self.stage_names)

    def default_stage_1_sigmas(self, settings: GuidanceSettings, stage_1_shape: VideoPixelShape) -> torch.Tensor:
        """The guided stage's schedule. As in the reference, the scheduler is not told the latent size: the
        shift is the one of the default token count, whatever the resolution."""
        return LTX2Scheduler().sigmas(settings.num_inference_steps)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        """The loop of `stage` (Euler, which draws no noise while sampling)."""
        return euler_denoising_loop

    def guided_stage_denoiser(self, transformer: nn.Module, inputs: GuidedInputs) -> GuidedDenoiser:
        """The guided stage's denoiser over `transformer`."""
        return stage_guided_denoiser(transformer, inputs, self.max_batch_size, self.step_cache)

    # ---- the calls -----------------------------------------------------------------------------------

    def generate(
        self,
        prompt: str,
        *,
        seed: int,
        video: VideoRequest = DEFAULT_VIDEO,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        enhance_prompt: bool = False,
        conditions: StageConditions | None = None,
    ) -> FinalLatents:
        """Generate from a prompt; the same seed and requests give the same result. What `video` and
        `guidance` leave unset takes the model version's defaults (or the pipeline's preset). `conditions`: see
        `latents_from_contexts`."""
        video = self.checked_video(video)
        self.guidance_settings(guidance)  # a bad value fails before Gemma runs
        self.check_conditions(conditions)
        extra = {} if conditions is None else {"conditions": conditions}
        return guided_prompt_call(
            self, prompt, seed=seed, images=video.images, enhance_prompt=enhance_prompt, guidance=guidance,
            video=video, **extra,
        )  # fmt: skip

    def check_conditions(self, conditions: StageConditions | None) -> None:
        if conditions is not None and not self.takes_stage_conditions:
            raise ValueError(f"{type(self).__name__} takes no stage conditions (conditions=): they are one-stage only")

    def checked_video(self, video: VideoRequest) -> VideoRequest:
        """`video` filled (`filled_video`) and checked against the model grid and the keyframe embedding."""
        if video.duration is not None and video.num_frames is None and not self.predicts_duration:
            raise ValueError(f"{type(self).__name__} does not predict the length: give num_frames, not a duration")
        video = self.filled_video(video)
        height, width, num_frames, frame_rate = video.size
        self.output_shape(height, width, num_frames, frame_rate)
        checked_keyframe_positions(self.checkpoint_path, video.generated_keyframes, num_frames)
        return video

    def latents_from_contexts(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        *,
        video: VideoRequest,
        noise: NoiseSource,
        guidance: GuidanceRequest = DEFAULT_GUIDANCE,
        stage_sigmas: Mapping[str, torch.Tensor] | None = None,
        sde_noise: NoiseSource | None = None,
        conditions: StageConditions | None = None,
    ) -> FinalLatents:
        """The final latents from given contexts (batch 1 each) and a noise source (the parity seam).

        `negative_contexts` may be None only when neither modality uses CFG. `stage_sigmas` replaces the
        schedule of the named stages (`stage_names`). `sde_noise` feeds samplers that draw noise while sampling
        (res2s); Euler draws none. `video.generated_keyframes`: stage-1 keyframe slots appended after every
        other video item (a count of evenly spaced interior frames or explicit frame indices; needs a
        transformer with the keyframe embedding), kept as `stage_1.video_generated_keyframes`. `conditions`
        (one-stage only): caller-encoded conditioning items, initial latents and the modalities that take part
        (see `StageConditions`); without video the latents decode to an `AudioGeneration`.
        """
        self.check_conditions(conditions)
        return self.denoise(
            self.guided_run(contexts, negative_contexts, video, noise, guidance, stage_sigmas, sde_noise, conditions)
        )

    def guided_run(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        video: VideoRequest,
        noise: NoiseSource,
        guidance: GuidanceRequest,
        stage_sigmas: Mapping[str, torch.Tensor] | None,
        sde_noise: NoiseSource | None = None,
        conditions: StageConditions | None = None,
    ) -> GuidedRun:
        """A call's arguments resolved and checked (the video filled, the guidance settled, the contexts placed)."""
        video = self.filled_video(video)
        shape = video.pixel_shape(self.spatial_multiple)
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        inputs = guided_inputs(self.guidance_settings(guidance), contexts, negative_contexts, self.placement)
        return GuidedRun(shape, video, inputs, noise, given, sde_noise, conditions)

    def denoise(self, run: GuidedRun) -> FinalLatents:
        """The stages of a run (here the one guided stage at the output size) to its final latents."""
        shape, video = run.shape, run.video
        conditions = run.conditions if run.conditions is not None else StageConditions()
        slots = generated_keyframe_slots(self.checkpoint_path, video.generated_keyframes, shape.frames)
        if slots and (conditions.video_frozen or not conditions.with_video):
            raise ValueError("generated keyframes need the video generated; the stage conditions freeze or omit it")
        if video.images and not conditions.with_video:
            raise ValueError("image conditions need the video stream, but the stage conditions leave it out")
        sigmas = run.stage_1_sigmas(self)
        device, dtype = self.placement.device, self.placement.dtype
        (image_items,) = encode_conditioning_images(
            video.images, self.checkpoint_path, self.placement, [shape]
        ).per_stage

        (loras,) = self.stage_loras()
        inputs = frozen_streams_keep_positive_context(run.inputs, conditions)
        with self.transformer(loras) as transformer:
            result = run_denoising_stage(
                self.guided_stage_denoiser(transformer, inputs), shape, sigmas, run.noise, "stage_1", device, dtype,
                conditionings=[*image_items, *conditions.video, *slots], **conditions.stage_arguments(),
                loop=self.sampling_loop("stage_1", run.sde_noise), progress=self.progress,
            )  # fmt: skip
        return finished_latents(self, shape, result.video_latent, result.audio_latent, run.noise, result.latents)


class TwoStageGuidedPipeline(GuidedPipeline):
    """The guided pipeline in two stages: guided half-resolution stage 1, x2 latent upsampling, stage 2
    refined without guidance at full resolution with the distilled sigmas.

    `loras` are fused into both stages, `distilled_lora` into stage 2 only. Without a distilled LoRA
    (the demo) stage 2 runs the plain full model, which is not what it was tuned for.
    """

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE
    stage_names = ("stage_1", "stage_2")
    images_as_keyframes: ClassVar[bool] = False
    """Images become appended keyframe tokens at any frame (keyframe interpolation) instead of frame-0
    substitution plus keyframes."""
    ship_refined_audio: ClassVar[bool] = False
    """The audio stage 2 refined is decoded (keyframe interpolation) instead of stage 1's."""
    takes_stage_conditions = False

    def __init__(
        self,
        checkpoint_path: str | Path,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        *,
        distilled_lora: LoraSpec | None,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`max_batch_size`: how many guidance passes share one transformer call (None: all); `options`: see
        `PipelineOptions`."""
        super().__init__(checkpoint_path, gemma_root, max_batch_size=max_batch_size, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)
        self.distilled_lora = distilled_lora
        if distilled_lora is None:
            logger.warning("no distilled LoRA: stage 2 refines with the plain full model")

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], ...]:
        """LoRAs fused into the stage-1 and the stage-2 transformer: the distilled LoRA in stage 2 only."""
        return distilled_lora_stages(self.loras, self.distilled_lora)

    def stage_plans(self, run: GuidedRun) -> tuple[StagePlan, StagePlan]:
        """Each stage's LoRAs, sigmas (the given ones, else the pipeline's: stage 1 at half size) and loop."""
        loras_1, loras_2 = self.stage_loras()
        stage_1_sigmas = run.stage_1_sigmas(self, half_size(run.shape))
        stage_2_sigmas = stage_sigmas_or(run.sigmas, "stage_2", lambda: refinement_sigmas(self))
        return (
            StagePlan(loras_1, stage_1_sigmas, self.sampling_loop("stage_1", run.sde_noise)),
            StagePlan(loras_2, stage_2_sigmas, self.sampling_loop("stage_2", run.sde_noise)),
        )

    def denoise(self, run: GuidedRun) -> FinalLatents:
        """Both stages, to the final latents; stage 2 gets no generated keyframe."""
        stage_1, stage_2 = self.stage_plans(run)
        return guided_two_stages(
            self, self.spatial_upsampler_path, run.shape, run.noise, run.inputs, stage_1=stage_1, stage_2=stage_2,
            max_batch_size=self.max_batch_size, images=run.video.images, images_as_keyframes=self.images_as_keyframes,
            ship_refined_audio=self.ship_refined_audio, generated_keyframes=run.video.generated_keyframes,
        )  # fmt: skip


def checked_stream_request(video: VideoRequest, pipeline: str, *, refuse: tuple[str, ...]) -> None:
    """Refuse the `video` fields a pipeline without a picture (or with its own input) cannot use."""
    given = [name for name in refuse if getattr(video, name) not in (None, (), 0)]
    if given:
        raise ValueError(f"{pipeline} does not take {given} in its video request")
