"""Where a training step's random numbers come from.

The strategy asks for every draw by name (`video.noise`, `audio.sigma_normal`, ...) through a `Draws`
object instead of calling torch's global generator directly. Training uses `TorchDraws` (a seeded
generator, so resume can restore it); the parity test uses `ReplayDraws`, which serves the reference's
recorded draws in order and fails if the strategy asks for a different name or shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import torch


class Draws(Protocol):
    def randn(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor: ...

    def rand(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor: ...


class TorchDraws:
    """Draws from a torch generator (None = the global one), generated on the CPU for device independence."""

    def __init__(self, generator: torch.Generator | None = None) -> None:
        self.generator = generator

    def randn(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(tuple(shape), generator=self.generator).to(device=device, dtype=dtype)

    def rand(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return torch.rand(tuple(shape), generator=self.generator).to(device=device, dtype=dtype)


class ReplayDraws:
    """Serves recorded draws: the i-th request must be `order[i]` with the recorded shape."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], order: Sequence[str]) -> None:
        self.tensors = dict(tensors)
        self.order = list(order)
        self.served: list[str] = []

    def _next(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        index = len(self.served)
        if index >= len(self.order):
            raise AssertionError(f"draw {name!r} requested after all {len(self.order)} recorded draws were served")
        if self.order[index] != name:
            raise AssertionError(f"draw #{index} requested as {name!r}, recorded as {self.order[index]!r}")
        value = self.tensors[name]
        if tuple(value.shape) != tuple(shape):
            raise AssertionError(f"draw {name!r} requested with shape {tuple(shape)}, recorded {tuple(value.shape)}")
        self.served.append(name)
        return value.to(device=device, dtype=dtype)

    randn = _next
    rand = _next

    @property
    def finished(self) -> bool:
        return len(self.served) == len(self.order)
