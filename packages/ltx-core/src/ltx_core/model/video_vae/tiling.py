"""Tiled VAE encoding and decoding: tile layouts, blend weights and the chunked blender.

Tiles are laid out on the latent grid. Along each tiled axis consecutive tiles share `overlap`
latent cells, and every tile is weighted by a trapezoid that ramps linearly through the shared
cells, so the weights of overlapping tiles add up to one. Along time the VAE is causal: a tile that
starts at latent frame s > 0 decodes latent s as a lone "first frame" (one pixel frame, seen
without its past), so such tiles start one latent earlier and give that frame zero weight.

Decoding yields the video in chunks of frames as soon as no later tile can touch them, so only
one temporal band of tiles is ever held in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ltx_core.model.video_vae.tiling_config import (
    MIN_ENCODE_OVERLAP_FRAMES,
    MIN_ENCODE_OVERLAP_PIXELS,
    AxisTiling,
    TilingConfig,
)
from ltx_core.types import SpatioTemporalScaleFactors


@dataclass(frozen=True)
class Span:
    """One tile's extent along one latent axis: cells [start, end), ramps in cells."""

    start: int
    end: int
    left_ramp: int = 0
    right_ramp: int = 0


def split_axis(length: int, size: int, overlap: int) -> list[Span]:
    """Tiles of `size` cells overlapping by `overlap`; the last one ends at `length` (it may be shorter)."""
    if length <= size:
        return [Span(0, length)]
    step = size - overlap
    count = -(-(length - overlap) // step)  # ceil
    spans = [Span(i * step, i * step + size, overlap if i else 0, overlap) for i in range(count)]
    last = spans[-1]
    spans[-1] = Span(last.start, length, last.left_ramp, 0)
    return spans


def split_time_axis(length: int, size: int, overlap: int) -> list[Span]:
    """`split_axis` for the causal time axis: later tiles start one latent frame earlier (see module doc)."""
    spans = split_axis(length, size, overlap)
    return [spans[0]] + [Span(s.start - 1, s.end, s.left_ramp + 1, s.right_ramp) for s in spans[1:]]


def trapezoid(length: int, left_ramp: int, right_ramp: int, left_from_zero: bool = False) -> torch.Tensor:
    """Blend weights: 1 in the middle, linear ramps of the given lengths at the ends.

    A right ramp of r steps down through r/(r+1) ... 1/(r+1). A left ramp of r steps up through
    1/(r+1) ... r/(r+1), or, with `left_from_zero`, through 0, 1/r ... (r-1)/r: the causal time
    axis, whose first cell of a later tile must get no weight.
    """
    weights = torch.ones(length)
    left = max(0, min(left_ramp, length))
    right = max(0, min(right_ramp, length))
    if left:
        steps = torch.arange(left, dtype=torch.float32)
        weights[:left] *= steps / left if left_from_zero else (steps + 1) / (left + 1)
    if right:
        weights[length - right :] *= torch.arange(right, 0, -1, dtype=torch.float32) / (right + 1)
    return weights.clamp_(0, 1)


@dataclass(frozen=True, eq=False)
class VideoTile:
    """One tile: where it reads, where it writes, and its blend weights along (frames, height, width).

    For decoding, `source` is latent cells and `target` pixels; for encoding the other way round.
    A slice whose stop is None spans the whole (untiled) axis; its weight is a length-1 tensor.
    """

    index: int
    source: tuple[slice, slice, slice]
    target: tuple[slice, slice, slice]
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = field(repr=False)


def _axis_spans(length: int, axis: AxisTiling, factor: int, name: str, temporal: bool) -> list[Span] | None:
    if not axis.tiled:
        return None
    size, overlap = axis.latent_size_and_overlap(factor, name)
    return (split_time_axis if temporal else split_axis)(length, size, overlap)


def _pixel_time(span: Span, factor: int) -> tuple[slice, torch.Tensor]:
    start, stop = span.start * factor, 1 + (span.end - 1) * factor
    left = 0 if span.left_ramp == 0 else 1 + (span.left_ramp - 1) * factor
    return slice(start, stop), trapezoid(stop - start, left, span.right_ramp * factor, left_from_zero=True)


def _pixel_space(span: Span, factor: int) -> tuple[slice, torch.Tensor]:
    start, stop = span.start * factor, span.end * factor
    return slice(start, stop), trapezoid(stop - start, span.left_ramp * factor, span.right_ramp * factor)


def decode_tile_layout(
    latent_fhw: Sequence[int], tiling: TilingConfig | None, scale: SpatioTemporalScaleFactors
) -> list[VideoTile]:
    """Tiles for decoding a latent of (frames, height, width) cells, frames slowest, width fastest.

    Blend weights live in pixel space: a time span [s, e) of latent frames covers pixel frames
    [8s, 8(e-1)+1).
    """
    tiling = tiling or TilingConfig.untiled()
    axes = []
    for length, axis, factor, name in zip(
        latent_fhw,
        (tiling.frames, tiling.height, tiling.width),
        (scale.time, scale.height, scale.width),
        ("frames", "height", "width"),
    ):
        temporal = name == "frames"
        spans = _axis_spans(length, axis, factor, name, temporal)
        if spans is None:
            axes.append([(slice(0, length), slice(0, None), torch.ones(1))])
            continue
        to_pixels = _pixel_time if temporal else _pixel_space
        axes.append([(slice(s.start, s.end), *to_pixels(s, factor)) for s in spans])
    return [
        VideoTile(i, tuple(a[0] for a in combo), tuple(a[1] for a in combo), tuple(a[2] for a in combo))
        for i, combo in enumerate(itertools.product(*axes))
    ]


def encode_tile_layout(
    pixel_fhw: Sequence[int], tiling: TilingConfig | None, scale: SpatioTemporalScaleFactors
) -> list[VideoTile]:
    """Tiles for encoding pixels of (frames, height, width); blend weights live on the latent grid."""
    tiling = tiling or TilingConfig.untiled()
    frames, height, width = pixel_fhw
    latent = ((frames - 1) // scale.time + 1, height // scale.height, width // scale.width)
    for axis, name, minimum, unit in (
        (tiling.frames, "frames", MIN_ENCODE_OVERLAP_FRAMES, "frames"),
        (tiling.height, "height", MIN_ENCODE_OVERLAP_PIXELS, "px"),
        (tiling.width, "width", MIN_ENCODE_OVERLAP_PIXELS, "px"),
    ):
        if axis.tiled and axis.overlap < minimum:
            raise ValueError(f"tiled encoding needs a {name} overlap of at least {minimum} {unit}, got {axis.overlap}")
    axes = []
    for length, axis, factor, name in zip(
        latent,
        (tiling.frames, tiling.height, tiling.width),
        (scale.time, scale.height, scale.width),
        ("frames", "height", "width"),
    ):
        temporal = name == "frames"
        spans = _axis_spans(length, axis, factor, name, temporal) or [Span(0, length)]
        entries = []
        for s in spans:
            pixels = _pixel_time(s, factor)[0] if temporal else _pixel_space(s, factor)[0]
            weights = trapezoid(s.end - s.start, s.left_ramp, s.right_ramp, left_from_zero=temporal)
            entries.append((pixels, slice(s.start, s.end), weights))
        axes.append(entries)
    return [
        VideoTile(i, tuple(a[0] for a in combo), tuple(a[1] for a in combo), tuple(a[2] for a in combo))
        for i, combo in enumerate(itertools.product(*axes))
    ]


def weights_sum_to_one(tiles: Sequence[VideoTile], full_fhw: Sequence[int], atol: float = 1e-5) -> bool:
    """Whether, along each axis, the distinct tiles' weights add up to one everywhere.

    Then blending needs no normalisation; otherwise the accumulated weights divide the result.
    """
    for axis, length in enumerate(full_fhw):
        total = torch.zeros(length)
        seen: set[tuple[Any, Any]] = set()
        for tile in tiles:
            span = tile.target[axis]
            if (span.start, span.stop) not in seen:
                seen.add((span.start, span.stop))
                total[span] += tile.weights[axis]
        if not torch.allclose(total, torch.ones(length), atol=atol, rtol=0):
            return False
    return True


def weight_volume(tile: VideoTile, like: torch.Tensor) -> torch.Tensor:
    """The tile's separable weights as a (1, 1, F, H, W) float32 tensor broadcastable against `like`."""
    f, h, w = (m.to(device=like.device, dtype=torch.float32) for m in tile.weights)
    return f.view(1, 1, -1, 1, 1) * h.view(1, 1, 1, -1, 1) * w.view(1, 1, 1, 1, -1)


def _time_range(tile: VideoTile, frames: int) -> tuple[int, int]:
    span = tile.target[0]
    return span.start, frames if span.stop is None else span.stop


def blend_in_time_chunks(
    tiles: Sequence[VideoTile],
    decode_tile: Callable[[VideoTile], torch.Tensor],
    batch_channels: tuple[int, int],
    full_fhw: tuple[int, int, int],
    out_dtype: torch.dtype,
    device: torch.device,
) -> Iterator[torch.Tensor]:
    """Decode `tiles` in order and yield the blended video as (B, C, f, H, W) chunks along time.

    Tiles sharing a time span form a band. Before a band is decoded, the frames in front of its
    first frame are final (bands start in increasing order) and are yielded; the rest stays in a
    float32 buffer that only spans the current band.
    """
    frames, height, width = full_fhw
    normalise = not weights_sum_to_one(tiles, full_fhw)
    buffer: torch.Tensor | None = None
    weight_sum: torch.Tensor | None = None
    buffer_start = 0

    def finish(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        if weights is not None:
            values = values / weights.clamp(min=1e-8)
        return values.to(out_dtype)

    for _, band in itertools.groupby(tiles, key=lambda t: _time_range(t, frames)):
        band = list(band)
        start, stop = _time_range(band[0], frames)
        if buffer is not None and start > buffer_start:
            done = start - buffer_start
            yield finish(buffer[:, :, :done], None if weight_sum is None else weight_sum[:, :, :done])
            buffer, weight_sum = buffer[:, :, done:], None if weight_sum is None else weight_sum[:, :, done:]
            buffer_start = start
        kept = 0 if buffer is None else buffer.shape[2]
        needed = max(kept, stop - start)
        grown = torch.zeros((*batch_channels, needed, height, width), dtype=torch.float32, device=device)
        grown_weights = torch.zeros((1, 1, needed, height, width), device=device) if normalise else None
        if buffer is not None:
            grown[:, :, :kept] = buffer
            if grown_weights is not None and weight_sum is not None:
                grown_weights[:, :, :kept] = weight_sum
        buffer, weight_sum, buffer_start = grown, grown_weights, start
        for tile in band:
            pixels = decode_tile(tile)
            if pixels.shape[2] != stop - start:
                raise RuntimeError(f"tile {tile.index} decoded to {pixels.shape[2]} frames, expected {stop - start}")
            weights = weight_volume(tile, buffer)
            region = (slice(None), slice(None), slice(0, stop - start), tile.target[1], tile.target[2])
            buffer[region] += pixels.float() * weights
            if weight_sum is not None:
                weight_sum[region] += weights.expand(1, 1, *pixels.shape[2:])
            del pixels
    if buffer is not None:
        yield finish(buffer, weight_sum)
