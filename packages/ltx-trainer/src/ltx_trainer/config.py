"""The training configuration: pydantic models that reject unknown fields, and YAML loading.

Every section forbids extra keys, so a typo is an error naming the field path instead of a setting that
is silently ignored. `load_config` turns pydantic's errors into one `ConfigError` that lists each bad
field as `section.sub.field: problem (accepted: ...)`. The legacy forms the reference still reads
(`text_to_video` / `video_to_video` strategies, `validation.prompts/images/reference_videos`,
`guidance_scale`/`stg_scale`) are converted with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_NEGATIVE_PROMPT = (
    "worst quality, inconsistent motion, blurry, jittery, distorted, low quality, static, watermark, "
    "text, subtitles, deformed, disfigured, bad anatomy, out of frame"
)
VIDEO_ONLY_CONDITIONS = ("first_frame", "spatial_crop")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names every bad field path."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _is_url(value: str) -> bool:
    return "://" in value


# -- model ----------------------------------------------------------------------------------------
class ModelConfig(_Section):
    model_path: Path = Field(
        description="Single-file LTX-2 / LTX-2.3 checkpoint, or the transformer file of the LTX-2.5 split set "
        "(.safetensors); a local path, not a URL."
    )
    text_encoder_path: Path | None = Field(
        None,
        description="Gemma 3 folder, or the packed Gemma 4 file of the LTX-2.5 split set; only needed for "
        "validation prompts (training reads precomputed features).",
    )
    video_vae_path: Path | None = Field(
        None,
        description="Video VAE file of the LTX-2.5 split set; its metadata gives the VAE compression factors "
        "(default: the `vae` section of model_path, a single file).",
    )
    audio_vae_path: Path | None = Field(
        None,
        description="Audio VAE file of the LTX-2.5 split set (as the reference's configs give it); checked to be "
        "an audio VAE file. Refused with a single-file model_path, whose own audio VAE is used.",
    )
    training_mode: Literal["lora", "full"] = Field("lora", description="Train LoRA adapters or every weight.")
    load_checkpoint: Path | None = Field(
        None,
        description="Weights to start from and resume: a saved `*_step_NNNNN.safetensors`, or a folder "
        "(its latest `*step_*` file is used). Its training state beside it is restored.",
    )

    @model_validator(mode="after")
    def _audio_vae_of_a_split_set(self) -> ModelConfig:
        if self.audio_vae_path is None:
            return self
        from ltx_core.loader import CheckpointError, read_checkpoint_config
        from ltx_trainer.model_files import is_component_transformer

        # With a single file, validation would decode with model_path's audio VAE: a second one given
        # here would silently not be the one used.
        if not is_component_transformer(self.model_path):
            raise ValueError(
                "model.audio_vae_path: only for the LTX-2.5 split set (model_path a transformer-only file); "
                f"{str(self.model_path)!r} is a single-file checkpoint whose own audio VAE is used; remove the field"
            )
        try:
            read_checkpoint_config(self.audio_vae_path, "audio_vae")
        except CheckpointError as e:
            raise ValueError(f"model.audio_vae_path: {e}") from None
        return self

    @field_validator("model_path")
    @classmethod
    def _model_exists(cls, value: Path) -> Path:
        if _is_url(str(value)):
            raise ValueError(f"{str(value)!r} is a URL; download the checkpoint and give its local path")
        if not value.is_file():
            raise ValueError(f"{str(value)!r} is not a file (expected a .safetensors checkpoint)")
        return value

    @field_validator("video_vae_path", "audio_vae_path")
    @classmethod
    def _vae_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{str(value)!r} is not a file (expected a VAE .safetensors file)")
        return value

    @field_validator("text_encoder_path", "load_checkpoint")
    @classmethod
    def _optional_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.exists():
            raise ValueError(f"{str(value)!r} does not exist")
        return value


# -- LoRA -----------------------------------------------------------------------------------------
class LoraConfig(_Section):
    rank: int = Field(64, ge=2, description="LoRA rank r.")
    alpha: float = Field(64, gt=0, description="LoRA alpha; the update is scaled by alpha / rank.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the LoRA input.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["to_k", "to_q", "to_v", "to_out.0"],
        min_length=1,
        description="Module names (suffixes such as `to_k`, or `attn1.to_k`, `ff.net.0.proj`) that get adapters.",
    )


# -- training strategy ----------------------------------------------------------------------------
class _Condition(_Section):
    probability: float = Field(1.0, ge=0.0, le=1.0, description="Chance per sample (per batch for references).")


class FirstFrameCondition(_Condition):
    type: Literal["first_frame"] = Field("first_frame", description="Discriminator of this entry.")


class PrefixCondition(_Condition):
    type: Literal["prefix"] = Field("prefix", description="Discriminator of this entry.")
    temporal_boundary: int = Field(ge=1, description="Clean leading latent frames (video) or latent steps (audio).")


class SuffixCondition(_Condition):
    type: Literal["suffix"] = Field("suffix", description="Discriminator of this entry.")
    temporal_boundary: int = Field(ge=1, description="Clean trailing latent frames (video) or steps (audio).")


class SpatialCropCondition(_Condition):
    type: Literal["spatial_crop"] = Field("spatial_crop", description="Discriminator of this entry.")
    spatial_region: tuple[int, int, int, int] = Field(description="Clean pixel region (y1, x1, y2, x2).")

    @field_validator("spatial_region")
    @classmethod
    def _ordered(cls, value: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        y1, x1, y2, x2 = value
        if min(value) < 0 or y2 <= y1 or x2 <= x1:
            raise ValueError(f"{list(value)} is not a region (y1, x1, y2, x2) with 0 <= y1 < y2 and 0 <= x1 < x2")
        return value


class MaskCondition(_Condition):
    type: Literal["mask"] = Field("mask", description="Discriminator of this entry.")
    mask_dir: str = Field(description="Folder under the data root with per-sample masks (> 0.5 = clean).")


class ReferenceCondition(_Condition):
    type: Literal["reference"] = Field("reference", description="Discriminator of this entry.")
    latents_dir: str = Field(description="Folder under the data root with the reference latents (IC-LoRA).")


TrainingCondition = Annotated[
    FirstFrameCondition | PrefixCondition | SuffixCondition | SpatialCropCondition | MaskCondition | ReferenceCondition,
    Field(discriminator="type"),
]


class ModalityConfig(_Section):
    is_generated: bool = Field(True, description="Denoised with a loss (true) or given clean (false).")
    latents_dir: str = Field(description="Folder under the data root with this modality's latents.")
    conditions: list[TrainingCondition] = Field(
        default_factory=list, description="Conditions in order; references are applied after the others."
    )


class FlexibleStrategyConfig(_Section):
    name: Literal["flexible"] = Field("flexible", description="The strategy (legacy names are converted).")
    video: ModalityConfig | None = Field(None, description="The video stream; absent = audio-only training.")
    audio: ModalityConfig | None = Field(None, description="The audio stream; absent = video-only training.")

    @model_validator(mode="after")
    def _check_modes(self) -> FlexibleStrategyConfig:
        present = {k: m for k, m in (("video", self.video), ("audio", self.audio)) if m is not None}
        if not any(m.is_generated for m in present.values()):
            raise ValueError(
                "no generated modality: set video.is_generated or audio.is_generated to true "
                f"(configured: {sorted(present) or 'none'})"
            )
        if self.audio is not None:
            for i, c in enumerate(self.audio.conditions):
                if c.type in VIDEO_ONLY_CONDITIONS:
                    raise ValueError(
                        f"audio.conditions.{i}: {c.type!r} is a video-only condition "
                        f"(audio accepts prefix, suffix, mask, reference)"
                    )
        for key, m in present.items():
            if not m.is_generated and m.conditions:
                raise ValueError(f"{key}.conditions: a frozen modality (is_generated: false) takes no conditions")
        return self

    def data_sources(self) -> list[str]:
        """Folders under the data root every sample needs (conditions/ always)."""
        sources = ["conditions"]
        for m in (self.video, self.audio):
            if m is None:
                continue
            sources.append(m.latents_dir)
            for c in m.conditions:
                if isinstance(c, MaskCondition):
                    sources.append(c.mask_dir)
                elif isinstance(c, ReferenceCondition):
                    sources.append(c.latents_dir)
        return list(dict.fromkeys(sources))


def _legacy_strategy(raw: dict[str, Any]) -> dict[str, Any]:
    """The deprecated `text_to_video` / `video_to_video` blocks as the equivalent flexible block."""
    name = raw.get("name", "text_to_video")
    if name == "flexible":
        return raw
    accepted = {
        "text_to_video": {"name", "first_frame_conditioning_p", "with_audio", "audio_latents_dir"},
        "video_to_video": {"name", "first_frame_conditioning_p", "reference_latents_dir"},
    }
    if name not in accepted:
        raise ValueError(
            f"name {name!r} is not a strategy (accepted: 'flexible'; legacy 'text_to_video', 'video_to_video')"
        )
    unknown = set(raw) - accepted[name]
    if unknown:
        raise ValueError(
            f"{sorted(unknown)} are not fields of the {name} strategy (accepted: {sorted(accepted[name])})"
        )
    warnings.warn(
        f"training_strategy.name {name!r} is deprecated; it is read as the equivalent 'flexible' block",
        DeprecationWarning,
        stacklevel=4,
    )
    p = raw.get("first_frame_conditioning_p", 0.1)
    video_conditions: list[dict[str, Any]] = []
    if name == "video_to_video":
        video_conditions.append(
            {"type": "reference", "latents_dir": raw.get("reference_latents_dir", "reference_latents")}
        )
    if p > 0:
        video_conditions.append({"type": "first_frame", "probability": p})
    block: dict[str, Any] = {"name": "flexible", "video": {"latents_dir": "latents", "conditions": video_conditions}}
    if name == "text_to_video" and raw.get("with_audio", False):
        block["audio"] = {"latents_dir": raw.get("audio_latents_dir", "audio_latents")}
    return block


# -- optimization / acceleration / data ---------------------------------------------------------------
SchedulerType = Literal["constant", "linear", "cosine", "cosine_with_restarts", "polynomial", "step"]


class OptimizationConfig(_Section):
    learning_rate: float = Field(5e-4, gt=0)
    steps: int = Field(3000, ge=1, description="Optimizer steps.")
    batch_size: int = Field(2, ge=1, description="Samples per process per micro-step.")
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_grad_norm: float = Field(1.0, ge=0, description="Gradient clipping norm (0 = off).")
    optimizer_type: Literal["adamw", "adamw8bit"] = Field("adamw", description="adamw8bit needs CUDA and bitsandbytes.")
    scheduler_type: SchedulerType = Field("linear", description="LR schedule, stepped once per optimizer step.")
    scheduler_params: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the schedule.")
    enable_gradient_checkpointing: bool = Field(False, description="Recompute block activations: less memory.")


class AccelerationConfig(_Section):
    mixed_precision_mode: Literal["no", "fp16", "bf16"] = Field("bf16", description="accelerate autocast mode.")
    quantization: (
        Literal["int8-quanto", "int4-quanto", "int2-quanto", "fp8-quanto", "fp8uz-quanto", "fp8-cast"] | None
    ) = Field(
        None,
        description="Quantize the frozen transformer's block Linears with optimum-quanto (LoRA mode only; "
        "needs `ltx-trainer[quanto]`), or `fp8-cast`: the blocks' attention and feed-forward weights stored as "
        "float8 and computed in the activations' dtype (any device, no extra). LoRA files are unchanged.",
    )
    blocks_to_swap: int | Literal["auto"] = Field(
        0,
        description="Keep this many of the transformer's frozen blocks off the device: each is copied in ahead of "
        "its use in the forward pass and again in the backward pass (LoRA mode; LoRA weights and optimizer "
        "state stay on the device). `auto`: the fewest that fit per the memory plan.",
    )
    block_swap_source: Literal["ram", "disk"] = Field(
        "ram",
        description="Where swapped blocks live: `ram` (all blocks in host memory, pinned on CUDA) or `disk` (read "
        "from the checkpoint file into a few host buffers: least host memory).",
    )
    offload_activations: bool = Field(
        False,
        description="Keep each checkpointed block's input in host memory until the backward pass needs it "
        "(needs optimization.enable_gradient_checkpointing).",
    )
    load_text_encoder_in_8bit: bool = Field(
        False, description="8-bit Gemma (bitsandbytes LLM.int8()) for validation prompts; needs CUDA and bitsandbytes."
    )
    offload_optimizer_during_validation: bool = Field(
        default=False,
        description="Move optimizer state to the CPU while validation samples are generated (CUDA).",
    )

    @field_validator("blocks_to_swap")
    @classmethod
    def _swap_count(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"must be a number of blocks >= 0 or 'auto', got {value}")
        return value

    skip_memory_check: bool = Field(
        False,
        description="Start even when the memory plan (`python -m ltx_trainer.memory_plan`) estimates that the run "
        "does not fit the device's free memory (by default the trainer stops before loading and names settings "
        "that would fit).",
    )


class DataConfig(_Section):
    preprocessed_data_root: Path = Field(description="The dataset's `.precomputed` folder (or the folder holding it).")
    num_dataloader_workers: int = Field(2, ge=0)

    @field_validator("preprocessed_data_root")
    @classmethod
    def _root_exists(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"{str(value)!r} is not a directory (run process_dataset first)")
        if (value / ".precomputed").is_dir():
            return value / ".precomputed"
        return value


# -- validation -----------------------------------------------------------------------------------
class _ValidationCondition(_Section):
    pass


class FirstFrameInput(_ValidationCondition):
    type: Literal["first_frame"] = Field("first_frame", description="Discriminator of this entry.")
    image_or_video: Path = Field(description="Image (or video: its first frame) kept as latent frame 0.")


class _MediaInput(_ValidationCondition):
    video: Path | None = Field(None, description="Video file (give this or audio).")
    audio: Path | None = Field(None, description="Audio file, or a video with sound (give this or video).")

    @model_validator(mode="after")
    def _one_medium(self):
        given = [name for name in ("video", "audio") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of video or audio (got {given or 'neither'})")
        return self


class PrefixInput(_MediaInput):
    type: Literal["prefix"] = Field("prefix", description="Discriminator of this entry.")
    num_frames: int | None = Field(None, description="Frames of the video to keep (8k+1).")
    duration: float | None = Field(None, gt=0, description="Seconds of audio to keep.")

    @field_validator("num_frames")
    @classmethod
    def _frames(cls, v: int | None) -> int | None:
        if v is not None and v % 8 != 1:
            raise ValueError(f"{v} is not 8k+1 (1, 9, 17, ...)")
        return v


class SuffixInput(_MediaInput):
    type: Literal["suffix"] = Field("suffix", description="Discriminator of this entry.")
    num_frames: int | None = Field(
        None, description="Last frames of the video to keep (a multiple of 8); the whole clip is encoded."
    )
    duration: float | None = Field(None, gt=0, description="Last seconds of audio to keep.")

    @field_validator("num_frames")
    @classmethod
    def _frames(cls, v: int | None) -> int | None:
        if v is not None and (v < 8 or v % 8 != 0):
            raise ValueError(f"{v} is not a multiple of 8 (8, 16, ...)")
        return v


class SpatialCropInput(_ValidationCondition):
    type: Literal["spatial_crop"] = Field("spatial_crop", description="Discriminator of this entry.")
    video: Path = Field(description="Video kept inside the region (at least the sample's frame count).")
    spatial_region: tuple[int, int, int, int] = Field(
        description="Kept pixel region (y1, x1, y2, x2) in the sample's frame; the rest is generated."
    )


class MaskInput(_MediaInput):
    type: Literal["mask"] = Field("mask", description="Discriminator of this entry.")
    mask: Path = Field(
        description="Video: grayscale image or video, > 0.5 keeps the given video. Audio: `.pt` tensor (or dict "
        "with `mask`) or an audio file (|amplitude|), > 0.5 keeps the given audio."
    )


class ReferenceInput(_MediaInput):
    type: Literal["reference"] = Field("reference", description="Discriminator of this entry.")
    downscale_factor: int = Field(1, ge=1, description="Reference resolution = sample resolution / this.")
    temporal_scale_factor: int = Field(1, ge=1, description="Reference keeps frame 0 and every N-th frame after.")
    include_in_output: bool = Field(False, description="Show the reference left of the generated video.")


class VideoToAudioInput(_ValidationCondition):
    type: Literal["video_to_audio"] = Field("video_to_audio", description="Discriminator of this entry.")
    video: Path = Field(description="Video held frozen (at least the sample's frame count); audio is generated.")


class AudioToVideoInput(_ValidationCondition):
    type: Literal["audio_to_video"] = Field("audio_to_video", description="Discriminator of this entry.")
    audio: Path = Field(description="Audio held frozen (cut to the sample's duration); video is generated.")


ValidationCondition = Annotated[
    FirstFrameInput
    | PrefixInput
    | SuffixInput
    | SpatialCropInput
    | MaskInput
    | ReferenceInput
    | VideoToAudioInput
    | AudioToVideoInput,
    Field(discriminator="type"),
]


def _check_dims(value: tuple[int, int, int]) -> tuple[int, int, int]:
    width, height, frames = value
    if width % 32 or height % 32 or width <= 0 or height <= 0:
        raise ValueError(f"width and height must be positive multiples of 32, got {width}x{height}")
    if frames % 8 != 1:
        raise ValueError(f"frames must be 8k+1 (1, 9, 17, ...), got {frames}")
    return value


class ValidationSample(_Section):
    prompt: str = Field(description="Text prompt (include the trigger word and describe the audio).")
    conditions: list[ValidationCondition] = Field(default_factory=list, description="Conditions of this sample.")
    video_dims: tuple[int, int, int] | None = Field(None, description="(width, height, frames) override.")
    seed: int | None = Field(None, description="Per-sample seed override.")

    @field_validator("video_dims")
    @classmethod
    def _dims(cls, v: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
        return None if v is None else _check_dims(v)

    @model_validator(mode="after")
    def _frozen_types(self) -> ValidationSample:
        kinds = {c.type for c in self.conditions}
        if {"video_to_audio", "audio_to_video"} <= kinds:
            raise ValueError("video_to_audio and audio_to_video cannot be combined (both modalities frozen)")
        return self


class ValidationConfig(_Section):
    samples: list[ValidationSample] = Field(default_factory=list, description="What to generate at each validation.")
    negative_prompt: str = Field(DEFAULT_NEGATIVE_PROMPT, description="Negative prompt for CFG.")
    video_dims: tuple[int, int, int] = Field((960, 544, 89), description="(width, height, frames).")
    frame_rate: float = Field(24.0, gt=0)
    seed: int = 42
    inference_steps: int = Field(30, ge=1, description="Denoising steps per sample.")
    interval: int | None = Field(100, ge=1, description="Sample every N steps (null = never).")
    video_cfg_scale: float = 3.0
    audio_cfg_scale: float = 7.0
    video_stg_scale: float = 1.0
    audio_stg_scale: float = 1.0
    stg_blocks: list[int] = Field(default_factory=lambda: [28], description="Blocks perturbed for STG.")
    guidance_rescale: float = 0.7
    video_modality_guidance_scale: float = 3.0
    audio_modality_guidance_scale: float = 3.0
    generate_audio: bool = Field(True, description="Mux the generated audio into the mp4.")
    generate_video: bool = Field(True, description="false: write only the audio (.wav).")
    skip_initial_validation: bool = Field(False, description="Do not sample before the first step.")

    @field_validator("video_dims")
    @classmethod
    def _dims(cls, v: tuple[int, int, int]) -> tuple[int, int, int]:
        return _check_dims(v)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        legacy = [k for k in ("prompts", "images", "reference_videos") if k in data]
        if legacy:
            if "samples" in data:
                raise ValueError(f"{legacy} (deprecated) cannot be combined with samples")
            warnings.warn(
                f"validation {legacy} are deprecated; use validation.samples", DeprecationWarning, stacklevel=2
            )
            prompts = data.pop("prompts", None) or []
            images = data.pop("images", None)
            references = data.pop("reference_videos", None)
            for name, values in (("images", images), ("reference_videos", references)):
                if values is not None and len(values) != len(prompts):
                    raise ValueError(f"{name} has {len(values)} entries for {len(prompts)} prompts")
            samples = []
            for i, prompt in enumerate(prompts):
                conditions: list[dict[str, Any]] = []
                if images:
                    conditions.append({"type": "first_frame", "image_or_video": images[i]})
                if references:
                    conditions.append({"type": "reference", "video": references[i]})
                samples.append({"prompt": prompt, "conditions": conditions})
            data["samples"] = samples
        old = [k for k in ("guidance_scale", "stg_scale", "stg_mode") if k in data]
        if old:
            new = [k for k in ("video_cfg_scale", "audio_cfg_scale", "video_stg_scale", "audio_stg_scale") if k in data]
            if new:
                raise ValueError(f"deprecated {old} cannot be mixed with {new}")
            warnings.warn(f"validation {old} are deprecated; use video_/audio_ cfg and stg scales",
                          DeprecationWarning, stacklevel=2)  # fmt: skip
            if "guidance_scale" in data:
                data["video_cfg_scale"] = data["audio_cfg_scale"] = data.pop("guidance_scale")
            stg = data.pop("stg_scale", None)
            mode = data.pop("stg_mode", "stg_av")
            if mode not in ("stg_av", "stg_v"):
                raise ValueError(f"stg_mode {mode!r} is not accepted (accepted: 'stg_av', 'stg_v')")
            if stg is not None:
                data["video_stg_scale"] = stg
                data["audio_stg_scale"] = stg if mode == "stg_av" else 0.0
        return data

    @model_validator(mode="after")
    def _something_generated(self) -> ValidationConfig:
        if not (self.generate_audio or self.generate_video):
            raise ValueError("generate_audio and generate_video are both false; at least one must be true")
        return self


# -- checkpoints / hub / tracking / flow matching -------------------------------------------------
class CheckpointsConfig(_Section):
    interval: int | None = Field(None, ge=1, description="Save every N steps (null = only the final one).")
    keep_last_n: int = Field(1, ge=-1, description="Checkpoints to keep (-1 = all).")
    precision: Literal["bfloat16", "float32"] = "bfloat16"
    lora_format: Literal["comfyui", "diffusers", "kohya"] = Field(
        "comfyui",
        description="Layout of saved LoRA files: comfyui (ComfyUI and these pipelines), diffusers "
        "(`LTX2Pipeline.load_lora_weights`) or kohya (`lora_unet_*`). All three load in these pipelines.",
    )
    no_resume: bool = Field(False, description="Load `load_checkpoint` weights but start from step 0.")
    save_training_state: Literal["off", "minimal", "full"] = Field(
        "minimal", description="full: optimizer too; minimal: step, scheduler, RNG, data order; off: no state."
    )

    @field_validator("keep_last_n")
    @classmethod
    def _not_zero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("0 would delete every checkpoint (accepted: -1 = keep all, or N >= 1)")
        return v


class HubConfig(_Section):
    push_to_hub: bool = Field(False, description="Upload the final LoRA to the Hugging Face Hub.")
    hub_model_id: str | None = Field(None, description="Target repo, e.g. user/my-lora.")

    @model_validator(mode="after")
    def _id_when_pushing(self) -> HubConfig:
        if self.push_to_hub and not (self.hub_model_id or "").strip():
            raise ValueError("hub_model_id is required when push_to_hub is true (e.g. 'user/my-lora')")
        return self


class WandbConfig(_Section):
    enabled: bool = Field(False, description="Log to Weights & Biases (pip install ltx-trainer[wandb]).")
    project: str = "ltxv-trainer"
    entity: str | None = None
    tags: list[str] = Field(default_factory=list)
    log_validation_videos: bool = True


class FlowMatchingConfig(_Section):
    timestep_sampling_mode: Literal["shifted_logit_normal", "uniform"] = Field(
        "shifted_logit_normal", description="How training noise levels are drawn."
    )
    timestep_sampling_params: dict[str, Any] = Field(
        default_factory=dict,
        description="shifted_logit_normal: std, eps, uniform_prob, min/max_tokens, min/max_shift; "
        "uniform: min_value, max_value.",
    )


# -- the whole file -------------------------------------------------------------------------------
def _defaults_of(section: type[_Section]) -> Any:
    """A section left out of the YAML takes all its defaults (a fresh object per config)."""
    return Field(default_factory=section)


class LtxTrainerConfig(_Section):
    model: ModelConfig = Field(description="The base checkpoint and what to train.")
    lora: LoraConfig | None = Field(None, description="Adapter settings; required when training_mode is lora.")
    training_strategy: FlexibleStrategyConfig = Field(default_factory=lambda: FlexibleStrategyConfig(
        video=ModalityConfig(latents_dir="latents")))  # fmt: skip
    optimization: OptimizationConfig = _defaults_of(OptimizationConfig)
    acceleration: AccelerationConfig = _defaults_of(AccelerationConfig)
    data: DataConfig = Field(description="Where the preprocessed samples are.")
    validation: ValidationConfig = _defaults_of(ValidationConfig)
    checkpoints: CheckpointsConfig = _defaults_of(CheckpointsConfig)
    hub: HubConfig = _defaults_of(HubConfig)
    flow_matching: FlowMatchingConfig = _defaults_of(FlowMatchingConfig)
    wandb: WandbConfig = _defaults_of(WandbConfig)
    seed: int = Field(42, description="Seeds LoRA initialisation, data order, noise and sigmas.")
    output_dir: Path = Field(Path("outputs"), description="Checkpoints, samples and the config dump go here.")

    @model_validator(mode="before")
    @classmethod
    def _legacy_strategy(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("training_strategy"), dict):
            data = dict(data)
            try:
                data["training_strategy"] = _legacy_strategy(data["training_strategy"])
            except ValueError as exc:
                raise ValueError(f"training_strategy: {exc}") from None
        return data

    @field_validator("output_dir")
    @classmethod
    def _resolve(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @model_validator(mode="after")
    def _cross_checks(self) -> LtxTrainerConfig:
        if self.lora is None and self.model.training_mode == "lora":
            raise ValueError("lora: the section is required when model.training_mode is 'lora'")
        if self.model.training_mode == "full" and self.acceleration.quantization is not None:
            raise ValueError(
                f"acceleration.quantization: {self.acceleration.quantization!r} needs model.training_mode 'lora' "
                "(a quantized base cannot be fully trained); with training_mode 'full' the accepted value is null"
            )
        acc = self.acceleration
        if acc.blocks_to_swap != 0 and self.model.training_mode != "lora":
            raise ValueError(
                f"acceleration.blocks_to_swap: {acc.blocks_to_swap!r} needs model.training_mode 'lora' (swapped "
                "blocks are frozen); with training_mode 'full' the accepted value is 0"
            )
        if acc.blocks_to_swap != 0 and acc.quantization not in (None, "fp8-cast"):
            raise ValueError(
                f"acceleration.blocks_to_swap: {acc.blocks_to_swap!r} cannot swap optimum-quanto layers "
                f"(acceleration.quantization: {acc.quantization}); use quantization fp8-cast or null with block swap"
            )
        if acc.offload_activations and not self.optimization.enable_gradient_checkpointing:
            raise ValueError(
                "acceleration.offload_activations: true offloads the checkpointed block inputs; it needs "
                "optimization.enable_gradient_checkpointing: true"
            )
        root = self.data.preprocessed_data_root
        fields = _source_fields(self.training_strategy)
        for source in self.training_strategy.data_sources():
            if not (root / source).is_dir():
                raise ValueError(
                    f"{fields.get(source, 'data.preprocessed_data_root')}: folder {source!r} is missing "
                    f"under {str(root)!r} (it holds: {sorted(p.name for p in root.iterdir() if p.is_dir())})"
                )
        return self


def _source_fields(strategy: FlexibleStrategyConfig) -> dict[str, str]:
    fields = {"conditions": "data.preprocessed_data_root"}
    for key, m in (("video", strategy.video), ("audio", strategy.audio)):
        if m is None:
            continue
        fields.setdefault(m.latents_dir, f"training_strategy.{key}.latents_dir")
        for i, c in enumerate(m.conditions):
            if isinstance(c, MaskCondition):
                fields.setdefault(c.mask_dir, f"training_strategy.{key}.conditions.{i}.mask_dir")
            elif isinstance(c, ReferenceCondition):
                fields.setdefault(c.latents_dir, f"training_strategy.{key}.conditions.{i}.latents_dir")
    return fields


def _describe(error: dict[str, Any]) -> str:
    path = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field (check the spelling; see docs/configuration-reference.md)"
    return f"{path or '<config>'}: {message}"


def parse_config(data: dict[str, Any]) -> LtxTrainerConfig:
    """Validate a config dict; a `ConfigError` lists every problem with its field path."""
    if not isinstance(data, dict):
        raise ConfigError(f"the config must be a mapping of sections, got {type(data).__name__}")
    try:
        return LtxTrainerConfig.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e) for e in exc.errors()]
        raise ConfigError("invalid training config:\n  " + "\n  ".join(lines)) from None


def load_config(path: str | Path) -> LtxTrainerConfig:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{str(p)!r} is not valid YAML: {exc}") from None
    return parse_config(data or {})


def dump_config(config: LtxTrainerConfig) -> str:
    """The config as YAML (paths as strings), as written beside the checkpoints."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
