"""Tiled video VAE decoding spread over the ranks of a process group, blended on rank 0.

The tile layout is the decoder's own (`VideoDecoder.tile_layout`), so the result equals the
single-process `decode_tiled` with the same tiling. Tile i is decoded by rank i % world; rank 0
walks the tiles in order, decoding its own and receiving the others' pixels point to point, and
blends them with the same band-by-band blender as the single-process path (so it holds at most
one temporal band of pixels). A timestep-conditioned decoder's per-tile noise is drawn on every
rank from the same generator, in tile order, exactly as the single-process decode draws it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist

from ltx_core.model.video_vae.decoder import VideoDecoder
from ltx_core.model.video_vae.tiling import TilingConfig, VideoTile, blend_in_time_chunks
from ltx_core.multigpu.comm import world_rank


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
    world, rank = world_rank(group)
    if world == 1:
        yield from decoder.decode_tiled(latent, tiling, generator, noise, timestep=timestep)
        return
    decoder.check_latent(latent.shape)
    tiles = decoder.tile_layout(latent.shape, tiling)
    if noise is not None and len(noise) != len(tiles):
        raise ValueError(f"tiled decoding needs one noise per tile: {len(tiles)} tiles, got {len(noise)}")
    if noise is None and decoder.timestep_conditioning:
        noise = draw_tile_noise(decoder, latent, tiles, generator)
    ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))

    def decode(tile: VideoTile) -> torch.Tensor:
        part = latent[(slice(None), slice(None), *tile.source)]
        return decoder(part, timestep=timestep, noise=None if noise is None else noise[tile.index])

    if rank != 0:
        for tile in tiles:
            if tile.index % world == rank:
                dist.send(decode(tile).contiguous(), dst=ranks[0], group=group)
        return

    def decode_or_receive(tile: VideoTile) -> torch.Tensor:
        owner = tile.index % world
        if owner == 0:
            return decode(tile)
        part_shape = latent[(slice(None), slice(None), *tile.source)].shape
        pixels = torch.empty(decoder.pixel_shape(part_shape), dtype=latent.dtype, device=latent.device)
        dist.recv(pixels, src=ranks[owner], group=group)
        return pixels

    if len(tiles) == 1:
        yield decode_or_receive(tiles[0])
        return
    batch, channels, *pixel_fhw = decoder.pixel_shape(latent.shape)
    yield from blend_in_time_chunks(
        tiles, decode_or_receive, (batch, channels), tuple(pixel_fhw), latent.dtype, latent.device
    )
