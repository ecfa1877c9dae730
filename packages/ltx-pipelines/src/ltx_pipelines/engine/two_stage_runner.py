"""The guided two-stage flow the full-checkpoint pipelines chain: encode the conditioning images at both
sizes, denoise stage 1 at half resolution, upsample the video latent x2, refine it at full resolution.

Stage 1's denoiser is the caller's (guided against the negative prompt, or with a frozen audio stream);
stage 2 refines without guidance over the pipeline's refinement transformer (over several devices,
possibly one tile per rank). Decoding, and which audio is shipped, stay with the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ltx_core.components.denoisers import Denoiser, SimpleDenoiser
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.components.schedulers import stage_2_distilled_sigmas
from ltx_core.conditioning import ConditioningItem, FrozenModality
from ltx_core.loader import LoraSpec, StateDictCache
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.generated_keyframes import (
    GeneratedKeyframes,
    generated_keyframe_slots,
    require_keyframe_embedding,
)
from ltx_pipelines.engine.guided import GuidedInputs, stage_guided_denoiser
from ltx_pipelines.engine.noise_sources import NoiseSource
from ltx_pipelines.engine.prompt_pipeline import PromptPipeline
from ltx_pipelines.engine.stage_blocks import ImageCondition, SamplingLoop, StageResult, run_denoising_stage
from ltx_pipelines.engine.stage_steps import encode_conditioning_images, upsample_between_stages


@dataclass(frozen=True)
class StagePlan:
    """How one stage denoises: the LoRAs fused into its transformer, its sigmas and its sampling loop."""

    loras: tuple[LoraSpec, ...]
    sigmas: torch.Tensor
    loop: SamplingLoop = euler_denoising_loop


@dataclass(frozen=True)
class TwoStageResult:
    stage_1: StageResult
    stage_2: StageResult
    latents: dict[str, torch.Tensor]
    """Every intermediate latent by name (`stage_1.*`, `upsampled_video_latent`, `stage_2.*`)."""


def half_size(shape: VideoPixelShape) -> VideoPixelShape:
    """The stage-1 shape of a two-stage run: half the output's height and width."""
    return VideoPixelShape(1, shape.frames, shape.height // 2, shape.width // 2, shape.fps)


def run_two_stages(
    pipeline: PromptPipeline,
    spatial_upsampler: Path,
    shape: VideoPixelShape,
    noise: NoiseSource,
    *,
    stage_1: StagePlan,
    stage_2: StagePlan,
    stage_1_denoiser: Callable[[nn.Module], Denoiser],
    refine_contexts: TextContexts,
    images: Sequence[ImageCondition] = (),
    images_as_keyframes: bool = False,
    frozen_audio: torch.Tensor | None = None,
    generated_keyframes: GeneratedKeyframes = 0,
) -> TwoStageResult:
    """Both stages of a `shape` (full size) run.

    `stage_1_denoiser(transformer)` makes stage 1's denoiser; stage 2 runs a `SimpleDenoiser` over
    `refine_contexts` (placed for the transformer). `images_as_keyframes`: every image is appended as
    guiding keyframe tokens (see `image_conditionings`). `frozen_audio`: an audio latent that is the initial
    audio of both stages and never changes (never noised, sigma 0); None: stage 1 generates the audio and
    stage 2 re-noises and refines it. `generated_keyframes`: keyframe slots appended to stage 1 only (after
    every other video item; see `engine.generated_keyframes`), kept as `stage_1.video_generated_keyframes`;
    stage 2 refines the upsampled target alone.
    """
    require_keyframe_embedding(pipeline.checkpoint_path, generated_keyframes)
    slots = generated_keyframe_slots(generated_keyframes, shape.frames)
    half = half_size(shape)
    placement = pipeline.placement
    device, dtype = placement.device, placement.dtype
    encoded = encode_conditioning_images(
        images,
        pipeline.checkpoint_path,
        placement,
        [half, shape],
        keep_latent_statistics=True,
        all_as_keyframes=images_as_keyframes,
    )
    stage_1_items, stage_2_items = encoded.per_stage
    assert encoded.latent_statistics is not None
    audio_items: list[ConditioningItem] = [] if frozen_audio is None else [FrozenModality()]

    # On the CPU both transformer builds share one cache: the module weights are the cached tensors,
    # so the file is read once at no extra memory, and each build fuses its LoRAs into new tensors.
    # On an accelerator the cache would pin a whole host copy of the transformer (~44 GB for the 22B
    # in bf16) across stage 1, so stage 2 reads the file again (usually from the OS page cache).
    cache = StateDictCache() if device.type == "cpu" else None
    latents: dict[str, torch.Tensor] = {}
    with pipeline.transformer(stage_1.loras, cache) as transformer:
        first = run_denoising_stage(
            stage_1_denoiser(transformer), half, stage_1.sigmas, noise, "stage_1", device, dtype,
            conditionings=[*stage_1_items, *slots], audio_conditionings=audio_items, initial_audio=frozen_audio,
            loop=stage_1.loop, progress=pipeline.progress,
        )  # fmt: skip
    latents.update(first.named("stage_1"))

    upsampled = upsample_between_stages(first.video_latent, spatial_upsampler, encoded.latent_statistics, placement)
    latents["upsampled_video_latent"] = upsampled

    with pipeline.transformer(stage_2.loras, cache) as transformer:
        if cache is not None:
            cache.clear()  # the stage-2 model holds every weight it needs
        refiner = X0Model(pipeline.refinement_transformer(transformer, shape))
        second = run_denoising_stage(
            SimpleDenoiser(refiner, refine_contexts.video, refine_contexts.audio), shape, stage_2.sigmas, noise,
            "stage_2", device, dtype, conditionings=stage_2_items, audio_conditionings=audio_items,
            initial_video=upsampled, initial_audio=first.audio_latent if frozen_audio is None else frozen_audio,
            loop=stage_2.loop, progress=pipeline.progress,
        )  # fmt: skip
    latents.update(second.named("stage_2"))
    return TwoStageResult(first, second, latents)


def guided_two_stages(
    pipeline: PromptPipeline,
    spatial_upsampler: Path,
    shape: VideoPixelShape,
    noise: NoiseSource,
    inputs: GuidedInputs,
    *,
    stage_1: StagePlan,
    stage_2: StagePlan,
    max_batch_size: int | None,
    images: Sequence[ImageCondition] = (),
    images_as_keyframes: bool = False,
    ship_refined_audio: bool = False,
    generated_keyframes: GeneratedKeyframes = 0,
) -> FinalLatents:
    """The text/image-to-video two-stage run's final latents: stage 1 guided by `inputs`, stage 2 refined
    without guidance. `ship_refined_audio`: ship the audio stage 2 refined (when the refinement's audio is
    usable: not over tiles) rather than the stage-1 audio (the reference's choice for text/image-to-video).
    `generated_keyframes`: stage-1 keyframe slots (see `run_two_stages`)."""
    result = run_two_stages(
        pipeline, spatial_upsampler, shape, noise, stage_1=stage_1, stage_2=stage_2,
        stage_1_denoiser=lambda model: stage_guided_denoiser(model, inputs, max_batch_size, pipeline.step_cache),
        refine_contexts=inputs.positive, images=images, images_as_keyframes=images_as_keyframes,
        generated_keyframes=generated_keyframes,
    )  # fmt: skip
    refined = ship_refined_audio and pipeline.refined_audio_is_usable
    audio = result.stage_2.audio_latent if refined else result.stage_1.audio_latent
    return pipeline.finished(shape, result.stage_2.video_latent, audio, noise, result.latents)


def distilled_lora_stages(
    loras: tuple[LoraSpec, ...], distilled_lora: LoraSpec | None
) -> tuple[tuple[LoraSpec, ...], tuple[LoraSpec, ...]]:
    """The LoRAs of the stage-1 and the stage-2 transformer: `loras` in both, the distilled LoRA (when
    given) in stage 2 only."""
    distilled = () if distilled_lora is None else (distilled_lora,)
    return loras, (*loras, *distilled)


def refinement_sigmas(pipeline: PromptPipeline) -> torch.Tensor:
    """The stage-2 sigmas of the guided two-stage pipelines: the distilled ones, or over tiles (several
    devices) the reference's tiled schedule."""
    single = stage_2_distilled_sigmas()
    return single if pipeline.parallel is None else pipeline.parallel.refinement_sigmas(single)
