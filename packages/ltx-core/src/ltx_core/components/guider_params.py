"""The guidance settings of one modality, as a value (no torch: command lines show and check them before
any model is imported). What they do is in `guiders.MultiModalGuider`."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MultiModalGuiderParams:
    """Guidance settings for one modality of the audio-video model.

    cfg_scale: text CFG (1 = off; needs a negative-prompt pass).
    stg_scale: STG strength (0 = off; needs a pass with self-attention skipped in `stg_blocks`).
    stg_blocks: transformer block indices perturbed for STG.
    rescale_scale: 0 = off; otherwise blend the guided prediction's std back toward cond's std.
    modality_scale: audio<->video guidance (1 = off; needs a pass with the cross-modal attention off).
    skip_step: 0 = guide every step; k > 0 = guide only steps i with i % (k + 1) == 0 and reuse the
        last guided prediction in between.
    """

    cfg_scale: float = 1.0
    stg_scale: float = 0.0
    stg_blocks: tuple[int, ...] = ()
    rescale_scale: float = 0.0
    modality_scale: float = 1.0
    skip_step: int = 0

    def __post_init__(self) -> None:
        blocks = tuple(self.stg_blocks) if self.stg_blocks is not None else ()
        if any(not isinstance(b, int) or b < 0 for b in blocks):
            raise ValueError(f"stg_blocks must be non-negative block indices, got {self.stg_blocks!r}")
        object.__setattr__(self, "stg_blocks", blocks)
        if self.skip_step < 0:
            raise ValueError(f"skip_step must be >= 0, got {self.skip_step}")

    @property
    def needs_uncond_text(self) -> bool:
        return not math.isclose(self.cfg_scale, 1.0)

    @property
    def needs_perturbed(self) -> bool:
        return not math.isclose(self.stg_scale, 0.0)

    @property
    def needs_isolated_modality(self) -> bool:
        return not math.isclose(self.modality_scale, 1.0)

    def skips_step(self, step_index: int) -> bool:
        return self.skip_step > 0 and step_index % (self.skip_step + 1) != 0
