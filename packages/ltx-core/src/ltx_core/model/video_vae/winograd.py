"""3x3x3 convolution on the CPU through Winograd F(4x4, 3x3) in height and width.

Each 4x4 block of output pixels is computed from a 6x6 input tile (tiles overlap by 2) in a
transformed basis where the 3x3 spatial kernel becomes 36 independent products, one per transformed
position: per time tap, 36 GEMMs of (out, in) x (in, tiles), i.e. 36 multiply-adds per 16 outputs
and input channel instead of 144 -- 1/4 of the direct convolution's. The three transforms (input
tiles, kernels, output blocks) are small GEMMs with the Kronecker products of the 1-D transform
matrices (interpolation points 0, +-1, +-2), made per call: they only pay for wide layers over large
frames (timed per layer shape, see `CausalConv3d`). The points +-2 scale some terms by up to 8 before
they cancel, so the result differs from the direct convolution by a few float32 roundings of the
output's range (measured ~1e-5 relative on the 22B decoder's layers, like oneDNN against itself in another order).
"""

from __future__ import annotations

import functools

import torch
from torch.nn import functional as F

# Output channels per pass: bounds the transformed kernels and products held at once (~90 MB at 512 in
# over 9 x 32 x 48). 256 rather than 512: same CPU time in the 22B decode, ~80 MiB lower peak RSS.
_OUT_CHUNK = 256
# Bytes of transformed tiles (and their unfolded copy), products and output blocks held at once,
# bounded by taking output frames a few at a time: over the 128-channel 17 x 64 x 96 layers of the
# 22B decoder all frames at once held ~360 MB more than the direct convolution, which raised the
# float32 decode's peak RSS to 1.08-1.10 of the reference's.
_BUFFER_BYTES = 48 * 2**20
# ... but at least this many tiles per GEMM: the 512-channel layers over 32 x 48 frames (96 tiles a
# frame) took 1.9 CPU s in 3-frame passes against 1.0 s in one pass.
_MIN_PASS_TILES = 1024
_TILE, _BLOCK = 6, 4  # input tile and output block edge of F(4x4, 3x3)


@functools.cache
def _transforms(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """2-D input (36 x 36), kernel (36 x 9) and output (16 x 36) transforms of F(4x4, 3x3).

    Built in float64 from the exact 1-D matrices and rounded once (the kernel one has thirds).
    """
    input_1d = torch.tensor(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        dtype=torch.float64,
    )
    kernel_1d = torch.tensor(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        dtype=torch.float64,
    )
    output_1d = torch.tensor(
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], dtype=torch.float64
    )
    return tuple(torch.kron(m, m).to(device=device, dtype=torch.float32) for m in (input_1d, kernel_1d, output_1d))


def winograd_applies(conv: torch.nn.Conv3d) -> bool:
    """Whether `conv` is a plain 3x3x3 convolution (stride 1, zero spatial padding 1, one group) that
    `winograd_conv3d` computes. Whether it is faster is measured per layer shape (`CausalConv3d`):
    on the 22B decoder's layers (2 threads) it took 0.39-0.53x of oneDNN's direct convolution for
    256-512 channels over 32 x 48 frames, but 1.28x for 128 channels over 64 x 96 and up to 3x for
    the wide layers over 8 x 12 frames, where the per-call kernel transform dominates.
    """
    return (
        tuple(conv.kernel_size) == (3, 3, 3)
        and tuple(conv.stride) == (1, 1, 1)
        and tuple(conv.dilation) == (1, 1, 1)
        and tuple(conv.padding) == (0, 1, 1)
        and conv.padding_mode == "zeros"
        and conv.groups == 1
    )


def _input_tiles(frames: torch.Tensor, rows: int, cols: int, transform: torch.Tensor) -> torch.Tensor:
    """(C, T, 4*rows + 2, 4*cols + 2) zero-padded frames -> (36, C, T * rows * cols) transformed tiles."""
    c, t = frames.shape[:2]
    tiles = frames.unfold(2, _TILE, _BLOCK).unfold(3, _TILE, _BLOCK)  # (C, T, rows, cols, 6, 6), a view
    return torch.mm(transform, tiles.reshape(-1, _TILE * _TILE).t()).view(_TILE * _TILE, c, t * rows * cols)


def winograd_conv3d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.conv3d(x, weight, bias, padding=(0, 1, 1))` for a (out, in, 3, 3, 3) float32 kernel.

    `x` is (N, in, T + 2, H, W), already padded in time; the output is (N, out, T, H, W). Inference
    only (results are written into preallocated buffers, which autograd does not follow).
    """
    n, c, frames, h, w = x.shape
    t = frames - 2
    if t < 1:
        raise ValueError(f"a 3-tap time kernel needs at least 3 input frames, got {frames}")
    rows, cols = -(-h // _BLOCK), -(-w // _BLOCK)
    input_transform, kernel_transform, output_transform = _transforms(x.device)
    plane = rows * cols
    positions = _TILE * _TILE
    out_channels = weight.shape[0]
    width = min(out_channels, _OUT_CHUNK)
    per_frame = positions * plane * (2 * c + 1.5 * width) * x.element_size()
    frames_per_pass = max(1, int(_BUFFER_BYTES // per_frame), -(-_MIN_PASS_TILES // plane))
    # With one pass over the output channels the transformed kernels serve every time pass; with
    # several they are transformed again per time pass (holding them all would cost more memory).
    kept_kernels: dict[int, torch.Tensor] | None = {} if out_channels <= _OUT_CHUNK else None

    def transformed_kernels(start: int) -> torch.Tensor:
        if kept_kernels is not None and start in kept_kernels:
            return kept_kernels[start]
        part = weight[start : start + _OUT_CHUNK]
        # (36 positions, time tap, out, in): G g G^T for every (out, in, tap) 3x3 kernel, as one GEMM.
        taps = part.permute(3, 4, 2, 0, 1).reshape(9, -1)
        kernels = torch.mm(kernel_transform, taps).view(positions, 3, part.shape[0], c)
        if kept_kernels is not None:
            kept_kernels[start] = kernels
        return kernels

    out = x.new_empty(n, out_channels, t, _BLOCK * rows, _BLOCK * cols)
    for b in range(n):
        for first in range(0, t, frames_per_pass):
            count = min(frames_per_pass, t - first)
            window = x[b, :, first : first + count + 2]
            # Zero border of one pixel, plus up to 3 more where H or W is not a multiple of 4 (cropped at the end).
            padded = F.pad(window, (1, 1 + _BLOCK * cols - w, 1, 1 + _BLOCK * rows - h))
            tiles = _input_tiles(padded, rows, cols, input_transform)
            del padded
            for start in range(0, out_channels, _OUT_CHUNK):
                kernels = transformed_kernels(start)
                width = kernels.shape[2]
                products = torch.bmm(kernels[:, 0], tiles[:, :, : count * plane])
                for tap in (1, 2):
                    products.baddbmm_(kernels[:, tap], tiles[:, :, tap * plane : (tap + count) * plane])
                del kernels
                blocks = torch.mm(output_transform, products.view(positions, -1))
                del products
                blocks = blocks.view(_BLOCK, _BLOCK, width, count, rows, cols)
                target = out[b, start : start + width, first : first + count]
                target = target.view(width, count, rows, _BLOCK, cols, _BLOCK)
                source = blocks.permute(2, 3, 4, 0, 5, 1)
                if bias is None:
                    target.copy_(source)
                else:
                    torch.add(source, bias[start : start + width].view(-1, 1, 1, 1, 1, 1), out=target)
    return out[:, :, :, :h, :w]
