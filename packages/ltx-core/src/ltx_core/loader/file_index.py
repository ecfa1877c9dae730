"""The index of a weight file: where each tensor lies and what it is, and the file's metadata. Safetensors
files (`safetensors_header`) and GGUF files (`gguf_file`) are both read into this one value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives in the file and what it is."""

    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, Any]
    """`__metadata__` values, JSON-decoded where they are JSON, else the raw string."""
