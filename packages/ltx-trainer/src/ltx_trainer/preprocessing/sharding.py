"""Which samples this process handles when a command runs under `accelerate launch` / torchrun."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    rank: int
    world_size: int

    def take(self, items: Sequence[T]) -> list[T]:
        """Every `world_size`-th item starting at `rank` (interleaved, so ranks get similar mixes)."""
        return list(items[self.rank :: self.world_size])

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def current_shard() -> Shard:
    """RANK / WORLD_SIZE from the environment (set by accelerate and torchrun); one shard otherwise.

    The launcher's variables are read directly rather than through an initialised process group:
    preprocessing needs no collective communication, only a disjoint split of the samples.
    """
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"invalid process layout RANK={rank} WORLD_SIZE={world}; expected 0 <= RANK < WORLD_SIZE")
    return Shard(rank=rank, world_size=world)


def shard_device(device: str | None) -> str | None:
    """On a multi-GPU launch each rank uses its own GPU (`cuda:LOCAL_RANK`) when the device is plain
    'cuda' or left to the default and CUDA is present; an explicit index or another device is kept."""
    local = os.environ.get("LOCAL_RANK")
    if local is None or device not in (None, "cuda"):
        return device
    import torch

    if device is None and not torch.cuda.is_available():
        return device
    return f"cuda:{int(local)}"
