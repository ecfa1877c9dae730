"""Winograd F(4x4, 3x3) 3x3x3 convolution (wide CPU float32 layers of the video VAE)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from ltx_core.model.video_vae import winograd
from ltx_core.model.video_vae.layers import CausalConv3d
from ltx_core.model.video_vae.winograd import winograd_applies, winograd_conv3d
from ltx_core.tune import KernelChoices


def _direct_float64(x, weight, bias, **kwargs):
    return F.conv3d(x.double(), weight.double(), None if bias is None else bias.double(), **kwargs)


def _close_to_float32_rounding(got: torch.Tensor, want: torch.Tensor, in_channels: int) -> None:
    """`want` is the float64 convolution. Each output sums 27 x `in_channels` terms; float32 rounding
    (and F(4x4, 3x3)'s transforms, which scale terms by up to 8 before they cancel) grows like the
    square root of that count: measured up to 1.7e-7 x max|output| x sqrt(terms) here, 2-7x the
    direct float32 convolution's. A wrong transform entry is off by O(max|output|)."""
    assert got.shape == want.shape
    bound = 1e-6 * float(want.abs().max()) * (27 * in_channels) ** 0.5
    assert float((got.double() - want).abs().max()) <= bound


@pytest.mark.parametrize("shape", [(1, 8, 3, 6, 8), (2, 8, 4, 5, 7), (1, 8, 3, 1, 1), (1, 8, 5, 2, 9)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_matches_the_direct_convolution(shape, with_bias):
    torch.manual_seed(0)
    x = torch.randn(shape)
    weight = torch.randn(6, shape[1], 3, 3, 3)
    bias = torch.randn(6) if with_bias else None
    want = _direct_float64(x, weight, bias, padding=(0, 1, 1))
    _close_to_float32_rounding(winograd_conv3d(x, weight, bias), want, x.shape[1])


def test_more_output_channels_than_one_pass(monkeypatch):
    monkeypatch.setattr(winograd, "_OUT_CHUNK", 4)
    torch.manual_seed(0)
    x, weight, bias = torch.randn(1, 5, 3, 4, 4), torch.randn(10, 5, 3, 3, 3), torch.randn(10)
    want = _direct_float64(x, weight, bias, padding=(0, 1, 1))
    _close_to_float32_rounding(winograd_conv3d(x, weight, bias), want, x.shape[1])


def test_too_few_frames_is_refused():
    with pytest.raises(ValueError, match="at least 3 input frames, got 2"):
        winograd_conv3d(torch.randn(1, 2, 2, 4, 4), torch.randn(2, 2, 3, 3, 3), None)


def test_only_plain_3x3x3_layers_can_take_it():
    assert winograd_applies(CausalConv3d(8, 4).conv)
    assert not winograd_applies(CausalConv3d(8, 4, padding_mode="reflect").conv)
    assert not winograd_applies(CausalConv3d(8, 4, stride=(1, 2, 2)).conv)
    assert not winograd_applies(CausalConv3d(8, 4, kernel_size=1).conv)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("frames", [1, 4])
def test_causal_conv_through_winograd_matches_padding(causal, frames, monkeypatch):
    torch.manual_seed(0)
    conv = CausalConv3d(16, 4).to(torch.bfloat16)  # bf16 weights, float32 maths
    conv.conv.cpu_half_mode = "float32"
    conv.use_kernel_choices(KernelChoices.fixed("winograd"))
    calls = []
    monkeypatch.setattr(
        "ltx_core.model.video_vae.layers.winograd_conv3d", lambda *a: calls.append(1) or winograd_conv3d(*a)
    )
    x = torch.randn(1, conv.conv.in_channels, frames, 3, 5)
    front, back = (2, 0) if causal else (1, 1)
    padded = torch.cat([x[:, :, :1]] * front + [x] + [x[:, :, -1:]] * back, dim=2)
    with torch.no_grad():
        want = _direct_float64(padded, conv.conv.weight, conv.conv.bias, padding=(0, 1, 1))
        got = conv(x, causal=causal)
    assert calls == [1]
    _close_to_float32_rounding(got, want, x.shape[1])
    conv(x.clone().requires_grad_(), causal=causal)  # tracked by autograd: not Winograd (writes into buffers)
    assert calls == [1]


def test_long_inputs_are_taken_a_few_frames_at_a_time(monkeypatch):
    """The transformed tiles and products are bounded (`_BUFFER_BYTES`): the input is transformed a few
    frames at a time, and the result is the same convolution."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(1, 4, 9, 8, 8), torch.randn(3, 4, 3, 3, 3), torch.randn(3)
    # 36 positions x 2 x 2 tiles x (twice the input channels + 1.5 x the output channels)
    per_frame = 36 * 4 * (2 * 4 + 1.5 * 3) * x.element_size()
    monkeypatch.setattr(winograd, "_BUFFER_BYTES", 3 * per_frame)
    monkeypatch.setattr(winograd, "_MIN_PASS_TILES", 1)
    tiled_frames, original = [], winograd._input_tiles
    monkeypatch.setattr(
        winograd, "_input_tiles", lambda frames, *a: tiled_frames.append(frames.shape[1]) or original(frames, *a)
    )
    want = _direct_float64(x, weight, bias, padding=(0, 1, 1))
    _close_to_float32_rounding(winograd_conv3d(x, weight, bias), want, x.shape[1])
    assert tiled_frames == [5, 5, 3]  # 7 output frames: 3 + 3 + 1, each with its 2 time-padding frames
