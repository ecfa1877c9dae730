"""What the full-checkpoint (guided) text/image-to-video pipelines share.

A guided pipeline encodes the prompt and the negative prompt in one Gemma batch (row 0 positive,
row 1 negative), resolves its step count and guidance from the checkpoint's generation unless told
otherwise, and hands contexts plus a noise source to `generate_from_contexts` - the seam that tests
and parity replays drive directly. That seam resolves the run (output shape, settings, contexts
placed for the transformer) once into a `GuidedRun`; each pipeline only implements `run_stages`.
Decoding (audio eagerly, video frames lazily) and building the stage transformers (with the
pipeline's LoRA fusion rule) are shared too.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.components.sampling import euler_denoising_loop
from ltx_core.loader import LoraSpec
from ltx_core.model.transformer import X0Model
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_NEGATIVE_PROMPT,
    PipelineDefaults,
    defaults_for_checkpoint,
)
from ltx_pipelines.engine.file_steps import contexts_on
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.noise import NoiseSource
from ltx_pipelines.engine.prompt_pipeline import GuidanceRequest, PipelineOptions, PromptPipeline
from ltx_pipelines.engine.stages import (
    GuidedDenoiser,
    ImageCondition,
    SamplingLoop,
    StageConditions,
    guided_denoiser,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class GuidedRun:
    """One generation as a pipeline's stages see it, resolved once by `generate_from_contexts`."""

    shape: VideoPixelShape
    """The output video (batch 1)."""
    inputs: GuidedInputs
    noise: NoiseSource
    """The pipeline's named draws (initial noise of each stage, decoder noise)."""
    images: tuple[ImageCondition, ...] = ()
    stage_sigmas: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Schedules given for named stages (`stage_1`, `stage_2`), replacing the pipeline's own."""
    sde_noise: NoiseSource | None = None
    """Draws of samplers that inject noise during sampling (res2s); None: their own seeded generators."""
    conditions: StageConditions = field(default_factory=StageConditions)
    """Caller-encoded items, initial latents and the modalities that take part (pipelines that accept them)."""

    def sigmas(self, stage: str, default: Callable[[], torch.Tensor]) -> torch.Tensor:
        given = self.stage_sigmas.get(stage)
        return default() if given is None else given


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


class GuidedPipeline(PromptPipeline):
    """Base of the pipelines whose (first) stage runs a full checkpoint under multi-modal guidance."""

    stage_names: ClassVar[tuple[str, ...]] = ("stage_1",)
    """The denoising stages, as named in noise draws, latents and `stage_sigmas`."""
    accepts_stage_conditions: ClassVar[bool] = False
    """Whether `run_stages` honours `GuidedRun.conditions` (others refuse non-default ones)."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        gemma_root: str | Path | None,
        *,
        max_batch_size: int | None = DEFAULT_MAX_BATCH_SIZE,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`max_batch_size`: how many guidance passes share one transformer call (None: all); the other
        options are those of `PipelineOptions`."""
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1 (or None for one call), got {max_batch_size}")
        super().__init__(checkpoint_path, gemma_root, **options)
        self.max_batch_size = max_batch_size

    # ---- settings --------------------------------------------------------------------------------

    def default_settings(self) -> PipelineDefaults:
        """The defaults of the checkpoint's model generation (LTX-2.3: 30 steps, STG block 28, ...)."""
        return defaults_for_checkpoint(self.checkpoint_path)

    def guidance_settings(
        self,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
    ) -> GuidanceSettings:
        """The given values, with the generation defaults for those left as None."""
        defaults = self.default_settings()
        return GuidanceSettings(
            num_inference_steps=defaults.num_inference_steps if num_inference_steps is None else num_inference_steps,
            video=defaults.video_guidance if video_guidance is None else video_guidance,
            audio=defaults.audio_guidance if audio_guidance is None else audio_guidance,
        )

    def guided_inputs(
        self,
        contexts: TextContexts,
        negative_contexts: TextContexts | None,
        num_inference_steps: int | None,
        video_guidance: MultiModalGuiderParams | None,
        audio_guidance: MultiModalGuiderParams | None,
    ) -> GuidedInputs:
        """The run's settings (None: the generation defaults) and both contexts placed for the transformer."""
        return GuidedInputs(
            settings=self.guidance_settings(num_inference_steps, video_guidance, audio_guidance),
            positive=contexts_on(contexts, self.placement),
            negative=None if negative_contexts is None else contexts_on(negative_contexts, self.placement),
        )

    def stage_loras(self) -> tuple[tuple[LoraSpec, ...], ...]:
        """LoRAs fused into each stage's transformer, in `stage_names` order."""
        return (self.loras,)

    def sampling_loop(self, stage: str, sde_noise: NoiseSource | None) -> SamplingLoop:
        """The loop of `stage`; `sde_noise` feeds a loop that draws noise while sampling (Euler draws none)."""
        return euler_denoising_loop

    def guided_stage_denoiser(self, transformer: nn.Module, inputs: GuidedInputs) -> GuidedDenoiser:
        """The guided denoiser of a stage over `transformer` (an x0 model is made of it)."""
        return guided_denoiser(
            X0Model(transformer),
            inputs.positive,
            inputs.negative,
            inputs.settings.video,
            inputs.settings.audio,
            max_batch_size=self.max_batch_size,
        )

    # ---- running ---------------------------------------------------------------------------------

    def prompt_options(self, request: GuidanceRequest) -> tuple[list[str], dict[str, Any]]:
        """The negative prompt (encoded with the prompt, its contexts drive CFG) and the settings, with
        the checkpoint generation's defaults for those left as None, checked before Gemma runs."""
        settings = self.guidance_settings(request.num_inference_steps, request.video_guidance, request.audio_guidance)
        negative = DEFAULT_NEGATIVE_PROMPT if request.negative_prompt is None else request.negative_prompt
        return [negative], {
            "num_inference_steps": settings.num_inference_steps,
            "video_guidance": settings.video,
            "audio_guidance": settings.audio,
        }

    def generate_from_contexts(
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
    ) -> Generation:
        """All stages and decoding from given contexts (batch 1 each) and a noise source.

        `negative_contexts` may be None only when neither modality uses CFG. `stage_sigmas` replaces
        the schedule of the named stages (see `stage_names`; a stage's step count is then its length
        - 1). `sde_noise` feeds samplers that draw noise while sampling (res2s) - by default they use
        their own seeded generators, as the reference does. `conditions`: caller-encoded conditioning
        items, initial latents and the modalities that take part (see `StageConditions`), for pipelines
        with `accepts_stage_conditions`.
        """
        if conditions is not None and not self.accepts_stage_conditions:
            raise ValueError(f"{type(self).__name__} does not take stage conditions (conditions=...)")
        unknown = sorted(set(stage_sigmas or {}) - set(self.stage_names))
        if unknown:
            raise ValueError(
                f"stage_sigmas names unknown stage(s) {unknown}; this pipeline has {list(self.stage_names)}"
            )
        run = GuidedRun(
            shape=self.output_shape(height, width, num_frames, frame_rate),
            inputs=self.guided_inputs(contexts, negative_contexts, num_inference_steps, video_guidance, audio_guidance),
            noise=noise,
            images=tuple(images),
            stage_sigmas=dict(stage_sigmas or {}),
            sde_noise=sde_noise,
            conditions=conditions if conditions is not None else StageConditions(),
        )
        return self.run_stages(run)

    @abstractmethod
    def run_stages(self, run: GuidedRun) -> Generation:
        """The pipeline's stages and decoding for a resolved run."""
