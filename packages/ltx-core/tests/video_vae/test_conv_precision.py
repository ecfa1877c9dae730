"""The video VAE's Conv3d: per-CPU half-precision mode, cached float32 weights, causal padding."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.video_vae.layers import CausalConv3d, Conv3d
from ltx_core.tune import KERNEL_PATHS, KernelChoices


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


def _replicate_padded(x: torch.Tensor, front: int, back: int) -> torch.Tensor:
    return torch.cat([x[:, :, :1]] * front + [x] + [x[:, :, -1:]] * back, dim=2)


@pytest.mark.parametrize("frames", [1, 2, 3, 5])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_causal_padding_repeats_edge_frames(causal, frames, padding_mode):
    # On the CPU in float32 the "merged" path runs the edge frames with merged time taps instead of a
    # padded copy: the same sums in another order, so equal to float32 rounding, never more.
    torch.manual_seed(0)
    conv = CausalConv3d(6, 4, kernel_size=3, padding_mode=padding_mode)
    conv.use_kernel_choices(KernelChoices.fixed("conv3d-f32=merged"))
    x = torch.randn(1, 6, frames, 5, 4)
    front, back = (2, 0) if causal else (1, 1)
    want = conv.conv(_replicate_padded(x, front, back))
    got = conv(x, causal=causal)
    assert got.shape == want.shape == (1, 4, frames, 5, 4)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # a wrong tap merge (e.g. the edge frame counted once) is off by O(1), far above that tolerance
    assert (got - want).abs().max() < 1e-5 * want.abs().max()


def test_merged_edges_with_bf16_weights_match_the_float32_cast_path():
    torch.manual_seed(0)
    conv = CausalConv3d(6, 4, kernel_size=3).to(torch.bfloat16)
    conv.use_kernel_choices(KernelChoices.fixed("conv3d-f32=merged"))
    conv.conv.cpu_half_mode = "float32"
    x = torch.randn(1, 6, 4, 5, 4)
    w, b = conv.conv.weight.float(), conv.conv.bias.float()
    want = torch.nn.functional.conv3d(_replicate_padded(x, 1, 1), w, b, padding=(0, 1, 1))
    got = conv(x, causal=False)  # float32 activations, as the decoder keeps them
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert conv(x.bfloat16(), causal=False).dtype == torch.bfloat16


def test_strided_time_conv_still_pads():
    torch.manual_seed(0)
    conv = CausalConv3d(3, 2, kernel_size=3, stride=(2, 1, 1))
    x = torch.randn(1, 3, 5, 4, 4)
    assert torch.equal(conv(x, causal=True), conv.conv(_replicate_padded(x, 2, 0)))


@pytest.mark.parametrize("path", KERNEL_PATHS["conv3d-f32"])
@pytest.mark.parametrize("causal", [True, False])
def test_each_cpu_float32_path_matches_torch_conv3d(path, causal, conv_paths_taken):
    """Force each way a CPU float32 CausalConv3d can run (timed per layer shape otherwise) and compare
    with torch's conv3d of the replicate-padded input in float64."""
    taken = conv_paths_taken
    torch.manual_seed(0)
    conv = CausalConv3d(8, 4, kernel_size=3)
    conv.use_kernel_choices(KernelChoices.fixed({"conv3d-f32": path}))
    x = torch.randn(2, 8, 4, 7, 9)
    front, back = (2, 0) if causal else (1, 1)
    padded = _replicate_padded(x, front, back).double()
    with torch.no_grad():
        want = torch.nn.functional.conv3d(padded, conv.conv.weight.double(), conv.conv.bias.double(), padding=(0, 1, 1))
        got = conv(x, causal=causal)
    assert taken == ([] if path == "direct" else [path])
    assert got.shape == want.shape == (2, 4, 4, 7, 9)
    # float32 rounding of 27 x 8 terms (Winograd's transforms round a few times more); a wrong tap
    # or transform entry is off by O(max |output|)
    assert float((got.double() - want).abs().max()) <= 1e-6 * float(want.abs().max()) * (27 * 8) ** 0.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 12, 3, 5, 7), (1, 128, 2, 4, 6), (3, 6, 10)])
def test_pixel_norm_is_the_rms_over_channels(dtype, shape):
    """PixelNorm (channel sums as a matrix product) against x / sqrt(mean(x^2) + eps) in float64, for
    batches, non-power-of-two widths and any number of trailing axes: within the dtype's rounding."""
    from ltx_core.model.video_vae.layers import PixelNorm

    torch.manual_seed(0)
    x = (torch.randn(shape) * torch.rand(shape[0], 1, *shape[2:]) * 4).to(dtype)
    x64 = x.double()
    want = x64 / torch.sqrt(x64.square().mean(dim=1, keepdim=True) + 1e-8)
    got = PixelNorm()(x)
    assert got.dtype == dtype and got.shape == x.shape
    tolerance = 1e-6 if dtype == torch.float32 else 2**-6  # a few roundings of values of order 1
    assert float((got.double() - want).abs().max()) <= tolerance * float(want.abs().max())
