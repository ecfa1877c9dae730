"""Position-wise MLPs: the block feed-forward and the LTX-2 caption projection."""

from __future__ import annotations

import torch
from torch import nn


class _GeluTanhProjection(nn.Module):
    """Linear followed by tanh-approximated GELU (key layout `net.0.proj`)."""

    def __init__(self, dim_in: int, dim_out: int, bias: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    """dim -> mult * dim (GELU tanh) -> dim."""

    def __init__(self, dim: int, mult: int = 4, bias: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(
            _GeluTanhProjection(dim, dim * mult, bias), nn.Identity(), nn.Linear(dim * mult, dim, bias=bias)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CaptionProjection(nn.Module):
    """LTX-2: text-stage features (caption_channels wide) -> the stream width: linear, GELU(tanh), linear."""

    def __init__(self, in_features: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_features, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(nn.functional.gelu(self.linear_1(x), approximate="tanh"))
