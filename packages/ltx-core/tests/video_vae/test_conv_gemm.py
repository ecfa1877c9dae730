"""The unfolded-window GEMM (`conv_gemm`): a candidate path for 3-D convolutions over small frames."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.video_vae.conv_gemm import MAX_COLUMN_BYTES, gemm_applies, gemm_conv3d
from ltx_core.model.video_vae.layers import CausalConv3d
from ltx_core.tune import KernelChoices


def _direct_float64(x, weight, bias, stride=(1, 1), padding=(1, 1)) -> torch.Tensor:
    b = None if bias is None else bias.double()
    return torch.nn.functional.conv3d(x.double(), weight.double(), b, (1, *stride), (0, *padding))


@pytest.mark.parametrize(
    "batch, frames, kernel, stride, padding, with_bias",
    [
        (1, 5, (3, 3, 3), (1, 1), (1, 1), True),
        (2, 3, (3, 3, 3), (1, 1), (1, 1), False),  # batch 2, exactly one output frame
        (1, 6, (3, 3, 3), (2, 2), (1, 1), True),  # spatial stride
        (1, 4, (3, 1, 1), (1, 1), (0, 0), True),  # time-only kernel, no spatial padding
        (1, 4, (1, 3, 3), (1, 1), (1, 1), True),  # space-only kernel
    ],
)
def test_matches_conv3d_in_float32(batch, frames, kernel, stride, padding, with_bias):
    torch.manual_seed(0)
    x = torch.randn(batch, 6, frames, 7, 9)
    weight = torch.randn(5, 6, *kernel)
    bias = torch.randn(5) if with_bias else None
    want = _direct_float64(x, weight, bias, stride, padding)
    got = gemm_conv3d(x, weight, bias, stride, padding)
    assert got.shape == want.shape and got.dtype == torch.float32
    # float32 rounding of 6 x 27 terms; a wrong row order (tap or channel) is off by O(max |output|)
    assert float((got.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())


def test_bf16_rounds_like_the_direct_bf16_convolution():
    torch.manual_seed(0)
    x = torch.randn(1, 32, 5, 8, 12).bfloat16()
    weight = (torch.randn(16, 32, 3, 3, 3) / 30).bfloat16()
    bias = torch.randn(16).bfloat16()
    want = _direct_float64(x, weight, bias)
    got = gemm_conv3d(x, weight, bias)
    direct = torch.nn.functional.conv3d(x, weight, bias, padding=(0, 1, 1))
    assert got.dtype == torch.bfloat16
    error, direct_error = (float((t.double() - want).abs().max()) for t in (got, direct))
    assert error <= 2 * max(direct_error, 2**-8 * float(want.abs().max()))


def test_refuses_an_input_that_does_not_fit_the_kernel():
    with pytest.raises(ValueError, match="does not fit"):
        gemm_conv3d(torch.randn(1, 4, 2, 4, 4), torch.randn(2, 4, 3, 3, 3), None)
    with pytest.raises(ValueError, match="does not fit"):
        gemm_conv3d(torch.randn(1, 3, 5, 4, 4), torch.randn(2, 4, 3, 3, 3), None)


def test_applies_to_plain_small_convolutions_only():
    small = (1, 8, 5, 8, 12)
    assert gemm_applies(CausalConv3d(8, 4).conv, small, torch.bfloat16)
    assert gemm_applies(CausalConv3d(8, 4, stride=(1, 2, 2)).conv, small, torch.float32)
    assert not gemm_applies(CausalConv3d(8, 4, stride=(2, 1, 1)).conv, small, torch.float32)
    assert not gemm_applies(CausalConv3d(8, 4, padding_mode="reflect").conv, small, torch.float32)
    # the unfolded input (in x 27 taps x output positions) must stay within MAX_COLUMN_BYTES
    positions = MAX_COLUMN_BYTES // (8 * 27 * 2)
    assert gemm_applies(CausalConv3d(8, 4).conv, (1, 8, 3, 1, positions), torch.bfloat16)
    assert not gemm_applies(CausalConv3d(8, 4).conv, (1, 8, 3, 1, positions + 1), torch.bfloat16)
    assert not gemm_applies(CausalConv3d(8, 4).conv, (1, 8, 3, 1, positions), torch.float32)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("frames", [1, 2, 4])
def test_causal_conv_forced_through_it_matches_the_padded_direct_conv(causal, frames, conv_paths_taken):
    torch.manual_seed(0)
    conv = CausalConv3d(6, 4).to(torch.bfloat16)
    x = torch.randn(1, 6, frames, 4, 6).bfloat16()
    front, back = (2, 0) if causal else (1, 1)
    padded = torch.cat([x[:, :, :1]] * front + [x] + [x[:, :, -1:]] * back, dim=2)
    conv.use_kernel_choices(KernelChoices.fixed({"conv3d-half": "gemm"}))
    with torch.no_grad():
        got = conv(x, causal=causal)
        direct = conv.conv(padded)
    assert conv_paths_taken == ["gemm"]
    torch.testing.assert_close(got, direct, rtol=2**-7, atol=2**-7 * float(direct.abs().max()))
