"""Tiled data-parallel execution of the LTX transformer over the ranks of a process group.

The video's latent grid (frames, height, width) is cut into overlapping spatial tiles, dealt out to the
ranks round-robin (more tiles than ranks is fine). Each rank runs the whole transformer on each of its
tiles as a small clip of its own: the tile's tokens, positions shifted so the tile starts at zero (the
range the model was trained on), the whole audio stream. The tile outputs are blended with weights that
ramp linearly across the shared bands and sum to one at every token, and one `all_reduce(SUM)` gives
every rank the blended video. The audio output is the mean over all tile forwards.

This is an approximation, not a faithful split like sequence parallelism: a tile never attends to the
rest of the frame. It is meant for refinement stages that start from an already coherent latent (stage 2
of the two-stage pipelines), where each tile's context is enough. The audio mean is no audio result:
each tile forward saw a different part of the video; pipelines ship the audio of the previous stage.

Conditioning tokens appended after the grid's tokens (guiding keyframes) go to every tile they overlap
in all three axes; tokens with a negative start time (references) go to every tile. Each such token's
output is the mean over the tiles that kept it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
from torch import nn

from ltx_core.guidance.perturbations import BatchedPerturbationConfig
from ltx_core.latent_tiles import LatentTile, TileCounts, latent_tiles
from ltx_core.model.transformer.model import Modality
from ltx_core.multigpu.comm import world_rank
from ltx_core.multigpu.wrapped_transformer import WrappedTransformer


@dataclass(frozen=True)
class TokenTile:
    """One tile as token indices into the (F * H * W) grid tokens, with its normalised blend weights."""

    index: int
    tokens: torch.Tensor
    """(n,) int64 raster-order (frame, row, column) indices of the tile's grid tokens."""
    weights: torch.Tensor
    """(n,) float32 blend weights; summed over all tiles they are 1 at every grid token."""


def token_tiles(grid: tuple[int, int, int], counts: TileCounts) -> list[TokenTile]:
    """The tiles of a (frames, height, width) token grid, each with its weights normalised over all tiles."""
    frames, height, width = grid
    tiles: list[LatentTile] = latent_tiles((1, 1, frames, height, width), counts)
    weight_sum = torch.zeros(frames, height, width)
    for tile in tiles:
        weight_sum[tile.cells] += tile.weights
    flat = torch.arange(frames * height * width).view(frames, height, width)
    return [
        TokenTile(tile.index, flat[tile.cells].reshape(-1), (tile.weights / weight_sum[tile.cells]).reshape(-1))
        for tile in tiles
    ]


def _kept_extra_tokens(positions: torch.Tensor, grid_tokens: int, tile: TokenTile) -> torch.Tensor:
    """Indices (>= grid_tokens) of the appended tokens that `tile` keeps: those overlapping the tile's
    [start, end) extent on every axis, and every token that starts before time zero. Decided on batch
    item 0 (the pipelines give every item the same positions)."""
    pos = positions[0]  # (axes, T, 2)
    extra = pos[:, grid_tokens:]
    if extra.shape[1] == 0:
        return torch.empty(0, dtype=torch.long)
    own = pos[:, tile.tokens.to(pos.device)]
    lo, hi = own[..., 0].amin(dim=1, keepdim=True), own[..., 1].amax(dim=1, keepdim=True)
    overlaps = ((extra[..., 0] < hi) & (extra[..., 1] > lo)).all(dim=0)
    reference = extra[0, :, 0] < 0
    return (torch.nonzero(overlaps | reference).reshape(-1) + grid_tokens).cpu()


def _tile_modality(video: Modality, tokens: torch.Tensor, grid_count: int, normalize_positions: bool) -> Modality:
    """The sub-clip of `video` made of `tokens` (the first `grid_count` of them grid tokens)."""
    t = video.latent.shape[1]
    idx = tokens.to(video.latent.device)
    timesteps = video.timesteps
    if timesteps.ndim >= 2 and timesteps.shape[1] == t:
        timesteps = timesteps.index_select(1, idx)
    positions = video.positions.index_select(2, idx.to(video.positions.device))
    if normalize_positions:
        # Shift every axis so the tile's grid tokens start at zero; interval widths are unchanged.
        origin = positions[:, :, :grid_count, 0].amin(dim=2)  # (B, axes)
        positions = positions - origin[:, :, None, None]
    mask = video.attention_mask
    if mask is not None:
        mask = mask.index_select(1, idx).index_select(2, idx)
    keyframes = video.keyframes_mask
    if keyframes is not None:
        keyframes = keyframes.reshape(keyframes.shape[0], t, -1).index_select(1, idx.to(keyframes.device))
    return replace(
        video,
        latent=video.latent.index_select(1, idx),
        timesteps=timesteps,
        positions=positions,
        attention_mask=mask,
        keyframes_mask=keyframes,
    )


class TiledDataParallelTransformer(WrappedTransformer):
    """Runs `model` (an `LTXModel`, or anything with its call signature) tile by tile over the ranks of
    `group`; returns the blended velocities, identical on every rank.

    `grid` is the (frames, height, width) token grid of the video's generated tokens, which come first
    in the video stream in raster order; `counts` how many tiles (and the overlap, in latent cells) per
    axis. With one rank every tile runs locally (the same result as any world size).
    """

    def __init__(
        self,
        model: nn.Module,
        grid: tuple[int, int, int],
        counts: TileCounts,
        group: dist.ProcessGroup | None = None,
        *,
        normalize_positions: bool = True,
    ) -> None:
        super().__init__(model, group)
        self.grid = tuple(grid)
        self.tiles = token_tiles(self.grid, counts)
        self.normalize_positions = normalize_positions
        world, rank = world_rank(group)
        self.world = world
        if len(self.tiles) < world:
            # Every rank computes the same layout, so all of them refuse together (no rank left waiting).
            raise ValueError(
                f"the {'x'.join(map(str, self.grid))} latent grid splits into {len(self.tiles)} tiles, fewer than the "
                f"{world} ranks; use at most {len(self.tiles)} ranks or a larger output"
            )
        self.local_tiles = [tile for tile in self.tiles if tile.index % world == rank]

    def forward(
        self,
        video: Modality | None,
        audio: Modality | None,
        perturbations: BatchedPerturbationConfig | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if video is None:
            return self.model(video, audio, perturbations)
        frames, height, width = self.grid
        grid_tokens = frames * height * width
        b, t, _ = video.latent.shape
        if t < grid_tokens:
            raise ValueError(
                f"the video stream has {t} tokens, fewer than its {frames}x{height}x{width} grid ({grid_tokens})"
            )
        # Every rank works out which appended tokens each tile keeps, so all agree on the averaging weights.
        kept = [_kept_extra_tokens(video.positions, grid_tokens, tile) for tile in self.tiles]
        keepers = torch.zeros(t - grid_tokens)
        for extra in kept:
            keepers[extra - grid_tokens] += 1

        video_sum: torch.Tensor | None = None
        audio_sum: torch.Tensor | None = None
        for tile in self.local_tiles:
            extra = kept[tile.index]
            tokens = torch.cat([tile.tokens, extra])
            weights = torch.cat([tile.weights, 1.0 / keepers[extra - grid_tokens]])
            v_out, a_out = self.model(
                _tile_modality(video, tokens, tile.tokens.numel(), self.normalize_positions), audio, perturbations
            )
            if video_sum is None:
                video_sum = torch.zeros(b, t, v_out.shape[-1], dtype=torch.float32, device=v_out.device)
            device = v_out.device
            video_sum.index_add_(1, tokens.to(device), v_out.float() * weights.to(device)[None, :, None])
            if a_out is not None:
                audio_sum = a_out.float() if audio_sum is None else audio_sum + a_out.float()
            out_dtype, audio_dtype = v_out.dtype, None if a_out is None else a_out.dtype
        assert video_sum is not None  # every rank holds a tile (checked at construction)
        if self.world > 1:
            dist.all_reduce(video_sum, op=dist.ReduceOp.SUM, group=self.group)
            if audio_sum is not None:
                dist.all_reduce(audio_sum, op=dist.ReduceOp.SUM, group=self.group)
        video_out = video_sum.to(out_dtype)
        audio_out = None if audio_sum is None else (audio_sum / len(self.tiles)).to(audio_dtype)
        return video_out, audio_out
