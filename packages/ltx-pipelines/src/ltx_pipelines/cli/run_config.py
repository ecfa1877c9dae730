"""Checking parsed command-line arguments before any model is loaded, into one frozen run config.

`validate_args(parser, args)` checks cheap things first (numbers, local files, the output path),
then resolves hf:// paths (which may download), then reads the model files' headers to check each
is the kind its flag expects. Every problem ends the program through `parser.error` (exit code 2)
with a message naming the flag, the value and what is accepted.
"""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import torch
from PIL import Image, UnidentifiedImageError

from ltx_core.components.guiders import MultiModalGuiderParams
from ltx_core.devices import default_device, parse_dtype
from ltx_core.loader import DEFAULT_LORA_FUSION, CheckpointError, LoraFusionPrecision, LoraSpec
from ltx_core.memory_estimate import InsufficientMemoryError, WorkloadShape, check_fits, free_device_memory
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.runtime import RuntimeOptions
from ltx_core.text_encoders.gemma.folder import locate_gemma_folder
from ltx_core.types import DEFAULT_SCALE_FACTORS
from ltx_pipelines.cli.hf_paths import HfPathError, is_hf_path, resolve_model_path
from ltx_pipelines.cli.runtime_flags import runtime_from_args
from ltx_pipelines.cli.tiling_flags import tiling_from_args
from ltx_pipelines.engine.checkpoint_kind import ExpectedKind, check_checkpoint_kind
from ltx_pipelines.engine.defaults import default_image_crf, normalize_model_version, spatial_multiple
from ltx_pipelines.engine.stages import ImageCondition
from ltx_pipelines.media.atomic_files import check_output_path, sidecar_path

logger = logging.getLogger(__name__)

_MAX_CRF = 51
_SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class ValidationRules:
    """What a pipeline accepts beyond the flags it declares.

    `spatial_multiple=None` means 64 for two-stage parsers (they have `--spatial-upsampler-path`,
    stage 1 runs at half size) and 32 otherwise. `writes_sidecar` also protects the `.json` beside
    the output. `check_kinds=False` skips reading model headers (tests of other rules).
    """

    spatial_multiple: int | None = None
    output_suffixes: tuple[str, ...] = (".mp4",)
    writes_sidecar: bool = False
    check_kinds: bool = True
    hf_cache_dir: str | Path | None = None
    hf_offline: bool | None = None


@dataclass(frozen=True)
class RunConfig:
    """Everything a pipeline run needs from the command line, checked. Fields of flags a parser
    does not declare are None (or empty)."""

    prompt: str
    output_path: Path
    seed: int
    device: torch.device
    dtype: torch.dtype
    overwrite: bool
    demo: bool
    log_level: str
    save_latents: bool = False
    audio_output: bool = True
    """Whether the written video carries the audio stream (`--no-audio-output` leaves it out)."""
    enhance_prompt: bool = False
    checkpoint_path: Path | None = None
    distilled_checkpoint: bool = False
    """True when the checkpoint came from --distilled-checkpoint-path."""
    model_version: tuple[int, ...] = ()
    gemma_root: Path | None = None
    spatial_upsampler_path: Path | None = None
    loras: tuple[LoraSpec, ...] = ()
    distilled_lora: LoraSpec | None = None
    lora_fusion: LoraFusionPrecision = DEFAULT_LORA_FUSION
    negative_prompt: str | None = None
    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    frame_rate: float | None = None
    num_inference_steps: int | None = None
    images: tuple[ImageCondition, ...] = ()
    video_guidance: MultiModalGuiderParams | None = None
    audio_guidance: MultiModalGuiderParams | None = None
    tiling: TilingConfig | None = None
    """The VAE decode layout the tiling flags ask for; None: the automatic layout for the output size."""
    max_batch_size: int | None = None
    runtime: RuntimeOptions | None = None
    """fp8 / streaming / compile / attention choices of the transformer; None: a plain load."""
    gemma_8bit: bool = False
    """Encode prompts with an 8-bit Gemma (`--gemma-8bit`; checked against the device)."""
    distilled_lora_strength_stage_1: float | None = None
    distilled_lora_strength_stage_2: float | None = None


class _Checker:
    """Collects the namespace and the parser's error channel for the individual checks."""

    def __init__(self, parser: argparse.ArgumentParser, args: argparse.Namespace, rules: ValidationRules) -> None:
        self.parser = parser
        self.args = args
        self.rules = rules

    def fail(self, message: str) -> NoReturn:
        self.parser.error(message)

    def has(self, name: str) -> bool:
        return hasattr(self.args, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self.args, name, default)

    # ---- numbers -------------------------------------------------------------------------------

    def finite(self, flag: str, value: float) -> float:
        if not math.isfinite(value):
            self.fail(f"{flag} {value} is not a finite number")
        return float(value)

    def size(self, multiple: int) -> tuple[int | None, int | None]:
        if not self.has("height"):
            return None, None
        values = []
        for flag, value in (("--height", self.args.height), ("--width", self.args.width)):
            if value < multiple or value % multiple:
                self.fail(
                    f"{flag} {value} is not accepted: it must be a positive multiple of {multiple} "
                    f"(e.g. {max(multiple, value // multiple * multiple)} or {(value // multiple + 1) * multiple})"
                )
            values.append(int(value))
        return values[0], values[1]

    def num_frames(self) -> int | None:
        if not self.has("num_frames"):
            return None
        n = self.args.num_frames
        if n < 1 or (n - 1) % 8:
            lower = max(1, (n - 1) // 8 * 8 + 1)
            self.fail(
                f"--num-frames {n} is not accepted: it must be 8k+1 (1, 9, 17, ..., 121, ...), "
                f"e.g. {lower} or {lower + 8}"
            )
        return int(n)

    def frame_rate(self) -> float | None:
        if not self.has("frame_rate"):
            return None
        fps = self.args.frame_rate
        if not math.isfinite(fps) or fps <= 0:
            self.fail(f"--frame-rate {fps} is not accepted: it must be a positive number of frames per second")
        return float(fps)

    def steps(self) -> int | None:
        if not self.has("num_inference_steps"):
            return None
        steps = self.args.num_inference_steps
        if steps < 1:
            self.fail(f"--num-inference-steps {steps} is not accepted: it must be at least 1")
        return int(steps)

    def seed(self) -> int:
        seed = self.get("seed", 0)
        if not _SEED_RANGE[0] <= seed <= _SEED_RANGE[1]:
            self.fail(f"--seed {seed} is out of range [{_SEED_RANGE[0]}, {_SEED_RANGE[1]}]")
        return int(seed)

    def guidance(self, modality: str, cross_flag: str) -> MultiModalGuiderParams | None:
        prefix = f"{modality}_"
        if not self.has(f"{prefix}cfg_guidance_scale"):
            return None
        cross = cross_flag.lstrip("-").replace("-", "_")
        skip = self.get(f"{prefix}skip_step")
        if skip < 0:
            self.fail(f"--{modality}-skip-step {skip} is not accepted: it must be >= 0 (0 guides every step)")
        blocks = tuple(int(b) for b in self.get(f"{prefix}stg_blocks"))
        if any(b < 0 for b in blocks):
            self.fail(f"--{modality}-stg-blocks {list(blocks)}: block indices must be >= 0")
        stg_scale = self.finite(f"--{modality}-stg-guidance-scale", self.get(f"{prefix}stg_guidance_scale"))
        if stg_scale != 0 and not blocks:
            self.fail(
                f"--{modality}-stg-guidance-scale {stg_scale} needs at least one block in --{modality}-stg-blocks "
                f"(or pass --{modality}-stg-guidance-scale 0 to turn STG off)"
            )
        return MultiModalGuiderParams(
            cfg_scale=self.finite(f"--{modality}-cfg-guidance-scale", self.get(f"{prefix}cfg_guidance_scale")),
            stg_scale=stg_scale,
            rescale_scale=self.finite(f"--{modality}-rescale-scale", self.get(f"{prefix}rescale_scale")),
            # A parser without the cross-modal flag (audio-only pipelines) has no other modality: 1 is off.
            modality_scale=self.finite(cross_flag, self.get(cross, 1.0)),
            skip_step=int(skip),
            stg_blocks=blocks,
        )

    def stg_blocks_in_model(
        self, modality: str, params: MultiModalGuiderParams | None, num_layers: int | None, demo: bool
    ) -> MultiModalGuiderParams | None:
        """STG blocks must exist in the checkpoint's transformer (a missing block would silently turn
        STG into a no-op). Blocks the user did not choose (the defaults, made for the released models)
        and any block of a `--demo` run move to the model's last block instead of failing, so a
        command without STG flags runs on any checkpoint, the small demo model included."""
        if params is None or num_layers is None or not params.needs_perturbed:
            return params
        outside = [b for b in params.stg_blocks if b >= num_layers]
        if not outside:
            return params
        default = self.parser.get_default(f"{modality}_stg_blocks")
        defaulted = default is not None and tuple(int(b) for b in default) == tuple(params.stg_blocks)
        if demo or defaulted:
            fitted = tuple(sorted({min(b, num_layers - 1) for b in params.stg_blocks}))
            logger.warning(
                "%s has %d transformer blocks: --%s-stg-blocks %s -> %s",
                "demo model" if demo else "the model",
                num_layers,
                modality,
                list(params.stg_blocks),
                list(fitted),
            )
            return replace(params, stg_blocks=fitted)
        self.fail(
            f"--{modality}-stg-blocks {list(params.stg_blocks)}: block(s) {outside} do not exist; the checkpoint's "
            f"transformer has {num_layers} blocks (accepted: 0..{num_layers - 1})"
        )

    def tiling(self, height: int | None, width: int | None) -> TilingConfig | None:
        """The tiling flags as a layout (None when none is given: automatic)."""
        if not self.has("tile_size"):
            return None
        try:
            return tiling_from_args(self.args, height=height, width=width)
        except ValueError as e:
            self.fail(str(e))

    def runtime(self, device: torch.device) -> RuntimeOptions | None:
        if not self.has("quantization"):
            return None
        try:
            options = runtime_from_args(self.args)
            if options is not None:
                options.validate(device)
        except (ValueError, RuntimeError) as e:
            self.fail(str(e))
        return options

    def gemma_8bit(self, device: torch.device) -> bool:
        if not self.get("gemma_8bit"):
            return False
        from ltx_core.text_encoders.gemma.eight_bit import gemma_8bit_unavailable

        reason = gemma_8bit_unavailable(device)
        if reason is not None:
            self.fail(f"--gemma-8bit needs {reason}; leave it off on this machine")
        if self.get("offload") not in (None, "none"):
            offload = self.get("offload")
            self.fail(f"--gemma-8bit cannot be combined with --offload {offload} (an 8-bit Gemma is not offloaded)")
        return True

    def fits_in_memory(
        self,
        metadata: dict[str, Any],
        device: torch.device,
        dtype: torch.dtype,
        runtime: RuntimeOptions | None,
        size: tuple[int | None, int | None, int | None, float | None],
        tiling: TilingConfig | None,
    ) -> None:
        """Stop before loading anything when the run's estimated peak device memory exceeds what is free,
        naming the estimate and the flags that would fit (devices that report free memory only)."""
        frames, height, width, fps = size
        transformer = (metadata.get("config") or {}).get("transformer")
        free = free_device_memory(device)
        if free is None or not transformer or None in (frames, height, width):
            return
        scale = DEFAULT_SCALE_FACTORS
        layout = tiling or TilingConfig.for_output(height, width, scale)
        seconds = frames / (fps or 24.0)
        workload = WorkloadShape(
            video_tokens=((frames - 1) // scale.time + 1) * (height // scale.height) * (width // scale.width),
            audio_tokens=int(seconds * 25) + 1,  # 25 audio latents per second
            batch=self.get("max_batch_size") or 1,
            vae_tile_frames=min(frames, layout.frames.tile_size or frames),
            vae_tile_height=min(height, layout.height.tile_size or height),
            vae_tile_width=min(width, layout.width.tile_size or width),
        )
        try:
            check_fits(metadata["config"], runtime or RuntimeOptions(), workload, free, dtype)
        except InsufficientMemoryError as e:
            self.fail(str(e))

    # ---- runtime ---------------------------------------------------------------------------------

    def device(self) -> torch.device:
        name = self.get("device")
        if name is None:
            return default_device()
        try:
            device = torch.device(name)
        except (RuntimeError, ValueError):
            self.fail(f"--device {name!r} is not a device; accepted: cpu, cuda, cuda:N, mps")
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if count == 0:
                self.fail(f"--device {name!r}: CUDA is not available on this machine; use --device cpu")
            if device.index is not None and device.index >= count:
                self.fail(f"--device {name!r}: there are only {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
        elif device.type == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                self.fail(f"--device {name!r}: Apple MPS is not available on this machine; use --device cpu")
        elif device.type != "cpu":
            self.fail(f"--device {name!r} is not supported; accepted: cpu, cuda, cuda:N, mps")
        return device

    def dtype(self) -> torch.dtype:
        name = self.get("dtype", "bfloat16")
        try:
            return parse_dtype(name)
        except ValueError as e:
            self.fail(f"--dtype: {e}")

    # ---- files -------------------------------------------------------------------------------------

    def output(self, suffixes: tuple[str, ...]) -> Path:
        raw = self.args.output_path
        path = Path(raw).expanduser()
        if suffixes and path.suffix.lower() not in suffixes:
            self.fail(f"--output-path {raw!r}: the file name must end in {' or '.join(suffixes)}")
        if self.get("no_audio_output", False) and path.suffix.lower() == ".wav":
            self.fail(f"--no-audio-output: --output-path {raw!r} is an audio file; the flag applies to videos")
        overwrite = bool(self.get("overwrite", False))
        try:
            path = check_output_path(path, overwrite=overwrite)
            if self.rules.writes_sidecar:
                check_output_path(sidecar_path(path), overwrite=overwrite)
        except FileExistsError as e:
            self.fail(f"--output-path: {e}")
        except OSError as e:
            self.fail(f"--output-path {raw!r}: {e}")
        return path

    def local_file(self, flag: str, value: str | Path) -> None:
        """Existence of a local (non-hf://) file; hf:// paths are checked when resolved."""
        if is_hf_path(value):
            return
        p = Path(value).expanduser()
        if not p.exists():
            self.fail(f"{flag} {str(value)!r}: no such file")
        if not p.is_file():
            self.fail(f"{flag} {str(value)!r} is not a file")

    def images(self, num_frames: int | None) -> list[ImageCondition]:
        checked = []
        for image in self.get("images") or []:
            where = f"--image {str(image.path)!r}"
            if not image.path.is_file():
                self.fail(f"{where}: no such file" if not image.path.exists() else f"{where} is not a file")
            try:
                with Image.open(image.path) as im:
                    im.size  # noqa: B018 - opening reads the header; a non-image raises here
            except (UnidentifiedImageError, OSError) as e:
                self.fail(f"{where} is not an image Pillow can read (PNG, JPEG, WebP, ...): {e}")
            if image.frame_idx < 0:
                self.fail(f"{where}: FRAME_IDX {image.frame_idx} must be >= 0")
            if num_frames is not None and image.frame_idx >= num_frames:
                self.fail(f"{where}: FRAME_IDX {image.frame_idx} is outside the video's frames 0..{num_frames - 1}")
            if not (math.isfinite(image.strength) and 0.0 <= image.strength <= 1.0):
                self.fail(f"{where}: STRENGTH {image.strength} must be in [0, 1]")
            if image.crf is not None and not 0 <= image.crf <= _MAX_CRF:
                self.fail(f"{where}: CRF {image.crf} must be in 0..{_MAX_CRF} (0 skips the re-compression)")
            checked.append(image)
        return checked

    def loras(self, flag: str, entries: list[LoraSpec]) -> None:
        for lora in entries:
            self.finite(f"{flag} {str(lora.path)!r} STRENGTH", lora.strength)
            self.local_file(flag, lora.path)

    def gemma_folder(self, flag: str, root: Path) -> Path:
        """The Gemma folder checked by ltx_core's `locate_gemma_folder` (the same check the loader makes):
        config of a multimodal Gemma 3, tokenizer, complete weights. Returns the model folder itself."""
        try:
            return locate_gemma_folder(root).root
        except CheckpointError as e:
            self.fail(f"{flag}: {e}")

    def resolve(self, flag: str, value: str | Path, *, folder: bool = False) -> Path:
        try:
            return resolve_model_path(
                value, folder=folder, cache_dir=self.rules.hf_cache_dir, offline=self.rules.hf_offline
            )
        except HfPathError as e:
            self.fail(f"{flag}: {e}")

    def lora_file(self, flag: str, lora: LoraSpec) -> LoraSpec:
        path = self.resolve(flag, lora.path)
        self.kind(flag, path, "lora")
        return LoraSpec(path, lora.strength)

    def kind(self, flag: str, path: Path, expected: ExpectedKind) -> dict[str, Any]:
        if not self.rules.check_kinds:
            return {}
        try:
            return check_checkpoint_kind(path, expected).header.metadata
        except CheckpointError as e:
            self.fail(f"{flag}: {e}")


def _model_flag(args: argparse.Namespace) -> tuple[str, str] | None:
    if hasattr(args, "distilled_checkpoint_path"):
        return "--distilled-checkpoint-path", "distilled_checkpoint_path"
    if hasattr(args, "checkpoint_path"):
        return "--checkpoint-path", "checkpoint_path"
    return None


def _transformer_layers(metadata: dict[str, Any]) -> int | None:
    transformer = (metadata.get("config") or {}).get("transformer") or {}
    layers = transformer.get("num_layers")
    return int(layers) if isinstance(layers, int) else None


def validate_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, rules: ValidationRules | None = None
) -> RunConfig:
    """Check `args` (from a parser built with `ltx_pipelines.cli.args`) and return the run config.

    Model-path flags the parser declares are required unless `--demo` is given (the pipeline then
    substitutes its demo models). Image CRFs left unset are filled in from the checkpoint's version.
    """
    rules = rules or ValidationRules()
    c = _Checker(parser, args, rules)
    demo = bool(c.get("demo", False))

    # 1. Values that need no file access.
    two_stage = c.has("spatial_upsampler_path")
    multiple = rules.spatial_multiple or spatial_multiple(two_stage)
    height, width = c.size(multiple)
    num_frames = c.num_frames()
    frame_rate = c.frame_rate()
    steps = c.steps()
    seed = c.seed()
    tiling = c.tiling(height, width)
    video_guidance = c.guidance("video", "--a2v-guidance-scale")
    audio_guidance = c.guidance("audio", "--v2a-guidance-scale")
    device = c.device()
    runtime = c.runtime(device)
    gemma_8bit = c.gemma_8bit(device)
    dtype = c.dtype()
    prompt = c.get("prompt")
    if prompt is None or not str(prompt).strip():
        c.fail("--prompt is empty; describe the video to generate")

    # 2. Local files and the output.
    images = c.images(num_frames)
    loras = list(c.get("lora") or [])
    c.loras("--lora", loras)
    distilled_lora = c.get("distilled_lora")
    if isinstance(distilled_lora, list):  # the shared LoRA action appends
        if len(distilled_lora) > 1:
            c.fail(f"--distilled-lora was given {len(distilled_lora)} times; pass it once")
        distilled_lora = distilled_lora[0] if distilled_lora else None
    if distilled_lora is not None:
        c.loras("--distilled-lora", [distilled_lora])
    elif c.has("distilled_lora") and not demo:
        c.fail("--distilled-lora PATH [STRENGTH] is required by this pipeline (or pass --demo)")

    model_flag = _model_flag(args)
    required = [model_flag] if model_flag else []
    if c.has("gemma_root"):
        required.append(("--gemma-root", "gemma_root"))
    if two_stage:
        required.append(("--spatial-upsampler-path", "spatial_upsampler_path"))
    for flag, dest in required:
        value = c.get(dest)
        if value is None:
            if not demo:
                c.fail(f"{flag} is required (a local path or hf://<org>/<repo>/<file>), or pass --demo")
            continue
        if dest == "gemma_root":
            if not is_hf_path(value):
                c.gemma_folder(flag, Path(value).expanduser())
        else:
            c.local_file(flag, value)
    output_path = c.output(rules.output_suffixes)

    # 3. Remote files (may download), then 4. what each file is.
    checkpoint_path = None
    model_version: tuple[int, ...] = ()
    if model_flag and c.get(model_flag[1]) is not None:
        checkpoint_path = c.resolve(model_flag[0], c.get(model_flag[1]))
        metadata = c.kind(model_flag[0], checkpoint_path, "ltx_checkpoint")
        model_version = normalize_model_version(metadata.get("model_version"))
        num_layers = _transformer_layers(metadata)
        video_guidance = c.stg_blocks_in_model("video", video_guidance, num_layers, demo)
        audio_guidance = c.stg_blocks_in_model("audio", audio_guidance, num_layers, demo)
        c.fits_in_memory(metadata, device, dtype, runtime, (num_frames, height, width, frame_rate), tiling)
    gemma_root = None
    if c.get("gemma_root") is not None:
        gemma_root = c.resolve("--gemma-root", c.get("gemma_root"), folder=True)
        if is_hf_path(c.get("gemma_root")):
            c.gemma_folder("--gemma-root", gemma_root)
    upsampler_path = None
    if c.get("spatial_upsampler_path") is not None:
        upsampler_path = c.resolve("--spatial-upsampler-path", c.get("spatial_upsampler_path"))
        config = c.kind("--spatial-upsampler-path", upsampler_path, "upsampler").get("config", {})
        if config and not config.get("spatial_upsample", False):
            c.fail(f"--spatial-upsampler-path {str(upsampler_path)!r} is a temporal-only upsampler; pass a spatial one")
    loras = [c.lora_file("--lora", lora) for lora in loras]
    if distilled_lora is not None:
        distilled_lora = c.lora_file("--distilled-lora", distilled_lora)

    crf = default_image_crf(model_version)
    images = [
im.with_default_crf(crf) for im in images]

    return RunConfig(
        prompt=str(prompt),
        output_path=output_path,
        seed=seed,
        device=device,
        dtype=dtype,
        overwrite=bool(c.get("overwrite", False)),
        save_latents=bool(c.get("save_latents", False)),
        audio_output=not c.get("no_audio_output", False),
        demo=demo,
        log_level=str(c.get("log_level", "INFO")),
        enhance_prompt=bool(c.get("enhance_prompt", False)),
        checkpoint_path=checkpoint_path,
        distilled_checkpoint=bool(model_flag and model_flag[1] == "distilled_checkpoint_path"),
        model_version=model_version,
        gemma_root=gemma_root,
        spatial_upsampler_path=upsampler_path,
        loras=tuple(loras),
        distilled_lora=distilled_lora,
        lora_fusion=LoraFusionPrecision.parse(c.get("lora_fusion_precision", DEFAULT_LORA_FUSION)),
        negative_prompt=c.get("negative_prompt"),
        height=height,
        width=width,
        num_frames=num_frames,
        frame_rate=frame_rate,
        num_inference_steps=steps,
        images=tuple(images),
        video_guidance=video_guidance,
        audio_guidance=audio_guidance,
        tiling=tiling,
        max_batch_size=c.get("max_batch_size"),
        runtime=runtime,
        gemma_8bit=gemma_8bit,
        distilled_lora_strength_stage_1=c.get("distilled_lora_strength_stage_1"),
        distilled_lora_strength_stage_2=c.get("distilled_lora_strength_stage_2"),
    )
