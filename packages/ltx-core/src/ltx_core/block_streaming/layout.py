"""Where each weight of a transformer block lives inside one contiguous byte buffer.

Every block of the transformer has the same parameter names, shapes and dtypes, so one layout
serves all of them: a block travels between host and device as a single contiguous copy, and typed
views are carved out of the buffer at fixed offsets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from ltx_core.quantization.gguf import byte_shape, qtype_named, quantized

_ALIGN = 64  # bytes; keeps every view aligned for any dtype and for vectorised kernels


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass(frozen=True)
class TensorPlace:
    name: str  # name inside the block, e.g. "attn1.to_q.weight"
    shape: tuple[int, ...]
    dtype: torch.dtype
    offset: int
    nbytes: int
    qtype: str | None = None  # a ggml block type (GGUF file): the place holds its raw blocks


@dataclass(frozen=True)
class BlockLayout:
    places: tuple[TensorPlace, ...]
    nbytes: int

    @classmethod
    def of(
        cls,
        block: nn.Module,
        dtype_of: Callable[[str, torch.Tensor], torch.dtype],
        qtypes: Mapping[str, str] | None = None,
    ) -> BlockLayout:
        """The layout of `block` (meta tensors are fine); `dtype_of(name, tensor)` gives each stored dtype,
        `qtypes` the ggml block type of the tensors a GGUF file keeps quantized (by name in the block)."""
        places = []
        offset = 0
        for name, tensor in (*block.named_parameters(), *block.named_buffers()):
            qtype = (qtypes or {}).get(name)
            if qtype is not None:
                raw = byte_shape(qtype_named(qtype), tuple(tensor.shape))
                places.append(TensorPlace(name, tuple(tensor.shape), torch.uint8, offset, math.prod(raw), qtype))
                offset = _aligned(offset + places[-1].nbytes)
                continue
            dtype = dtype_of(name, tensor)
            nbytes = tensor.numel() * torch.empty((), dtype=dtype).element_size()
            places.append(TensorPlace(name, tuple(tensor.shape), dtype, offset, nbytes))
            offset = _aligned(offset + nbytes)
        return cls(tuple(places), max(offset, _ALIGN))

    @property
    def names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.places)

    def place(self, name: str) -> TensorPlace:
        for p in self.places:
            if p.name == name:
                return p
        raise KeyError(name)

    def views(self, buffer: torch.Tensor) -> dict[str, torch.Tensor]:
        """Typed views of a uint8 buffer of at least `nbytes` bytes."""
        if buffer.dtype != torch.uint8 or buffer.numel() < self.nbytes:
            raise ValueError(f"block buffer must hold {self.nbytes} uint8 bytes, got {buffer.numel()} {buffer.dtype}")
        return {p.name: _view(buffer[p.offset : p.offset + p.nbytes], p) for p in self.places}

    def allocate(self, device: torch.device, *, pin: bool = False) -> torch.Tensor:
        return torch.empty(self.nbytes, dtype=torch.uint8, device=device, pin_memory=pin)


def _view(data: torch.Tensor, place: TensorPlace) -> torch.Tensor:
    if place.qtype is None:
        return data.view(place.dtype).view(place.shape)
    qtype = qtype_named(place.qtype)
    return quantized(data.view(byte_shape(qtype, place.shape)), qtype, place.shape)
