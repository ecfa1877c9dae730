"""Loading a model for the span of a stage and giving its memory back afterwards.

Telling model files apart from their safetensors header alone, so a file passed to the wrong flag
is named for what it is before anything is loaded.

- LTX single-file checkpoint: `config` metadata with a `transformer` section (plus `vae`, ...).
  A diffusers model folder (or a `ModelFiles` set) counts as one: its translated configs are checked
  the same way, and a folder of another model family is refused while it is read (no weight loaded).
- Latent upsampler: a flat `config` whose `_class_name` is `LatentUpsampler` (a diffusers
  `latent_upsampler/` folder: its translated `config.json`).
- LoRA: low-rank pairs in any layout `ltx_core.loader.lora_layouts` reads (`lora_A` / `lora_B`,
  peft's `.default`, kohya's `lora_down` / `lora_up`).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from ltx_core.loader import (
    DEFAULT_LORA_FUSION,
    CheckpointError,
    ComponentSource,
    ComponentSpec,
    Layout,
    LoraFusionPrecision,
    LoraSpec,
    ModelFiles,
    SafetensorsHeader,
    StateDictCache,
    build_model,
    free_model_weights,
    read_safetensors_header,
)
from ltx_core.loader.file_headers import FileHeaders
from ltx_core.loader.lora_layouts import ACCEPTED_LAYOUTS
from ltx_core.loader.model_files import Component, ModelSource, model_files_of, names_a_model_folder

logger = logging.getLogger(__name__)


ModelBuilder = Callable[..., nn.Module]


"""How a model is made from its file: `build_model`'s signature (spec, path, *, dtype, device, loras, ...)."""


@dataclass(frozen=True)
class Placement:
    """Where models run, in which dtype, and what builds them (`builder`; None: `build_model`)."""

    device: torch.device
    dtype: torch.dtype
    builder: ModelBuilder | None = None

    def build(self, spec: ComponentSpec, path: ModelSource | ComponentSource, **options: Any) -> nn.Module:
        """`spec` built from `path` (a file, a model folder, a set of model files or one component's source) by
        this placement's builder (`options` as `build_model` takes them)."""
        return (self.builder or build_model)(spec, path, **options)


def release(*models: nn.Module | None) -> None:
    """Drop the weights of `models` and return cached accelerator memory."""
    for model in models:
        if model is not None:
            free_model_weights(model)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def loaded(
    spec: ComponentSpec,
    path: ModelSource | ComponentSource,
    placement: Placement,
    *,
    loras: Sequence[LoraSpec] = (),
    cache: StateDictCache | None = None,
    dtype: torch.dtype | None = None,
    lora_fusion: LoraFusionPrecision | str = DEFAULT_LORA_FUSION,
) -> Iterator[nn.Module]:
    """Build `spec` from `path` for the duration of a `with` block, then free it."""
    model = placement.build(
        spec,
        path,
        dtype=dtype or placement.dtype,
        device=placement.device,
        loras=loras,
        cache=cache,
        lora_fusion=lora_fusion,
    )
    try:
        yield model
    finally:
        release(model)


@contextmanager
def loaded_models(
    placement: Placement, *models: tuple[ComponentSpec, ModelSource | ComponentSource]
) -> Iterator[tuple[nn.Module, ...]]:
    """The models of one step, each `(spec, path)` built in order for the duration of one `with` block, then
    freed together."""
    with ExitStack() as stack:
        yield tuple(stack.enter_context(loaded(spec, path, placement)) for spec, path in models)


@dataclass(frozen=True)
class Decoders:
    """The decoders of a run's final latents (None: not built, as not needed)."""

    video: nn.Module | None
    """The video VAE decoder the model files call for (`video_decoder_spec_of`)."""
    audio: nn.Module | None
    vocoder: nn.Module | None
    """Built in float32, whatever the placement's dtype (the waveform is computed in float32)."""


@contextmanager
def loaded_decoders(checkpoint: ModelSource, placement: Placement, *, video: bool, audio: bool) -> Iterator[Decoders]:
    """The video decoder (`video`) and the audio decoder + vocoder (`audio`, the vocoder in float32) built from
    `checkpoint` for the span of a `with` block, then freed. A run's decode asks for the audio ones first and
    the video decoder after (`engine.generation`), so that they are never in memory together."""
    from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER

    with ExitStack() as stack:

        def load(spec: ComponentSpec, dtype: torch.dtype | None = None) -> nn.Module:
            return stack.enter_context(loaded(spec, checkpoint, placement, dtype=dtype))

        yield Decoders(
            video=load(video_decoder_spec_of(checkpoint)) if video else None,
            audio=load(AUDIO_DECODER) if audio else None,
            vocoder=load(VOCODER, torch.float32) if audio else None,
        )


def video_decoder_spec_of(checkpoint: ModelSource) -> ComponentSpec:
    """The video decoder the model files' video VAE calls for, from its `config` metadata alone: the
    LTX-2.5 diffusion decoder (`CausalDiffusionVAE`) or the convolutional one (LTX-2 / 2.3, the 2.5 conv file).
    A set without a video VAE is refused, naming the option that gives one."""
    from ltx_core.loader import Component, VideoDecoderKind
    from ltx_core.loader.model_files import model_files_of
    from ltx_core.model.video_vae import DIFFUSION_VIDEO_DECODER, VIDEO_DECODER

    files = model_files_of(checkpoint)
    files.source(Component.VIDEO_VAE)  # raises for a set without one, naming its option
    return DIFFUSION_VIDEO_DECODER if files.info.video_decoder is VideoDecoderKind.DIFFUSION else VIDEO_DECODER


def check_model_configs(checkpoint: ModelSource, components: Sequence[Component] | None = None) -> None:
    """Build on the meta device (no weight read) each model of `components` (default: every one the files
    provide) that a run builds from the model files: the transformer, the video decoder, the audio decoder
    and the vocoder. A config they cannot be built from is refused now, naming where it comes from, instead
    of when the model is loaded (after the prompt encoding, or after denoising for the decoders)."""
    from ltx_core.loader.builder import configure_on_meta
    from ltx_core.loader.model_files import model_files_of
    from ltx_core.model.audio_vae import AUDIO_DECODER, VOCODER
    from ltx_core.model.transformer import AV_TRANSFORMER

    files = model_files_of(checkpoint)
    wanted = set(components) if components is not None else {s.component for s in files.sources}
    if Component.TRANSFORMER in wanted and files.has(Component.TRANSFORMER):
        configure_on_meta(AV_TRANSFORMER, files)
    if Component.VIDEO_VAE in wanted and files.has(Component.VIDEO_VAE):
        configure_on_meta(video_decoder_spec_of(files), files)
    if Component.AUDIO_VAE in wanted and files.has(Component.AUDIO_VAE):
        configure_on_meta(AUDIO_DECODER, files)
        configure_on_meta(VOCODER, files)


CheckpointKind = Literal["ltx_checkpoint", "upsampler", "lora", "gemma_text_encoder", "ltx_component", "unknown"]


ExpectedKind = Literal["ltx_checkpoint", "upsampler", "lora"]


_EXPECTED_DESCRIPTIONS: dict[str, str] = {
    "ltx_checkpoint": (
        "an LTX-2 single-file model checkpoint (metadata 'config' with a 'transformer' section) "
        "or an LTX-2 diffusers model folder"
    ),
    "upsampler": "a latent upsampler (metadata 'config' with _class_name 'LatentUpsampler')",
    "lora": f"a LoRA in one of the accepted layouts: {ACCEPTED_LAYOUTS}",
}


_FLAG_HINTS: dict[str, str] = {
    "ltx_checkpoint": "--checkpoint-path / --distilled-checkpoint-path",
    "upsampler": "--spatial-upsampler-path",
    "lora": "--lora / --distilled-lora",
}


@dataclass(frozen=True)
class CheckpointKindInfo:
    kind: CheckpointKind
    description: str
    """What the file is, in words, for error messages."""
    header: SafetensorsHeader
    """The file's header; for a model folder or a set of model files, its location and the metadata
    the models are built from (translated configs, `model_version`), without a tensor index."""


_DOWN_FACTOR_SUFFIXES = (".lora_A.weight", ".lora_A.default.weight", ".lora_down.weight")


def _lora_pairs(header: SafetensorsHeader) -> int:
    return sum(1 for name in header.tensors if name.endswith(_DOWN_FACTOR_SUFFIXES))


def _describe_upsampler(config: dict) -> str:
    kinds = [k for k in ("spatial", "temporal") if config.get(f"{k}_upsample")]
    scale = config.get("spatial_scale") if config.get("spatial_upsample") else None
    detail = " + ".join(kinds) or "unknown axis"
    if scale is not None:
        detail += f" x{scale:g}" if isinstance(scale, (int, float)) else f" x{scale}"
    elif config.get("temporal_upsample"):
        detail += " x2"
    return f"a latent upsampler ({detail})"


def _folder_header(source: ModelSource, headers: FileHeaders | None = None) -> tuple[SafetensorsHeader, str]:
    """A model folder or set of model files described as a header (its metadata as the models read it),
    and what it is called as a model checkpoint."""
    if not isinstance(source, ModelFiles):
        folder = Path(source).expanduser()
        if folder.is_dir() and not _is_model_folder(folder):
            # One component's folder: only latent upsamplers stand alone (another class is refused, named).
            from ltx_core.loader.diffusers_folder import upsampler_source

            metadata = dict(upsampler_source(folder).read_metadata())
            return SafetensorsHeader(path=folder, tensors={}, metadata=metadata), "component folder"
    files = model_files_of(source, headers=headers)
    metadata: dict = {"config": dict(files.info.configs)}
    version = files.info.metadata.get("model_version")
    if version is not None:
        metadata["model_version"] = version
    noun = "model folder" if files.layout is Layout.DIFFUSERS else f"set of {files.layout.value} model files"
    return SafetensorsHeader(path=files.location, tensors={}, metadata=metadata), noun


def _is_model_folder(folder: Path) -> bool:
    """A folder of a whole model (a diffusers `model_index.json`, or component folders), as opposed to
    one component's folder (`config.json` + weights, e.g. `latent_upsampler/`)."""
    from ltx_core.loader.diffusers_folder import CONFIG, MODEL_INDEX

    return (folder / MODEL_INDEX).is_file() or not (folder / CONFIG).is_file()


def detect_checkpoint_kind(path: ModelSource, headers: FileHeaders | None = None) -> CheckpointKindInfo:
    """Classify a safetensors file by its metadata and key names (only the header is read); a model
    folder or a `ModelFiles` set by its translated metadata (only configs and headers are read).
    `headers`: the run's store (a header it holds is not read again)."""
    if isinstance(path, ModelFiles) or names_a_model_folder(path):
        header, what = _folder_header(path, headers)
    else:
        header = read_safetensors_header(path) if headers is None else headers.header(path)
        what = "single-file model checkpoint"
    config = header.metadata.get("config")
    version = header.metadata.get("model_version")
    version_text = f", model_version {version}" if version is not None else ""
    if isinstance(config, dict):
        if isinstance(config.get("transformer"), dict):
            sections = ", ".join(sorted(k for k, v in config.items() if isinstance(v, dict)))
            return CheckpointKindInfo("ltx_checkpoint", f"an LTX-2 {what} (sections: {sections}{version_text})", header)
        if config.get("_class_name") == "LatentUpsampler":
            return CheckpointKindInfo("upsampler", _describe_upsampler(config), header)
        sections = sorted(k for k, v in config.items() if isinstance(v, dict))
        if sections:
            return CheckpointKindInfo(
                "ltx_component",
                f"an LTX component file with config sections {sections} but no 'transformer'{version_text}",
                header,
            )
    pairs = _lora_pairs(header)
    if pairs:
        return CheckpointKindInfo("lora", f"a LoRA ({pairs} low-rank pairs)", header)
    if "gemma_config" in header.metadata:
        return CheckpointKindInfo("gemma_text_encoder", "a single-file Gemma text encoder", header)
    if any(name.startswith("model.diffusion_model.") for name in header.tensors):
        return CheckpointKindInfo(
            "unknown", "transformer weights without the 'config' metadata the model is built from", header
        )
    meta_keys = sorted(header.metadata)
    return CheckpointKindInfo(
        "unknown", f"a safetensors file with {len(header.tensors)} tensors and metadata keys {meta_keys}", header
    )


def check_checkpoint_kind(
    path: ModelSource, expected: ExpectedKind, headers: FileHeaders | None = None
) -> CheckpointKindInfo:
    """Raise CheckpointError unless `path` is the `expected` kind; the message says what the file is instead."""
    if expected not in _EXPECTED_DESCRIPTIONS:
        raise ValueError(f"unknown expected kind {expected!r}; accepted: {sorted(_EXPECTED_DESCRIPTIONS)}")
    info = detect_checkpoint_kind(path, headers)
    if info.kind != expected:
        hint = _FLAG_HINTS.get(info.kind)
        where = f"; it belongs to {hint}" if hint else ""
        if expected == "lora" and info.header.tensors and not hint:
            # Name a key, so a user whose trainer wrote another naming sees which spelling was not recognised.
            where = f"; its key {min(info.header.tensors)!r} is no LoRA factor"
        raise CheckpointError(
            f"{str(info.header.path)!r} is {info.description}, not {_EXPECTED_DESCRIPTIONS[expected]}{where}"
        )
    return info
