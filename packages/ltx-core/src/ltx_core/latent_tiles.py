"""Overlapping tiles over a latent grid (frames, height, width), counted per axis, with blend weights that
ramp linearly across each shared band.

Used wherever a latent is processed tile by tile and put back together: the tiled refinement stage of the
HDR IC-LoRA pipeline and the tiled data-parallel transformer (`ltx_core.multigpu`). The weights of one
tile are never zero, and normalising by their sum over all tiles makes every cell's weights sum to one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import torch

from ltx_core.types import VideoPixelShape

logger = logging.getLogger(__name__)

_TIME_STRIDE, _SPACE_STRIDE = 8, 32  # pixel frames / pixels per latent cell


@dataclass(frozen=True)
class AxisTileCount:
    """How many tiles along one latent axis and how many cells neighbouring tiles share."""

    tiles: int = 1
    overlap: int = 0

    def __post_init__(self) -> None:
        if self.tiles < 1 or self.overlap < 0:
            raise ValueError(f"tiles must be >= 1 and overlap >= 0, got {self.tiles} and {self.overlap}")


@dataclass(frozen=True)
class TileCounts:
    frames: AxisTileCount = AxisTileCount()
    height: AxisTileCount = AxisTileCount()
    width: AxisTileCount = AxisTileCount()


def split_by_count(length: int, axis: AxisTileCount, name: str = "axis") -> list[tuple[int, int]]:
    """[start, end) cell ranges of `axis.tiles` tiles over `length` cells with the given overlap.

    An axis too short for its tile count is not split; an overlap too large for the length is reduced
    to the largest that leaves every tile a cell of its own.
    """
    n, overlap = axis.tiles, axis.overlap
    if n <= 1:
        return [(0, length)]
    if length < n:
        logger.warning("%s: %d cells cannot hold %d tiles; not tiling this axis", name, length, n)
        return [(0, length)]
    if overlap > length - n:
        logger.warning("%s: overlap %d reduced to %d for %d cells", name, overlap, length - n, length)
        overlap = length - n
    size = (length + overlap * (n - 1)) // n
    step = size - overlap
    ranges = [(i * step, i * step + size) for i in range(n)]
    ranges[-1] = (ranges[-1][0], length)
    return ranges


def _ramp_weights(ranges: Sequence[tuple[int, int]], index: int) -> torch.Tensor:
    """Weights of tile `index` along its axis: 1 inside, rising / falling linearly through the cells it
    shares with the previous / next tile (never 0, so every cell keeps some weight)."""
    start, end = ranges[index]
    weights = torch.ones(end - start, dtype=torch.float32)
    if index > 0:
        shared = ranges[index - 1][1] - start
        if shared > 0:
            weights[:shared] = torch.arange(1, shared + 1, dtype=torch.float32) / (shared + 1)
    if index + 1 < len(ranges):
        shared = end - ranges[index + 1][0]
        if shared > 0:
            weights[-shared:] = torch.minimum(
                weights[-shared:], torch.arange(shared, 0, -1, dtype=torch.float32) / (shared + 1)
            )
    return weights


@dataclass(frozen=True)
class LatentTile:
    index: int
    cells: tuple[slice, slice, slice]
    """(frames, height, width) latent ranges."""
    weights: torch.Tensor
    """(f, h, w) blend weights (before normalisation)."""

    def pixel_shape(self, fps: float) -> VideoPixelShape:
        f, h, w = (s.stop - s.start for s in self.cells)
        return VideoPixelShape(1, (f - 1) * _TIME_STRIDE + 1, h * _SPACE_STRIDE, w * _SPACE_STRIDE, fps)


def latent_tiles(shape: Sequence[int], counts: TileCounts) -> list[LatentTile]:
    """The tiles of a (B, C, F, H, W) latent, frames-major order."""
    axes = [
        split_by_count(length, axis, name)
        for length, axis, name in zip(
            shape[2:], (counts.frames, counts.height, counts.width), ("frames", "height", "width")
        )
    ]
    tiles = []
    for index, (fi, hi, wi) in enumerate(product(*(range(len(a)) for a in axes))):
        picks = (fi, hi, wi)
        cells = tuple(slice(*axes[k][picks[k]]) for k in range(3))
        per_axis = [_ramp_weights(axes[k], picks[k]) for k in range(3)]
        weights = per_axis[0][:, None, None] * per_axis[1][None, :, None] * per_axis[2][None, None, :]
        tiles.append(LatentTile(index, cells, weights))  # type: ignore[arg-type]
    return tiles


def balanced_tile_counts(tiles: int, height: int, width: int, overlap: int = 0) -> TileCounts:
    """`tiles` spatial tiles as a grid as square as `tiles` allows (2 -> 1x2, 4 -> 2x2, 6 -> 2x3, 8 -> 2x4),
    the larger factor along the longer of `height` and `width` (latent cells); frames are not split."""
    if tiles < 1:
        raise ValueError(f"tiles must be >= 1, got {tiles}")
    small = next(d for d in range(int(tiles**0.5), 0, -1) if tiles % d == 0)
    large = tiles // small
    along_h, along_w = (large, small) if height > width else (small, large)
    return TileCounts(height=AxisTileCount(along_h, overlap), width=AxisTileCount(along_w, overlap))
