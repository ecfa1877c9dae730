"""Building blocks of the audio VAE: 2-D convolutions over (time, mel) that can be causal in time.

Tensors are (batch, channels, time, mel). "height" causality pads the time axis on the past side only,
so an output frame never sees later frames; the mel axis is padded symmetrically.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ltx_core.model.audio_vae.config import GROUP_NORM_GROUPS

# F.pad order for a 4-D tensor: (mel left, mel right, time before, time after).
Padding2d = tuple[int, int, int, int]


def causal_padding(causality_axis: str, kernel: int) -> Padding2d:
    """Padding that keeps the size of a stride-1 `kernel` x `kernel` convolution."""
    total = kernel - 1
    half, rest = total // 2, total - total // 2
    if causality_axis == "height":
        return (half, rest, total, 0)
    if causality_axis in ("width", "width-compatibility"):
        return (total, 0, half, rest)
    return (half, rest, half, rest)


# Padding before the stride-2 3x3 convolution that halves both axes.
_DOWNSAMPLE_PADDING: dict[str, Padding2d] = {
    "none": (0, 1, 0, 1),
    "height": (0, 1, 2, 0),
    "width": (2, 0, 0, 1),
    "width-compatibility": (1, 0, 0, 1),
}


class CausalConv2d(nn.Module):
    """Stride-1 square convolution with explicit (possibly one-sided) zero padding; weights under `conv.`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, causality_axis: str) -> None:
        super().__init__()
        self.padding = causal_padding(causality_axis, kernel_size)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, self.padding))


class PixelNorm(nn.Module):
    """RMS normalisation over channels at every (time, mel) position; no parameters."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(x.pow(2).mean(dim=1, keepdim=True) + self.eps)


def make_norm(channels: int, norm_type: str) -> nn.Module:
    if norm_type == "group":
        return nn.GroupNorm(GROUP_NORM_GROUPS, channels, eps=1e-6, affine=True)
    return PixelNorm()


class ResnetBlock(nn.Module):
    """norm -> SiLU -> conv, twice, plus a 1x1 projection of the input when the width changes."""

    def __init__(self, in_channels: int, out_channels: int, norm_type: str, causality_axis: str) -> None:
        super().__init__()
        self.norm1 = make_norm(in_channels, norm_type)
        self.conv1 = CausalConv2d(in_channels, out_channels, 3, causality_axis)
        self.norm2 = make_norm(out_channels, norm_type)
        self.conv2 = CausalConv2d(out_channels, out_channels, 3, causality_axis)
        self.nin_shortcut = (
            CausalConv2d(in_channels, out_channels, 1, causality_axis) if in_channels != out_channels else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        skip = x if self.nin_shortcut is None else self.nin_shortcut(x)
        return skip + h


class AttentionBlock(nn.Module):
    """Single-head self-attention over all (time, mel) positions, with a residual connection.

    The attention is not masked: a VAE level with attention sees the whole clip, causal convolutions or not.
    """

    def __init__(self, channels: int, norm_type: str) -> None:
        super().__init__()
        self.norm = make_norm(channels, norm_type)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, m = x.shape
        h = self.norm(x)
        q, k, v = (proj(h).reshape(b, c, t * m) for proj in (self.q, self.k, self.v))
        weights = torch.softmax(torch.einsum("bci,bcj->bij", q, k) / math.sqrt(c), dim=-1)
        attended = torch.einsum("bij,bcj->bci", weights, v).reshape(b, c, t, m)
        return x + self.proj_out(attended)


def make_attention(channels: int, norm_type: str, attn_type: str) -> nn.Module:
    return AttentionBlock(channels, norm_type) if attn_type == "vanilla" else nn.Identity()


class Downsample(nn.Module):
    """Halve time and mel: a stride-2 3x3 convolution after (causal) padding, or 2x2 average pooling."""

    def __init__(self, channels: int, with_conv: bool, causality_axis: str) -> None:
        super().__init__()
        self.padding = _DOWNSAMPLE_PADDING[causality_axis]
        self.conv = nn.Conv2d(channels, channels, 3, stride=2) if with_conv else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv is None:
            return F.avg_pool2d(x, kernel_size=2, stride=2)
        return self.conv(F.pad(x, self.padding))


class Upsample(nn.Module):
    """Double time and mel by nearest-neighbour repetition, then a (causal) 3x3 convolution.

    With time causality the first output frame is dropped afterwards: after repetition the first two
    frames both depend on input frame 0 only, and dropping one keeps the 2n - 1 length that undoes the
    encoder's causal downsampling (n - 1 latent steps of 2 frames, plus the first frame).
    """

    def __init__(self, channels: int, with_conv: bool, causality_axis: str) -> None:
        super().__init__()
        self.causality_axis = causality_axis
        self.conv = CausalConv2d(channels, channels, 3, causality_axis) if with_conv else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        if self.conv is None:
            return x
        x = self.conv(x)
        if self.causality_axis == "height":
            return x[:, :, 1:, :]
        if self.causality_axis == "width":
            return x[:, :, :, 1:]
        return x


class MidBlock(nn.Module):
    """Two residual blocks with optional self-attention between them (`attn_1`, absent when disabled)."""

    def __init__(self, channels: int, norm_type: str, causality_axis: str, attention: bool, attn_type: str) -> None:
        super().__init__()
        self.block_1 = ResnetBlock(channels, channels, norm_type, causality_axis)
        self.attn_1 = make_attention(channels, norm_type, attn_type) if attention else nn.Identity()
        self.block_2 = ResnetBlock(channels, channels, norm_type, causality_axis)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block_2(self.attn_1(self.block_1(x)))


class Level(nn.Module):
    """One resolution level: residual blocks, each optionally followed by attention, then a resampler.

    `resample` is stored under the name the checkpoints use (`downsample` / `upsample`).
    """

    def __init__(self, blocks: list[nn.Module], attentions: list[nn.Module]) -> None:
        super().__init__()
        self.block = nn.ModuleList(blocks)
        self.attn = nn.ModuleList(attentions)

    def run_blocks(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self.block):
            x = block(x)
            if len(self.attn):
                x = self.attn[i](x)
        return x
