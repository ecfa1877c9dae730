"""Where the DFR pipeline puts its keyframes and how it cuts the temporal rounds into tiles.

Everything here is pixel-frame arithmetic on the x8 temporal latent grid, with no tensors except the
final stitch, so it can be checked against the fixture's recorded layout on its own.

Vocabulary:
* canvas: the requested length padded so that ``frames - 1`` is a whole number of segments; a keyframe
  sits at the end of every segment (frame 0 is the causal image latent, never a keyframe).
* seam: a keyframe a temporal round anchors its tiles on: the canvas keyframes in round 1, in every later
  round also the slots the round before generated (``plan_rounds``). Neighbouring tiles share one.
* tile: one window of segments denoised on its own in a temporal round. Every tile but the first reaches
  one segment back (the lead-in) so the seam it shares with the previous tile lies inside its window;
  the stitch then drops that lead-in and the seam latent the previous tile already owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import torch

from ltx_core.types import DEFAULT_SCALE_FACTORS

# Segment lengths a canvas may use (pixel frames between keyframes); the one that pads least wins,
# ties going to the longer one (fewer keyframes to generate).
SEGMENT_LENGTHS: tuple[int, ...] = (24, 32)
# Segments of lead-in before the region a non-first tile owns.
TILE_LEAD_SEGMENTS = 1


@dataclass(frozen=True)
class Canvas:
    """The stage-1/2 canvas: ``frames`` pixel frames with keyframe slots at ``positions``."""

    requested_frames: int
    frames: int
    segment: int
    positions: tuple[int, ...]


@dataclass(frozen=True)
class SeamTile:
    """One tile of a temporal round, in the round's global coordinates.

    ``pixel_start``/``pixel_end`` are inclusive pixel frames, ``latent_start``/``latent_stop`` a half-open
    latent range. ``anchors`` are the seam keyframes inside the window (conditioned, not generated),
    ``slots`` the mid-segment positions the tile generates, ``drop_prefix`` how many leading latent frames
    the stitch discards.
    """

    pixel_start: int
    pixel_end: int
    latent_start: int
    latent_stop: int
    anchors: tuple[int, ...]
    slots: tuple[int, ...]
    drop_prefix: int

    @property
    def latent_frames(self) -> int:
        return self.latent_stop - self.latent_start

    @property
    def pixel_frames(self) -> int:
        return self.pixel_end - self.pixel_start + 1

    def local(self, positions: Sequence[int]) -> tuple[int, ...]:
        """Global pixel positions as tile-local ones."""
        return tuple(int(p) - self.pixel_start for p in positions)


def _padding(content: int, segment: int) -> int:
    return -content % segment


def segment_length(content_frames: int) -> int:
    """The segment length for ``content_frames`` (= frames - 1) pixel frames."""
    if content_frames < 1:
        raise ValueError(f"a DFR canvas needs at least 1 content frame (frames - 1), got {content_frames}")
    return min(SEGMENT_LENGTHS, key=lambda s: (_padding(content_frames, s), -s))


def plan_canvas(num_frames: int, *, time_scale: int = DEFAULT_SCALE_FACTORS.time) -> Canvas:
    """Pad ``num_frames`` to a whole number of segments and place a keyframe at every segment end."""
    if num_frames < 2 or (num_frames - 1) % time_scale != 0:
        raise ValueError(
            f"num_frames must be {time_scale}k+1 with k >= 1 for a DFR canvas (9, 17, 25, ...), got {num_frames}"
        )
    content = num_frames - 1
    segment = segment_length(content)
    padded = content + _padding(content, segment)
    positions = tuple(range(segment, padded + 1, segment))
    return Canvas(requested_frames=num_frames, frames=padded + 1, segment=segment, positions=positions)


def latent_index(pixel_frame: int, *, time_scale: int = DEFAULT_SCALE_FACTORS.time) -> int:
    """The latent frame whose last pixel frame is ``pixel_frame`` (0 maps to the image latent 0)."""
    if pixel_frame < 0 or pixel_frame % time_scale != 0:
        raise ValueError(f"pixel frame {pixel_frame} is not on the x{time_scale} latent border (0, 8, 16, ...)")
    return pixel_frame // time_scale


def round_frames(canvas_frames: int, round_index: int) -> int:
    """Pixel frames after ``round_index`` x2 temporal rounds of a ``canvas_frames`` canvas."""
    if round_index < 0:
        raise ValueError(f"round index must be >= 0, got {round_index}")
    return ((canvas_frames - 1) << round_index) + 1


def round_tile_count(round_index: int) -> int:
    """Tiles requested in a round (before clamping to the segment count): 2, 4, ..."""
    return 2**round_index


def _owned_counts(segments: int, tiles: int) -> list[int]:
    base, extra = divmod(segments, tiles)
    return [base + (i < extra) for i in range(tiles)]


def plan_tiles(
    seams: Sequence[int],
    num_frames: int,
    num_tiles: int,
    *,
    time_scale: int = DEFAULT_SCALE_FACTORS.time,
    lead_segments: int = TILE_LEAD_SEGMENTS,
) -> tuple[SeamTile, ...]:
    """Cut a ``num_frames`` round into at most ``num_tiles`` contiguous tiles along the seams.

    The last seam must be the final frame; every segment must span at least two latent frames, so a
    lead-in always contains its seam latent and one frame more.
    """
    if num_frames < 2:
        raise ValueError(f"num_frames must be >= 2, got {num_frames}")
    if num_tiles < 1:
        raise ValueError(f"num_tiles must be >= 1, got {num_tiles}")
    if lead_segments < 1:
        raise ValueError(f"lead_segments must be >= 1, got {lead_segments}")
    if not seams or int(seams[-1]) != num_frames - 1:
        raise ValueError(f"the last seam must be the final frame {num_frames - 1}, got seams {list(seams)}")
    bounds = [0, *(int(s) for s in seams)]
    for lo, hi in pairwise(bounds):
        span = hi - lo
        if span <= 0 or span % time_scale != 0 or span < 2 * time_scale:
            raise ValueError(
                f"seams {list(seams)}: segment {lo}..{hi} must increase by a multiple of {time_scale} "
                f"of at least {2 * time_scale} frames"
            )
    segments = len(bounds) - 1
    out: list[SeamTile] = []
    own_lo = 0
    for index, count in enumerate(_owned_counts(segments, min(num_tiles, segments))):
        own_hi = own_lo + count
        window_lo = own_lo if index == 0 else max(0, own_lo - lead_segments)
        latent_start = latent_index(bounds[window_lo], time_scale=time_scale)
        # A later tile resumes just after the seam latent that the previous tile keeps.
        drop = latent_index(bounds[own_lo], time_scale=time_scale) - latent_start + (1 if own_lo > 0 else 0)
        out.append(
            SeamTile(
                pixel_start=bounds[window_lo],
                pixel_end=bounds[own_hi],
                latent_start=latent_start,
                latent_stop=latent_index(bounds[own_hi], time_scale=time_scale) + 1,
                anchors=tuple(b for b in bounds[window_lo : own_hi + 1] if b > 0),
                slots=tuple((bounds[i] + bounds[i + 1]) // 2 for i in range(window_lo, own_hi)),
                drop_prefix=drop,
            )
        )
        own_lo = own_hi
    return tuple(out)


@dataclass(frozen=True)
class TemporalRound:
    """Round ``index`` of the x2 temporal rounds, in its own (doubled) pixel coordinates: the ``seams``
    its tiles are anchored on, the clip length ``frames`` and the ``tiles``."""

    index: int
    seams: tuple[int, ...]
    frames: int
    tiles: tuple[SeamTile, ...]

    @property
    def carried(self) -> tuple[int, ...]:
        """The keyframe positions this round hands on (still in its coordinates): its seams and every slot
        its tiles generate, a lead-in's repeated slot counted once."""
        return tuple(sorted({*self.seams, *(slot for tile in self.tiles for slot in tile.slots)}))


def plan_rounds(
    canvas: Canvas, rounds: int, *, time_scale: int = DEFAULT_SCALE_FACTORS.time
) -> tuple[TemporalRound, ...]:
    """The layout of ``rounds`` x2 temporal rounds after the ``canvas`` stages.

    Round 1 is seamed on the canvas keyframes; every later round on all the keyframes the round before it
    carried (its seams and the slots it generated), each position doubled by the x2 upsampling. So the
    segments halve from round 2 on, while the tile count doubles.
    """
    if rounds < 0:
        raise ValueError(f"temporal rounds must be >= 0, got {rounds}")
    out: list[TemporalRound] = []
    carried, frames = canvas.positions, canvas.frames
    for index in range(1, rounds + 1):
        seams = tuple(2 * p for p in carried)
        frames = round_frames(frames, 1)
        tiles = plan_tiles(seams, frames, round_tile_count(index), time_scale=time_scale)
        out.append(TemporalRound(index=index, seams=seams, frames=frames, tiles=tiles))
        carried = out[-1].carried
    return tuple(out)


def stitch_tiles(latents: Sequence[torch.Tensor], tiles: Sequence[SeamTile]) -> torch.Tensor:
    """Join denoised tile latents (B, C, T, H, W) along time, each without its ``drop_prefix`` frames."""
    if not tiles or len(latents) != len(tiles):
        raise ValueError(f"need one latent per tile: {len(latents)} latents for {len(tiles)} tiles")
    pieces = []
    for latent, tile in zip(latents, tiles, strict=True):
        if latent.ndim != 5 or latent.shape[2] != tile.latent_frames:
            raise ValueError(
                f"tile latent {tuple(latent.shape)} must be (B, C, T={tile.latent_frames}, H, W) for latent range "
                f"[{tile.latent_start}, {tile.latent_stop})"
            )
        pieces.append(latent[:, :, tile.drop_prefix :])
    return torch.cat(pieces, dim=2)


def output_frames(requested_frames: int, rounds: int) -> int:
    """Frames the pipeline returns: the requested clip stretched by ``rounds`` x2 temporal rounds."""
    if requested_frames < 1 or rounds < 0:
        raise ValueError(f"need requested_frames >= 1 and rounds >= 0, got {requested_frames}, {rounds}")
    return ((requested_frames - 1) << rounds) + 1


def output_latent_frames(frames: int, *, time_scale: int = DEFAULT_SCALE_FACTORS.time) -> int:
    """Latent frames that decode to ``frames`` pixel frames (the final latent is trimmed to this)."""
    return (frames - 1) // time_scale + 1
