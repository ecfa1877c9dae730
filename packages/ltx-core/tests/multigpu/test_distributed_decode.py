"""Distributed tiled VAE decode over gloo CPU processes equals the single-process tiled decode."""

from __future__ import annotations

import copy

import pytest
import torch
from rank_jobs import distributed_decode_job, distributed_diffusion_decode_job

from ltx_core.model.video_vae import VideoDecoder, VideoVAEConfig
from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_core.multigpu.launch import computing_as_a_rank, run_ranks

from ..video_vae.conftest import TINY_VAE, randomize_, tiny_diffusion_decoder


def _decoder(**overrides) -> VideoDecoder:
    section = {**copy.deepcopy(TINY_VAE), **overrides}
    return randomize_(VideoDecoder(VideoVAEConfig.from_checkpoint_config(section)), seed=5)


@pytest.mark.parametrize(
    ("world", "timestep_conditioning"),
    [(2, True), (3, False)],
)
def test_distributed_decode_equals_single_process_tiled_decode(world, timestep_conditioning, tmp_path):
    decoder = _decoder(timestep_conditioning=timestep_conditioning, causal_decoder=True)
    latent = torch.randn(1, 8, 5, 3, 2, generator=torch.Generator().manual_seed(7))
    # 2 time bands x 2 rows = 4 tiles: round-robin leaves rank 0 both its own and received tiles.
    tiling = TilingConfig(AxisTiling(24, 8), AxisTiling(64, 32), AxisTiling())
    assert len(decoder.tile_layout(latent.shape, tiling)) >= world + 1
    seed = 11 if timestep_conditioning else None
    out_path = tmp_path / "video.pt"
    run_ranks(distributed_decode_job, world, args=(decoder, latent, tiling, seed, str(out_path)), timeout_s=120)
    got = torch.load(out_path)
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with computing_as_a_rank(world), torch.inference_mode():
        want = torch.cat(list(decoder.decode_tiled(latent, tiling, generator)), dim=2)
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-6


@pytest.mark.parametrize(
    ("world", "tiling", "tiles"),
    [
        # 2 time bands x 2 width tiles: rank 0 decodes tiles 0 and 2 and receives 1 and 3, across bands.
        (2, TilingConfig(AxisTiling(14, 8), AxisTiling(), AxisTiling(64, 32)), 4),
        (3, None, 1),  # one tile: rank 0 decodes it, the others only run stages 1-3
    ],
)
def test_distributed_diffusion_decode_equals_single_process_tiled_decode(world, tiling, tiles, tmp_path):
    """The LTX-2.5 diffusion decoder over gloo ranks gives the single-process `decode_tiled` with the same
    tiling and canvas noise: stages 1-3 and the canvas noise on every rank, stages 4-5 spread by tile."""
    decoder = tiny_diffusion_decoder()
    latent = torch.randn(1, 8, 3, 4, 6, generator=torch.Generator().manual_seed(7))
    assert len(decoder.tile_layout(latent.shape, tiling)) == tiles
    out_path = tmp_path / "video.pt"
    args = (decoder, latent, tiling, 5, str(out_path))
    run_ranks(distributed_diffusion_decode_job, world, args=args, timeout_s=120)
    got = torch.load(out_path)
    with computing_as_a_rank(world), torch.inference_mode():
        want = torch.cat(list(decoder.decode_tiled(latent, tiling, torch.Generator().manual_seed(5))), dim=2)
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-6
