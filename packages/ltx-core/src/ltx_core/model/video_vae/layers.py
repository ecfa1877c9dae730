"""Small building blocks of the video VAE: convolutions, norms, pixel shuffles, latent statistics."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

_HALF_DTYPES = (torch.bfloat16, torch.float16)


class Conv3d(nn.Conv3d):
    """`nn.Conv3d` that does its arithmetic in float32 on the CPU when weights are half precision.

    PyTorch's CPU kernels for bf16/fp16 3-D convolutions fall back to a reference loop on CPUs without
    native bf16 instructions (hundreds of times slower than float32). Upcasting per call keeps bf16
    weights and activations in memory, and still rounds each output to the input dtype, as a native
    half-precision convolution with float32 accumulation would.
    """

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if input.device.type == "cpu" and input.dtype in _HALF_DTYPES:
            out = super()._conv_forward(input.float(), weight.float(), None if bias is None else bias.float())
            return out.to(input.dtype)
        return super()._conv_forward(input, weight, bias)


class CausalConv3d(nn.Module):
    """A 3-D convolution whose time axis is padded by repeating edge frames instead of zeros.

    Causal mode repeats the first frame `k - 1` times in front, so output frame t only sees input
    frames <= t; non-causal mode repeats the first and the last frame `(k - 1) / 2` times each.
    Height and width are padded inside the convolution with `padding_mode`.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int | tuple[int, int, int] = 1,
        padding_mode: str = "zeros",
    ) -> None:
        super().__init__()
        self.time_kernel = kernel_size
        self.conv = Conv3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=(0, kernel_size // 2, kernel_size // 2),
            padding_mode=padding_mode,
        )

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        front, back = (self.time_kernel - 1, 0) if causal else ((self.time_kernel - 1) // 2,) * 2
        parts = []
        if front:
            parts.append(x[:, :, :1].expand(-1, -1, front, -1, -1))
        parts.append(x)
        if back:
            parts.append(x[:, :, -1:].expand(-1, -1, back, -1, -1))
        return self.conv(torch.cat(parts, dim=2) if len(parts) > 1 else x)


class PixelNorm(nn.Module):
    """RMS normalisation over channels at every (frame, row, column); no learned scale."""

    def __init__(self, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x.pow(2), dim=1, keepdim=True) + self.eps)


def make_norm(kind: str, channels: int, groups: int = 32) -> nn.Module:
    if kind == "pixel_norm":
        return PixelNorm()
    if kind == "group_norm":
        return nn.GroupNorm(num_groups=groups, num_channels=channels, eps=1e-6)
    raise ValueError(f"unknown norm layer {kind!r}; accepted: 'pixel_norm', 'group_norm'")


def fold_into_channels(x: torch.Tensor, factors: tuple[int, int, int]) -> torch.Tensor:
    """(B, C, D*a, H*b, W*c) -> (B, C*a*b*c, D, H, W); channel index = ((c*a + i)*b + j)*c + k."""
    a, b, c = factors
    n, ch, d, h, w = x.shape
    x = x.reshape(n, ch, d // a, a, h // b, b, w // c, c)
    x = x.permute(0, 1, 3, 5, 7, 2, 4, 6)
    return x.reshape(n, ch * a * b * c, d // a, h // b, w // c)


def unfold_from_channels(x: torch.Tensor, factors: tuple[int, int, int]) -> torch.Tensor:
    """Inverse of `fold_into_channels`: (B, C*a*b*c, D, H, W) -> (B, C, D*a, H*b, W*c)."""
    a, b, c = factors
    n, ch, d, h, w = x.shape
    x = x.reshape(n, ch // (a * b * c), a, b, c, d, h, w)
    x = x.permute(0, 1, 5, 2, 6, 3, 7, 4)
    return x.reshape(n, ch // (a * b * c), d * a, h * b, w * c)


def patchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, F, H*p, W*p) -> (B, C*p*p, F, H, W) with channel index c*p*p + (column offset)*p + (row offset).

    The column offset comes before the row offset: that is the layout the released weights expect.
    """
    if patch == 1:
        return x
    n, ch, f, h, w = x.shape
    x = x.reshape(n, ch, f, h // patch, patch, w // patch, patch)
    x = x.permute(0, 1, 6, 4, 2, 3, 5)
    return x.reshape(n, ch * patch * patch, f, h // patch, w // patch)


def unpatchify(x: torch.Tensor, patch: int) -> torch.Tensor:
    """Inverse of `patchify`."""
    if patch == 1:
        return x
    n, ch, f, h, w = x.shape
    x = x.reshape(n, ch // (patch * patch), patch, patch, f, h, w)
    x = x.permute(0, 1, 4, 5, 3, 6, 2)
    return x.reshape(n, ch // (patch * patch), f, h * patch, w * patch)


class PerChannelStatistics(nn.Module):
    """Per-channel mean and spread of the encoder's latent means over the training data.

    `normalize` maps raw latents to the unit-scale latents the transformer works with, and
    `un_normalize` goes back. The buffers keep the checkpoint's hyphenated names.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("std-of-means", torch.ones(channels))
        self.register_buffer("mean-of-means", torch.zeros(channels))

    def _stat(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.get_buffer(name).view(1, -1, *([1] * (x.ndim - 2))).to(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self._stat("mean-of-means", x)) / self._stat("std-of-means", x)

    def un_normalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self._stat("std-of-means", x) + self._stat("mean-of-means", x)


class _TimestepMLP(nn.Module):
    def __init__(self, in_features: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_features, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class TimestepEmbedder(nn.Module):
    """Timestep -> vector: 256 sinusoidal features (cosines first, max period 10^4), then a SiLU MLP."""

    FREQUENCY_FEATURES = 256

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.timestep_embedder = _TimestepMLP(self.FREQUENCY_FEATURES, dim)

    def forward(self, timestep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        half = self.FREQUENCY_FEATURES // 2
        exponent = -math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=timestep.device) / half
        angles = timestep.float()[:, None] * torch.exp(exponent)[None, :]
        features = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
        return self.timestep_embedder(features.to(dtype))
