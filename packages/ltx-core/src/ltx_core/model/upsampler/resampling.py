"""Resampling layers of the latent upsampler: channel-to-axis shuffles and the rational resampler.

Every layer here takes and returns video latents laid out (B, C, F, H, W).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# Rational spatial scales the learned resampler supports, as (up, down) integer pairs.
RATIONAL_SCALES: dict[float, tuple[int, int]] = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}

_BLUR_TAPS = 5


def shuffle_channels_into_axes(x: torch.Tensor, factors: tuple[int, ...]) -> torch.Tensor:
    """Move channel sub-blocks into the trailing axes: (B, C*prod(f), D1..Dn) -> (B, C, D1*f1, ..., Dn*fn).

    Channel index `c * prod(f) + i1 * f2 * ... * fn + ... + in` lands on output position
    (d1 * f1 + i1, ..., dn * fn + in): the ordering of a pixel shuffle, generalised to n axes.
    """
    n = len(factors)
    batch, channels, *sizes = x.shape
    if len(sizes) != n:
        raise ValueError(f"expected {n} axes after the channel axis for factors {factors}, got shape {tuple(x.shape)}")
    group = math.prod(factors)
    if channels % group:
        raise ValueError(f"{channels} channels cannot be split into groups of {group} (factors {factors})")
    x = x.reshape(batch, channels // group, *factors, *sizes)
    # Interleave: (B, C, f1..fn, D1..Dn) -> (B, C, D1, f1, D2, f2, ...).
    order = [0, 1]
    for axis in range(n):
        order += [2 + n + axis, 2 + axis]
    x = x.permute(order)
    return x.reshape(batch, channels // group, *(size * f for size, f in zip(sizes, factors)))


def fold_frames(x: torch.Tensor) -> torch.Tensor:
    """(B, C, F, H, W) -> (B*F, C, H, W), so 2-D layers act on each frame alone."""
    return x.transpose(1, 2).flatten(0, 1)


def unfold_frames(x: torch.Tensor, batch: int) -> torch.Tensor:
    """Inverse of `fold_frames`."""
    return x.unflatten(0, (batch, -1)).transpose(1, 2)


class FramewiseShuffleUpsampler(nn.Sequential):
    """Per-frame 3x3 conv to `factor**2` times the channels, then a 2-D pixel shuffle (H and W times `factor`).

    A Sequential so that the conv's weights are stored under `0.` like in the released files.
    """

    def __init__(self, channels: int, factor: int = 2) -> None:
        super().__init__(nn.Conv2d(channels, channels * factor**2, kernel_size=3, padding=1))
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self[0](fold_frames(x))
        y = shuffle_channels_into_axes(y, (self.factor, self.factor))
        return unfold_frames(y, x.shape[0])


class VolumeShuffleUpsampler(nn.Sequential):
    """3x3x3 conv to prod(factors) times the channels, then a shuffle into (F, H, W) by `factors`.

    Returns every shuffled frame; dropping the extra leading frame is the caller's business.
    """

    def __init__(self, channels: int, factors: tuple[int, int, int]) -> None:
        super().__init__(nn.Conv3d(channels, channels * math.prod(factors), kernel_size=3, padding=1))
        self.factors = factors

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return shuffle_channels_into_axes(self[0](x), self.factors)


def binomial_blur_kernel(taps: int, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Normalised 2-D binomial low-pass kernel (outer product of a Pascal-triangle row), shape (taps, taps)."""
    row = torch.tensor([math.comb(taps - 1, k) for k in range(taps)], dtype=torch.float64)
    kernel = torch.outer(row, row)
    return (kernel / kernel.sum()).to(device=device, dtype=dtype)


class BlurDownsample(nn.Module):
    """Anti-aliased spatial decimation: per-channel binomial blur with stride `stride` (H and W only).

    The filter is a fixed constant, built in forward for the input's dtype and device so that it
    never depends on checkpoint contents (some files store it, some may not).
    """

    def __init__(self, stride: int, taps: int = _BLUR_TAPS) -> None:
        super().__init__()
        if stride < 1 or taps < 3 or taps % 2 == 0:
            raise ValueError(f"BlurDownsample needs stride >= 1 and an odd taps >= 3, got stride={stride}, taps={taps}")
        self.stride = stride
        self.taps = taps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            return x
        channels = x.shape[1]
        kernel = binomial_blur_kernel(self.taps, dtype=x.dtype, device=x.device)
        weight = kernel.expand(channels, 1, self.taps, self.taps)
        return F.conv2d(x, weight, stride=self.stride, padding=self.taps // 2, groups=channels)


class RationalSpatialResampler(nn.Module):
    """Spatial scaling by a ratio up/down: per-frame conv + pixel shuffle by `up`, then blur-decimate by `down`."""

    def __init__(self, channels: int, scale: float) -> None:
        super().__init__()
        self.up, self.down = rational_scale(scale)
        self.conv = nn.Conv2d(channels, channels * self.up**2, kernel_size=3, padding=1)
        self.blur_down = BlurDownsample(self.down)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(fold_frames(x))
        y = shuffle_channels_into_axes(y, (self.up, self.up))
        y = self.blur_down(y)
        return unfold_frames(y, x.shape[0])

    def output_size(self, size: int) -> int:
        """Length of one spatial axis after resampling (the strided blur pads taps // 2 on each side)."""
        grown = size * self.up
        if self.down == 1:
            return grown
        taps = self.blur_down.taps
        return (grown + 2 * (taps // 2) - taps) // self.down + 1


def rational_scale(scale: float) -> tuple[int, int]:
    """(up, down) integers for a supported rational spatial scale; ValueError naming the accepted ones."""
    pair = RATIONAL_SCALES.get(float(scale))
    if pair is None:
        raise ValueError(f"unsupported rational spatial scale {scale!r}; accepted: {sorted(RATIONAL_SCALES)}")
    return pair
