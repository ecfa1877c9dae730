"""The VAE decode tiling flags every command that decodes video shares, and what they mean.

Unset flags keep what the layout would otherwise be: the automatic layout for the output size in a
generation run, the run's recorded layout in `python -m ltx_pipelines.decode`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from ltx_core.model.video_vae.tiling_config import AxisTiling, TilingConfig
from ltx_core.types import DEFAULT_SCALE_FACTORS
from ltx_pipelines.cli.arg_types import non_negative_int
from ltx_pipelines.cli.flag_group import FlagError, FlagGroup, ReadContext
from ltx_pipelines.engine.defaults import PipelineDefaults

AUTO_LONG_SIDE = AxisTiling(768, 64)
AUTO_FRAMES = AxisTiling(80, 24)


def add_tiling_args(parser: argparse.ArgumentParser, *, unset_means: str = "automatic, from the output size") -> None:
    group = parser.add_argument_group(f"VAE decode tiling (unset: {unset_means})")
    group.add_argument(
        "--tile-size",
        type=non_negative_int,
        default=None,
        metavar="PIXELS",
        help="Square spatial tiles of this size (a multiple of 32, at least 64); 0 decodes each frame whole "
        f"(automatic: {AUTO_LONG_SIDE.tile_size} on the long side, as many tiles on the short side).",
    )
    group.add_argument(
        "--tile-overlap",
        type=non_negative_int,
        default=None,
        metavar="PIXELS",
        help=f"Pixels shared by neighbouring spatial tiles, a multiple of 32 (automatic: {AUTO_LONG_SIDE.overlap}).",
    )
    group.add_argument(
        "--tile-frames",
        type=non_negative_int,
        default=None,
        metavar="FRAMES",
        help="Temporal tiles of this many frames (a multiple of 8, at least 16); 0 decodes all frames at once "
        f"(automatic: {AUTO_FRAMES.tile_size}).",
    )
    group.add_argument(
        "--tile-frame-overlap",
        type=non_negative_int,
        default=None,
        metavar="FRAMES",
        help=f"Frames shared by neighbouring temporal tiles, a multiple of 8 (automatic: {AUTO_FRAMES.overlap}).",
    )


def tiling_from_args(
    args: argparse.Namespace, *, height: int | None, width: int | None, base: TilingConfig | None = None
) -> TilingConfig | None:
    """The layout the tiling flags ask for over `base` (None: the automatic layout for `height` x `width`);
    None when no flag is given. A flag value off the VAE grid raises ValueError naming the flag."""
    size, overlap = args.tile_size, args.tile_overlap
    frames, frame_overlap = args.tile_frames, args.tile_frame_overlap
    if (size, overlap, frames, frame_overlap) == (None, None, None, None):
        return base
    scale = DEFAULT_SCALE_FACTORS
    if overlap is not None and overlap % scale.height:
        raise ValueError(f"--tile-overlap {overlap} is not accepted: it must be a multiple of {scale.height}")
    if base is None:
        long_side = AUTO_LONG_SIDE if overlap is None else replace(AUTO_LONG_SIDE, overlap=overlap)
        if height and width and size is None and overlap is not None and overlap >= long_side.tile_size:
            raise ValueError(f"--tile-overlap {overlap} is not accepted: it must be smaller than the tile size")
        base_spatial = (
            TilingConfig.for_output(height, width, scale, long_side=long_side)
            if height and width and size is None
            else TilingConfig(AUTO_FRAMES, AUTO_LONG_SIDE, AUTO_LONG_SIDE)
        )
        base = TilingConfig(AUTO_FRAMES, base_spatial.height, base_spatial.width)

    def axis(current: AxisTiling, tile: int | None, shared: int | None, size_flag: str, overlap_flag: str, factor: int):
        tile = current.tile_size if tile is None else tile
        if tile == 0:
            return AxisTiling()
        shared = (current.overlap if current.tiled else 0) if shared is None else shared
        minimum = 2 * factor
        if tile < minimum or tile % factor:
            raise ValueError(f"{size_flag} {tile} is not accepted: use 0 (off) or a multiple of {factor}, >= {minimum}")
        if shared % factor or shared >= tile:
            raise ValueError(
                f"{overlap_flag} {shared} is not accepted: it must be a multiple of {factor} smaller than "
                f"the tile size {tile}"
            )
        return AxisTiling(tile, shared)

    return TilingConfig(
        frames=axis(base.frames, frames, frame_overlap, "--tile-frames", "--tile-frame-overlap", scale.time),
        height=axis(base.height, size, overlap, "--tile-size", "--tile-overlap", scale.height),
        width=axis(base.width, size, overlap, "--tile-size", "--tile-overlap", scale.width),
    )


@dataclass(frozen=True)
class TilingChoice:
    config: TilingConfig | None
    """The decode layout the flags ask for; None when no flag is given (the automatic layout per output size)."""
    given: dict[str, int | None]
    """The flags as typed (the sidecar records them)."""


@dataclass(frozen=True)
class TilingFlags(FlagGroup[TilingChoice]):
    """The tiling flags of a generation run, read after the group that sets the output size (`size_from`,
    whose value has `height` and `width`; the automatic layout follows the output size). Without that group
    (retake: the source's size) the layout is the one for any size."""

    size_from: type | None = None
    """None: the video group."""

    def add(self, parser: argparse.ArgumentParser, defaults: PipelineDefaults) -> None:
        add_tiling_args(parser)

    def read(self, args: argparse.Namespace, context: ReadContext) -> TilingChoice:
        from ltx_pipelines.cli.video_flags import VideoFlags

        sized = context.values.get(self.size_from or VideoFlags)
        height, width = (sized.height, sized.width) if sized is not None else (None, None)
        try:
            config = tiling_from_args(args, height=height, width=width)
        except ValueError as e:
            raise FlagError(str(e)) from None
        names = ("tile_size", "tile_overlap", "tile_frames", "tile_frame_overlap")
        return TilingChoice(config, {name: getattr(args, name) for name in names})

    def record(self, value: TilingChoice) -> dict[str, Any]:
        return dict(value.given)

    def memory_inputs(self, value: TilingChoice) -> dict[str, Any]:
        return {"tiling": value.config}
