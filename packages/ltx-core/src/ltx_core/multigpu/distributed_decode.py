"""Tiled video VAE decoding spread over the ranks of a process group, blended on rank 0.

The tile layout is the decoder's own (`VideoDecoder.tile_layout`, `DiffusionVideoDecoder.plan_tiles`), so
the result equals the single-process `decode_tiled` with the same tiling. Tile i is decoded by rank i % world; rank 0
walks the tiles in order, decoding its own and receiving the others' pixels point to point, and
blends them with the same band-by-band blender as the single-process path (so it holds at most
one temporal band of pixels). A timestep-conditioned decoder's per-tile noise is drawn on every
rank from the same generator, in tile order, exactly as the single-process decode draws it. The
LTX-2.5 diffusion decoder runs its whole-latent stages 1-3 and draws its canvas noise on every rank
(each tile needs both), then spreads stages 4-5 tile by tile the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.distributed as dist

from ltx_core.devices import available_memory
from ltx_core.model.video_vae.decoder import VideoDecoder
from ltx_core.model.video_vae.diffusion_decoder import DecoderNoise, DiffusionVideoDecoder
from ltx_core.model.video_vae.tiling import TilingConfig, VideoTile, blend_in_time_chunks
from ltx_core.multigpu.comm import world_rank

logger = logging.getLogger(__name__)


def draw_tile_noise(
    decoder: VideoDecoder, latent: torch.Tensor, tiles: Sequence[VideoTile], generator: torch.Generator | None
) -> list[torch.Tensor]:
    """One noise per tile, drawn in tile order as `VideoDecoder.forward` draws them from `generator`."""
    dtype = decoder.conv_in.conv.weight.dtype
    where = latent.device if generator is None else generator.device
    return [
        torch.randn(latent[(slice(None), slice(None), *t.source)].shape, generator=generator, dtype=dtype, device=where)
        for t in tiles
    ]


def decode_tiled_distributed(
    decoder: VideoDecoder,
    latent: torch.Tensor,
    tiling: TilingConfig | None,
    generator: torch.Generator | None = None,
    noise: Sequence[torch.Tensor] | None = None,
    *,
    timestep: torch.Tensor | float | None = None,
    group: dist.ProcessGroup | None = None,
) -> Iterator[torch.Tensor]:
    """`decoder.decode_tiled(latent, tiling, generator)` over all ranks of `group`.

    Every rank must call it with the same latent, tiling and generator state and exhaust the
    iterator: on rank 0 it yields the blended (B, 3, f, H, W) chunks; on the other ranks it decodes
    their tiles, sends them, and yields nothing. `noise` (one per tile of the layout, the same on every
    rank) replaces the draws from `generator`, as in `decode_tiled`.
    """
    world, _ = world_rank(group)
    if world == 1:
        yield from decoder.decode_tiled(latent, tiling, generator, noise, timestep=timestep)
        return
    decoder.check_latent(latent.shape)
    tiles = decoder.tile_layout(latent.shape, tiling)
    if noise is not None and len(noise) != len(tiles):
        raise ValueError(f"tiled decoding needs one noise per tile: {len(tiles)} tiles, got {len(noise)}")
    if noise is None and decoder.timestep_conditioning:
        noise = draw_tile_noise(decoder, latent, tiles, generator)

    def decode(tile: VideoTile) -> torch.Tensor:
        part = latent[(slice(None), slice(None), *tile.source)]
        return decoder(part, timestep=timestep, noise=None if noise is None else noise[tile.index])

    def tile_shape(tile: VideoTile) -> tuple[int, ...]:
        return decoder.pixel_shape(latent[(slice(None), slice(None), *tile.source)].shape)

    batch, channels, *pixel_fhw = decoder.pixel_shape(latent.shape)
    yield from _spread_tiles(
        tiles, decode, tile_shape, (batch, channels), tuple(pixel_fhw), latent.dtype, latent.device, group
    )


def decode_diffusion_tiled_distributed(
    decoder: DiffusionVideoDecoder,
    latent: torch.Tensor,
    tiling: TilingConfig | None,
    noise: DecoderNoise | None = None,
    generator: torch.Generator | None = None,
    *,
    group: dist.ProcessGroup | None = None,
) -> Iterator[torch.Tensor]:
    """`decoder.decode_tiled(latent, tiling, generator, noise)` over all ranks of `group`: every rank must
    call it with the same latent, tiling and noise (a forked `NoiseSource` gives each rank the same draws)
    and exhaust it; rank 0 yields the chunks, the other ranks nothing."""
    world, _ = world_rank(group)
    if world == 1:
        yield from decoder.decode_tiled(latent, tiling, generator, noise)
        return
    plan = decoder.plan_tiles(latent, tiling, generator, noise)
    chunks = _spread_tiles(
        plan.tiles, plan.decode_tile, plan.tile_pixel_shape, plan.batch_channels, plan.canvas_fhw,
        plan.dtype, plan.device, group,
    )  # fmt: skip
    yield from plan.crop(chunks)


def agreed_diffusion_tiling(
    decoder: DiffusionVideoDecoder, latent: torch.Tensor, group: dist.ProcessGroup | None = None
) -> TilingConfig | None:
    """The memory-fitted tiling every rank uses: fitted to the smallest free memory over the ranks (each
    rank runs stages 1-3 whole and some tiles). Untiled when a rank cannot read its free memory, as the
    single-process decode does."""
    free = available_memory(latent.device)
    smallest = torch.tensor([-1 if free is None else free], dtype=torch.int64, device=latent.device)
    dist.all_reduce(smallest, op=dist.ReduceOp.MIN, group=group)
    if int(smallest) < 0:
        logger.info("diffusion VAE decode untiled: a rank cannot read its free memory")
        return None
    return decoder.recommended_tiling(latent.shape, latent.device, free_bytes=int(smallest))


def _spread_tiles(
    tiles: Sequence[VideoTile],
    decode: Callable[[VideoTile], torch.Tensor],
    tile_shape: Callable[[VideoTile], tuple[int, ...]],
    batch_channels: tuple[int, int],
    full_fhw: tuple[int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    group: dist.ProcessGroup | None,
) -> Iterator[torch.Tensor]:
    """Tile i is decoded by rank i % world; the other ranks send theirs to rank 0, which yields the blend."""
    world, rank = world_rank(group)
    ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
    if rank != 0:
        for tile in tiles:
            if tile.index % world == rank:
                dist.send(decode(tile).contiguous(), dst=ranks[0], group=group)
        return

    def decode_or_receive(tile: VideoTile) -> torch.Tensor:
        owner = tile.index % world
        if owner == 0:
            return decode(tile)
        pixels = torch.empty(tile_shape(tile), dtype=dtype, device=device)
        dist.recv(pixels, src=ranks[owner], group=group)
        return pixels

    if len(tiles) == 1:
        yield decode_or_receive(tiles[0])
        return
    yield from blend_in_time_chunks(tiles, decode_or_receive, batch_channels, full_fhw, dtype, device)
