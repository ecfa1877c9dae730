"""Where a training step's random numbers come from.

The strategy asks for every draw by name (`video.noise`, `audio.sigma_normal`, ...) through a `Draws`
object instead of calling torch's global generator directly. Training uses `TorchDraws` (a seeded
generator, so resume can restore it); the parity test uses `ReplayDraws`, which serves the reference's
recorded draws in order and fails if the strategy asks for a different name or shape.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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


def _stream_seed(*parts: int | str) -> int:
    text = "/".join(str(p) for p in parts).encode()
    return zlib.crc32(text) | (zlib.adler32(text) << 32)


class PerSampleDraws:
    """Draws keyed by (seed, step, sample, name): row i of a per-sample draw comes from its own generator.

    A sample's noise and sigma then depend only on the run seed, the optimizer step and which sample it
    is, not on the batch it shares or the process it runs on: one process with batch 2b draws exactly
    what two processes with batch b draw, and a resumed run needs no generator state. Batch-wide draws
    (shape ()) are keyed by (seed, step, name).
    """

    def __init__(self, seed: int, step: int, sample_ids: Sequence[int]) -> None:
        self.seed = seed
        self.step = step
        self.sample_ids = list(sample_ids)

    def _draw(self, fn, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        shape = tuple(shape)
        if not shape:
            g = torch.Generator().manual_seed(_stream_seed(self.seed, self.step, "batch", name))
            return fn((), generator=g).to(device=device, dtype=dtype)
        if shape[0] != len(self.sample_ids):
            raise ValueError(f"draw {name!r} has {shape[0]} rows for a batch of {len(self.sample_ids)} samples")
        rows = [
            fn(shape[1:], generator=torch.Generator().manual_seed(_stream_seed(self.seed, self.step, sid, name)))
            for sid in self.sample_ids
        ]
        return torch.stack(rows).to(device=device, dtype=dtype)

    def randn(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return self._draw(torch.randn, name, shape, device, dtype)

    def rand(self, name: str, shape: Sequence[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return self._draw(torch.rand, name, shape, device, dtype)


@contextmanager
def keyed_global_rng(seed: int, step: int, rank: int, device: torch.device) -> Iterator[None]:
    """Inside the block, torch's global generators (CPU and `device`'s) start from a state keyed by
    (seed, micro-step, rank); outside it they are as they were.

    For what draws from the global generator and cannot be given one of its own: peft's LoRA dropout
    (`nn.Dropout`). Its masks then depend on the micro-step and process only, not on what else drew before
    (a DataLoader iterator, validation, a resumed run's start), so a resumed run draws the masks the
    uninterrupted run drew, without any generator state saved. Gradient checkpointing's recompute
    restores the state it stashed during the forward, so it replays the same masks.
    """
    key = _stream_seed(seed, step, rank, "global")
    if device.type == "cpu":
        forked: list[int] = []
    else:
        forked = [device.index if device.index is not None else torch.get_device_module(device.type).current_device()]
    with torch.random.fork_rng(devices=forked, device_type=None if device.type == "cpu" else device.type):
        torch.default_generator.manual_seed(key)
        if forked:
            module = torch.get_device_module(device.type)
            with module.device(forked[0]) if hasattr(module, "device") else contextlib.nullcontext():
                module.manual_seed(key)  # the current device's generator only
        yield
