"""Collective helpers over `torch.distributed` shared by the multi-GPU pieces (inference only: no autograd)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def world_rank(group: dist.ProcessGroup | None = None) -> tuple[int, int]:
    """(world size, rank) of `group`; (1, 0) when torch.distributed is not initialised."""
    if not dist.is_available() or not dist.is_initialized():
        return 1, 0
    return dist.get_world_size(group), dist.get_rank(group)


def padded_length(length: int, world: int) -> int:
    """The smallest multiple of `world` that holds `length` tokens."""
    return -(-length // world) * world


def all_to_all_heads_to_tokens(x: torch.Tensor, world: int, group: dist.ProcessGroup | None) -> torch.Tensor:
    """(B, t, H * d) local tokens with all heads -> (B, world * t, H / world * d): all tokens, this rank's heads.

    Rank r receives head chunk r of every rank's tokens, stacked in rank order, so the tokens come
    back in their global order."""
    b, t, width = x.shape
    chunks = x.reshape(b, t, world, width // world).permute(2, 0, 1, 3).contiguous()  # (world, B, t, w/world)
    received = torch.empty_like(chunks)
    dist.all_to_all_single(received, chunks, group=group)
    return received.permute(1, 0, 2, 3).reshape(b, world * t, width // world)


def all_to_all_tokens_to_heads(x: torch.Tensor, world: int, group: dist.ProcessGroup | None) -> torch.Tensor:
    """The inverse of `all_to_all_heads_to_tokens`: (B, world * t, w) -> (B, t, world * w)."""
    b, total, width = x.shape
    t = total // world
    chunks = x.reshape(b, world, t, width).permute(1, 0, 2, 3).contiguous()  # (world, B, t, w): token chunk p
    received = torch.empty_like(chunks)
    dist.all_to_all_single(received, chunks, group=group)  # now chunk p = head chunk p of my tokens
    return received.permute(1, 2, 0, 3).reshape(b, t, world * width)


def all_gather_along(x: torch.Tensor, dim: int, world: int, group: dist.ProcessGroup | None) -> torch.Tensor:
    """Concatenate every rank's equally shaped `x` along `dim`, in rank order."""
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def broadcast_tensor(
    x: torch.Tensor | None, src: int = 0, group: dist.ProcessGroup | None = None, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Send rank `src`'s tensor (shape and dtype included) to every rank; other ranks pass None."""
    world, rank = world_rank(group)
    if world == 1:
        assert x is not None
        return x
    meta = [(tuple(x.shape), x.dtype) if rank == src else None]
    dist.broadcast_object_list(meta, src=src, group=group)
    shape, dtype = meta[0]
    buffer = x.contiguous().to(device) if rank == src else torch.empty(shape, dtype=dtype, device=device)
    dist.broadcast(buffer, src=src, group=group)
    return buffer
