"""What the full-checkpoint (guided) pipelines share, as values and functions.

A guided pipeline encodes the prompt and the negative prompt in one Gemma batch (row 0 positive,
row 1 negative), resolves its step count and guidance from the checkpoint's generation (or its own
preset) unless told otherwise, and hands contexts plus a noise source to its `latents_from_contexts`
(`guided_prompt_call`) - the seam that tests and parity replays drive directly. That seam resolves the
run (output shape, settings, contexts placed for the transformer: a `GuidedInputs`) and chains the stage
functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_pipelines.engine.denoising_stage import (
    GuidedDenoiser,
    ImageCondition,
    SeededNoise,
    StageConditions,
    contexts_on,
    guided_denoiser,
)
from ltx_pipelines.engine.model_loading import Placement
from ltx_pipelines.engine.model_versions import DEFAULT_NEGATIVE_PROMPT, PipelineDefaults

if TYPE_CHECKING:
    from ltx_pipelines.engine.denoising_stage import FinalLatents
    from ltx_pipelines.engine.prompt_pipeline import PromptPipeline
    from ltx_pipelines.engine.requests import GuidanceRequest


@dataclass(frozen=True)
class GuidanceSettings:
    """Steps of the guided stage and the guidance of each modality, as one run uses them."""

    num_inference_steps: int
    video: MultiModalGuiderParams
    audio: MultiModalGuiderParams

    def __post_init__(self) -> None:
        if self.num_inference_steps < 1:
            raise ValueError(f"num_inference_steps must be at least 1, got {self.num_inference_steps}")


@dataclass(frozen=True)
class GuidedInputs:
    """What a guided stage takes besides the model: the run's settings and both prompts' contexts,
    already where (and in the dtype) the transformer runs."""

    settings: GuidanceSettings
    positive: TextContexts
    negative: TextContexts | None


def frozen_streams_keep_positive_context(inputs: GuidedInputs, conditions: StageConditions) -> GuidedInputs:
    """A frozen stream is not guided, so in the negative-prompt (CFG) pass it keeps its positive text
    context (what the other stream attends to through it), as in the reference's audio-to-video and
    its trainer's validation sampling."""
    negative = inputs.negative
    if negative is None or not (conditions.video_frozen or conditions.audio_frozen):
        return inputs
    return replace(
        inputs,
        negative=TextContexts(
            video=inputs.positive.video if conditions.video_frozen else negative.video,
            audio=inputs.positive.audio if conditions.audio_frozen else negative.audio,
            mask=negative.mask,
        ),
    )


def resolve_guidance(
    defaults: PipelineDefaults,
    num_inference_steps: int | None = None,
    video_guidance: MultiModalGuiderParams | None = None,
    audio_guidance: MultiModalGuiderParams | None = None,
) -> GuidanceSettings:
    """The given values, with `defaults` (a model version's, or a pipeline's preset) for those
    left as None."""
    return GuidanceSettings(
        num_inference_steps=defaults.num_inference_steps if num_inference_steps is None else num_inference_steps,
        video=defaults.video_guidance if video_guidance is None else video_guidance,
        audio=defaults.audio_guidance if audio_guidance is None else audio_guidance,
    )


def guided_inputs(
    settings: GuidanceSettings, contexts: TextContexts, negative_contexts: TextContexts | None, placement: Placement
) -> GuidedInputs:
    """The run's settings and both contexts placed for the transformer."""
    return GuidedInputs(
        settings=settings,
        positive=contexts_on(contexts, placement),
        negative=None if negative_contexts is None else contexts_on(negative_contexts, placement),
    )


def guided_prompt_call(
    pipeline: PromptPipeline,
    prompt: str,
    *,
    seed: int,
    images: Sequence[ImageCondition],
    enhance_prompt: bool,
    guidance: GuidanceRequest,
    **inputs: Any,
) -> FinalLatents:
    """A guided pipeline's prompt call: the prompt and `guidance`'s negative prompt encoded in one Gemma batch,
    then its `latents_from_contexts` with noise seeded from `seed`, `guidance` and `inputs` (the video request,
    an audio track, ...); the final latents carry the prompt as encoded. The caller checks `guidance` before
    this runs Gemma, so a bad value fails in seconds."""
    (contexts, negative), final_prompt = pipeline.encode_prompts(
        [prompt, negative_prompt_or_default(guidance.negative_prompt)], seed=seed, images=images, enhance=enhance_prompt
    )
    final = pipeline.latents_from_contexts(contexts, negative, noise=SeededNoise(seed), guidance=guidance, **inputs)
    return replace(final, prompt=final_prompt)


def negative_prompt_or_default(negative_prompt: str | None) -> str:
    """The negative prompt a guided call encodes beside the prompt (its contexts drive CFG)."""
    return DEFAULT_NEGATIVE_PROMPT if negative_prompt is None else negative_prompt


def checked_max_batch_size(max_batch_size: int | None) -> int | None:
    """How many guidance passes share one transformer call (None: all), checked."""
    if max_batch_size is not None and max_batch_size < 1:
        raise ValueError(f"max_batch_size must be at least 1 (or None for one call), got {max_batch_size}")
    return max_batch_size


def checked_stage_sigmas(
    stage_sigmas: Mapping[str, torch.Tensor] | None, stage_names: Sequence[str]
) -> dict[str, torch.Tensor]:
    """Schedules given for named stages, refused when a name is not one of the pipeline's stages."""
    given = dict(stage_sigmas or {})
    unknown = sorted(set(given) - set(stage_names))
    if unknown:
        raise ValueError(f"stage_sigmas names unknown stage(s) {unknown}; this pipeline has {list(stage_names)}")
    return given


def stage_guided_denoiser(
    transformer: nn.Module, inputs: GuidedInputs, max_batch_size: int | None, step_cache: float | None = None
) -> GuidedDenoiser:
    """The guided denoiser of a stage over `transformer` (an x0 model is made of it); `step_cache`: reuse the
    deep blocks' residual below that first-block change (`ltx_core.components.step_cache`; None: off)."""
    # Guidance parallel (issue 38): a transformer run that way gets the pass-spreading denoiser.
    from ltx_pipelines.engine.guidance_parallel import guidance_parallel_denoiser

    spread = guidance_parallel_denoiser(transformer, inputs, max_batch_size, step_cache)
    if spread is not None:
        return spread
    if step_cache is not None:
        from ltx_core.components.step_cache import StepCachedTransformer

        transformer = StepCachedTransformer(transformer, step_cache)
    return guided_denoiser(
        X0Model(transformer),
        inputs.positive,
        inputs.negative,
        inputs.settings.video,
        inputs.settings.audio,
        max_batch_size=max_batch_size,
    )


def stage_sigmas_or(given: Mapping[str, torch.Tensor], stage: str, default: Callable[[], torch.Tensor]) -> torch.Tensor:
    """The schedule given for `stage`, else the pipeline's own (`default()`, computed only when needed)."""
    sigmas = given.get(stage)
    return default() if sigmas is None else sigmas
