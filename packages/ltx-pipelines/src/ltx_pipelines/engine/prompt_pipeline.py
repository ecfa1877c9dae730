"""The small base every pipeline stands on: its model files and runtime options, and the building blocks
it chains - encoding prompts, building the stage transformer with its LoRAs, decoding.

Generating and decoding are two steps. A pipeline's `generate(prompt, ...)` encodes the prompt (and, with
guidance, the negative prompt, in the same Gemma batch), seeds its noise from `seed`, and hands both to its
`latents_from_contexts` - the seam tests and parity replays drive directly with stored contexts and recorded
noise - which returns the final latents undecoded (`FinalLatents`). `decode` turns them into frames and a
waveform (`engine/generation.py`); calling the pipeline does both. `generate` and `latents_from_contexts` are
the pipeline's own, with its own signature; what runs on several devices is the `parallel` value it is given.

Prompt encoding as the pipelines use it: Gemma (freed afterwards), then the checkpoint's text stage.

A run's length from its prompt: the LTX-2.5 duration head reads the prompt's text contexts and
predicts seconds, clamped to a range and snapped to the video VAE's 8k+1 frame grid.

Pipelines call `predict_frame_count` after encoding the prompt, when the caller asked for a predicted
length (a `DurationRange`) instead of a frame count. Whether a set of model files can predict at all
(`has_duration_head`) is a header-only question, asked before anything loads.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

import torch
from torch import nn

from ltx_core.loader import (
    DEFAULT_LORA_FUSION,
    CheckpointError,
    Component,
    ComponentSpec,
    LoraFusionPrecision,
    LoraSpec,
    ModelFiles,
    StateDictCache,
)
from ltx_core.loader.checkpoint_info import CheckpointInfo
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.model_files import ModelSource, model_files_of
from ltx_core.model.duration_head import DURATION_HEAD, DurationRange, predict_num_frames
from ltx_core.model.transformer import AV_TRANSFORMER
from ltx_core.model.transformer.config import time_position_limit_seconds
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.model.video_vae.vae_class import video_scale_factors
from ltx_core.runtime import RuntimeOptions, build_transformer, release_transformer
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.text_encoders.gemma.modes import text_encoder_mode_for
from ltx_core.text_encoders.gemma.prompt_encoding import context_row
from ltx_core.text_encoders.gemma.resident import ResidentTextEncoders
from ltx_core.types import VideoPixelShape
from ltx_pipelines.engine.denoising_stage import (
    FinalLatents,
    ImageCondition,
    NoiseSource,
    SeededNoise,
)
from ltx_pipelines.engine.generation import AudioGeneration, Generation, decode_latents
from ltx_pipelines.engine.model_loading import ModelBuilder, Placement, loaded, release
from ltx_pipelines.engine.model_versions import (
    ONE_STAGE_SPATIAL_MULTIPLE,
    TWO_STAGE_SPATIAL_MULTIPLE,
)
from ltx_pipelines.engine.requests import VideoRequest, checked_keyframe_positions
from ltx_pipelines.io import read_image_rgb

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ltx_pipelines.engine.multigpu import MultiDevice

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
    text_encoder_mode: str | None
    """How Gemma is held: full, fp8, stream-ram or stream-disk (`ltx_core.text_encoders.gemma.modes`); None:
    the mode matching the transformer's offload (none -> full, cpu -> stream-ram, disk -> stream-disk)."""
    prompt_enhancer_gemma_root: str | Path | None
    """Another Gemma (a folder or a packed file, e.g. a dense Gemma 4) that rewrites the prompt when
    enhancement is asked for; None: the text encoder rewrites it."""
    model_builder: ModelBuilder | None
    """What builds each model from its file (None: `ltx_core.loader.build_model`)."""
    resident_text_encoders: ResidentTextEncoders | None
    """Keep Gemma (and a prompt enhancer) loaded in this pool between prompts instead of loading and freeing
    it for each (a warm worker that owns its device); None: loaded and freed, so it never shares memory
    with the transformer."""
    built_transformer: nn.Module | None
    """A transformer already in memory (e.g. the trainer's, with its current LoRA) that every stage runs
    instead of building one from the checkpoint: used as it is, never freed, no LoRA fused into it."""
    step_cache: float | None
    """The guided stages reuse the deep transformer blocks' residual on steps whose first block changed by less
    than this (First-Block-Cache, `ltx_core.components.step_cache`); None (default): off. Not used by the
    distilled stages."""
    file_headers: FileHeaders | None
    """The headers already read (a command line's checks: `cli.model_resolution`): the pipeline's model files
    read through them, so no header is read twice in a run; None: a store of the pipeline's own."""
    parallel: MultiDevice | None
    """Run over the ranks of the default process group (sequence-parallel stages, prompts encoded per rank,
    tile-parallel decode); None: this process only."""


class Pipeline:
    """What every pipeline stands on: its model files, placement, LoRAs (and how they are fused), runtime, tiling,
    the devices it runs over, and the stage transformer the stages run (a run's final latents take what decoding
    needs from it: `finished_latents(pipeline, ...)`). Prompt-driven pipelines are `PromptPipeline`s; HDR IC-LoRA
    runs from stored contexts and is a `Pipeline` of its own kind."""

    spatial_multiple: ClassVar[int] = ONE_STAGE_SPATIAL_MULTIPLE
    """Output height and width must be multiples of this (64 when stage 1 runs at half size)."""
    predicts_duration: ClassVar[bool] = False
    """Whether a call may leave the length to the duration head (LTX-2.5 files that have one)."""
    transformer_spec: ClassVar[ComponentSpec] = AV_TRANSFORMER
    """What the stages build from the checkpoint (the audio-only pipeline reads only audio weights)."""

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        *,
        loras: Sequence[LoraSpec] = (),
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.bfloat16,
        tiling: TilingConfig | None = None,
        lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
        runtime: RuntimeOptions | None = None,
        progress: bool = True,
        model_builder: ModelBuilder | None = None,
        built_transformer: nn.Module | None = None,
        parallel: MultiDevice | None = None,
        step_cache: float | None = None,
        file_headers: FileHeaders | None = None,
    ) -> None:
        """The options are those of `PipelineOptions` but the text encoder's (`PromptPipeline` adds those)."""
        from ltx_core.devices import resolve_device

        # Issue 34: the checkpoint is resolved into its set of model files once, here; every helper given this
        # set answers from it (each header is read once, kept on the set), and `checkpoint` holds its facts.
        self.checkpoint_path: ModelFiles = model_files_of(checkpoint_path, headers=file_headers)
        self.checkpoint: CheckpointInfo = self.checkpoint_path.info
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
        self.progress = progress
        self.parallel = parallel
        if step_cache is not None and not step_cache > 0:
            raise ValueError(f"step_cache {step_cache} is not accepted: a threshold > 0, or None for no cache")
        if step_cache is not None and runtime is not None and runtime.streams_blocks:
            # Refused here, before any weight is read (the cache wraps the transformer once it is built).
            raise ValueError(
                f"step_cache skips transformer blocks, which offload {runtime.offload!r} streams in order; use one"
            )
        self.step_cache = step_cache

    def output_shape(self, height: int, width: int, num_frames: int, frame_rate: float) -> VideoPixelShape:
        shape = VideoPixelShape(1, num_frames, height, width, frame_rate)
        shape.check(spatial_multiple=self.spatial_multiple)
        return shape

    def transformer(
        self, loras: Sequence[LoraSpec], cache: StateDictCache | None = None
    ) -> AbstractContextManager[nn.Module]:
        """The stage transformer (`transformer_spec`) with `loras` fused by the pipeline's fusion rule and
        built under its runtime options, freed on exit; or the `built_transformer` given, as it is. Over
        several devices it runs sequence parallel."""
        model = self._stage_transformer(loras, cache)
        return model if self.parallel is None else _sequence_parallel(model, self.parallel)

    def _stage_transformer(
        self, loras: Sequence[LoraSpec], cache: StateDictCache | None
    ) -> AbstractContextManager[nn.Module]:
        if self.built_transformer is not None:
            if loras:
                raise ValueError(
                    f"{type(self).__name__}: this stage fuses {[str(lora.path) for lora in loras]} but the "
                    "transformer was given already built (built_transformer); it takes no LoRA file"
                )
            return nullcontext(self.built_transformer)
        if self.runtime is None:
            # The loading context itself (no wrapper of ours around it): built on entry, freed on exit.
            return loaded(
                self.transformer_spec,
                self.checkpoint_path,
                self.placement,
                loras=loras,
                cache=cache,
                lora_fusion=self.lora_fusion,
            )
        return self._runtime_transformer(loras)

    @contextmanager
    def _runtime_transformer(self, loras: Sequence[LoraSpec]) -> Iterator[nn.Module]:
        # Quantized or streamed weights are built tensor by tensor from the file (no shared cache).
        assert self.runtime is not None
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


class PromptPipeline(Pipeline, ABC):
    """A pipeline driven by a prompt, in two steps: `generate` (prompt -> `FinalLatents`, undecoded) and `decode`;
    calling it does both. Each pipeline defines `generate` and `latents_from_contexts` (the seam parity replays
    drive with stored contexts and recorded noise) with its own arguments."""

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        gemma_root: str | Path | None,
        *,
        gemma_8bit: bool = False,
        text_encoder_mode: str | None = None,
        prompt_enhancer_gemma_root: str | Path | None = None,
        resident_text_encoders: ResidentTextEncoders | None = None,
        **options: Any,
    ) -> None:
        """`gemma_root` may be None when only `latents_from_contexts` is used (LTX-2.5 files: the text encoder
        file of the set); the options are those of `PipelineOptions`."""
        if gemma_root is not None and not Path(gemma_root).expanduser().exists():
            # Refused here, not when the first prompt is encoded (after the pipeline is set up and called).
            raise CheckpointError(
                f"gemma_root {str(gemma_root)!r} does not exist; pass the Gemma folder (Hugging Face layout, with "
                "config.json and the tokenizer) or, for LTX-2.5, the packed text encoder file"
            )
        super().__init__(checkpoint_path, **options)
        self.gemma_root = (
            Path(gemma_root).expanduser() if gemma_root is not None else text_encoder_of(self.checkpoint_path)
        )
        if gemma_8bit:
            from ltx_core.text_encoders.gemma.eight_bit import require_gemma_8bit

            require_gemma_8bit(self.placement.device, "gemma_8bit")
            if self.runtime is not None and self.runtime.offload != "none":
                raise ValueError(f"gemma_8bit: an 8-bit Gemma is not offloaded (offload {self.runtime.offload!r})")
            if text_encoder_mode not in (None, "full"):
                raise ValueError(
                    f"gemma_8bit: an 8-bit Gemma is loaded whole (text_encoder_mode {text_encoder_mode!r})"
                )
        self.gemma_8bit = gemma_8bit
        # Text-encoder mode (issue 35): the flag's, else the one following the transformer's offload.
        offload = self.runtime.offload if self.runtime is not None else "none"
        self.text_encoder_mode = text_encoder_mode_for(text_encoder_mode, offload)
        self.prompt_enhancer_gemma_root = (
            None if prompt_enhancer_gemma_root is None else Path(prompt_enhancer_gemma_root)
        )
        self.resident_text_encoders = resident_text_encoders

    # ---- the two steps: generate, then decode ------------------------------------------------------

    @abstractmethod
    def generate(self, *args: Any, **kwargs: Any) -> FinalLatents:
        """The final latents from a prompt, undecoded (each pipeline defines it with its own arguments)."""

    @abstractmethod
    def latents_from_contexts(self, *args: Any, **kwargs: Any) -> FinalLatents:
        """The final latents from given text contexts and a noise source (each pipeline defines it)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Generation | AudioGeneration:
        """`generate` then `decode`: the decoded frames and waveform (an audio-only pipeline: the waveform).
        A `Generation` carries the call's parameters and the model files, so `save` writes the sidecar the
        command line writes (seed, size, length - the one the duration head picked -, every argument)."""
        final = self.generate(*args, **kwargs)
        decoded = self.decode(final)
        if isinstance(decoded, Generation):
            decoded.parameters = {**self.call_parameters(args, kwargs, final), **decoded.parameters}
            decoded.model_files = {**self.model_files(), **decoded.model_files}
        return decoded

    def filled_video(self, video: VideoRequest) -> VideoRequest:
        """`video` with what it leaves unset taken as the command line takes it: the defaults of the checkpoint's
        model version (two-stage pipelines: twice the stage-1 size); on model files with a duration head a length
        left unset is the head's pick in its default range (for a pipeline that `predicts_duration`)."""
        if None not in (video.height, video.width, video.num_frames, video.frame_rate):
            return video  # nothing is left to the defaults: the model version is not looked up
        from ltx_pipelines.engine.model_versions import defaults_for_checkpoint

        defaults = defaults_for_checkpoint(self.checkpoint_path)
        two_stage = self.spatial_multiple == TWO_STAGE_SPATIAL_MULTIPLE
        filled = replace(
            video,
            height=video.height if video.height is not None else (
                defaults.two_stage_height if two_stage else defaults.height
            ),
            width=video.width if video.width is not None else (
                defaults.two_stage_width if two_stage else defaults.width
            ),
            frame_rate=video.frame_rate if video.frame_rate is not None else defaults.frame_rate,
        )  # fmt: skip
        if video.num_frames is not None:
            return filled
        if self.predicts_duration and self.checkpoint.has_duration_head:
            return replace(filled, duration=video.duration or DurationRange())
        return replace(filled, num_frames=defaults.num_frames)

    def call_parameters(self, args: Sequence[Any], kwargs: Mapping[str, Any], final: FinalLatents) -> dict[str, Any]:
        """Every argument of a `generate` call (defaults included) and the options the pipeline was built with,
        as the sidecar records them."""
        bound = inspect.signature(self.generate).bind(*args, **kwargs)
        bound.apply_defaults()
        from ltx_pipelines.engine.requests import GuidanceRequest, VideoRequest

        arguments: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            # A request value is recorded field by field, under the names the command line's sidecar uses; a
            # video request as the run filled it (issue 34: the size the defaults gave, not None).
            if isinstance(value, VideoRequest):
                value = self.filled_video(value)
            if isinstance(value, (VideoRequest, GuidanceRequest)):
                arguments.update(value.parameters())
            else:
                arguments[name] = value
        # A tensor argument (a waveform, a mask) is recorded by its shape, not its values.
        parameters: dict[str, Any] = {
            name: f"tensor{tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else value
            for name, value in arguments.items()
        }
        if parameters.get("num_frames") is None and "num_frames" in parameters:
            parameters["num_frames"] = final.shape.frames  # the length the duration head picked
        parameters.update(
            device=str(self.placement.device),
            dtype=str(self.placement.dtype).removeprefix("torch."),
            lora=[{"path": str(lora.path), "strength": lora.strength} for lora in self.loras],
            lora_fusion_precision=self.lora_fusion.value,
        )
        return parameters

    def model_files(self) -> dict[str, Any]:
        """The model files by role, for the sidecar (as the command line names them)."""
        files: dict[str, Any] = {"checkpoint": self.checkpoint_path, "gemma_root": self.gemma_root}
        upsampler = getattr(self, "spatial_upsampler_path", None)
        if upsampler is not None:
            files["spatial_upsampler"] = upsampler
        for i, lora in enumerate(self.loras):
            files[f"lora_{i}"] = Path(lora.path)
        return {role: value for role, value in files.items() if value is not None}

    def generate_from_contexts(self, *args: Any, **kwargs: Any) -> Generation | AudioGeneration:
        """`latents_from_contexts` then `decode` (the seam parity replays drive)."""
        return self.decode(self.latents_from_contexts(*args, **kwargs))

    def decode(self, final: FinalLatents) -> Generation | AudioGeneration:
        """The decode step for this pipeline's latents; over several devices the video is decoded
        tile-parallel (every rank must call it; rank 0 gets the frames, the others none)."""
        distributed = self.parallel is not None and self.parallel.decodes_distributed
        return decode_latents(final, distributed=distributed)

    def encode_prompts(
        self, prompts: Sequence[str], *, seed: int, images: Sequence[ImageCondition], enhance: bool
    ) -> tuple[list[TextContexts], str]:
        """Each prompt's contexts (batch 1), from one Gemma batch, and the first prompt as encoded
        (rewritten by Gemma when `enhance`; the others never are). Over several devices each rank encodes
        its share of the prompts (see `MultiDevice.encode_prompts`)."""
        if self.gemma_root is None:
            raise ValueError("a Gemma folder (gemma_root) is needed to encode prompts")
        gemma_root = self.gemma_root

        def encode(batch: Sequence[str], enhance_first: bool) -> tuple[list[TextContexts], str]:
            contexts, final_prompt = encode_prompt(
                batch,
                gemma_root=gemma_root,
                checkpoint=self.checkpoint_path,
                placement=self.placement,
                enhance=enhance_first,
                images=images,
                seed=seed,
                text_encoder_mode=self.text_encoder_mode,
                gemma_8bit=self.gemma_8bit,
                enhancer_root=self.prompt_enhancer_gemma_root,
                resident=self.resident_text_encoders,
            )
            return [context_row(contexts, i) for i in range(len(batch))], final_prompt

        if self.parallel is not None:
            return self.parallel.encode_prompts(prompts, encode, enhance=enhance)
        return encode(prompts, enhance)


class TwoStagePromptPipeline(PromptPipeline):
    """A prompt pipeline whose stage 2 refines the x2-upsampled stage-1 latent (the distilled-checkpoint family:
    distilled, IC-LoRA, lip-dub, DFR): it holds the spatial upsampler's file, and the output size is a multiple
    of 64 so that the half-size stage 1 stays on the 32-pixel grid."""

    spatial_multiple = TWO_STAGE_SPATIAL_MULTIPLE

    def __init__(
        self,
        checkpoint_path: str | Path | ModelFiles,
        spatial_upsampler_path: str | Path,
        gemma_root: str | Path | None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        """`options`: see `PipelineOptions`."""
        super().__init__(checkpoint_path, gemma_root, **options)
        self.spatial_upsampler_path = Path(spatial_upsampler_path)

    def checked_video(self, video: VideoRequest) -> VideoRequest:
        """`video` filled (`filled_video`) and checked before anything loads: a `duration` range as
        `check_video_length` accepts it, the size against the model grid, generated keyframes against the
        keyframe embedding and the length (when the request gives one: a predicted length is checked once the
        head has picked it)."""
        check_video_length(self.checkpoint_path, video)
        video = self.filled_video(video)
        height, width, frame_rate = video.height, video.width, video.frame_rate
        assert height is not None and width is not None and frame_rate is not None
        self.output_shape(height, width, video.num_frames or 1, frame_rate)
        checked_keyframe_positions(self.checkpoint_path, video.generated_keyframes, video.num_frames)
        return video

    def prompted(self, prompt: str, *, seed: int, video: VideoRequest, enhance_prompt: bool) -> Prompted:
        """What the prompt call of these pipelines (no guidance, so no negative prompt) hands its
        `latents_from_contexts`: `video` checked and filled (`checked_video`), the prompt encoded alone, the length
        picked by the duration head where the request leaves it to it (pipelines that `predicts_duration`), the
        noise seeded from `seed`, and the prompt as encoded (for the final latents)."""
        video = self.checked_video(video)
        (contexts,), final_prompt = self.encode_prompts(
            [prompt], seed=seed, images=video.images, enhance=enhance_prompt
        )
        if self.predicts_duration:
            video = with_requested_frames(self.checkpoint_path, self.placement, contexts, video)
        return Prompted(contexts, video, SeededNoise(seed), final_prompt)


@dataclass(frozen=True)
class Prompted:
    """A prompt call's inputs to `latents_from_contexts`, worked out once: the prompt's contexts, the checked and
    filled video request (its length decided), the seeded noise, and the prompt as encoded."""

    contexts: TextContexts
    video: VideoRequest
    noise: NoiseSource
    prompt: str


@contextmanager
def _sequence_parallel(model: AbstractContextManager[nn.Module], parallel: MultiDevice) -> Iterator[nn.Module]:
    with model as transformer:
        yield parallel.stage_transformer(transformer)


def encode_prompt(
    prompts: Sequence[str],
    *,
    gemma_root: Path,
    checkpoint: ModelSource,
    placement: Placement,
    enhance: bool = False,
    images: Sequence[ImageCondition] = (),
    seed: int = 0,
    text_encoder_mode: str = "full",
    gemma_8bit: bool = False,
    enhancer_root: Path | None = None,
    resident: ResidentTextEncoders | None = None,
) -> tuple[TextContexts, str]:
    """Encode prompts with Gemma (freed afterwards) and the checkpoint's text stage (`checkpoint`: the
    single file, a diffusers folder - its `connectors/` - or a set of model files).

    With `enhance`, Gemma first rewrites prompts[0] (looking at the first conditioning image, if any): the
    Gemma at `enhancer_root` when given (loaded and freed before the text encoder), else the text encoder.
    `text_encoder_mode` (full | fp8 | stream-ram | stream-disk, `ltx_core.text_encoders.gemma.modes`): how
    Gemma is held (streamed: the same contexts with one layer on the device; fp8: close contexts);
    `gemma_8bit` loads its 8-bit (LLM.int8()) form instead (CUDA and bitsandbytes; close contexts).
    `resident`: Gemma is taken from (and kept in) that pool instead of loaded and freed.
    Returns the contexts (one row per prompt) and the prompt actually used.
    """
    from ltx_core.text_encoders.gemma.prompt_encoding import PromptEnhancement, encode_text_prompts

    enhancement = None
    if enhance:
        first = min(images, key=lambda i: i.frame_idx) if images else None
        image = read_image_rgb(first.path) if first is not None and first.path is not None else None
        enhancement = PromptEnhancement(image=image, seed=seed, gemma_root=enhancer_root)
    try:
        encoded = encode_text_prompts(
            list(prompts),
            gemma_root=gemma_root,
            checkpoint=checkpoint,
            dtype=placement.dtype,
            device=placement.device,
            enhancement=enhancement,
            mode=text_encoder_mode,
            load_in_8bit=gemma_8bit,
            resident=resident,
        )
    except CheckpointError as e:
        # Usually a Gemma folder of another size than the checkpoint's: name both files.
        raise CheckpointError(
            f"encoding the prompt with the Gemma folder {str(gemma_root)!r} and the text stage of "
            f"{str(checkpoint)!r} failed: {e}; pass the Gemma 3 folder this checkpoint was made for (--gemma-root)"
        ) from e
    if enhance:
        logger.info("enhanced prompt: %s", encoded.prompts[0])
    return encoded.contexts, encoded.prompts[0]


def text_encoder_of(checkpoint: ModelSource) -> Path | None:
    """The text encoder a set of model files names (e.g. LTX-2.5's packed Gemma 4 file), for a pipeline
    given no `gemma_root`; None for paths (a single file or a folder carries no usable text encoder)."""
    if isinstance(checkpoint, ModelFiles) and checkpoint.has(Component.TEXT_ENCODER):
        return checkpoint.source(Component.TEXT_ENCODER).path
    return None


def has_duration_head(checkpoint: ModelSource) -> bool:
    """Whether the model files carry a duration head (its own file, or `duration_head.*` in a single file)."""
    try:
        return model_files_of(checkpoint).info.has_duration_head
    except CheckpointError:
        return False


def predict_frame_count(
    checkpoint: ModelSource,
    placement: Placement,
    contexts: TextContexts,
    *,
    frame_rate: float,
    duration_range: DurationRange,
) -> int:
    """The frame count the duration head predicts for one prompt's `contexts` (batch 1), in
    `duration_range` seconds at `frame_rate`, on the video VAE's temporal grid (its factor read from the
    VAE's config). The head is loaded for the prediction and freed after it."""
    files = model_files_of(checkpoint)
    files.require(Component.DURATION_HEAD, purpose="predicting the video length (no --num-frames)")
    vae = files.info.configs.get("vae")
    time_factor = video_scale_factors(vae).time if isinstance(vae, dict) else 8
    video = contexts.video.to(device=placement.device, dtype=placement.dtype)
    audio = contexts.audio.to(device=placement.device, dtype=placement.dtype)
    with loaded(DURATION_HEAD, files, placement) as head:
        frames = predict_num_frames(
            head, video, audio, frame_rate=frame_rate, duration_range=duration_range, time_factor=time_factor
        )
    logger.info("duration head: %d frames (%.2f s at %g fps)", frames, frames / frame_rate, frame_rate)
    return frames


def check_duration_range(duration: DurationRange, transformer_config: Mapping[str, Any]) -> None:
    """Refuse a range the model cannot produce: the transformer places frames in time only up to its
    temporal RoPE extent (`time_position_limit_seconds`, 20 s in the released models), so a predicted length
    beyond it would be clamped into a clip longer than the positions the model was trained on."""
    limit = time_position_limit_seconds(transformer_config)
    if duration.max_seconds > limit:
        raise ValueError(
            f"the range [{duration.min_seconds:g}, {duration.max_seconds:g}] s goes beyond the {limit:g} s the model's "
            f"temporal positions span (positional_embedding_max_pos); accepted: 0 < MIN_SECONDS <= MAX_SECONDS <= "
            f"{limit:g}"
        )


def check_length_request(checkpoint: ModelSource, num_frames: int | None, duration: DurationRange | None) -> None:
    """A pipeline call asks for its length one way: a frame count, or a `duration` range for the duration
    head (then the model files must carry one, and the range must be one the model can produce). Checked
    before the prompt is encoded."""
    if (num_frames is None) == (duration is None):
        raise ValueError(f"give num_frames or duration, not both or neither (got {num_frames}, {duration})")
    if duration is not None and not has_duration_head(checkpoint):
        raise ValueError("duration needs model files with a duration head (ModelFiles.split(duration_head=...))")
    if duration is not None:
        check_duration_range(duration, model_files_of(checkpoint).info.section("transformer"))


def requested_frames(
    checkpoint: ModelSource,
    placement: Placement,
    contexts: TextContexts,
    *,
    num_frames: int | None,
    duration: DurationRange | None,
    frame_rate: float,
) -> int:
    """The frame count a call asked for: `num_frames`, or the duration head's prediction in `duration`."""
    if duration is None:
        assert num_frames is not None, "check_length_request first"
        return num_frames
    return predict_frame_count(checkpoint, placement, contexts, frame_rate=frame_rate, duration_range=duration)


def check_video_length(checkpoint: ModelSource, video: VideoRequest) -> None:
    """`check_length_request` for a request as the caller gave it (before `fill_video`): one that gives a
    `duration` range must leave `num_frames` unset and run on model files with a duration head (filling
    gives any other request a frame count)."""
    if video.duration is not None:
        check_length_request(checkpoint, video.num_frames, video.duration)


def with_requested_frames(
    checkpoint: ModelSource, placement: Placement, contexts: TextContexts, video: VideoRequest
) -> VideoRequest:
    """`video` with its length decided: its frame count, or the duration head's pick in its `duration` range
    (`check_video_length` first)."""
    assert video.frame_rate is not None, "fill the request first"
    if video.duration is None:
        return video  # the request's own frame count: nothing to decide
    frames = requested_frames(
        checkpoint, placement, contexts, num_frames=video.num_frames, duration=video.duration,
        frame_rate=video.frame_rate,
    )  # fmt: skip
    return video.with_frames(frames)


def refuse_duration(video: VideoRequest, pipeline: str) -> None:
    """Refuse a `duration` range on a pipeline whose length is its inputs' or the caller's frame count."""
    if video.duration is not None:
        raise ValueError(f"{pipeline} takes a frame count (num_frames), not a duration range (got {video.duration})")
