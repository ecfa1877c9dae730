"""The automatic decode layout: the long side gets 768-pixel tiles, the short side as many tiles."""

from __future__ import annotations

import pytest

from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig
from ltx_core.types import DEFAULT_SCALE_FACTORS


@pytest.mark.parametrize(
    ("height", "width", "tile_height", "tile_width"),
    [
        # Worked by hand: latent cells = pixels / 32; tile cells = round(24 * axis cells / long-side cells).
        (512, 768, 512, 768),  # 16 and 24 cells: round(24 * 16 / 24) = 16
        (1088, 1920, 448, 768),  # 34 and 60 cells: round(24 * 34 / 60) = round(13.6) = 14 cells
        (1920, 1088, 768, 448),  # portrait: the same, axes swapped
        (128, 192, 512, 768),  # smaller than one tile: a single tile either way
        (64, 1024, 96, 768),  # 2 and 32 cells: round(1.5) = 2 cells, but a 64-pixel overlap needs 3 cells
    ],
)
def test_automatic_layout_splits_both_axes_alike(height, width, tile_height, tile_width):
    tiling = TilingConfig.for_output(height, width, DEFAULT_SCALE_FACTORS)
    assert tiling.height == AxisTiling(tile_height, 64)
    assert tiling.width == AxisTiling(tile_width, 64)
    assert tiling.frames == AxisTiling(80, 24)


def test_untiled_long_side_turns_spatial_tiling_off():
    tiling = TilingConfig.for_output(512, 768, DEFAULT_SCALE_FACTORS, long_side=AxisTiling(), frames=AxisTiling())
    assert tiling == TilingConfig.untiled()
    assert tiling.describe() == "frames off, height off, width off"


def test_layout_off_the_vae_grid_is_rejected():
    with pytest.raises(ValueError, match="multiples of 32"):
        TilingConfig.for_output(512, 768, DEFAULT_SCALE_FACTORS, long_side=AxisTiling(700, 64))
