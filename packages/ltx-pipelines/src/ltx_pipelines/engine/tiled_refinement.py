"""A refinement stage run tile by tile over the latent grid, the tiles blended back with linear ramps.

Large outputs (the HDR IC-LoRA's 4K frames) do not fit one transformer call at full resolution. The
latent is split into a fixed number of overlapping tiles per axis; each tile is refined as a clip of its
own (positions from zero, its own slice of any reference latent, its own named noise draw), and the
tiles are blended with weights that ramp linearly across each overlap and are normalised so they sum
to one everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ltx_core.components.denoisers import Denoiser
from ltx_core.conditioning import ConditioningItem
from ltx_core.latent_tiles import LatentTile, TileCounts, latent_tiles
from ltx_pipelines.engine.denoising_stage import NoiseSource, run_denoising_stage


def run_tiled_video_stage(
    denoiser: Denoiser,
    latent: torch.Tensor,
    sigmas: torch.Tensor,
    noise: NoiseSource,
    stage: str,
    *,
    fps: float,
    counts: TileCounts,
    tile_conditionings: Callable[[LatentTile], Sequence[ConditioningItem]] = lambda tile: (),
    device: torch.device,
    dtype: torch.dtype,
    progress: bool = True,
) -> torch.Tensor:
    """Refine a (1, C, F, H, W) video latent (no audio) tile by tile from `sigmas[0]`; returns the blended
    latent. Each tile draws its noise as `<stage>.tile_<i>.video` and gets `tile_conditionings(tile)`."""
    total = torch.zeros_like(latent, dtype=torch.float32)
    weight_sum = torch.zeros(latent.shape[2:], dtype=torch.float32, device=latent.device)
    tiles = latent_tiles(latent.shape, counts)
    for tile in tiles:
        f, h, w = tile.cells
        result = run_denoising_stage(
            denoiser, tile.pixel_shape(fps), sigmas, noise, f"{stage}.tile_{tile.index}", device, dtype,
            conditionings=tile_conditionings(tile), initial_video=latent[:, :, f, h, w], with_audio=False,
            progress=progress,
        )  # fmt: skip
        assert result.video_latent is not None
        weights = tile.weights.to(latent.device)
        total[:, :, f, h, w] += result.video_latent.float().to(latent.device) * weights
        weight_sum[f, h, w] += weights
    return (total / weight_sum).to(latent.dtype)
