"""Timestep conditioning: sinusoidal embedding -> MLP -> AdaLN modulation rows (PixArt's adaLN-single)."""

from __future__ import annotations

import math

import torch
from torch import nn

SINUSOID_CHANNELS = 256
_MAX_PERIOD = 10000


def timestep_sinusoid(timesteps: torch.Tensor, channels: int = SINUSOID_CHANNELS) -> torch.Tensor:
    """(N,) -> (N, channels) float32 embedding, cosines first then sines, periods up to 10000."""
    half = channels // 2
    exponent = -math.log(_MAX_PERIOD) * torch.arange(half, dtype=torch.float32, device=timesteps.device) / half
    angles = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class TimestepEmbedder(nn.Module):
    """Sinusoid -> linear -> SiLU -> linear."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(SINUSOID_CHANNELS, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, timesteps: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.linear_2(nn.functional.silu(self.linear_1(timestep_sinusoid(timesteps).to(dtype))))


class _EmbeddingHolder(nn.Module):
    """Keeps the checkpoint's `emb.timestep_embedder.*` key layout."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.timestep_embedder = TimestepEmbedder(dim)


class AdaLNSingle(nn.Module):
    """Maps (already scaled) timesteps to `rows` modulation vectors of width `dim`.

    Returns (modulation (N, rows * dim), embedded timestep (N, dim)); the latter also drives the
    output-layer modulation.
    """

    def __init__(self, dim: int, rows: int) -> None:
        super().__init__()
        self.rows = rows
        self.emb = _EmbeddingHolder(dim)
        self.linear = nn.Linear(dim, rows * dim)

    def forward(self, timesteps: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        embedded = self.emb.timestep_embedder(timesteps, dtype)
        return self.linear(nn.functional.silu(embedded)), embedded


def modulation(table: torch.Tensor, per_token: torch.Tensor, rows: slice) -> tuple[torch.Tensor, ...]:
    """Rows `rows` of a learned (R, D) table plus the per-token AdaLN output (B, T, R*D), one (B, T, D) each."""
    b, t, _ = per_token.shape
    values = table[rows].to(per_token.dtype)[None, None] + per_token.reshape(b, t, table.shape[0], -1)[:, :, rows]
    return values.unbind(dim=2)
