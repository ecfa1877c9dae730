"""Loading a model for the span of a stage and giving its memory back afterwards."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ltx_core.loader import (
    DEFAULT_LORA_FUSION,
    ComponentSource,
    ComponentSpec,
    LoraFusionPrecision,
    LoraSpec,
    StateDictCache,
    build_model,
    free_model_weights,
)
from ltx_core.loader.model_files import Component, ModelSource

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
