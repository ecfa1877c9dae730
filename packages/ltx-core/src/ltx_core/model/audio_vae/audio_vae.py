"""The mel-spectrogram VAE: stereo log-mel (B, 2, T, 64) <-> normalised latent (B, 8, T', 16).

Time and mel are halved at every level but the last (x4 with the released three levels). With time
causality the encoder keeps frame 0 and then one step per 4 frames, T' = (T - 1) // 4 + 1, and the
decoder returns 4 T' - 3 frames (`AudioVAEConfig.latent_frames` / `decoded_frames`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ltx_core.model.audio_vae.config import AudioVAEConfig
from ltx_core.model.audio_vae.layers import (
    CausalConv2d,
    Downsample,
    Level,
    MidBlock,
    ResnetBlock,
    Upsample,
    make_attention,
    make_norm,
)


class PerChannelStatistics(nn.Module):
    """Latent normalisation with dataset statistics, one pair per patchified latent feature.

    The statistics are indexed like the transformer's audio tokens: feature c * mel_bins + m for
    latent channel c and latent mel bin m. The buffer names contain '-' as in the checkpoints.
    """

    def __init__(self, channels: int, mel_bins: int) -> None:
        super().__init__()
        self.channels = channels
        self.mel_bins = mel_bins
        self.register_buffer("std-of-means", torch.ones(channels * mel_bins))
        self.register_buffer("mean-of-means", torch.zeros(channels * mel_bins))

    def _grid(self, name: str, like: torch.Tensor) -> torch.Tensor:
        # (C * M,) -> (1, C, 1, M) to broadcast over (B, C, T, M).
        return self.get_buffer(name).to(like).view(1, self.channels, 1, self.mel_bins)

    def normalize(self, latent: torch.Tensor) -> torch.Tensor:
        return (latent - self._grid("mean-of-means", latent)) / self._grid("std-of-means", latent)

    def un_normalize(self, latent: torch.Tensor) -> torch.Tensor:
        return latent * self._grid("std-of-means", latent) + self._grid("mean-of-means", latent)


def _check_4d(name: str, x: torch.Tensor, channels: int, last: int, what: str) -> None:
    if x.dim() != 4:
        raise ValueError(f"{name} expects a 4-D tensor (batch, {channels}, frames, {last}), got shape {tuple(x.shape)}")
    if x.shape[1] != channels:
        raise ValueError(f"{name} expects {channels} channels (dim 1), got {x.shape[1]} (shape {tuple(x.shape)})")
    if x.shape[3] != last:
        raise ValueError(f"{name} expects {last} {what} (dim 3), got {x.shape[3]} (shape {tuple(x.shape)})")
    if x.shape[2] < 1:
        raise ValueError(f"{name} got an empty time axis (shape {tuple(x.shape)})")


class AudioEncoder(nn.Module):
    """Stereo log-mel (B, in_channels, T, mel_bins) -> normalised latent means (B, z_channels, T', mel_bins / 4)."""

    def __init__(self, config: AudioVAEConfig) -> None:
        super().__init__()
        self.config = config
        axis, norm = config.causality_axis, config.norm_type
        self.per_channel_statistics = PerChannelStatistics(config.z_channels, config.latent_mel_bins)
        self.conv_in = CausalConv2d(config.in_channels, config.ch, 3, axis)

        self.down = nn.ModuleList()
        width = config.ch
        for level, out_width in enumerate(config.level_channels):
            blocks, attentions = [], []
            for _ in range(config.num_res_blocks):
                blocks.append(ResnetBlock(width, out_width, norm, axis))
                width = out_width
                if config.level_resolution(level) in config.attn_resolutions:
                    attentions.append(make_attention(width, norm, config.attn_type))
            stage = Level(blocks, attentions)
            if level < config.num_levels - 1:
                stage.downsample = Downsample(width, config.resamp_with_conv, axis)
            self.down.append(stage)

        self.mid = MidBlock(width, norm, axis, config.mid_block_add_attention, config.attn_type)
        self.norm_out = make_norm(width, norm)
        out_channels = 2 * config.z_channels if config.double_z else config.z_channels
        self.conv_out = CausalConv2d(width, out_channels, 3, axis)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        _check_4d("audio encoder", mel, cfg.in_channels, cfg.mel_bins, "mel bins")
        h = self.conv_in(mel.to(self.conv_in.conv.weight.dtype))
        for stage in self.down:
            h = stage.run_blocks(h)
            if hasattr(stage, "downsample"):
                h = stage.downsample(h)
        h = self.mid(h)
        h = self.conv_out(F.silu(self.norm_out(h)))
        # With double_z the second half holds log-variances; the latent is the mean.
        means = h[:, : cfg.z_channels]
        return self.per_channel_statistics.normalize(means)


class AudioDecoder(nn.Module):
    """Normalised latent (B, z_channels, T, mel_bins / 4) -> log-mel (B, out_ch, 4T - 3, mel_bins)."""

    def __init__(self, config: AudioVAEConfig) -> None:
        super().__init__()
        self.config = config
        axis, norm = config.causality_axis, config.norm_type
        self.per_channel_statistics = PerChannelStatistics(config.z_channels, config.latent_mel_bins)
        width = config.level_channels[-1]
        self.conv_in = CausalConv2d(config.z_channels, width, 3, axis)
        self.mid = MidBlock(width, norm, axis, config.mid_block_add_attention, config.attn_type)

        # Built from the coarsest level down, stored by level index (up.0 is the finest) as in the checkpoints.
        stages: dict[int, Level] = {}
        for level in reversed(range(config.num_levels)):
            out_width = config.level_channels[level]
            blocks, attentions = [], []
            for _ in range(config.num_res_blocks + 1):
                blocks.append(ResnetBlock(width, out_width, norm, axis))
                width = out_width
                if config.level_resolution(level) in config.attn_resolutions:
                    attentions.append(make_attention(width, norm, config.attn_type))
            stage = Level(blocks, attentions)
            if level > 0:
                stage.upsample = Upsample(width, config.resamp_with_conv, axis)
            stages[level] = stage
        self.up = nn.ModuleList(stages[level] for level in range(config.num_levels))

        self.norm_out = make_norm(width, norm)
        self.conv_out = CausalConv2d(width, config.out_ch, 3, axis)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        _check_4d("audio decoder", latent, cfg.z_channels, cfg.latent_mel_bins, "latent mel bins")
        frames = cfg.decoded_frames(latent.shape[2])
        h = self.per_channel_statistics.un_normalize(latent.to(self.conv_in.conv.weight.dtype))
        h = self.mid(self.conv_in(h))
        for level in reversed(range(cfg.num_levels)):
            stage = self.up[level]
            h = stage.run_blocks(h)
            if hasattr(stage, "upsample"):
                h = stage.upsample(h)
        h = self.conv_out(F.silu(self.norm_out(h)))
        return _fit(h, frames, cfg.mel_bins)


def _fit(mel: torch.Tensor, frames: int, mel_bins: int) -> torch.Tensor:
    """Crop, or zero-pad at the end, the time and mel axes to exactly (frames, mel_bins)."""
    mel = mel[:, :, :frames, :mel_bins]
    pad_time, pad_mel = frames - mel.shape[2], mel_bins - mel.shape[3]
    if pad_time or pad_mel:
        mel = F.pad(mel, (0, pad_mel, 0, pad_time))
    return mel
