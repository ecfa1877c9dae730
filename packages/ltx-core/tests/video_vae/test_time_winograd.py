"""Winograd F(2, 3) in time (`time_winograd`): a candidate for the native half-precision convolutions."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from ltx_core.model.video_vae import layers
from ltx_core.model.video_vae.layers import CausalConv3d
from ltx_core.model.video_vae.time_winograd import time_winograd_applies, time_winograd_conv3d
from ltx_core.tune import KERNEL_PATHS, KernelChoices, MachineKey

MACHINE = MachineKey("Some CPU", ("avx512_bf16",), "2.15.0")


def _direct_float64(x, weight, bias, stride=(1, 1), padding=(1, 1)):
    b = None if bias is None else bias.double()
    return F.conv3d(x.double(), weight.double(), b, (1, *stride), (0, *padding))


def _max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    assert got.shape == want.shape
    return float((got.double() - want).abs().max())


@pytest.mark.parametrize("frames", [3, 4, 5, 8], ids=lambda f: f"{f - 2}out")
@pytest.mark.parametrize("batch, with_bias", [(1, True), (2, False)])
def test_float32_matches_the_direct_convolution(frames, batch, with_bias):
    torch.manual_seed(0)
    x = torch.randn(batch, 6, frames, 5, 7)
    weight, bias = torch.randn(4, 6, 3, 3, 3), torch.randn(4) if with_bias else None
    want = _direct_float64(x, weight, bias)
    # Each output sums 27 x 6 terms; the transforms only add, subtract and halve: float32 rounding.
    assert _max_error(time_winograd_conv3d(x, weight, bias), want) <= 1e-5 * float(want.abs().max())


def test_spatial_stride_and_a_1x1_spatial_kernel():
    torch.manual_seed(0)
    x = torch.randn(1, 5, 6, 8, 9)
    weight = torch.randn(3, 5, 3, 3, 3)
    want = _direct_float64(x, weight, None, stride=(2, 2))
    assert _max_error(time_winograd_conv3d(x, weight, None, stride=(2, 2)), want) <= 1e-5 * float(want.abs().max())
    point = torch.randn(3, 5, 3, 1, 1)
    want = _direct_float64(x, point, None, padding=(0, 0))
    got = time_winograd_conv3d(x, point, None, padding=(0, 0))
    assert _max_error(got, want) <= 1e-5 * float(want.abs().max())


def test_bf16_rounds_within_a_few_times_the_direct_convolution():
    """bf16 in and out: the frame sums, the halved kernel sums and the four rounded products cost
    about 2-3x the direct bf16 convolution's error (measured 2.1-2.4x in max on the 22B decoder's
    layer shapes); a wrong transform coefficient is off by O(max|output|)."""
    torch.manual_seed(0)
    x = torch.randn(1, 64, 9, 6, 8).bfloat16()
    weight = (torch.randn(32, 64, 3, 3, 3) * (64 * 27) ** -0.5).bfloat16()
    bias = (torch.randn(32) * 0.1).bfloat16()
    want = _direct_float64(x, weight, bias)
    got = time_winograd_conv3d(x, weight, bias)
    assert got.dtype == torch.bfloat16
    direct = F.conv3d(x, weight, bias, padding=(0, 1, 1))
    assert _max_error(got, want) <= 4 * _max_error(direct, want)


def test_too_few_frames_or_another_time_kernel_is_refused():
    with pytest.raises(ValueError, match="at least 3 input frames, got 2"):
        time_winograd_conv3d(torch.randn(1, 2, 2, 4, 4), torch.randn(2, 2, 3, 3, 3), None)
    with pytest.raises(ValueError, match="3-tap time kernel, got 5 taps"):
        time_winograd_conv3d(torch.randn(1, 2, 7, 4, 4), torch.randn(2, 2, 5, 3, 3), None)


def test_only_3_tap_unit_stride_zero_padded_layers_can_take_it():
    assert time_winograd_applies(CausalConv3d(8, 4).conv)
    assert time_winograd_applies(CausalConv3d(8, 4, stride=(1, 2, 2)).conv)
    assert not time_winograd_applies(CausalConv3d(8, 4, stride=(2, 1, 1)).conv)
    assert not time_winograd_applies(CausalConv3d(8, 4, padding_mode="reflect").conv)
    assert not time_winograd_applies(CausalConv3d(8, 4, kernel_size=1).conv)


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = layers.time_winograd_conv3d
    monkeypatch.setattr(layers, "time_winograd_conv3d", lambda *a: calls.append(1) or original(*a))
    return calls


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("frames", [1, 2, 5])
def test_causal_conv_forced_through_it_matches_the_padded_direct_conv(causal, frames, monkeypatch):
    torch.manual_seed(0)
    conv = CausalConv3d(16, 8).to(torch.bfloat16)
    x = torch.randn(1, 16, frames, 4, 6).bfloat16()
    front, back = (2, 0) if causal else (1, 1)
    padded = torch.cat([x[:, :, :1]] * front + [x] + [x[:, :, -1:]] * back, dim=2)
    calls = _counting(monkeypatch)
    conv.use_kernel_choices(KernelChoices.fixed({"conv3d-half": "time-winograd"}))
    with torch.no_grad():
        want = _direct_float64(padded, conv.conv.weight, conv.conv.bias)
        got = conv(x, causal=causal)
        direct = conv.conv(padded)
    assert calls == [1]
    assert _max_error(got, want) <= 4 * max(_max_error(direct, want), 2**-8)


def test_not_taken_under_autograd_nor_with_float32_activations(monkeypatch):
    conv = CausalConv3d(8, 4).to(torch.bfloat16)
    conv.use_kernel_choices(KernelChoices.fixed({"conv3d-half": "time-winograd"}))
    calls = _counting(monkeypatch)
    conv(torch.randn(1, 8, 3, 4, 4).bfloat16().requires_grad_())  # writes into buffers: not under autograd
    with torch.no_grad():
        conv(torch.randn(1, 8, 3, 4, 4))  # float32 activations over bf16 weights: the float32 paths
    assert calls == []


@pytest.mark.parametrize("fastest", KERNEL_PATHS["conv3d-half"])
def test_half_conv_takes_the_path_timed_fastest(fastest, monkeypatch):
    """The choice logic with injected timings: the faster candidate is taken and recorded per op key."""
    seconds = dict.fromkeys(KERNEL_PATHS["conv3d-half"], 1.0)
    seconds[fastest] = 0.5
    asked: list[str] = []
    choices = KernelChoices(MACHINE, None, timer=lambda path, run: asked.append(path) or seconds[path], min_work=0)
    conv = CausalConv3d(8, 4).to(torch.bfloat16)
    conv.use_kernel_choices(choices)
    calls = _counting(monkeypatch)
    with torch.no_grad():
        conv(torch.randn(1, 8, 4, 4, 4).bfloat16(), causal=False)
        conv(torch.randn(1, 8, 4, 4, 4).bfloat16(), causal=False)  # same key: decided, not timed again
    assert sorted(asked) == sorted(KERNEL_PATHS["conv3d-half"])
    (key, decision), *rest = choices.decisions.items()
    assert not rest and key.startswith("conv3d-half/bfloat16/8x4.k3x3x3.")
    assert decision.path == fastest
    assert len(calls) == (2 if fastest == "time-winograd" else 0)
