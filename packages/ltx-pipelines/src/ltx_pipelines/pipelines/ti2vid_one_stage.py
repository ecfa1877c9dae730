"""The pipeline class of `python -m ltx_pipelines.ti2vid_one_stage`
(what it does: that module's docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.loader import LoraSpec
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.defaults import DEFAULT_MAX_BATCH_SIZE, defaults_for_checkpoint
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generated_keyframes import (
    GeneratedKeyframes,
    generated_keyframe_positions,
    generated_keyframe_slots,
    require_keyframe_embedding,
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
from ltx_pipelines.engine.noise_sources import NoiseSource
from ltx_pipelines.engine.prompt_pipeline import PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stage_blocks import (
    GuidedDenoiser,
    ImageCondition,
    SamplingLoop,
    StageConditions,
    run_denoising_stage,
)
from ltx_pipelines.engine.stage_steps import encode_conditioning_images

if TYPE_CHECKING:
    from typing_extensions import Unpack


class TI2VidOneStagePipeline(PromptPipeline):
    """One guided stage at full resolution over a full (non-distilled) checkpoint and Gemma.

    Construct with `(checkpoint_path, gemma_root, max_batch_size=..., **PipelineOptions)`; call with a
    prompt or drive `generate_from_contexts` directly.
    """

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
        self,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
    ) -> GuidanceSettings:
        """The given values, with the checkpoint generation's defaults for those left as None."""
        defaults = defaults_for_checkpoint(self.checkpoint_path)
        return resolve_guidance(defaults, num_inference_steps, video_guidance, audio_guidance)

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...]]:
        """LoRAs fused into the stage's transformer."""
        return (self.loras,)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        """The loop of the stage (Euler, which draws no noise while sampling)."""
        return euler_denoising_loop

    def guided_stage_denoiser(self, transformer: nn.Module, inputs: GuidedInputs) -> GuidedDenoiser:
        """The stage's guided denoiser over `transformer`."""
        return stage_guided_denoiser(transformer, inputs, self.max_batch_size, self.step_cache)

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
        conditions: StageConditions | None = None,
        generated_keyframes: GeneratedKeyframes = 0,
    ) -> FinalLatents:
        """Generate from a prompt; the same seed and settings give the same result. None: the default
        negative prompt and the checkpoint generation's step count and guidance. `conditions`,
        `generated_keyframes`: see `latents_from_contexts`."""
        self.output_shape(height, width, num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, video_guidance, audio_guidance)  # before Gemma runs
        require_keyframe_embedding(self.checkpoint_path, generated_keyframes)
        generated_keyframe_positions(generated_keyframes, num_frames)
        return guided_prompt_call(
            self, prompt, seed=seed, images=images, enhance_prompt=enhance_prompt, negative_prompt=negative_prompt,
            settings=settings, height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            conditions=conditions, generated_keyframes=generated_keyframes,
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
        conditions: StageConditions | None = None,
        generated_keyframes: GeneratedKeyframes = 0,
    ) -> FinalLatents:
        """The stage's final latents from given contexts (batch 1 each) and a noise source (the parity seam).

        `negative_contexts` may be None only when neither modality uses CFG. `stage_sigmas` replaces the
        schedule of `stage_1`. `conditions`: caller-encoded conditioning items, initial latents and the
        modalities that take part (see `StageConditions`); without video the latents decode to an
        `AudioGeneration`. `generated_keyframes`: keyframe slots appended after every other video item (a
        count of evenly spaced interior frames or explicit frame indices; needs a transformer with the keyframe
        embedding), kept as `stage_1.video_generated_keyframes`.
        """
        shape = self.output_shape(height, width, num_frames, frame_rate)
        given = checked_stage_sigmas(stage_sigmas, self.stage_names)
        conditions = conditions if conditions is not None else StageConditions()
        require_keyframe_embedding(self.checkpoint_path, generated_keyframes)
        slots = generated_keyframe_slots(generated_keyframes, num_frames)
        if slots and (conditions.video_frozen or not conditions.with_video):
            raise ValueError("generated keyframes need the video generated; the stage conditions freeze or omit it")
        settings = self.guidance_settings(num_inference_steps, video_guidance, audio_guidance)
        inputs = guided_inputs(settings, contexts, negative_contexts, self.placement)
        if images and not conditions.with_video:
            raise ValueError("image conditions need the video stream, but the stage conditions leave it out")
        # No latent is passed to the scheduler here (as in the reference): the shift is the one of the
        # default token count, whatever the resolution.
        sigmas = stage_sigmas_or(given, "stage_1", lambda: LTX2Scheduler().sigmas(settings.num_inference_steps))
        device, dtype = self.placement.device, self.placement.dtype
        (image_items,) = encode_conditioning_images(images, self.checkpoint_path, self.placement, [shape]).per_stage

        (loras,) = self.stage_loras()
        with self.transformer(loras) as transformer:
            denoiser = self.guided_stage_denoiser(transformer, frozen_streams_keep_positive_context(inputs, conditions))
            result = run_denoising_stage(
                denoiser, shape, sigmas, noise, "stage_1", device, dtype,
                conditionings=[*image_items, *conditions.video, *slots], **conditions.stage_arguments(),
                loop=self.sampling_loop("stage_1", sde_noise), progress=self.progress,
            )  # fmt: skip

        # Without the video stream the latents decode to an `AudioGeneration`.
        return self.finished(shape, result.video_latent, result.audio_latent, noise, result.named("stage_1"))
