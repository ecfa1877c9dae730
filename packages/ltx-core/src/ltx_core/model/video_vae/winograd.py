"""3x3x3 convolution on the CPU through Winograd F(2x2, 3x3) in height and width.

Each 2x2 block of output pixels is computed from a 4x4 input tile in a transformed basis where the
3x3 spatial kernel becomes 16 independent matrix products, one per transformed position: 16 products
of (out, in) x (in, tiles) per time tap instead of 36 multiply-adds per output pair, i.e. 4/9 of the
direct convolution's multiply-adds, as 48 large float32 GEMMs. The tile and kernel transforms are
memory-bound and made per call, so it only pays for wide layers over large frames (`use_winograd`).
Same result to float32 rounding (the transforms only add and halve; measured max |difference|
~1e-5 relative to the output's range).
"""

from __future__ import annotations

import functools

import torch
from torch.nn import functional as F

# Layers at least this wide, over frames at least this large, go through Winograd. Measured in the 22B
# decoder (17 x 256 x 384): at 512 channels over 32 x 48 frames it wins; at 256 channels, or over
# 16 x 24 and smaller frames (where the per-call kernel transform of 1024- and 4096-wide layers and
# short GEMMs dominate), oneDNN's direct convolution is as fast or faster.
MIN_WINOGRAD_CHANNELS = 512
MIN_WINOGRAD_PIXELS = 32 * 48
# Output channels per pass: bounds the transformed weights and products held at once (~100 MB at 512 in).
_OUT_CHUNK = 512


@functools.cache
def _transforms(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """2-D kernel transform G x G (16 positions x 9 taps) and output transform (4 outputs x 16 positions)."""
    g = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]], device=device)
    a_t = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]], device=device)
    return torch.kron(g, g), torch.kron(a_t, a_t)


def use_winograd(conv: torch.nn.Conv3d, height: int, width: int) -> bool:
    """Whether `conv` (already known to run in float32 on the CPU) is a wide, plain 3x3x3 convolution
    over frames large enough (`height` x `width`) for the GEMMs to outweigh the tile transforms."""
    return (
        height * width >= MIN_WINOGRAD_PIXELS
        and tuple(conv.kernel_size) == (3, 3, 3)
        and tuple(conv.stride) == (1, 1, 1)
        and tuple(conv.dilation) == (1, 1, 1)
        and tuple(conv.padding) == (0, 1, 1)
        and conv.padding_mode == "zeros"
        and conv.groups == 1
        and conv.in_channels >= MIN_WINOGRAD_CHANNELS
    )


def _input_tiles(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """(C, T, 2*rows + 2, 2*cols + 2) zero-padded frames -> (16, C, T * rows * cols) transformed tiles."""
    c, t = x.shape[:2]
    # Even and odd columns apart, so every column slice below is contiguous (stride-2 slices are slow).
    split = x.reshape(c, t, 2 * rows + 2, cols + 1, 2).permute(4, 0, 1, 2, 3).contiguous()
    even, odd = split[0], split[1]
    col_sums = (
        even[..., :cols] - even[..., 1:],
        odd[..., :cols] + even[..., 1:],
        even[..., 1:] - odd[..., :cols],
        odd[..., :cols] - odd[..., 1:],
    )
    del split, even, odd
    tiles = x.new_empty(4, 4, c, t, rows, cols)
    for j, col in enumerate(col_sums):
        r0, r1, r2, r3 = (col[:, :, i : i + 2 * rows : 2] for i in range(4))
        torch.sub(r0, r2, out=tiles[0, j])
        torch.add(r1, r2, out=tiles[1, j])
        torch.sub(r2, r1, out=tiles[2, j])
        torch.sub(r1, r3, out=tiles[3, j])
    return tiles.view(16, c, t * rows * cols)


def winograd_conv3d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.conv3d(x, weight, bias, padding=(0, 1, 1))` for a (out, in, 3, 3, 3) float32 kernel.

    `x` is (N, in, T + 2, H, W), already padded in time; the output is (N, out, T, H, W). Inference
    only (results are written into preallocated buffers, which autograd does not follow).
    """
    n, c, frames, h, w = x.shape
    t = frames - 2
    if t < 1:
        raise ValueError(f"a 3-tap time kernel needs at least 3 input frames, got {frames}")
    rows, cols = (h + 1) // 2, (w + 1) // 2
    kernel_transform, out_transform = _transforms(x.device)
    plane = rows * cols
    out_channels = weight.shape[0]
    out = x.new_empty(n, out_channels, t, 2 * rows, 2 * cols)
    for b in range(n):
        # Zero border of one pixel, plus one more where H or W is odd (cropped at the end).
        padded = F.pad(x[b], (1, 1 + 2 * cols - w, 1, 1 + 2 * rows - h))
        tiles = _input_tiles(padded, rows, cols)
        del padded
        for start in range(0, out_channels, _OUT_CHUNK):
            part = weight[start : start + _OUT_CHUNK]
            width = part.shape[0]
            # (16 positions, time tap, out, in): G g G^T for every (out, in, tap) 3x3 kernel, as one GEMM.
            taps = part.permute(3, 4, 2, 0, 1).reshape(9, -1)
            kernels = torch.mm(kernel_transform, taps).view(16, 3, width, c)
            del taps
            products = torch.bmm(kernels[:, 0], tiles[:, :, : t * plane])
            for tap in (1, 2):
                products.baddbmm_(kernels[:, tap], tiles[:, :, tap * plane : (tap + t) * plane])
            del kernels
            blocks = torch.mm(out_transform, products.view(16, -1)).view(2, 2, width, t, rows, cols)
            del products
            target = out[b, start : start + width].view(width, t, rows, 2, cols, 2)
            source = blocks.permute(2, 3, 4, 0, 5, 1)
            if bias is None:
                target.copy_(source)
            else:
                torch.add(source, bias[start : start + width].view(-1, 1, 1, 1, 1, 1), out=target)
    return out[:, :, :, :h, :w]
