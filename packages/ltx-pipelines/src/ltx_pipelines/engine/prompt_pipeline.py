"""What every text/image-to-video+audio pipeline shares: its model files and runtime options, the
prompt-to-generation call, building the stage transformer with its LoRAs, and decoding.

A pipeline is called with a prompt; it encodes the prompt (and, with guidance, the negative prompt,
in the same Gemma batch), seeds its noise from `seed`, and hands both to `generate_from_contexts` -
the seam tests and parity replays drive directly with stored contexts and recorded noise.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import torch
from torch import nn

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.loader import (
    DEFAULT_LORA_FUSION,
    ComponentSpec,
    LoraFusionPrecision,
    LoraSpec,
    ModelFiles,
    StateDictCache,
)
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.runtime import RuntimeOptions, build_transformer, release_transformer
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.text_encoders.gemma.prompt_encoding import context_row
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.defaults import ONE_STAGE_SPATIAL_MULTIPLE
from ltx_pipelines.engine.file_steps import decoded_generation
from ltx_pipelines.engine.generation import Generation
from ltx_pipelines.engine.model_loading import ModelBuilder, Placement, loaded, release
from ltx_pipelines.engine.noise import NoiseSource, SeededNoise
from ltx_pipelines.engine.prompts import encode_prompt, text_encoder_of
from ltx_pipelines.engine.stages import ImageCondition

logger = logging.getLogger(__name__)


class PipelineOptions(TypedDict, total=False):
    """The keyword options every pipeline's constructor takes; each pipeline's constructor documents
    only what it adds. Defaults are those of `PromptPipeline.__init__`."""

    loras: Sequence[LoraSpec]
    """LoRA files fused into the transformer of every stage."""
    device: torch.device | str | None
    """None: CUDA when present, then MPS, then the CPU."""
    dtype: torch.dtype
    tiling: TilingConfig | None
    """The VAE decode layout; None: the automatic layout for each output size."""
    lora_fusion: LoraFusionPrecision | str
    """`weight-dtype` (default: the reference's rounding in the dtype the checkpoint stores the weights
    in) or `float32` accumulation."""
    runtime: RuntimeOptions | None
    """fp8 quantization, block streaming, compilation and the attention backend of the transformer (None:
    a plain load); checked against the device in the constructor, before any weight is read."""
    progress: bool
    gemma_8bit: bool
    """Encode prompts with an 8-bit (LLM.int8()) Gemma: CUDA and bitsandbytes, checked in the constructor."""
    model_builder: ModelBuilder | None
    """What builds each model from its file (None: `ltx_core.loader.build_model`)."""
    built_transformer: nn.Module | None
    """A transformer already in memory (e.g. the trainer's, with its current LoRA) that every stage runs
    instead of building one from the checkpoint: used as it is, never freed, no LoRA fused into it."""


class GuidedOptions(PipelineOptions, total=False):
    """`PipelineOptions` plus what guided pipelines add."""

    max_batch_size: int | None


@dataclass(frozen=True)
class GuidanceRequest:
    """What a prompt call asks of guidance; None: the pipeline's defaults."""

    negative_prompt: str | None = None
    num_inference_steps: int | None = None
    video_guidance: MultiModalGuiderParams | None = None
    audio_guidance: MultiModalGuiderParams | None = None

    def given(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


class PromptPipeline(ABC):
    """Base of the pipelines: model files, placement, LoRAs (and how they are fused), tiling."""

    spatial_multiple: ClassVar[int] = ONE_STAGE_SPATIAL_MULTIPLE
    """Output height and width must be multiples of this (64 when stage 1 runs at half size)."""
    transformer_spec: ClassVar[ComponentSpec] = AV_TRANSFORMER
    """What the stages build from the checkpoint (the audio-only pipeline reads only audio weights)."""

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        gemma_root: str | Path | None,
        *,
        loras: Sequence[LoraSpec] = (),
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
        tiling: TilingConfig | None = None,
        lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
        runtime: RuntimeOptions | None = None,
        progress: bool = True,
        gemma_8bit: bool = False,
        model_builder: ModelBuilder | None = None,
        built_transformer: nn.Module | None = None,
    ) -> None:
        """`gemma_root` may be None when only `generate_from_contexts` is used; the options are those of
        `PipelineOptions`."""
        from ltx_core.devices import resolve_device

        self.checkpoint_path = checkpoint_path if isinstance(checkpoint_path, ModelFiles) else Path(checkpoint_path)
        self.gemma_root = Path(gemma_root) if gemma_root is not None else text_encoder_of(self.checkpoint_path)
        self.loras = tuple(loras)
        self.placement = Placement(resolve_device(device), dtype, model_builder)
        if built_transformer is not None and (self.loras or runtime is not None):
            given = "loras" if self.loras else "runtime"
            raise ValueError(f"built_transformer is used as it is: {given} cannot apply to it (pass neither)")
        self.built_transformer = built_transformer
        self.tiling = tiling  # None: the automatic layout for each output size
        self.lora_fusion = LoraFusionPrecision.parse(lora_fusion)
        self.runtime = runtime
        if runtime is not None:
            runtime.validate(self.placement.device)
        if gemma_8bit:
            from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit

            require_gemma_8bit(self.placement.device, "gemma_8bit")
            if runtime is not None and runtime.offload != "none":
                raise ValueError(f"gemma_8bit: an 8-bit Gemma is not offloaded (offload {runtime.offload!r})")
        self.gemma_8bit = gemma_8bit
        self.progress = progress

    # ---- the prompt call ---------------------------------------------------------------------------

    def __call__(
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
        **inputs: Any,
    ) -> Generation:
        """Generate from a prompt; the same seed and settings give the same result.

        `inputs`: a pipeline's own media inputs (e.g. the audio of audio-to-video), handed on to its
        `generate_from_contexts` unchanged.

        `negative_prompt`, `num_inference_steps` and the guidance of each modality apply to pipelines
        with a guided stage (None: the default negative prompt and the checkpoint generation's
        defaults); a pipeline without guidance refuses them. `inputs`: further keywords of the
        pipeline's own `generate_from_contexts` (reference videos, ...), passed through.
        """
        self.output_shape(height, width, num_frames, frame_rate)
        self._check_inputs(inputs)
        extra_prompts, options = self.prompt_options(
            GuidanceRequest(negative_prompt, num_inference_steps, video_guidance, audio_guidance)
        )
        contexts, final_prompt = self.encode_prompts(
            [prompt, *extra_prompts], seed=seed, images=images, enhance=enhance_prompt
        )
        generation = self.generate_from_contexts(
            *contexts,
            height=height,
            width=width,
            num_frames=num_frames,
            frame_rate=frame_rate,
            noise=SeededNoise(seed),
            images=images,
            **options,
            **inputs,
        )
        generation.prompt = final_prompt
        return generation

    def _check_inputs(self, inputs: dict[str, Any]) -> None:
        """Refuse keywords `generate_from_contexts` does not take before the prompt is encoded."""
        if not inputs:
            return
        parameters = inspect.signature(self.generate_from_contexts).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return
        unknown = sorted(set(inputs) - set(parameters))
        if unknown:
            raise TypeError(f"{type(self).__name__} does not take {unknown}")

    def prompt_options(self, request: GuidanceRequest) -> tuple[list[str], dict[str, Any]]:
        """Prompts encoded after the prompt (their contexts follow its in `generate_from_contexts`) and
        the keywords `generate_from_contexts` takes from the call. Without guidance: none of either."""
        refused = request.given()
        if refused:
            raise ValueError(f"{type(self).__name__} runs without guidance and fixed schedules: {refused} not accepted")
        return [], {}

    def encode_prompts(
        self, prompts: Sequence[str], *, seed: int, images: Sequence[ImageCondition], enhance: bool
    ) -> tuple[list[TextContexts], str]:
        """Each prompt's contexts (batch 1), from one Gemma batch, and the first prompt as encoded
        (rewritten by Gemma when `enhance`; the others never are)."""
        if self.gemma_root is None:
            raise ValueError("a Gemma folder (gemma_root) is needed to encode prompts")
        contexts, final_prompt = encode_prompt(
            prompts,
            gemma_root=self.gemma_root,
            checkpoint=self.checkpoint_path,
            placement=self.placement,
            enhance=enhance,
            images=images,
            seed=seed,
            # --offload streams Gemma's layers too, so the text encoder fits where the transformer does.
            gemma_offload=self.runtime.offload if self.runtime is not None else "none",
            gemma_8bit=self.gemma_8bit,
        )
        return [context_row(contexts, i) for i in range(len(prompts))], final_prompt

    @abstractmethod
    def generate_from_contexts(self, *contexts: TextContexts | None, **options: Any) -> Generation:
        """All stages and decoding from given contexts and a noise source (see each pipeline)."""

    # ---- building blocks ---------------------------------------------------------------------------

    def output_shape(self, height: int, width: int, num_frames: int, frame_rate: float) -> VideoPixelShape:
        shape = VideoPixelShape(1, num_frames, height, width, frame_rate)
        shape.check(spatial_multiple=self.spatial_multiple)
        return shape

    @contextmanager
    def transformer(self, loras: Sequence[LoraSpec], cache: StateDictCache | None = None) -> Iterator[nn.Module]:
        """The stage transformer (`transformer_spec`) with `loras` fused by the pipeline's fusion rule and
        built under its runtime options, freed on exit; or the `built_transformer` given, as it is."""
        if self.built_transformer is not None:
            if loras:
                raise ValueError(
                    f"{type(self).__name__}: this stage fuses {[str(lora.path) for lora in loras]} but the "
                    "transformer was given already built (built_transformer); it takes no LoRA file"
                )
            yield self.built_transformer
            return
        if self.runtime is None:
            with loaded(
                self.transformer_spec,
                self.checkpoint_path,
                self.placement,
                loras=loras,
                cache=cache,
                lora_fusion=self.lora_fusion,
            ) as model:
                yield model
            return
        # Quantized or streamed weights are built tensor by tensor from the file (no shared cache).
        model = build_transformer(
            self.transformer_spec,
            self.checkpoint_path,
            self.runtime,
            device=self.placement.device,
            dtype=self.placement.dtype,
            loras=loras,
            lora_fusion=self.lora_fusion,
        )
        try:
            yield model
        finally:
            release_transformer(model)
            release()

    def refinement_transformer(self, transformer: nn.Module, shape: VideoPixelShape) -> nn.Module:
        """The model a refinement stage (stage 2 of the two-stage pipelines) runs at `shape`, given the stage's
        transformer: the transformer itself here; the multi-device pipelines may swap in a tiled one."""
        return transformer

    @property
    def refined_audio_is_usable(self) -> bool:
        """Whether a refinement stage's audio output may be shipped (a tiled stage's is a mean over tiles
        that each saw part of the video: the pipelines then ship the audio of the stage before)."""
        return True

    def decoded(
        self,
        shape: VideoPixelShape,
        video_latent: torch.Tensor,
        audio_latent: torch.Tensor | None,
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
