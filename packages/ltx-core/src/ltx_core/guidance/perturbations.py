"""Attention perturbations: which attention branches a batch item skips, in which blocks.

Guidance runs conditional, unconditional and perturbed predictions as items of ONE batched forward.
Each item carries a `PerturbationConfig`; the transformer asks the `BatchedPerturbationConfig` for a
per-item keep mask (1 = compute normally, 0 = skip) at every block, and takes shortcuts when no item
or every item skips a branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch


class PerturbationType(Enum):
    """An attention branch of the audio-video block that can be skipped."""

    SKIP_VIDEO_SELF_ATTN = "skip_video_self_attn"
    SKIP_AUDIO_SELF_ATTN = "skip_audio_self_attn"
    SKIP_A2V_CROSS_ATTN = "skip_a2v_cross_attn"
    SKIP_V2A_CROSS_ATTN = "skip_v2a_cross_attn"


@dataclass(frozen=True)
class Perturbation:
    """Skip one attention branch in `blocks` (block indices; None means every block)."""

    type: PerturbationType
    blocks: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, PerturbationType):
            raise ValueError(
                f"perturbation type must be a PerturbationType, got {self.type!r}; "
                f"accepted: {[t.name for t in PerturbationType]}"
            )
        if self.blocks is not None:
            blocks = tuple(self.blocks)  # accept lists from callers, store an immutable tuple
            if any(not isinstance(b, int) or b < 0 for b in blocks):
                raise ValueError(f"perturbation blocks must be non-negative block indices, got {self.blocks!r}")
            object.__setattr__(self, "blocks", blocks)

    def skips(self, type: PerturbationType, block: int) -> bool:
        return self.type == type and (self.blocks is None or block in self.blocks)


@dataclass(frozen=True)
class PerturbationConfig:
    """The perturbations applied to ONE batch item."""

    perturbations: tuple[Perturbation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "perturbations", tuple(self.perturbations))

    def skips(self, type: PerturbationType, block: int) -> bool:
        return any(p.skips(type, block) for p in self.perturbations)

    @staticmethod
    def empty() -> PerturbationConfig:
        return PerturbationConfig()


@dataclass(frozen=True)
class BatchedPerturbationConfig:
    """One `PerturbationConfig` per batch item, in batch order."""

    items: tuple[PerturbationConfig, ...]

    def __post_init__(self) -> None:
        items = tuple(self.items)
        if not items:
            raise ValueError("a batched perturbation config needs at least one item (one per batch item)")
        object.__setattr__(self, "items", items)

    @property
    def batch_size(self) -> int:
        return len(self.items)

    def skip_flags(self, type: PerturbationType, block: int) -> tuple[bool, ...]:
        return tuple(item.skips(type, block) for item in self.items)

    def any_skip(self, type: PerturbationType, block: int) -> bool:
        return any(self.skip_flags(type, block))

    def all_skip(self, type: PerturbationType, block: int) -> bool:
        return all(self.skip_flags(type, block))

    def keep_mask(
        self,
        type: PerturbationType,
        block: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """(B, 1, 1) tensor: 1 where the item computes the branch, 0 where it skips it."""
        keep = [0.0 if skip else 1.0 for skip in self.skip_flags(type, block)]
        return torch.tensor(keep, device=device, dtype=dtype).reshape(-1, 1, 1)

    @staticmethod
    def empty(batch: int) -> BatchedPerturbationConfig:
        if batch < 1:
            raise ValueError(f"batch size must be >= 1, got {batch}")
        return BatchedPerturbationConfig(tuple(PerturbationConfig.empty() for _ in range(batch)))
