"""Geometry of the diffusion decoder's tiled decode, and tile sizes picked from free memory.

Stages 1-3 run once on the whole latent; stages 4 and 5 run per tile. Tiles are cut on the grid of
stage-4 input cells and mapped to pixels through the last upsample (stride s) and the patch size p:
an interval [a, b) of stage-4 cells covers pixels [s a, s b) in space (times p), and in time
[2a - 1, 2b - 1) - the temporal stride of 2 drops the duplicated first frame, which only the tile
holding frame 0 has (it then starts at 0). Blend weights are symmetric trapezoids over each overlap.
Tiles never see their neighbours: a pixel is exact (equal to the untiled decode) when it lies farther
than the receptive-field halo of stages 4 and 5 from every cut, so overlaps must cover that halo.

The tile layout follows the reference decoder exactly, so a tiled decode there and here agree.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

import torch

from ltx_core.model.video_vae.diffusion_config import DiffusionDecoderConfig, Triple
from ltx_core.model.video_vae.tiling import AxisTiling, TilingConfig, VideoTile, trapezoid
from ltx_core.types import SpatioTemporalScaleFactors

logger = logging.getLogger(__name__)

# Working-set multiplicity of one stage-5 token (its stage-5 + context channels x element size x this)
# on the eager blocked path: residual stream, context, modulated copy, q/k/v, the blocked attention's
# stacked keys and the MLP hidden. Calibrated on CPU float32 decodes (benchmarks/diffusion_vae_decode.py:
# estimate / measured activation peak = 0.9-1.2 for the released and a reduced architecture, tiled
# and untiled).
STAGE5_WORKING_SET = 12.0
# Share of the free memory a tile may use; the rest stays for the allocator and other tenants.
FREE_MEMORY_SHARE = 0.6


@dataclass(frozen=True)
class DiffusionTileGeometry:
    """Per-decoder constants of the tiling, all derived from the architecture."""

    min_latent: Triple  # latent floor so every stage's attention sees at least its kernel
    min_stage4: Triple  # smallest stage-4 tile such that stages 4 and 5 see their kernels
    halo_stage4: Triple  # one-sided receptive field of the stage-4 blocks, in stage-4 cells
    halo_stage5: Triple  # ... of the stage-5 blocks, in stage-4 cells
    stage4_to_pixels: SpatioTemporalScaleFactors
    upsample_strides: tuple[Triple, ...]

    @classmethod
    def of(cls, config: DiffusionDecoderConfig) -> DiffusionTileGeometry:
        strides = tuple(s for s, _ in config.upsamples)
        k4, k5, s4 = config.stage_kernels[3], config.stage5_kernel, strides[3]
        cumulative = [(1, 1, 1)]
        for s in strides:
            cumulative.append(tuple(c * x for c, x in zip(cumulative[-1], s)))
        mins = [1, 1, 1]
        for stage, kernel in enumerate(config.stage_kernels[: len(strides)]):
            for a in range(3):
                mins[a] = max(mins[a], -(-kernel[a] // cumulative[stage][a]))
        for a in range(3):
            mins[a] = max(mins[a], -(-k5[a] // cumulative[-1][a]))
        return cls(
            min_latent=(mins[0], mins[1], mins[2]),
            min_stage4=tuple(max(k4[a], -(-k5[a] // s4[a])) for a in range(3)),  # type: ignore[arg-type]
            halo_stage4=tuple(config.stage_depths[3] * (k4[a] // 2) for a in range(3)),  # type: ignore[arg-type]
            halo_stage5=tuple(-(-(config.stage_depths[4] * (k5[a] // 2)) // s4[a]) for a in range(3)),  # type: ignore[arg-type]
            stage4_to_pixels=SpatioTemporalScaleFactors(
                time=s4[0], height=s4[1] * config.patch_size, width=s4[2] * config.patch_size
            ),
            upsample_strides=strides,
        )

    def min_overlaps(self) -> tuple[int, int]:
        """Smallest (frames, pixels) overlaps that cover the halo, on the 8-frame / 32-pixel grid."""
        halo = [max(self.halo_stage4[a], self.halo_stage5[a]) for a in range(3)]
        frames = -(-halo[0] * self.stage4_to_pixels.time // 8) * 8
        pixels = -(-max(halo[1], halo[2]) * self.stage4_to_pixels.height // 32) * 32
        return frames, pixels

    def stage4_extent(self, latent_fhw: Triple) -> Triple:
        """Stage-4 input (T, H, W) after the first three upsamples (frame 0 not duplicated)."""
        t, h, w = latent_fhw
        for st, sh, sw in self.upsample_strides[:3]:
            t, h, w = t * st - (1 if st == 2 else 0), h * sh, w * sw
        return (t, h, w)


@dataclass(frozen=True)
class _Interval:
    start: int
    end: int
    left: int
    right: int


def _split(length: int, size: int, overlap: int, min_size: int) -> list[_Interval]:
    """Tiles of `size` cells sharing `overlap`; a short last tile grows leftwards to `min_size`."""
    if length < min_size or length <= size:
        return [_Interval(0, length, 0, 0)]
    step = size - overlap
    count = (length + size - 2 * overlap - 1) // step
    spans = [_Interval(i * step, i * step + size, overlap if i else 0, overlap) for i in range(count - 1)]
    spans.append(_Interval((count - 1) * step, length, overlap, 0))
    last = spans[-1]
    if len(spans) > 1 and last.end - last.start < min_size:
        start = last.end - min_size
        grown = spans[-2].end - start
        spans[-2] = _Interval(spans[-2].start, spans[-2].end, spans[-2].left, grown)
        spans[-1] = _Interval(start, last.end, grown, 0)
    return spans


def _to_pixels(span: _Interval, stride: int, patch: int, temporal: bool) -> _Interval:
    start, end = span.start * stride, span.end * stride
    if temporal and stride == 2:
        end -= 1
        start -= 1 if span.start else 0
    return _Interval(start * patch, end * patch, span.left * stride * patch, span.right * stride * patch)


def check_tiling(tiling: TilingConfig, geometry: DiffusionTileGeometry) -> None:
    min_frames, min_pixels = geometry.min_overlaps()
    scale = geometry.stage4_to_pixels
    for name, axis, factor, floor in (
        ("frames", tiling.frames, scale.time, min_frames),
        ("height", tiling.height, scale.height, min_pixels),
        ("width", tiling.width, scale.width, min_pixels),
    ):
        if not axis.tiled:
            continue
        if axis.tile_size < 2 * factor or axis.tile_size % factor or axis.overlap % factor:
            raise ValueError(
                f"diffusion decoder {name} tile_size must be a multiple of {factor} and at least {2 * factor}, and "
                f"its overlap a multiple of {factor}; got tile_size {axis.tile_size}, overlap {axis.overlap}"
            )
        if axis.overlap < floor:
            raise ValueError(
                f"diffusion decoder {name} overlap {axis.overlap} is below the {floor} its attention halo needs"
            )


def stage4_tile_layout(
    latent_fhw: Triple, tiling: TilingConfig | None, geometry: DiffusionTileGeometry
) -> list[VideoTile]:
    """Tiles for a (padded) latent: `source` in stage-4 cells, `target` in pixels of the padded canvas.

    Frames vary slowest. An untiled axis has the slice (0, None) and a length-1 weight.
    """
    tiling = tiling or TilingConfig.untiled()
    check_tiling(tiling, geometry)
    extent = geometry.stage4_extent(latent_fhw)
    scale = geometry.stage4_to_pixels
    patch = scale.height // geometry.upsample_strides[3][1]
    axes = []
    for a, (axis, factor) in enumerate(
        zip((tiling.frames, tiling.height, tiling.width), (scale.time, scale.height, scale.width))
    ):
        if not axis.tiled:
            axes.append([(slice(0, extent[a]), slice(0, None), torch.ones(1))])
            continue
        overlap = axis.overlap // factor
        size = max(2, overlap + 1, axis.tile_size // factor)
        entries = []
        for span in _split(extent[a], size, overlap, geometry.min_stage4[a]):
            px = _to_pixels(span, geometry.upsample_strides[3][a], 1 if a == 0 else patch, temporal=a == 0)
            weights = trapezoid(px.end - px.start, px.left, px.right)
            entries.append((slice(span.start, span.end), slice(px.start, px.end), weights))
        axes.append(entries)
    return [
        VideoTile(i, tuple(e[0] for e in combo), tuple(e[1] for e in combo), tuple(e[2] for e in combo))
        for i, combo in enumerate(itertools.product(*axes))
    ]


def decode_peak_bytes(
    config: DiffusionDecoderConfig,
    geometry: DiffusionTileGeometry,
    pixels_fhw: Triple,
    tile_fhw: Triple,
    element_size: int,
) -> int:
    """Estimated peak of a tiled decode: the resident stage-4 input and canvas noise, the float32 blend
    band (two tile-heights of frames, full frame), one tile's pixel temporaries (x_t, the Euler update,
    the weighted copy) and its stage-4 and stage-5 working sets."""
    frames, height, width = pixels_fhw
    scale = config.scale
    latent = (1 + (frames - 1) // scale.time + config.ghost_latent_frames, height // scale.height, width // scale.width)
    s4 = geometry.stage4_extent(latent)
    resident = math.prod(s4) * config.stage_channels[3] * element_size
    blend = 2 * tile_fhw[0] * height * width * config.out_channels * 4
    tile_tokens5 = tile_fhw[0] * (tile_fhw[1] // config.patch_size) * (tile_fhw[2] // config.patch_size)
    stage5 = tile_tokens5 * (config.stage5_width + config.stage_channels[4]) * element_size * STAGE5_WORKING_SET
    px = geometry.stage4_to_pixels
    tile_tokens4 = math.prod(-(-n // f) for n, f in zip(tile_fhw, (px.time, px.height, px.width)))
    stage4 = tile_tokens4 * config.stage_channels[3] * element_size * STAGE5_WORKING_SET
    noise = frames * height * width * config.out_channels * element_size
    tile_pixels = 4 * math.prod(tile_fhw) * config.out_channels * 4
    return int(resident + noise + blend + tile_pixels + stage5 + stage4)


def tiling_for_memory(
    config: DiffusionDecoderConfig,
    pixels_fhw: Triple,
    free_bytes: int,
    *,
    element_size: int = 4,
    weight_bytes: int = 0,
) -> TilingConfig | None:
    """The largest tiles whose estimated peak fits in `FREE_MEMORY_SHARE` of `free_bytes` (beyond the
    weights), preferring least recomputed overlap; None when the untiled decode fits.

    Raises naming the budget when even the smallest legal tile does not fit."""
    geometry = DiffusionTileGeometry.of(config)
    frames, height, width = pixels_fhw
    budget = int(free_bytes * FREE_MEMORY_SHARE) - weight_bytes
    if decode_peak_bytes(config, geometry, pixels_fhw, pixels_fhw, element_size) <= budget:
        return None
    min_frames, min_pixels = geometry.min_overlaps()
    px = geometry.stage4_to_pixels
    # Sizes on the 8-frame / 32-pixel grid and the stage-4 grid; at least two overlaps long.
    step_t, step_hw = math.lcm(px.time, 8), math.lcm(px.height, 32)

    def candidates(length: int, overlap: int, step: int, floor_cells: int, factor: int) -> list[int]:
        low = max(2 * overlap, floor_cells * factor, 2 * factor, step)
        low = -(-low // step) * step
        # Up to the first size that covers the whole axis (= that axis untiled).
        return list(range(low, max(low, length) + step, step))

    best: tuple[float, int, Triple] | None = None
    for tf in candidates(frames, min_frames, step_t, geometry.min_stage4[0], px.time):
        for th in candidates(height, min_pixels, step_hw, geometry.min_stage4[1], px.height):
            for tw in candidates(width, min_pixels, step_hw, geometry.min_stage4[2], px.width):
                tile = (min(tf, frames), min(th, height), min(tw, width))
                if decode_peak_bytes(config, geometry, pixels_fhw, tile, element_size) > budget:
                    continue
                counts = [
                    1 if size >= n else -(-(n - ov) // (size - ov))
                    for n, size, ov in zip(pixels_fhw, (tf, th, tw), (min_frames, min_pixels, min_pixels))
                ]
                waste = math.prod(c * s for c, s in zip(counts, tile)) / max(1, frames * height * width)
                score = (waste, -math.prod(tile), (tf, th, tw))
                if best is None or score < best:
                    best = score
    if best is None:
        raise ValueError(
            f"cannot fit a diffusion-decoder tile of a {frames}x{height}x{width} video in the memory budget: "
            f"{budget / 2**30:.2f} GiB usable of {free_bytes / 2**30:.2f} GiB free; lower the resolution or "
            "frame count, or free memory"
        )
    tf, th, tw = best[2]

    def axis(size: int, length: int, overlap: int) -> AxisTiling:
        return AxisTiling() if size >= length else AxisTiling(size, overlap)

    return TilingConfig(axis(tf, frames, min_frames), axis(th, height, min_pixels), axis(tw, width, min_pixels))
