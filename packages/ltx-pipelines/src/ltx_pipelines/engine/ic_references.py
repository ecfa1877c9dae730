"""IC-LoRA reference videos: what an IC-LoRA declares about its reference, loading the reference at the
size it was trained for, and turning it into appended reference tokens (with an optional attention mask).

An IC-LoRA learns with the reference's tokens beside the generated ones. Its file's metadata may say
that the reference was smaller (`reference_downscale_factor`, target / reference resolution) or had a
lower frame rate (`reference_temporal_scale_factor`); both default to 1.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ltx_core.conditioning import ConditioningItem, VideoConditionByReferenceLatent
from ltx_core.loader import CheckpointError, LoraSpec, lora_metadata
from ltx_pipelines.io import frames_to_model_input, iter_video_frames, read_image_rgb
from ltx_pipelines.io.errors import MediaError

logger = logging.getLogger(__name__)

DOWNSCALE_KEY = "reference_downscale_factor"
TEMPORAL_SCALE_KEY = "reference_temporal_scale_factor"
_VAE_TIME_STRIDE = 8
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".gif")


@dataclass(frozen=True)
class ReferenceFactors:
    """How the IC-LoRAs' reference relates to the target: spatial downscale and temporal subsampling."""

    downscale: int = 1
    temporal: int = 1


def _factor(metadata: dict, key: str, path: Path) -> int:
    raw = metadata.get(key)
    if raw is None:
        return 1
    try:
        value = int(str(raw))
    except ValueError:
        raise ValueError(f"IC-LoRA {str(path)!r}: metadata {key}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"IC-LoRA {str(path)!r}: metadata {key}={value} must be >= 1")
    return value


def reference_factors(loras: Sequence[LoraSpec]) -> ReferenceFactors:
    """The factors the IC-LoRAs' metadata declare (1 where absent); LoRAs that disagree are refused."""
    found: dict[str, tuple[int, Path] | None] = {DOWNSCALE_KEY: None, TEMPORAL_SCALE_KEY: None}
    for lora in loras:
        path = Path(lora.path)
        try:
            metadata = lora_metadata(path)
        except (CheckpointError, OSError) as e:
            raise ValueError(f"cannot read the metadata of IC-LoRA {str(path)!r}: {e}") from None
        for key in found:
            value = _factor(metadata, key, path)
            if value == 1:
                continue
            previous = found[key]
            if previous is not None and previous[0] != value:
                raise ValueError(
                    f"IC-LoRAs disagree on {key}: {previous[0]} in {str(previous[1])!r}, {value} in {str(path)!r}"
                )
            found[key] = (value, path)
    return ReferenceFactors(
        downscale=found[DOWNSCALE_KEY][0] if found[DOWNSCALE_KEY] else 1,
        temporal=found[TEMPORAL_SCALE_KEY][0] if found[TEMPORAL_SCALE_KEY] else 1,
    )


def usable_reference_frames(available: int, num_frames: int, temporal: int) -> int:
    """Frames of the reference that are used: at most `num_frames`, and a count that, after keeping frame
    0 and every `temporal`-th frame after it, is 8k+1 (what the VAE encodes)."""
    step = _VAE_TIME_STRIDE * temporal
    count = min(available, num_frames)
    return max(1, (count - 1) // step * step + 1)


def subsample_in_time(video: torch.Tensor, temporal: int) -> torch.Tensor:
    """(B, C, F, H, W) -> frame 0, then every `temporal`-th frame (the VAE's causal frame grouping)."""
    if temporal == 1:
        return video
    return video[:, :, [0, *range(1, video.shape[2], temporal)]]


@dataclass(frozen=True)
class VideoReference:
    """One IC reference video: a file, or pixels (1, 3, F, h, w) in [-1, 1] already at the reference size
    (what the parity tests and callers that preprocess their videos give).

    `strength`: how clean the reference tokens are (denoise mask 1 - strength). `sized_pixels` maps a
    reference size (h, w) to its prepared pixels, for callers that use the reference at several stage sizes;
    it is looked up before `pixels` and the file.
    """

    strength: float
    path: Path | None = None
    pixels: torch.Tensor | None = None
    sized_pixels: Mapping[tuple[int, int], torch.Tensor] = field(default_factory=dict)

    def load(self, height: int, width: int, num_frames: int, temporal: int) -> torch.Tensor:
        """(1, 3, F', height, width) in [-1, 1], frames trimmed and subsampled for `temporal`."""
        if (height, width) in self.sized_pixels:
            video = self.sized_pixels[(height, width)]
        elif self.pixels is not None:
            video = self.pixels
        else:
            if self.path is None:
                raise ValueError("a video reference needs a file or pixels")
            frames = torch.stack(list(iter_video_frames(self.path, max_frames=num_frames)))
            video = frames_to_model_input(frames, height, width)
        used = usable_reference_frames(video.shape[2], num_frames, temporal)
        return subsample_in_time(video[:, :, :used], temporal)


def load_attention_mask(path: Path, height: int, width: int, num_frames: int) -> torch.Tensor:
    """A grayscale attention mask from a video (its first `num_frames` frames) or an image (one frame,
    applied to every frame): (1, 1, F, height, width) in [0, 1] (the mean of the RGB channels)."""
    if path.suffix.lower() in _IMAGE_SUFFIXES:
        frames = torch.from_numpy(read_image_rgb(path)).unsqueeze(0)
    else:
        frames = torch.stack(list(iter_video_frames(path, max_frames=num_frames)))
    if frames.shape[0] == 0:
        raise MediaError(f"no frames decoded from mask {str(path)!r}")
    pixels = frames_to_model_input(frames, height, width)  # (1, 3, F, h, w) in [-1, 1]
    return ((pixels.mean(dim=1, keepdim=True) + 1.0) / 2.0).clamp(0.0, 1.0)


def check_attention_mask(mask: torch.Tensor) -> None:
    if mask.dim() != 5 or mask.shape[:2] != (1, 1):
        raise ValueError(f"attention mask must be (1, 1, F, H, W), got {tuple(mask.shape)}")
    low, high = float(mask.min()), float(mask.max())
    if low < 0.0 or high > 1.0:
        raise ValueError(f"attention mask values must lie in [0, 1]; got values in [{low:g}, {high:g}]")


def mask_to_reference_tokens(mask: torch.Tensor, latent_shape: Sequence[int]) -> torch.Tensor:
    """Pixel mask (1, 1, F, H, W) -> one weight per reference token (1, F'*H'*W'), token order (f, h, w).

    Each frame is area-averaged to the latent grid; latent frame 0 takes pixel frame 0 and every later
    latent frame the mean of its group of pixel frames. A one-frame mask applies to every latent frame.
    """
    check_attention_mask(mask)
    _, _, latent_frames, latent_h, latent_w = latent_shape
    frames = mask.shape[2]
    spatial = F.interpolate(mask[0].transpose(0, 1).float(), size=(latent_h, latent_w), mode="area")  # (F, 1, h, w)
    spatial = spatial[:, 0]
    if frames == 1 or latent_frames == 1:
        grid = spatial[:1].expand(latent_frames, -1, -1)
    else:
        if (frames - 1) % (latent_frames - 1):
            raise ValueError(
                f"attention mask has {frames} frames; with {latent_frames} reference latent frames it needs "
                f"1 + k * {latent_frames - 1} frames (or a single frame)"
            )
        group = (frames - 1) // (latent_frames - 1)
        rest = spatial[1:].reshape(latent_frames - 1, group, latent_h, latent_w).mean(dim=1)
        grid = torch.cat([spatial[:1], rest], dim=0)
    return grid.reshape(1, -1)


def reference_conditionings(
    references: Sequence[VideoReference],
    encoder: nn.Module,
    *,
    height: int,
    width: int,
    num_frames: int,
    factors: ReferenceFactors,
    device: torch.device,
    dtype: torch.dtype,
    attention_strength: float = 1.0,
    attention_mask: torch.Tensor | None = None,
) -> list[ConditioningItem]:
    """Each reference VAE-encoded at (height, width) / downscale and appended as reference tokens.

    Attention between the target and a reference is limited by `attention_mask` (pixel layout, times
    `attention_strength`) when given, else by `attention_strength` when below 1; otherwise it is full.
    """
    if not 0.0 <= attention_strength <= 1.0:
        raise ValueError(f"attention strength must be in [0, 1], got {attention_strength}")
    scale = factors.downscale
    if height % scale or width % scale:
        raise ValueError(f"the stage size {height}x{width} is not divisible by the reference downscale factor {scale}")
    ref_height, ref_width = height // scale, width // scale
    items: list[ConditioningItem] = []
    for reference in references:
        video = reference.load(ref_height, ref_width, num_frames, factors.temporal)
        with torch.no_grad():
            latent = encoder(video.to(device=device, dtype=dtype))
        if attention_mask is not None:
            # The mask covers the target's pixel frames; the reference uses its first `needed` only.
            needed = (video.shape[2] - 1) * factors.temporal + 1
            mask = attention_mask
            if mask.shape[2] > 1:
                if mask.shape[2] < needed:
                    raise ValueError(
                        f"attention mask has {mask.shape[2]} frames, fewer than the reference's {needed}; "
                        "give a longer mask or a single image"
                    )
                mask = mask[:, :, :needed]  # latent frame j > 0 averages its 8 * temporal pixel frames
            weights: float | torch.Tensor | None = mask_to_reference_tokens(mask, latent.shape).to(device)
            weights = weights * attention_strength
        elif attention_strength < 1.0:
            weights = attention_strength
        else:
            weights = None
        items.append(
            VideoConditionByReferenceLatent(
                latent,
                downscale_factor=scale,
                temporal_scale_factor=factors.temporal,
                strength=reference.strength,
                attention_strength=weights,
            )
        )
    return items
