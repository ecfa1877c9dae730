"""How a VAE encode or decode is cut into tiles, as values (no torch: command lines show and check the
layout before any model is imported). The tiles themselves and their blending are in `tiling`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ltx_core.types import SpatioTemporalScaleFactors

# Tiled encoding needs this much overlap to hide the tiles' edge effects (frames / pixels).
MIN_ENCODE_OVERLAP_FRAMES = 16
MIN_ENCODE_OVERLAP_PIXELS = 64


@dataclass(frozen=True)
class AxisTiling:
    """Tile size and overlap along one axis, in pixel frames or pixels; tile_size 0 = not tiled."""

    tile_size: int = 0
    overlap: int = 0

    def __post_init__(self) -> None:
        if self.tile_size < 0 or self.overlap < 0:
            raise ValueError(f"tile_size and overlap must be >= 0, got {self.tile_size} and {self.overlap}")
        if self.tile_size == 0 and self.overlap != 0:
            raise ValueError(f"an untiled axis (tile_size 0) cannot have an overlap, got overlap {self.overlap}")
        if self.tile_size and self.overlap >= self.tile_size:
            raise ValueError(f"overlap {self.overlap} must be smaller than tile_size {self.tile_size}")

    @property
    def tiled(self) -> bool:
        return self.tile_size > 0

    def latent_size_and_overlap(self, factor: int, axis: str) -> tuple[int, int]:
        """The tile size and overlap in latent cells, checking they sit on the VAE grid."""
        if self.tile_size < 2 * factor or self.tile_size % factor:
            raise ValueError(
                f"{axis} tile_size must be a multiple of {factor} and at least {2 * factor}, got {self.tile_size}"
            )
        if self.overlap % factor:
            raise ValueError(f"{axis} overlap must be a multiple of {factor}, got {self.overlap}")
        overlap = self.overlap // factor
        return max(self.tile_size // factor, overlap + 1, 2), overlap


@dataclass(frozen=True)
class TilingConfig:
    """Per-axis tile sizes for VAE encode/decode. The defaults are the reference's decode defaults."""

    frames: AxisTiling = AxisTiling(80, 24)
    height: AxisTiling = AxisTiling(768, 64)
    width: AxisTiling = AxisTiling(768, 64)

    @classmethod
    def default(cls) -> TilingConfig:
        return cls()

    @classmethod
    def untiled(cls) -> TilingConfig:
        return cls(AxisTiling(), AxisTiling(), AxisTiling())

    @classmethod
    def from_dict(cls, spec: Mapping[str, Mapping[str, int]]) -> TilingConfig:
        """From `{"frames": {"tile_size": 80, "overlap": 24}, "height": {...}, "width": {...}}`."""
        unknown = set(spec) - {"frames", "height", "width"}
        if unknown:
            raise ValueError(f"unknown tiling axes {sorted(unknown)}; accepted: frames, height, width")
        axes = {name: AxisTiling(**dict(value)) for name, value in spec.items()}
        return cls(**{name: axes.get(name, AxisTiling()) for name in ("frames", "height", "width")})

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {
            name: {"tile_size": axis.tile_size, "overlap": axis.overlap}
            for name, axis in (("frames", self.frames), ("height", self.height), ("width", self.width))
        }

    @classmethod
    def for_output(
        cls,
        height: int,
        width: int,
        scale: SpatioTemporalScaleFactors,
        *,
        long_side: AxisTiling = AxisTiling(768, 64),
        frames: AxisTiling = AxisTiling(80, 24),
    ) -> TilingConfig:
        """The automatic decode layout for an output of `height` x `width` pixels (the reference's
        choice for convolutional VAEs): the longer side gets `long_side.tile_size`, the shorter side
        the same fraction of its length, so both axes split into about as many tiles. Sizes are
        rounded on the latent grid and never fall below what a blend with `long_side.overlap` needs.
        An untiled `long_side` gives no spatial tiling.
        """
        if height < 1 or width < 1:
            raise ValueError(f"height and width must be >= 1, got {height}x{width}")
        if not long_side.tiled:
            return cls(frames, AxisTiling(), AxisTiling())
        longest = max(height, width)

        def axis(length: int, factor: int) -> AxisTiling:
            if long_side.overlap % factor or long_side.tile_size % factor:
                raise ValueError(
                    f"tile size {long_side.tile_size} and overlap {long_side.overlap} must be multiples of {factor}"
                )
            overlap_cells = long_side.overlap // factor
            cells = round(long_side.tile_size // factor * (length // factor) / (longest // factor))
            cells = max(cells, overlap_cells + 1, 2)
            size = max(cells * factor, 2 * factor, long_side.overlap + factor)
            return AxisTiling(size, long_side.overlap)

        return cls(frames, axis(height, scale.height), axis(width, scale.width))

    def describe(self) -> str:
        """`frames 80/24, height 512/64, width 768/64` (tile size / overlap; `off` for an untiled axis)."""
        parts = []
        for name, axis in (("frames", self.frames), ("height", self.height), ("width", self.width)):
            parts.append(f"{name} {axis.tile_size}/{axis.overlap}" if axis.tiled else f"{name} off")
        return ", ".join(parts)
