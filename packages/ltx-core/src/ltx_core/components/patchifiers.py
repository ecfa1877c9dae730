"""Latent grids <-> transformer token sequences, and where each token sits in time and space.

Video: a latent (B, C, F, H, W) becomes (B, F*H*W, C) tokens in (f, h, w) row-major order, one token per
latent cell (patch size 1), feature = latent channel.
Audio: a latent (B, C, T, M) becomes (B, T, C*M) tokens, one per latent time step, feature = c*M + m.

Positions are [start, end) extents per token and axis, in the units the transformer's RoPE expects:
video time in seconds, height/width in pixels; audio time in seconds.
"""

from __future__ import annotations

import torch

from ltx_core.types import (
    AUDIO_HOP_LENGTH,
    AUDIO_LATENT_DOWNSAMPLE,
    AUDIO_SAMPLE_RATE,
    DEFAULT_SCALE_FACTORS,
    AudioLatentShape,
    SpatioTemporalScaleFactors,
    VideoLatentShape,
)


def _check_rank(name: str, tensor: torch.Tensor, rank: int, layout: str) -> None:
    if tensor.dim() != rank:
        raise ValueError(f"{name} must be {rank}-D {layout}, got shape {tuple(tensor.shape)}")


class VideoPatchifier:
    """Video latent (B, C, F, H, W) <-> tokens (B, F*H*W, C)."""

    @staticmethod
    def patchify(latent: torch.Tensor) -> torch.Tensor:
        _check_rank("video latent", latent, 5, "(B, C, F, H, W)")
        b, c = latent.shape[:2]
        return latent.reshape(b, c, -1).transpose(1, 2).contiguous()

    @staticmethod
    def unpatchify(tokens: torch.Tensor, shape: VideoLatentShape) -> torch.Tensor:
        """Tokens (B, F*H*W, C) back to (B, C, F, H, W); `shape.channels` may be 1 for masks."""
        _check_rank("video tokens", tokens, 3, "(B, T, C)")
        expected = (shape.batch, shape.token_count, shape.channels)
        if tuple(tokens.shape) != expected:
            raise ValueError(f"video tokens have shape {tuple(tokens.shape)}, expected {expected} for {shape}")
        return tokens.transpose(1, 2).reshape(shape.batch, shape.channels, shape.frames, shape.height, shape.width)

    @staticmethod
    def latent_bounds(shape: VideoLatentShape, device: torch.device | str | None = None) -> torch.Tensor:
        """(B, 3, F*H*W, 2) int64 [start, end) latent-cell indices per token along (f, h, w)."""
        if min(shape.batch, shape.frames, shape.height, shape.width) < 1:
            raise ValueError(f"video latent shape must have positive batch/frames/height/width, got {shape}")
        grid = torch.meshgrid(
            torch.arange(shape.frames, device=device),
            torch.arange(shape.height, device=device),
            torch.arange(shape.width, device=device),
            indexing="ij",
        )
        starts = torch.stack([g.reshape(-1) for g in grid])  # (3, T)
        bounds = torch.stack([starts, starts + 1], dim=-1)  # (3, T, 2)
        return bounds.unsqueeze(0).expand(shape.batch, -1, -1, -1).clone()

    @staticmethod
    def pixel_bounds(
        latent_bounds: torch.Tensor,
        scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS,
        causal_fix: bool = True,
    ) -> torch.Tensor:
        """Latent-cell bounds (B, 3, T, 2) -> pixel/frame bounds (same dtype).

        With `causal_fix` the time axis is shifted by 1 - scale.time and clamped at 0: the causal VAE
        encodes the first pixel frame alone, so latent frame f covers frames [max(8f-7, 0), 8f+1).
        """
        factors = torch.tensor([scale.time, scale.height, scale.width], device=latent_bounds.device)
        pixels = latent_bounds * factors.view(1, 3, 1, 1)
        if causal_fix:
            time = (pixels[:, 0] + 1 - scale.time).clamp(min=0)
            pixels = torch.cat([time.unsqueeze(1), pixels[:, 1:]], dim=1)
        return pixels

    @classmethod
    def positions(
        cls,
        shape: VideoLatentShape,
        fps: float,
        scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS,
        causal_fix: bool = True,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """(B, 3, T, 2) float32: time in seconds, height and width in pixels."""
        if not fps > 0:
            raise ValueError(f"fps must be positive, got {fps}")
        pixels = cls.pixel_bounds(cls.latent_bounds(shape, device), scale, causal_fix).to(torch.float32)
        return torch.cat([(pixels[:, 0] / fps).unsqueeze(1), pixels[:, 1:]], dim=1)


class AudioPatchifier:
    """Audio latent (B, C, T, M) <-> tokens (B, T, C*M); time extents from the mel hop and latent stride."""

    def __init__(
        self,
        sample_rate: int = AUDIO_SAMPLE_RATE,
        hop_length: int = AUDIO_HOP_LENGTH,
        latent_downsample: int = AUDIO_LATENT_DOWNSAMPLE,
        causal: bool = True,
    ) -> None:
        self.sample_rate = sample_rate
        self.hop_length = hop_length
        self.latent_downsample = latent_downsample
        self.causal = causal

    @staticmethod
    def patchify(latent: torch.Tensor) -> torch.Tensor:
        _check_rank("audio latent", latent, 4, "(B, C, T, M)")
        b, c, t, m = latent.shape
        return latent.permute(0, 2, 1, 3).reshape(b, t, c * m).contiguous()

    @staticmethod
    def unpatchify(tokens: torch.Tensor, shape: AudioLatentShape) -> torch.Tensor:
        """Tokens (B, T, C*M) back to (B, C, T, M); a mask shape has channels = mel_bins = 1."""
        _check_rank("audio tokens", tokens, 3, "(B, T, C*M)")
        expected = (shape.batch, shape.frames, shape.channels * shape.mel_bins)
        if tuple(tokens.shape) != expected:
            raise ValueError(f"audio tokens have shape {tuple(tokens.shape)}, expected {expected} for {shape}")
        return tokens.reshape(shape.batch, shape.frames, shape.channels, shape.mel_bins).permute(0, 2, 1, 3)

    def _seconds(self, latent_steps: torch.Tensor) -> torch.Tensor:
        mel = latent_steps * self.latent_downsample
        if self.causal:
            # The causal encoder's step t first sees mel frame 4t-3 in full.
            mel = (mel + 1 - self.latent_downsample).clamp(min=0)
        # Keep the reference rounding: (mel * hop) / rate in float32, not mel * (hop / rate).
        return mel * self.hop_length / self.sample_rate

    def positions(
        self,
        shape: AudioLatentShape,
        device: torch.device | str | None = None,
        first_step: int = 0,
    ) -> torch.Tensor:
        """(B, 1, T, 2) float32 [start, end) seconds of each latent step (steps counted from `first_step`)."""
        if shape.batch < 1 or shape.frames < 0:
            raise ValueError(f"audio latent shape must have batch >= 1 and frames >= 0, got {shape}")
        steps = torch.arange(first_step, first_step + shape.frames, dtype=torch.float32, device=device)
        bounds = torch.stack([self._seconds(steps), self._seconds(steps + 1)], dim=-1)  # (T, 2)
        return bounds.view(1, 1, shape.frames, 2).expand(shape.batch, -1, -1, -1).clone()
