"""Video VAE encoder: pixels (B, 3, 1 + 8k, 32h, 32w) in [-1, 1] -> normalized latent (B, 128, 1 + k, h, w)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.video_vae.blocks import ResBlockStack, ResnetBlock3D, SpaceToDepthDownsample
from ltx_core.model.video_vae.config import VAEBlock, VideoVAEConfig
from ltx_core.model.video_vae.layers import (
    CausalConv3d,
    Conv3d,
    PerChannelStatistics,
    make_norm,
    patchify,
    vae_compute_path,
    widest_conv,
)
from ltx_core.model.video_vae.tiling import TilingConfig, encode_tile_layout, weight_volume, weights_sum_to_one
from ltx_core.tune import KernelChoices, owned_choices
from ltx_core.types import SpatioTemporalScaleFactors


def _encoder_block(block: VAEBlock, channels: int, config: VideoVAEConfig) -> tuple[nn.Module, int]:
    """The module for one encoder block and the channel count it outputs."""
    norm, padding = config.norm_layer, config.encoder_padding
    if block.kind == "res_x":
        return ResBlockStack(channels, block.num_layers, norm, padding), channels
    if block.kind == "res_x_y":
        out = channels * block.multiplier
        return ResnetBlock3D(channels, out, norm, padding), out
    if block.kind.endswith("_res"):
        out = channels * block.multiplier
        return SpaceToDepthDownsample(channels, out, block.stride, padding), out
    # Plain strided convolutions: compress_time / _space / _all keep the width, compress_all_x_y widens.
    out = channels * block.multiplier if block.kind == "compress_all_x_y" else channels
    return CausalConv3d(channels, out, stride=block.stride, padding_mode=padding), out


class VideoEncoder(nn.Module):
    """Patchify, causal conv stack, PixelNorm + SiLU + conv to means (+ log-variance), normalize.

    The encoder is causal in time: latent frame j only sees pixel frames <= 8j, and the first
    latent frame encodes the first pixel frame alone (so an image is a 1-frame video). On the CPU it
    owns `kernel_choices` like the decoder (`ltx_core.tune`).
    """

    kernel_choices: KernelChoices | None = None

    def use_kernel_choices(self, choices: KernelChoices | None) -> None:
        self.kernel_choices = choices

    def __init__(self, config: VideoVAEConfig) -> None:
        super().__init__()
        self.config = config
        self.scale: SpatioTemporalScaleFactors = config.encoder_scale
        self.latent_channels = config.latent_channels
        self.per_channel_statistics = PerChannelStatistics(config.latent_channels)
        channels = config.latent_channels
        self.conv_in = CausalConv3d(
            config.in_channels * config.patch_size**2, channels, padding_mode=config.encoder_padding
        )
        self.down_blocks = nn.ModuleList()
        for block in config.encoder_blocks:
            module, channels = _encoder_block(block, channels, config)
            self.down_blocks.append(module)
        self.conv_norm_out = make_norm(config.norm_layer, channels)
        extra = config.latent_channels if config.latent_log_var == "per_channel" else 1
        self.conv_out = CausalConv3d(channels, config.latent_channels + extra, padding_mode=config.encoder_padding)

    def check_input(self, shape: torch.Size | tuple[int, ...]) -> None:
        """Raise ValueError naming the bad value unless `shape` is (B, 3, 1 + 8k, 32h, 32w)."""
        if len(shape) != 5:
            raise ValueError(f"video encoder input must be (B, C, F, H, W), got shape {tuple(shape)}")
        _, channels, frames, height, width = shape
        if channels != self.config.in_channels:
            raise ValueError(f"video encoder input must have {self.config.in_channels} channels, got {channels}")
        t = self.scale.time
        if frames < 1 or (frames - 1) % t:
            raise ValueError(f"num frames must be {t}k+1 (1, {t + 1}, {2 * t + 1}, ...), got {frames}")
        for name, value, factor in (("height", height, self.scale.height), ("width", width, self.scale.width)):
            if value < factor or value % factor:
                raise ValueError(f"{name} must be a positive multiple of {factor}, got {value}")
            # Reflect padding needs at least 2 cells on the smallest (latent) grid.
            if self.config.encoder_padding == "reflect" and value < 2 * factor:
                raise ValueError(f"{name} must be at least {2 * factor} for this VAE (reflect padding), got {value}")

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """Pixels in [-1, 1] -> normalized latent means, in the input's dtype."""
        self.check_input(pixels.shape)
        dtype = self.conv_in.conv.weight.dtype
        choices = owned_choices(self, pixels.device)
        if choices is not None and dtype != torch.float32:
            # Activations stay in the weights' dtype; each convolution goes through float32 where that
            # measured faster (its input up, its output back down).
            height, width = pixels.shape[3] // self.scale.height, pixels.shape[4] // self.scale.width
            path = vae_compute_path(choices, widest_conv(self), height, width)
            for module in self.modules():
                if isinstance(module, Conv3d):
                    module.half_path = path
        x = self.conv_in(patchify(pixels.to(dtype), self.config.patch_size))
        for block in self.down_blocks:
            x = block(x)
        x = self.conv_out(F.silu(self.conv_norm_out(x)))
        means = x[:, : self.latent_channels]
        return self.per_channel_statistics.normalize(means).to(pixels.dtype)

    def encode_tiled(self, pixels: torch.Tensor, tiling: TilingConfig | None = None) -> torch.Tensor:
        """`forward` over overlapping tiles blended on the latent grid (bounded activation memory).

        Tiled axes need an overlap of at least 16 frames / 64 pixels.
        """
        self.check_input(pixels.shape)
        batch, _, frames, height, width = pixels.shape
        tiles = encode_tile_layout((frames, height, width), tiling, self.scale)
        latent_fhw = ((frames - 1) // self.scale.time + 1, height // self.scale.height, width // self.scale.width)
        device = self.conv_in.conv.weight.device
        latent = torch.zeros((batch, self.latent_channels, *latent_fhw), dtype=torch.float32, device=device)
        weight_sum = None if weights_sum_to_one(tiles, latent_fhw) else torch.zeros((1, 1, *latent_fhw), device=device)
        for tile in tiles:
            part = self(pixels[(slice(None), slice(None), *tile.source)].to(device))
            region = (slice(None), slice(None), *tile.target)
            weights = weight_volume(tile, latent)
            latent[region] += part.float() * weights
            if weight_sum is not None:
                weight_sum[region] += weights
        if weight_sum is not None:
            latent = latent / weight_sum.clamp(min=1e-8)
        return latent.to(pixels.dtype)
