"""Stage blocks run straight from the model files: each loads the model it needs, runs, and frees it.

These wrap the plain blocks of `stage_blocks` with the load/release policy every pipeline uses, so a
pipeline module reads as its sequence of stages and holds at most one large model at a time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ltx_core.conditioning import ConditioningItem
from ltx_core.loader import ComponentSource
from ltx_core.loader.model_files import ModelSource
from ltx_core.model.upsampler import LATENT_UPSAMPLER, upsample_video_latent
from ltx_core.model.video_vae import VIDEO_ENCODER
from ltx_core.model.video_vae.tiling import TilingConfig
from ltx_core.text_encoders.gemma.embeddings_processor import TextContexts
from ltx_core.types import DEFAULT_SCALE_FACTORS, VideoPixelShape
from ltx_pipelines.engine.defaults import defaults_for_checkpoint
from ltx_pipelines.engine.final_latents import FinalLatents
from ltx_pipelines.engine.model_loading import Placement, loaded
from ltx_pipelines.engine.noise_sources import NoiseSource, fork_noise
from ltx_pipelines.engine.stage_blocks import ImageCondition, image_conditionings


@dataclass(frozen=True)
class EncodedImages:
    """Image conditionings per requested stage size, and (when asked for) the VAE latent statistics
    the x2 upsampler needs between the stages."""

    per_stage: tuple[list[ConditioningItem], ...]
    latent_statistics: nn.Module | None = None


def encode_conditioning_images(
    images: Sequence[ImageCondition],
    checkpoint: ModelSource,
    placement: Placement,
    shapes: Sequence[VideoPixelShape],
    *,
    keep_latent_statistics: bool = False,
    all_as_keyframes: bool = False,
    also_encode: Callable[[nn.Module], Sequence[Sequence[ConditioningItem]]] | None = None,
) -> EncodedImages:
    """VAE-encode the conditioning images once per stage size with one encoder load. Without images
    and without a need for the statistics, the encoder is not loaded at all. `all_as_keyframes`: see
    `image_conditionings`. `also_encode(encoder)` gives further items per stage (e.g. IC-LoRA reference
    videos), appended after the images' with the same encoder load."""
    if not images and not keep_latent_statistics and also_encode is None:
        return EncodedImages(per_stage=tuple([] for _ in shapes))
    device, dtype = placement.device, placement.dtype
    crf = defaults_for_checkpoint(checkpoint).image_crf
    images = [image.with_default_crf(crf) for image in images]
    with loaded(VIDEO_ENCODER, checkpoint, placement) as encoder:
        per_stage = tuple(
            image_conditionings(images, encoder, shape, device, dtype, all_as_keyframes=all_as_keyframes)
            for shape in shapes
        )
        if also_encode is not None:
            extra = also_encode(encoder)
            if len(extra) != len(shapes):
                raise ValueError(f"also_encode gave items for {len(extra)} stages, expected {len(shapes)}")
            per_stage = tuple([*items, *more] for items, more in zip(per_stage, extra))
        # A copy: the encoder's own weights go back to the meta device when it is released.
        statistics = copy.deepcopy(encoder.per_channel_statistics) if keep_latent_statistics else None
    return EncodedImages(per_stage=per_stage, latent_statistics=statistics)


def upsample_between_stages(
    video_latent: torch.Tensor,
    upsampler_path: str | Path | ComponentSource,
    latent_statistics: nn.Module,
    placement: Placement,
) -> torch.Tensor:
    """The stage-1 video latent upsampled by the latent upsampler (a file, or its diffusers folder), through the
    VAE statistics."""
    with loaded(LATENT_UPSAMPLER, upsampler_path, placement) as upsampler, torch.no_grad():
        return upsample_video_latent(video_latent, upsampler, latent_statistics)


def upsample_latents_between_stages(
    latents: Mapping[str, torch.Tensor],
    upsampler_path: str | Path | ComponentSource,
    latent_statistics: nn.Module,
    placement: Placement,
) -> dict[str, torch.Tensor]:
    """Several stage-1 latents (by name) upsampled with one load of the latent upsampler (see
    `upsample_between_stages`)."""
    with loaded(LATENT_UPSAMPLER, upsampler_path, placement) as upsampler, torch.no_grad():
        return {name: upsample_video_latent(latent, upsampler, latent_statistics) for name, latent in latents.items()}


def finished_latents(
    checkpoint: ModelSource,
    placement: Placement,
    shape: VideoPixelShape,
    video_latent: torch.Tensor | None,
    audio_latent: torch.Tensor | None,
    *,
    tiling: TilingConfig | None,
    noise: NoiseSource,
    latents: dict[str, torch.Tensor],
) -> FinalLatents:
    """What a finished run returns: its final latents and what decoding them takes (nothing is decoded
    here: that is the decode step, `engine/decoding.py`). `tiling` None picks the automatic layout for the
    output size (`decode_tiling_for`); the noise is forked at the decoder's first draw."""
    return FinalLatents(
        video=video_latent,
        audio=audio_latent,
        shape=shape,
        checkpoint=checkpoint,
        placement=placement,
        tiling=decode_tiling_for(shape, tiling),
        noise=fork_noise(noise),
        stage_latents=dict(latents),
    )


def decode_tiling_for(shape: VideoPixelShape, tiling: TilingConfig | None) -> TilingConfig:
    """`tiling` itself, or (None) the automatic layout: 768-pixel tiles on the output's long side, the
    short side split as often, 80-frame temporal tiles (the reference's choice for these VAEs)."""
    return tiling if tiling is not None else TilingConfig.for_output(shape.height, shape.width, DEFAULT_SCALE_FACTORS)


def contexts_on(contexts: TextContexts, placement: Placement) -> TextContexts:
    """Text contexts moved to where (and in the dtype) the transformer runs."""
    device, dtype = placement.device, placement.dtype
    return TextContexts(
        video=contexts.video.to(device=device, dtype=dtype),
        audio=None if contexts.audio is None else contexts.audio.to(device=device, dtype=dtype),
        mask=contexts.mask.to(device),
    )
