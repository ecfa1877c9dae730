"""Which LoRA files to fuse, at what strength, and how the fused update is rounded, as values (no torch:
command lines check them before any model is imported). The rounding rules themselves are in `lora`."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


class LoraFusionPrecision(str, enum.Enum):
    """How a LoRA update is rounded when it is fused into a weight (see the module docstring)."""

    WEIGHT_DTYPE = "weight-dtype"
    FLOAT32 = "float32"

    @classmethod
    def parse(cls, value: LoraFusionPrecision | str) -> LoraFusionPrecision:
        """`value` as a member, with an error naming the accepted spellings."""
        try:
            return cls(value)
        except ValueError:
            accepted = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"LoRA fusion precision {value!r} is not one of {accepted}") from None


DEFAULT_LORA_FUSION = LoraFusionPrecision.WEIGHT_DTYPE


@dataclass(frozen=True)
class LoraSpec:
    """One LoRA file (any layout `read_lora` accepts) to fuse, at a strength."""

    path: str | Path
    strength: float = 1.0
