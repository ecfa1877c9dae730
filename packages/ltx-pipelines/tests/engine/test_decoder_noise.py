"""The pipelines' video decoding draws one noise per tile, named `decoder.<i>`, for a timestep-conditioned
decoder (the names the golden fixtures store as `<run>.noise.decoder.<i>`), and none otherwise."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from ltx_core.model.video_vae import TilingConfig, VideoDecoder, VideoVAEConfig
from ltx_pipelines.engine.denoising_stage import ReplayedNoise, SeededNoise
from ltx_pipelines.engine.generation import decode_video_frames

# A tiny decoder with the released block structure (32x32x8), few channels.
_DECODER_BLOCKS = [
    ["res_x", {"num_layers": 1}],
    ["compress_space", {"multiplier": 2}],
    ["compress_time", {"multiplier": 2}],
    ["compress_all", {"multiplier": 1}],
    ["compress_all", {"multiplier": 2}],
]
_ENCODER_BLOCKS = [
    ["res_x", {"num_layers": 1}],
    ["compress_space_res", {"multiplier": 2}],
    ["compress_time_res", {"multiplier": 2}],
    ["compress_all_res", {"multiplier": 2}],
    ["compress_all_res", {"multiplier": 1}],
]
# Two temporal bands x two height tiles over a (5, 3, 1) latent: four tiles.
_TILING = {"frames": {"tile_size": 24, "overlap": 8}, "height": {"tile_size": 64, "overlap": 32}}


def _decoder(timestep_conditioning: bool) -> VideoDecoder:
    config = VideoVAEConfig.from_checkpoint_config(
        {
            "dims": 3,
            "in_channels": 3,
            "out_channels": 3,
            "latent_channels": 8,
            "patch_size": 4,
            "norm_layer": "pixel_norm",
            "latent_log_var": "uniform",
            "spatial_padding_mode": "zeros",
            "timestep_conditioning": timestep_conditioning,
            "causal_decoder": False,
            "decoder_base_channels": 4,
            "encoder_blocks": _ENCODER_BLOCKS,
            "decoder_blocks": _DECODER_BLOCKS,
        }
    )
    decoder = VideoDecoder(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in decoder.named_parameters():
            if not name.endswith("timestep_scale_multiplier"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
        for name, b in decoder.named_buffers():
            if name.endswith("std-of-means"):
                b.fill_(1.0)
            elif name.endswith("mean-of-means"):
                b.zero_()
    return decoder.eval()


class Recording:
    def __init__(self, source) -> None:
        self.source = source
        self.draws: list[tuple[str, tuple[int, ...]]] = []

    def __call__(self, name: str, shape: Sequence[int], *, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        self.draws.append((name, tuple(shape)))
        return self.source(name, shape, device=device, dtype=dtype)


@pytest.fixture(scope="module")
def latent() -> torch.Tensor:
    return torch.randn(1, 8, 5, 3, 1, generator=torch.Generator().manual_seed(1))


def test_timestep_conditioned_decoder_draws_one_named_noise_per_tile(latent):
    decoder, tiling = _decoder(True), TilingConfig.from_dict(_TILING)
    tiles = decoder.tile_layout(latent.shape, tiling)
    assert len(tiles) > 1
    noise = Recording(SeededNoise(3))
    frames = torch.cat(list(decode_video_frames(decoder, latent, tiling, noise)))

    want_shapes = [tuple(latent[(slice(None), slice(None), *t.source)].shape) for t in tiles]
    assert noise.draws == [(f"decoder.{i}", shape) for i, shape in enumerate(want_shapes)]
    # The drawn tensors are the ones the tiles decode with: replaying them by the fixture naming
    # (`<run>.noise.decoder.<i>`) gives the same frames, other noise gives other frames.
    stored, prefix = SeededNoise(3), "t2v.noise."
    tensors = {prefix + name: stored(name, shape, device="cpu", dtype=latent.dtype) for name, shape in noise.draws}
    replay = ReplayedNoise(tensors, prefix=prefix)
    replayed = torch.cat(list(decode_video_frames(decoder, latent, tiling, replay)))
    torch.testing.assert_close(replayed, frames, atol=0, rtol=0)
    other = torch.cat(list(decode_video_frames(decoder, latent, tiling, SeededNoise(4))))
    assert not torch.equal(other, frames)


def test_plain_decoder_draws_nothing(latent):
    noise = Recording(SeededNoise(3))
    frames = list(decode_video_frames(_decoder(False), latent, TilingConfig.from_dict(_TILING), noise))
    assert frames and noise.draws == []
