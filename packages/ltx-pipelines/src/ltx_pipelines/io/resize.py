"""Fitting frames to a target size the way the model's conditioning inputs were prepared."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def resize_cover_center_crop(frames: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Scale `frames` (F, H, W, C) or (H, W, C), any numeric dtype, to cover (height, width), crop the centre.

    Returns float32 (F, C, height, width) on the input's device, values in the input's scale (no
    normalisation). Bilinear without antialiasing, sizes rounded up after scaling, crop offsets
    rounded down: the reference preprocessing, so conditioning pixels match it.
    """
    if frames.ndim == 3:
        frames = frames.unsqueeze(0)
    if frames.ndim != 4:
        raise ValueError(f"expected frames shaped (F, H, W, C) or (H, W, C); got {tuple(frames.shape)}")
    if height < 1 or width < 1:
        raise ValueError(f"target size must be positive; got {height}x{width}")
    pixels = frames.permute(0, 3, 1, 2).to(torch.float32)
    src_h, src_w = pixels.shape[-2:]
    scale = max(height / src_h, width / src_w)
    # Rounding up keeps the scaled image at least as large as the target despite float error.
    scaled_h, scaled_w = math.ceil(src_h * scale), math.ceil(src_w * scale)
    pixels = F.interpolate(pixels, size=(scaled_h, scaled_w), mode="bilinear", align_corners=False)
    top = (scaled_h - height) // 2
    left = (scaled_w - width) // 2
    return pixels[:, :, top : top + height, left : left + width]


def to_model_range(pixels_0_255: torch.Tensor) -> torch.Tensor:
    """8-bit scale [0, 255] -> the VAE's input range [-1, 1]."""
    return pixels_0_255 / 127.5 - 1.0
