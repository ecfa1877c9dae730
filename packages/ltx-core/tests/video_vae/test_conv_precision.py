"""The video VAE's Conv3d: per-CPU half-precision mode, cached float32 weights, causal padding."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.video_vae.layers import CausalConv3d, Conv3d


def _conv(mode: str) -> Conv3d:
    torch.manual_seed(0)
    conv = Conv3d(8, 8, 3, padding=1).to(torch.bfloat16)
    conv.cpu_half_mode = mode
    return conv


def test_native_and_float32_modes_agree_to_bf16_rounding():
    x = torch.randn(1, 8, 4, 6, 6).to(torch.bfloat16)
    native, cast = _conv("native")(x), _conv("float32")(x)
    assert native.dtype == cast.dtype == torch.bfloat16
    # both accumulate in float32 and round once to bf16; only the summation order differs
    ulp = 2.0 ** (torch.floor(torch.log2(cast.float().abs().clamp(min=1e-3))) - 7)
    assert bool(((native.float() - cast.float()).abs() <= 2 * ulp).all())


def test_float32_weights_are_converted_once_and_refreshed_when_weights_change():
    conv = _conv("float32")
    x = torch.randn(1, 8, 3, 5, 5).to(torch.bfloat16)
    conv(x)
    first = conv.__dict__["_float_cache"][1]
    conv(x)
    assert conv.__dict__["_float_cache"][1] is first, "weights were converted again"
    with torch.no_grad():
        conv.weight.mul_(2)
    out = conv(x)
    assert conv.__dict__["_float_cache"][1] is not first
    want = torch.nn.functional.conv3d(x.float(), conv.weight.float(), conv.bias.float(), padding=1).to(torch.bfloat16)
    assert torch.equal(out, want)


@pytest.mark.parametrize("causal", [True, False])
def test_causal_padding_repeats_edge_frames(causal):
    torch.manual_seed(0)
    conv = CausalConv3d(3, 2, kernel_size=3)
    x = torch.randn(1, 3, 5, 4, 4)
    front, back = (2, 0) if causal else (1, 1)
    padded = torch.cat([x[:, :, :1]] * front + [x] + [x[:, :, -1:]] * back, dim=2)
    assert torch.equal(conv(x, causal=causal), conv.conv(padded))
