"""The latent upsampler: a small conv net that enlarges a video latent in space and/or time.

Layout: input conv -> GroupNorm -> SiLU -> residual blocks -> resampling layer -> residual blocks ->
output conv. It works on un-normalised latents; `upsample_video_latent` wraps it with the video
VAE's per-channel statistics for latents in the normalised space the diffusion model uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn

from ltx_core.model.upsampler.config import NORM_GROUPS, LatentUpsamplerConfig
from ltx_core.model.upsampler.resampling import (
    FramewiseShuffleUpsampler,
    RationalSpatialResampler,
    VolumeShuffleUpsampler,
    fold_frames,
    unfold_frames,
)


def _conv(dims: int, channels_in: int, channels_out: int) -> nn.Module:
    conv = nn.Conv3d if dims == 3 else nn.Conv2d
    return conv(channels_in, channels_out, kernel_size=3, padding=1)


class UpsamplerResBlock(nn.Module):
    """conv -> norm -> SiLU -> conv -> norm, plus the input, then SiLU (the activation comes after the sum)."""

    def __init__(self, channels: int, dims: int) -> None:
        super().__init__()
        self.conv1 = _conv(dims, channels, channels)
        self.norm1 = nn.GroupNorm(NORM_GROUPS, channels)
        self.conv2 = _conv(dims, channels, channels)
        self.norm2 = nn.GroupNorm(NORM_GROUPS, channels)
        self.activation = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.activation(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        return self.activation(h + x)


def _resampling_layer(config: LatentUpsamplerConfig) -> nn.Module:
    channels = config.mid_channels
    if config.temporal_upsample:
        spatial = 2 if config.spatial_upsample else 1
        return VolumeShuffleUpsampler(channels, (2, spatial, spatial))
    if config.rational_resampler:
        return RationalSpatialResampler(channels, config.spatial_scale)
    return FramewiseShuffleUpsampler(channels, factor=2)


def _run_blocks(blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = block(x)
    return x


class LatentUpsampler(nn.Module):
    """Upsamples (B, C, F, H, W) latents; see `output_size` for the resulting grid."""

    def __init__(self, config: LatentUpsamplerConfig) -> None:
        super().__init__()
        self.config = config
        dims, mid = config.dims, config.mid_channels
        self.initial_conv = _conv(dims, config.in_channels, mid)
        self.initial_norm = nn.GroupNorm(NORM_GROUPS, mid)
        self.initial_activation = nn.SiLU()
        self.res_blocks = nn.ModuleList(UpsamplerResBlock(mid, dims) for _ in range(config.num_blocks_per_stage))
        self.upsampler = _resampling_layer(config)
        self.post_upsample_res_blocks = nn.ModuleList(
            UpsamplerResBlock(mid, dims) for _ in range(config.num_blocks_per_stage)
        )
        self.final_conv = _conv(dims, mid, config.in_channels)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        self._check_input(latent)
        batch = latent.shape[0]
        # dims=2 runs every layer on single frames; the resampling layers fold frames themselves.
        x = fold_frames(latent) if self.config.dims == 2 else latent
        x = self.initial_activation(self.initial_norm(self.initial_conv(x)))
        x = _run_blocks(self.res_blocks, x)
        x = self._resample(x, batch)
        x = _run_blocks(self.post_upsample_res_blocks, x)
        x = self.final_conv(x)
        return unfold_frames(x, batch) if self.config.dims == 2 else x

    def _resample(self, x: torch.Tensor, batch: int) -> torch.Tensor:
        if self.config.dims == 2:
            return fold_frames(self.upsampler(unfold_frames(x, batch)))
        x = self.upsampler(x)
        if self.config.temporal_upsample:
            # Latent frame 0 stands for a single pixel frame (causal VAE), so doubling F latent frames
            # gives 2F - 1: the first of the two frames born from frame 0 is discarded.
            x = x[:, :, 1:]
        return x

    def output_size(self, frames: int, height: int, width: int) -> tuple[int, int, int]:
        """Latent (frames, height, width) produced from an input grid of that size."""
        if self.config.temporal_upsample:
            frames = 2 * frames - 1
        if isinstance(self.upsampler, RationalSpatialResampler):
            return frames, self.upsampler.output_size(height), self.upsampler.output_size(width)
        if self.config.spatial_upsample:
            return frames, 2 * height, 2 * width
        return frames, height, width

    def _check_input(self, latent: torch.Tensor) -> None:
        if latent.ndim != 5 or latent.shape[1] != self.config.in_channels:
            raise ValueError(
                f"latent upsampler expects a (B, {self.config.in_channels}, F, H, W) latent, "
                f"got shape {tuple(latent.shape)}"
            )


class LatentStatistics(Protocol):
    """Per-channel latent statistics of the video VAE (e.g. its encoder's `per_channel_statistics`)."""

    def normalize(self, x: torch.Tensor) -> torch.Tensor: ...

    def un_normalize(self, x: torch.Tensor) -> torch.Tensor: ...


def upsample_video_latent(
    latent: torch.Tensor, upsampler: Callable[[torch.Tensor], torch.Tensor], stats: LatentStatistics
) -> torch.Tensor:
    """Upsample a normalised video latent: the upsampler was trained on raw VAE latents, so leave the
    normalised space with the VAE statistics, upsample, and come back."""
    return stats.normalize(upsampler(stats.un_normalize(latent)))
