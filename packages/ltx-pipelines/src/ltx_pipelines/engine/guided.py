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
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import DEFAULT_LORA_FUSION, LoraFusionPrecision, LoraSpec, StateDictCache
from ltx_core.model.transformer import AV_TRANSFORMER, X0Model
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import DEFAULT_NEGATIVE_PROMPT, PipelineDefaults, defaults_for_checkpoint
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.loaded_stages import contexts_on, decoded_generation
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.noise import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompts import encode_prompt_pair
from ltx_pipelines.engine.stages import GuidedDenoiser, ImageCondition, guided_denoiser

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

    def sigmas(self, stage: str, default: Callable[[], torch.Tensor]) -> torch.Tensor:
        given = self.stage_sigmas.get(stage)
        return default() if given is None else given


class GuidedPipeline(ABC):
    """Base of the pipelines whose (first) stage runs a full checkpoint under multi-modal guidance."""

    spatial_multiple: ClassVar[int] = 32
    """Output height and width must be multiples of this (64 when stage 1 runs at half size)."""
    stage_names: ClassVar[tuple[str, ...]] = ("stage_1",)
    """The denoising stages, as named in noise draws, latents and `stage_sigmas`."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        gemma_root: str | Path | None,
        *,
        loras: Sequence[LoraSpec] = (),
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
        tiling: TilingConfig | None = None,
        max_batch_size: int | None = None,
        lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
        progress: bool = True,
    ) -> None:
        """`lora_fusion`: how LoRAs are fused into the transformer - `weight-dtype` (default, the
        reference's rounding in the checkpoint's stored dtype) or `float32` accumulation."""
        from ltx_core.devices import resolve_device

        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1 (or None for one call), got {max_batch_size}")
        self.checkpoint_path = Path(checkpoint_path)
        self.gemma_root = Path(gemma_root) if gemma_root is not None else None
        self.loras = tuple(loras)
        self.placement = Placement(resolve_device(device), dtype)
        self.tiling = tiling if tiling is not None else TilingConfig.default()
        self.max_batch_size = max_batch_size
        self.lora_fusion = LoraFusionPrecision.parse(lora_fusion)
        self.progress = progress

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

    @contextmanager
    def transformer(self, loras: Sequence[LoraSpec], cache: StateDictCache | None = None) -> Iterator[nn.Module]:
        """The stage transformer with `loras` fused (by the pipeline's fusion rule), freed on exit."""
        with loaded(
            AV_TRANSFORMER, self.checkpoint_path, self.placement, loras=loras, cache=cache, lora_fusion=self.lora_fusion
        ) as model:
            yield model

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

    def output_shape(self, height: int, width: int, num_frames: int, frame_rate: float) -> VideoPixelShape:
        shape = VideoPixelShape(1, num_frames, height, width, frame_rate)
        shape.check(spatial_multiple=self.spatial_multiple)
        return shape

    # ---- running ---------------------------------------------------------------------------------

    def __call__(
        self,
        prompt: str,
        *,
        seed: int,
        height: int,
        width: int,
        num_frames: int,
        frame_rate: float,
        negative_prompt: str = DEFAULT_NEGATIVE_PROMPT,
        num_inference_steps: int | None = None,
        video_guidance: MultiModalGuiderParams | None = None,
        audio_guidance: MultiModalGuiderParams | None = None,
        images: Sequence[ImageCondition] = (),
        enhance_prompt: bool = False,
    ) -> Generation:
        """Generate from a prompt. Steps and guidance left as None take the checkpoint's defaults."""
        self.output_shape(height, width, num_frames, frame_rate)
        settings = self.guidance_settings(num_inference_steps, video_guidance, audio_guidance)
        if self.gemma_root is None:
            raise ValueError("a Gemma folder (gemma_root) is needed to encode prompts")
        prompts = encode_prompt_pair(
            prompt,
            negative_prompt,
            gemma_root=self.gemma_root,
            checkpoint=self.checkpoint_path,
            placement=self.placement,
            enhance=enhance_prompt,
            images=images,
            seed=seed,
        )
        generation = self.generate_from_contexts(
            prompts.positive,
            prompts.negative,
            height=height,
            width=width,
            num_frames=num_frames,
            frame_rate=frame_rate,
            noise=SeededNoise(seed),
            images=images,
            num_inference_steps=settings.num_inference_steps,
            video_guidance=settings.video,
            audio_guidance=settings.audio,
        )
        generation.prompt = prompts.prompt
        return generation

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
    ) -> Generation:
        """All stages and decoding from given contexts (batch 1 each) and a noise source.

        `negative_contexts` may be None only when neither modality uses CFG. `stage_sigmas` replaces
        the schedule of the named stages (see `stage_names`; a stage's step count is then its length
        - 1). `sde_noise` feeds samplers that draw noise while sampling (res2s) - by default they use
        their own seeded generators, as the reference does.
        """
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
        )
        return self.run_stages(run)

    @abstractmethod
    def run_stages(self, run: GuidedRun) -> Generation:
        """The pipeline's stages and decoding for a resolved run."""

    def decoded(
        self,
        shape: VideoPixelShape,
        video_latent: torch.Tensor,
        audio_latent: torch.Tensor,
        noise: NoiseSource,
        latents: dict[str, torch.Tensor],
    ) -> Generation:
        """The Generation of a finished run: audio decoded now, video frames decoded as consumed."""
        return decoded_generation(
            self.checkpoint_path,
            self.placement,
            shape,
            video_latent,
            audio_latent,
            tiling=self.tiling,
            noise=noise,
            latents=latents,
        )
