"""Rotary position embeddings over fractional, multi-axis positions.

Each token has an extent [start, end) per position axis (video: time in seconds, height and width
in pixels; audio: time in seconds). The rotation angle of frequency f on axis a is

    angle = f * (2 * mid_a / max_pos_a - 1),   f in (pi/2) * theta ** linspace(0, 1, dim // (2 * n_axes))

with mid_a the midpoint of the token's extent. Angles reach ~1e4 rad, so their float32 rounding is
visible in the output: the grid, midpoints, fractions and products are all formed in float32 (the
grid optionally computed in float64 first, as released LTX-2.3 configs ask), matching the reference
numerics. Frequencies are laid out frequency-major, axis-minor, and front-padded with identity
rotations up to the rotated width.

Two layouts pair up the channels that rotate together:
- SPLIT: inside each head, channel i of the first half with channel i of the second half.
- INTERLEAVED (legacy): channels (2i, 2i+1) over the whole inner dim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch


class RopeType(Enum):
    SPLIT = "split"
    INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class RotaryEmbedding:
    """cos/sin tables ready to rotate (B, T, heads * head_dim) queries or keys.

    SPLIT: (B, heads, T, head_dim / 2). INTERLEAVED: (B, T, heads * head_dim).
    """

    cos: torch.Tensor
    sin: torch.Tensor
    rope_type: RopeType


def frequency_grid(theta: float, n_axes: int, dim: int, float64: bool = False) -> torch.Tensor:
    """The float32 angular frequencies shared by every axis, `dim // (2 * n_axes)` of them."""
    count = dim // (2 * n_axes)
    if float64:
        grid = np.power(float(theta), np.linspace(0.0, 1.0, count, dtype=np.float64)) * math.pi / 2
        return torch.from_numpy(grid).to(torch.float32)
    grid = float(theta) ** torch.linspace(0.0, 1.0, count, dtype=torch.float32)
    return grid * math.pi / 2


def rotation_angles(
    positions: torch.Tensor,
    max_pos: Sequence[float],
    grid: torch.Tensor,
    use_midpoint: bool = True,
) -> torch.Tensor:
    """(B, T, n_freq * n_axes) float32 angles from positions (B, n_axes, T, 2) or (B, n_axes, T)."""
    if use_midpoint:
        if positions.ndim != 4 or positions.shape[-1] != 2:
            raise ValueError(
                f"positions must be (batch, axes, tokens, 2) [start, end) extents, got {tuple(positions.shape)}"
            )
        points = (positions[..., 0] + positions[..., 1]) / 2.0
    else:
        points = positions[..., 0] if positions.ndim == 4 else positions
    if points.shape[1] != len(max_pos):
        raise ValueError(f"positions have {points.shape[1]} axes but max_pos names {len(max_pos)}: {list(max_pos)}")
    points = points.to(torch.float32)
    fractions = torch.stack([points[:, axis] / extent for axis, extent in enumerate(max_pos)], dim=-1)
    angles = grid.to(fractions.device) * (fractions.unsqueeze(-1) * 2 - 1)  # (B, T, axes, freqs)
    return angles.transpose(-1, -2).flatten(2)


def _front_pad(table: torch.Tensor, width: int, value: float) -> torch.Tensor:
    pad = width - table.shape[-1]
    if pad == 0:
        return table
    return torch.cat([torch.full_like(table[..., :1], value).expand(*table.shape[:-1], pad), table], dim=-1)


def rotary_embedding(
    positions: torch.Tensor,
    *,
    dim: int,
    heads: int,
    max_pos: Sequence[float],
    theta: float = 10000.0,
    rope_type: RopeType = RopeType.SPLIT,
    float64_grid: bool = False,
    use_midpoint: bool = True,
    dtype: torch.dtype = torch.float32,
) -> RotaryEmbedding:
    """Tables rotating an attention input of width `dim` split into `heads` heads."""
    if dim % heads or (dim // heads) % 2:
        raise ValueError(f"rotary width {dim} must split into {heads} heads of even size")
    grid = frequency_grid(theta, len(max_pos), dim, float64_grid)
    angles = rotation_angles(positions, max_pos, grid, use_midpoint)
    cos, sin = angles.cos(), angles.sin()
    if rope_type is RopeType.SPLIT:
        cos, sin = _front_pad(cos, dim // 2, 1.0), _front_pad(sin, dim // 2, 0.0)
        b, t, _ = cos.shape
        cos = cos.reshape(b, t, heads, -1).transpose(1, 2)
        sin = sin.reshape(b, t, heads, -1).transpose(1, 2)
    else:
        cos = _front_pad(cos.repeat_interleave(2, dim=-1), dim, 1.0)
        sin = _front_pad(sin.repeat_interleave(2, dim=-1), dim, 0.0)
    return RotaryEmbedding(cos.to(dtype), sin.to(dtype), rope_type)


def apply_rotary(x: torch.Tensor, pe: RotaryEmbedding) -> torch.Tensor:
    """Rotate x (B, T, heads * head_dim) by `pe`."""
    if pe.rope_type is RopeType.INTERLEAVED:
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((-odd, even), dim=-1).flatten(-2)
        return x * pe.cos + rotated * pe.sin
    heads = pe.cos.shape[1]
    b, t, width = x.shape
    per_head = x.reshape(b, t, heads, 2, width // heads // 2).transpose(1, 2)  # (B, H, T, 2, D/2)
    first, second = per_head[..., 0, :], per_head[..., 1, :]
    cos, sin = pe.cos, pe.sin
    out = torch.stack((first * cos - second * sin, second * cos + first * sin), dim=-2)
    return out.transpose(1, 2).reshape(b, t, width)
