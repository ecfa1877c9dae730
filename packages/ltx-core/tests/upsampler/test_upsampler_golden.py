"""Parity of the latent upsamplers with the reference outputs in fx_upsampler."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ltx_core.loader import build_model, read_checkpoint_config, read_safetensors_header, selected_keys
from ltx_core.model.upsampler import (
    LATENT_UPSAMPLER,
    LatentUpsampler,
    RationalSpatialResampler,
    binomial_blur_kernel,
    upsample_video_latent,
)


class ChannelStats:
    """Video VAE latent statistics read straight from the checkpoint (z_raw = z * std + mean)."""

    def __init__(self, checkpoint: Path) -> None:
        with safe_open(str(checkpoint), framework="pt", device="cpu") as f:
            self.std = f.get_tensor("vae.per_channel_statistics.std-of-means").float()
            self.mean = f.get_tensor("vae.per_channel_statistics.mean-of-means").float()

    def _view(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(1, -1, 1, 1, 1)

    def un_normalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self._view(self.std) + self._view(self.mean)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self._view(self.mean)) / self._view(self.std)


def _upsampler_cases(golden_fixture) -> dict[str, str]:
    return golden_fixture("fx_upsampler").params["upsamplers"]


@pytest.mark.golden
def test_every_upsampler_matches_reference(
    golden_fixture, golden_checkpoint, golden_upsampler_source, assert_golden_close
):
    fx = golden_fixture("fx_upsampler")
    stats = ChannelStats(golden_checkpoint)
    cases = _upsampler_cases(golden_fixture)
    assert cases, "fx_upsampler lists no upsampler"
    for name, file_name in cases.items():
        source = golden_upsampler_source(file_name)
        upsampler = build_model(LATENT_UPSAMPLER, source, dtype=torch.float32, device="cpu")
        assert isinstance(upsampler, LatentUpsampler)
        raw = upsampler(fx["latent"])
        assert_golden_close(raw, fx[f"{name}.raw"], name=f"{name}.raw")
        wrapped = upsample_video_latent(fx["latent"], upsampler, stats)
        assert_golden_close(wrapped, fx[f"{name}.vae_stats"], name=f"{name}.vae_stats")
        assert upsampler.output_size(*fx["latent"].shape[2:]) == tuple(raw.shape[2:])


@pytest.mark.golden
def test_rational_flag_selects_the_resampler(golden_dir, golden_fixture):
    for file_name in _upsampler_cases(golden_fixture).values():
        config = read_checkpoint_config(golden_dir / file_name)
        upsampler = build_model(LATENT_UPSAMPLER, golden_dir / file_name, device="cpu")
        assert isinstance(upsampler.upsampler, RationalSpatialResampler) == bool(config.get("rational_resampler"))


@pytest.mark.golden
def test_module_keys_are_the_file_keys(golden_dir, golden_fixture):
    """Every stored key is consumed except the fixed blur filter, which the module computes."""
    for file_name in _upsampler_cases(golden_fixture).values():
        path = golden_dir / file_name
        with torch.device("meta"):
            module = LATENT_UPSAMPLER.configurator(read_checkpoint_config(path))
        file_keys = set(read_safetensors_header(path).tensors)
        loaded = set(selected_keys(path, LATENT_UPSAMPLER.ops).values())
        assert loaded == set(module.state_dict())
        assert all(k.endswith("blur_down.kernel") for k in file_keys - loaded)


@pytest.mark.golden
def test_stored_blur_filter_equals_the_computed_one(golden_dir, golden_fixture):
    for file_name in _upsampler_cases(golden_fixture).values():
        path = golden_dir / file_name
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                if key.endswith("blur_down.kernel"):
                    stored = f.get_tensor(key).float()
                    taps = stored.shape[-1]
                    want = binomial_blur_kernel(taps, dtype=torch.float32, device=torch.device("cpu"))
                    torch.testing.assert_close(stored.reshape(taps, taps), want, atol=0, rtol=0)


@pytest.mark.golden
def test_bfloat16_build_runs_close_to_float32(golden_dir, golden_fixture):
    fx = golden_fixture("fx_upsampler")
    name, file_name = next(iter(_upsampler_cases(golden_fixture).items()))
    upsampler = build_model(LATENT_UPSAMPLER, golden_dir / file_name, dtype=torch.bfloat16, device="cpu")
    out = upsampler(fx["latent"].to(torch.bfloat16)).float()
    want = fx[f"{name}.raw"]
    assert out.shape == want.shape
    assert (out - want).abs().max() <= 0.1 * want.abs().max()
