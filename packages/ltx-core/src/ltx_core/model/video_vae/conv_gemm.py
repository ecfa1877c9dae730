"""A 3-D convolution as one matrix product over its unfolded input windows (im2col + GEMM).

Over small frames (the 22B decoder's 1024-channel layers work on 3 x 8 x 12 latents) oneDNN's direct
bf16 convolution has too few output positions to block well: it measured ~125 GFLOP per CPU second
there against ~270 on the 32 x 48 frames. Copying every (channel, tap) window of the input into a
(in x taps, positions) matrix and multiplying by the (out, in x taps) weight view is one long GEMM
instead: 0.75-0.8x the direct convolution's CPU time on those layers, same rounding (one bf16 product
accumulated in float32 per output, as the convolution does). The copy is taps times the input, so the
path is offered only where it stays small (`MAX_COLUMN_BYTES`); over large frames the direct
convolution wins anyway (0.6x on 512 channels over 5 x 16 x 24).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.nn import functional as F

# The largest unfolded input (in x taps x output positions) the path may allocate per call.
MAX_COLUMN_BYTES = 64 << 20


def gemm_applies(conv: torch.nn.Conv3d, padded_shape: Sequence[int], dtype: torch.dtype) -> bool:
    """Whether `gemm_conv3d` computes `conv` over a `dtype` input of `padded_shape` (time padding
    included) within `MAX_COLUMN_BYTES`: one group, no dilation, no time stride or padding, zero
    spatial padding."""
    if conv.groups != 1 or tuple(conv.dilation) != (1, 1, 1) or conv.stride[0] != 1 or conv.padding[0] != 0:
        return False
    if conv.padding_mode != "zeros":
        return False
    n, _, frames, height, width = padded_shape
    positions = (frames - conv.kernel_size[0] + 1) * _out_size(height, conv, 1) * _out_size(width, conv, 2)
    element = torch.empty((), dtype=dtype).element_size()
    return n * conv.in_channels * math.prod(conv.kernel_size) * positions * element <= MAX_COLUMN_BYTES


def _out_size(size: int, conv: torch.nn.Conv3d, axis: int) -> int:
    return (size + 2 * conv.padding[axis] - conv.kernel_size[axis]) // conv.stride[axis] + 1


def gemm_conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (1, 1),
) -> torch.Tensor:
    """`F.conv3d(x, weight, bias, (1, *stride), (0, *padding))`, `x` already padded in time.

    `x` is (N, in, T + kt - 1, H, W); the output (N, out, T, H', W') is in `x`'s dtype.
    """
    out_channels, in_channels, kt, kh, kw = weight.shape
    if x.shape[1] != in_channels or x.shape[2] < kt:
        raise ValueError(f"input {tuple(x.shape)} does not fit a kernel {tuple(weight.shape)}")
    if any(padding):
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    windows = x.unfold(2, kt, 1).unfold(3, kh, stride[0]).unfold(4, kw, stride[1])
    n, _, frames, height, width = windows.shape[:5]
    # (N, in, kt, kh, kw, T, H', W'): rows in the weight's (in, kt, kh, kw) order; the reshape copies.
    columns = windows.permute(0, 1, 5, 6, 7, 2, 3, 4).reshape(n, in_channels * kt * kh * kw, -1)
    flat_weight = weight.reshape(out_channels, -1)
    out = x.new_empty(n, out_channels, columns.shape[2])
    for b in range(n):
        if bias is None:
            torch.mm(flat_weight, columns[b], out=out[b])
        else:
            torch.addmm(bias[:, None], flat_weight, columns[b], out=out[b])
    return out.view(n, out_channels, frames, height, width)
