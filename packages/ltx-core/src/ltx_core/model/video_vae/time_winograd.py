"""3-tap time convolution through Winograd F(2, 3) in time, each product a 2-D convolution in space.

Two consecutive output frames y0, y1 of a 3-tap time kernel (g0, g1, g2) over input frames d0..d3
are, exactly,

    m0 = (d0 - d2) * g0              m1 = (d1 + d2) * (g0 + g1 + g2) / 2
    m2 = (d2 - d1) * (g0 - g1 + g2) / 2                 m3 = (d1 - d3) * g2
    y0 = m0 + m1 + m2                y1 = m1 - m2 - m3

where each "*" is the layer's spatial (kh x kw) convolution of a whole frame: four 2-D convolutions
per pair of output frames instead of six, 2/3 of the multiply-adds, and every transform is an add
or subtract of whole frames (coefficients 0, +-1, +-1/2). Unlike F(4x4, 3x3) in space, whose
transforms scale terms by up to 8 (with bf16 tiles, kernels and products: 17x the direct bf16
convolution's mean error, 25x its max, on the 22B decoder's 512-channel layer), this rounds about
2-3x the direct convolution's error in bf16, so it is a candidate for the native half-precision
convolutions (timed per layer shape against the direct one, see `CausalConv3d`).
An odd number of output frames drops the last pair's second frame and its `m3` term.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def time_winograd_applies(conv: torch.nn.Conv3d) -> bool:
    """Whether `conv` is a 3-tap time convolution (time stride and dilation 1, zero spatial padding,
    one group) that `time_winograd_conv3d` computes."""
    return (
        conv.kernel_size[0] == 3
        and conv.stride[0] == 1
        and tuple(conv.dilation) == (1, 1, 1)
        and conv.padding[0] == 0
        and conv.padding_mode == "zeros"
        and conv.groups == 1
    )


def time_kernels(weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The four spatial kernels (g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2) of a (out, in, 3, kh, kw) kernel,
    in its dtype; the sums are formed in float32 and rounded once."""
    g0, g1, g2 = weight.unbind(2)
    outer = g0.float() + g2
    plus = (outer + g1).mul_(0.5).to(weight.dtype)
    minus = (outer - g1).mul_(0.5).to(weight.dtype)
    return g0.contiguous(), plus, minus, g2.contiguous()


def time_winograd_conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (1, 1),
) -> torch.Tensor:
    """`F.conv3d(x, weight, bias, (1, *stride), (0, *padding))` for a (out, in, 3, kh, kw) kernel.

    `x` is (N, in, T + 2, H, W), already padded in time; the output is (N, out, T, H', W'), in `x`'s
    dtype (weights of the same dtype). Inference only (writes into a preallocated output).
    """
    n, _, frames, _, _ = x.shape
    t = frames - 2
    if t < 1:
        raise ValueError(f"a 3-tap time kernel needs at least 3 input frames, got {frames}")
    if weight.shape[2] != 3:
        raise ValueError(f"time Winograd F(2, 3) takes a 3-tap time kernel, got {weight.shape[2]} taps")
    pairs, full_pairs = (t + 1) // 2, t // 2  # an odd T has no second frame in its last pair
    k0, k_plus, k_minus, k2 = time_kernels(weight)

    def spatial(frames_first: torch.Tensor, kernel: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return F.conv2d(frames_first, kernel, b, stride, padding)

    def combined(op, a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # Written frame-major and contiguous: the layout conv2d takes without another copy.
        return op(a, c, out=torch.empty(a.shape, dtype=a.dtype, device=a.device))

    out: torch.Tensor | None = None
    for b in range(n):
        # (frames, in, H, W) views: the pair p of output frames reads input frames 2p .. 2p + 3.
        src = x[b].transpose(0, 1)
        d0, d1, d2 = (src[j : j + 2 * pairs : 2] for j in range(3))
        d3 = src[3 : 3 + 2 * full_pairs : 2]
        # The bias enters through m1, which both output frames add once.
        m1 = spatial(combined(torch.add, d1, d2), k_plus, bias)
        m2 = spatial(combined(torch.sub, d2, d1), k_minus)
        m0 = spatial(combined(torch.sub, d0, d2), k0)
        if out is None:
            out = x.new_empty(n, m0.shape[1], t, *m0.shape[2:])
        even = out[b, :, 0::2].transpose(0, 1)  # output frames 0, 2, 4, ... as (pairs, out, H', W')
        torch.add(m0, m1, out=even).add_(m2)
        del m0
        if full_pairs:
            m3 = spatial(combined(torch.sub, d1[:full_pairs], d3), k2)
            odd = out[b, :, 1::2].transpose(0, 1)
            torch.sub(m1[:full_pairs], m2[:full_pairs], out=odd).sub_(m3)
    assert out is not None
    return out
