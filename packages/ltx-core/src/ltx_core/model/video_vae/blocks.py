"""Residual blocks and the space-to-depth / depth-to-space resamplers of the video VAE."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ltx_core.model.video_vae.layers import (
    CausalConv3d,
    Conv3d,
    TimestepEmbedder,
    fold_into_channels,
    make_norm,
    unfold_from_channels,
)


class ResnetBlock3D(nn.Module):
    """norm -> SiLU -> conv, twice, plus a skip (1x1x1 projection with a LayerNorm when widths differ).

    With timestep conditioning, the block owns a (4, C) table that, added to the stack's timestep
    embedding, gives shift/scale pairs applied after each norm (AdaLN).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        norm_layer: str,
        padding_mode: str,
        timestep_conditioning: bool = False,
    ) -> None:
        super().__init__()
        self.norm1 = make_norm(norm_layer, in_channels)
        self.conv1 = CausalConv3d(in_channels, out_channels, padding_mode=padding_mode)
        self.norm2 = make_norm(norm_layer, out_channels)
        self.conv2 = CausalConv3d(out_channels, out_channels, padding_mode=padding_mode)
        self.widens = in_channels != out_channels
        if self.widens:
            self.norm3 = nn.GroupNorm(num_groups=1, num_channels=in_channels, eps=1e-6)
            self.conv_shortcut = Conv3d(in_channels, out_channels, kernel_size=1)
        self.timestep_conditioning = timestep_conditioning
        if timestep_conditioning:
            self.scale_shift_table = nn.Parameter(torch.zeros(4, in_channels))

    def forward(self, x: torch.Tensor, causal: bool = True, embedding: torch.Tensor | None = None) -> torch.Tensor:
        # Without autograd the fresh norm and conv outputs are updated in place (SiLU, the skip add):
        # fewer full-size allocations and passes over memory when decoding.
        inplace = not torch.is_grad_enabled()
        h = self.norm1(x)
        if self.timestep_conditioning:
            if embedding is None:
                raise ValueError("a timestep-conditioned resnet block needs the timestep embedding")
            ada = self.scale_shift_table.to(h)[None, :, :, None, None, None] + embedding.reshape(
                x.shape[0], 4, -1, 1, 1, 1
            )
            shift1, scale1, shift2, scale2 = ada.unbind(dim=1)
            h = h * (1 + scale1) + shift1
        h = self.conv1(F.silu(h, inplace=inplace), causal=causal)
        h = self.norm2(h)
        if self.timestep_conditioning:
            h = h * (1 + scale2) + shift2
        h = self.conv2(F.silu(h, inplace=inplace), causal=causal)
        skip = self.conv_shortcut(self.norm3(x)) if self.widens else x
        return h.add_(skip) if inplace else skip + h


class ResBlockStack(nn.Module):
    """`num_layers` same-width resnet blocks (the `res_x` block), sharing one timestep embedder."""

    def __init__(
        self,
        channels: int,
        num_layers: int,
        norm_layer: str,
        padding_mode: str,
        timestep_conditioning: bool = False,
    ) -> None:
        super().__init__()
        self.timestep_conditioning = timestep_conditioning
        if timestep_conditioning:
            self.time_embedder = TimestepEmbedder(4 * channels)
        self.res_blocks = nn.ModuleList(
            ResnetBlock3D(channels, channels, norm_layer, padding_mode, timestep_conditioning)
            for _ in range(num_layers)
        )

    def forward(self, x: torch.Tensor, causal: bool = True, timestep: torch.Tensor | None = None) -> torch.Tensor:
        embedding = None
        if self.timestep_conditioning:
            if timestep is None:
                raise ValueError("a timestep-conditioned block needs a timestep")
            embedding = self.time_embedder(timestep.flatten(), dtype=x.dtype)
        for block in self.res_blocks:
            x = block(x, causal=causal, embedding=embedding)
        return x


class SpaceToDepthDownsample(nn.Module):
    """Encoder `compress_*_res`: a causal conv folded into channels, plus the input folded and group-averaged.

    With a temporal stride the first frame is duplicated first, so 1 + 2k frames become 1 + k.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: tuple[int, int, int], padding_mode: str) -> None:
        super().__init__()
        self.stride = stride
        volume = math.prod(stride)
        if (in_channels * volume) % out_channels or out_channels % volume:
            raise ValueError(f"cannot fold {in_channels} channels by {stride} into {out_channels} channels")
        self.group_size = in_channels * volume // out_channels
        self.conv = CausalConv3d(in_channels, out_channels // volume, padding_mode=padding_mode)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        if self.stride[0] == 2:
            x = torch.cat([x[:, :, :1], x], dim=2)
        skip = fold_into_channels(x, self.stride)
        n, ch, d, h, w = skip.shape
        skip = skip.reshape(n, ch // self.group_size, self.group_size, d, h, w).mean(dim=2)
        return fold_into_channels(self.conv(x, causal=causal), self.stride) + skip


class DepthToSpaceUpsample(nn.Module):
    """Decoder `compress_*`: a conv to `volume * C / reduction` channels unfolded into space and time.

    With a temporal stride the first output frame is dropped, so 1 + k frames become 1 + 2k.
    `residual` adds the input unfolded the same way, its channels repeated to the output width.
    """

    def __init__(
        self,
        in_channels: int,
        stride: tuple[int, int, int],
        reduction: int,
        padding_mode: str,
        residual: bool = False,
    ) -> None:
        super().__init__()
        self.stride = stride
        self.reduction = reduction
        self.residual = residual
        volume = math.prod(stride)
        if (volume * in_channels) % reduction:
            raise ValueError(f"cannot reduce {volume} x {in_channels} channels by {reduction}")
        self.conv = CausalConv3d(in_channels, volume * in_channels // reduction, padding_mode=padding_mode)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        out = unfold_from_channels(self.conv(x, causal=causal), self.stride)
        if self.residual:
            skip = unfold_from_channels(x, self.stride)
            out = out + skip.repeat(1, math.prod(self.stride) // self.reduction, 1, 1, 1)
        if self.stride[0] == 2:
            out = out[:, :, 1:]
        return out
