"""Bad inputs are rejected with a message naming the value, before any convolution runs."""

from __future__ import annotations

import pytest
import torch

from ltx_core.model.video_vae import TilingConfig
from ltx_core.model.video_vae.layers import CausalConv3d


@pytest.fixture
def vae(make_vae):
    encoder, decoder = make_vae()
    calls: list[int] = []
    for module in (encoder, decoder):
        for conv in module.modules():
            if isinstance(conv, CausalConv3d):
                conv.register_forward_pre_hook(lambda _m, _a: calls.append(1))
    return encoder, decoder, calls


@pytest.mark.parametrize(
    "shape, message",
    [
        ((1, 3, 8, 64, 64), "num frames must be 8k\\+1 .* got 8"),
        ((1, 3, 10, 64, 64), "got 10"),
        ((1, 3, 0, 64, 64), "got 0"),
        ((1, 3, 9, 48, 64), "height must be a positive multiple of 32, got 48"),
        ((1, 3, 9, 64, 100), "width must be a positive multiple of 32, got 100"),
        ((1, 3, 9, 16, 64), "height must be a positive multiple of 32, got 16"),
        ((1, 4, 9, 64, 64), "must have 3 channels, got 4"),
        ((3, 9, 64, 64), "must be \\(B, C, F, H, W\\), got shape \\(3, 9, 64, 64\\)"),
    ],
)
def test_encoder_rejects_bad_pixels(vae, shape, message):
    encoder, _, calls = vae
    with pytest.raises(ValueError, match=message):
        encoder(torch.zeros(shape))
    with pytest.raises(ValueError, match=message):
        encoder.encode_tiled(torch.zeros(shape), TilingConfig())
    assert calls == []


@pytest.mark.parametrize(
    "shape, message",
    [
        ((1, 16, 2, 2, 2), "must have 8 channels, got 16"),
        ((1, 8, 2, 2), "got \\(1, 8, 2, 2\\)"),
        ((1, 8, 0, 2, 2), "non-empty"),
    ],
)
def test_decoder_rejects_bad_latents(vae, shape, message):
    _, decoder, calls = vae
    with pytest.raises(ValueError, match=message):
        decoder(torch.zeros(shape))
    with pytest.raises(ValueError, match=message):
        decoder.decode_tiled(torch.zeros(shape), TilingConfig())
    assert calls == []


def test_decode_video_is_one_video_at_a_time(vae):
    _, decoder, calls = vae
    with pytest.raises(ValueError, match="batch 1\\), got batch 2"):
        decoder.decode_video(torch.zeros(2, 8, 1, 1, 1))
    assert calls == []


def test_decode_video_frames_in_unit_range(vae):
    _, decoder, _ = vae
    latent = torch.randn(1, 8, 2, 1, 2, generator=torch.Generator().manual_seed(0)) * 3
    (frames,) = list(decoder.decode_video(latent))
    assert frames.shape == (9, 32, 64, 3)
    assert frames.min() >= 0 and frames.max() <= 1
    torch.testing.assert_close(frames, ((decoder(latent)[0].permute(1, 2, 3, 0) + 1) / 2).clamp(0, 1))


def test_timestep_shape_is_checked(make_vae):
    _, decoder = make_vae(timestep_conditioning=True)
    with pytest.raises(ValueError, match="scalar or have shape \\(1,\\), got \\(2,\\)"):
        decoder(torch.zeros(1, 8, 1, 1, 1), timestep=torch.tensor([0.1, 0.2]))
    with pytest.raises(ValueError, match="latent's shape \\(1, 8, 1, 1, 1\\), got \\(1, 8, 2, 1, 1\\)"):
        decoder(torch.zeros(1, 8, 1, 1, 1), noise=torch.zeros(1, 8, 2, 1, 1))


def test_reflect_padding_needs_two_latent_cells_per_axis(make_vae):
    encoder, decoder = make_vae(spatial_padding_mode="reflect")
    with pytest.raises(ValueError, match="height must be at least 64 .*reflect.*got 32"):
        encoder(torch.zeros(1, 3, 9, 32, 64))
    with pytest.raises(ValueError, match="at least 2 x 2"):
        decoder(torch.zeros(1, decoder.config.latent_channels, 2, 1, 2))
    # Two cells per axis are enough.
    assert encoder(torch.zeros(1, 3, 9, 64, 64)).shape[-2:] == (2, 2)
