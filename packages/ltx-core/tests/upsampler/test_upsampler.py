"""Latent upsampler behaviour on tiny random models built from configs (no checkpoint needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from ltx_core.loader import CheckpointError, build_model
from ltx_core.model.upsampler import (
    LATENT_UPSAMPLER,
    LatentUpsampler,
    LatentUpsamplerConfig,
    latent_upsampler_from_config,
    shuffle_channels_into_axes,
    upsample_video_latent,
)

TINY = {"in_channels": 8, "mid_channels": 32, "num_blocks_per_stage": 1, "dims": 3}


def _tiny(**overrides) -> LatentUpsampler:
    torch.manual_seed(0)
    return latent_upsampler_from_config({**TINY, **overrides}).eval()


def test_shuffle_places_channel_blocks_like_a_pixel_shuffle():
    x = torch.randn(2, 3 * 4, 5, 7)
    torch.testing.assert_close(shuffle_channels_into_axes(x, (2, 2)), F.pixel_shuffle(x, 2), atol=0, rtol=0)


def test_shuffle_three_axes_index_mapping():
    b, c, t, s = 1, 2, 2, 3
    x = torch.randn(b, c * t * s * s, 2, 2, 3)
    y = shuffle_channels_into_axes(x, (t, s, s))
    assert y.shape == (b, c, 4, 6, 9)
    for ch in range(c):
        for i in range(t):
            for j in range(s):
                for k in range(s):
                    source = x[:, ch * t * s * s + i * s * s + j * s + k]
                    torch.testing.assert_close(y[:, ch, i::t, j::s, k::s], source, atol=0, rtol=0)


@torch.no_grad()
def test_temporal_x2_doubles_frames_and_drops_the_first():
    model = _tiny(spatial_upsample=False, temporal_upsample=True)
    latent = torch.randn(2, 8, 3, 4, 5)
    captured = {}
    model.upsampler.register_forward_hook(lambda m, i, o: captured.__setitem__("shuffled", o))
    model.upsampler[0].register_forward_hook(lambda m, i, o: captured.__setitem__("conv", o))
    out = model(latent)
    assert out.shape == (2, 8, 5, 4, 5)
    assert model.output_size(3, 4, 5) == (5, 4, 5)

    conv, shuffled = captured["conv"], captured["shuffled"]
    assert shuffled.shape[2] == 6  # all 2F frames before the first one is dropped
    # conv channel 2c + p becomes frame 2f + p of channel c
    for p in range(2):
        torch.testing.assert_close(shuffled[:, :, p::2], conv[:, p::2], atol=0, rtol=0)

    # The rest of the network sees the shuffled frames 1..2F-1.
    x = shuffled[:, :, 1:]
    for block in model.post_upsample_res_blocks:
        x = block(x)
    torch.testing.assert_close(model.final_conv(x), out)


@torch.no_grad()
def test_spatiotemporal_upsampler_shape():
    model = _tiny(spatial_upsample=True, temporal_upsample=True)
    out = model(torch.randn(1, 8, 2, 3, 4))
    assert out.shape == (1, 8, 3, 6, 8) == (1, 8, *model.output_size(2, 3, 4))


RATIONAL_CASES = [(1.5, (3, 5)), (1.5, (4, 6)), (0.75, (8, 5)), (4.0, (2, 3)), (2.0, (3, 3))]


@pytest.mark.parametrize(("scale", "size"), RATIONAL_CASES)
@torch.no_grad()
def test_rational_output_size_matches_forward(scale, size):
    model = _tiny(rational_resampler=True, spatial_scale=scale)
    out = model(torch.randn(1, 8, 2, *size))
    assert tuple(out.shape[2:]) == model.output_size(2, *size)


@torch.no_grad()
def test_frames_are_independent_for_spatial_upsamplers_with_2d_convs():
    model = _tiny(dims=2)
    latent = torch.randn(1, 8, 3, 2, 3)
    out = model(latent)
    assert out.shape == (1, 8, 3, 4, 6)
    torch.testing.assert_close(out[:, :, 1:2], model(latent[:, :, 1:2]))


def test_stats_wrapper_un_normalizes_then_normalizes():
    class Affine:
        def un_normalize(self, x):
            return x * 3.0 + 1.0

        def normalize(self, x):
            return (x - 1.0) / 3.0

    calls = []

    def fake_upsampler(x):
        calls.append(x)
        return x * 2.0

    latent = torch.randn(1, 4, 1, 2, 2)
    out = upsample_video_latent(latent, fake_upsampler, Affine())
    torch.testing.assert_close(calls[0], latent * 3.0 + 1.0)
    torch.testing.assert_close(out, ((latent * 3.0 + 1.0) * 2.0 - 1.0) / 3.0)


def test_wrong_input_shape_is_rejected():
    with pytest.raises(ValueError, match=r"\(B, 8, F, H, W\)"):
        _tiny()(torch.randn(1, 4, 2, 2, 2))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"transformer": {}, "vae": {}}, "single-file"),
        ({"foo": {"a": 1}}, "not a latent upsampler"),
        ({"_class_name": "CausalVideoAutoencoder"}, "_class_name"),
        ({"spatial_scale": 1.5}, "rational_resampler"),
        ({"spatial_scale": 3.0, "rational_resampler": True}, "accepted"),
        ({"mid_channels": 48}, "multiple of 32"),
        ({"dims": 1}, "dims"),
        ({"spatial_upsample": False, "temporal_upsample": False}, "neither"),
        ({"dims": 2, "temporal_upsample": True}, "dims=2"),
        ({"in_channels": "128"}, "in_channels"),
    ],
)
def test_bad_configs_are_named(config, message):
    with pytest.raises(CheckpointError, match=message):
        LatentUpsamplerConfig.from_checkpoint_config(config)


def test_missing_entries_take_released_defaults():
    config = LatentUpsamplerConfig.from_checkpoint_config({"_class_name": "LatentUpsampler", "extra": 1})
    assert config == LatentUpsamplerConfig()
    assert (config.mid_channels, config.num_blocks_per_stage, config.spatial_factor) == (512, 4, 2.0)


def test_build_from_a_saved_temporal_upsampler(tmp_path: Path):
    """Round trip through a file in the released layout: flat config, bare keys."""
    model = _tiny(spatial_upsample=False, temporal_upsample=True)
    path = tmp_path / "temporal.safetensors"
    config = {**TINY, "spatial_upsample": False, "temporal_upsample": True, "_class_name": "LatentUpsampler"}
    save_file(model.state_dict(), str(path), metadata={"config": json.dumps(config)})
    loaded = build_model(LATENT_UPSAMPLER, path, device="cpu")
    latent = torch.randn(1, 8, 2, 2, 2)
    with torch.no_grad():
        torch.testing.assert_close(loaded(latent), model(latent))


def test_single_file_checkpoint_is_rejected_as_upsampler(tmp_path: Path):
    # The sections of a single-file model checkpoint's `config` (released names), one tensor under its prefix.
    config = {"transformer": {"num_layers": 2}, "vae": {"_class_name": "CausalVideoAutoencoder"}, "vocoder": {}}
    path = tmp_path / "ltx-checkpoint.safetensors"
    save_file(
        {"model.diffusion_model.patchify_proj.weight": torch.zeros(4, 4)},
        str(path),
        metadata={"config": json.dumps(config)},
    )
    with pytest.raises(ValueError, match="single-file"):
        build_model(LATENT_UPSAMPLER, path, device="cpu")
