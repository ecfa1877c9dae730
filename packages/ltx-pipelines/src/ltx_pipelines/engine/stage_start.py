"""The initial states of one denoising stage: built, conditioned, then noised to the stage's first sigma.

Kept apart from `stage_blocks.run_denoising_stage` so that its body reads as the stage's phases. The
order of work here is part of the reproducibility contract: conditionings are applied before the noise
(they fix the token layout and so the noise layout), and the video draw (`<stage>.video`) comes before
the audio draw (`<stage>.audio`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ltx_core.components.noisers import add_noise
from ltx_core.conditioning import ConditioningItem, VideoGeneratedKeyframeSlots, apply_conditionings
from ltx_core.latent_tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import LatentState
from ltx_pipelines.engine.noise_sources import NoiseSource


def keyframe_slot_items(conditionings: Sequence[ConditioningItem]) -> list[VideoGeneratedKeyframeSlots]:
    """The stage's keyframe slots item (a list of at most one; a stage reads back one set of slots)."""
    items = [item for item in conditionings if isinstance(item, VideoGeneratedKeyframeSlots)]
    if len(items) > 1:
        raise ValueError(f"a stage takes one keyframe slots item, got {len(items)}")
    return items


@dataclass(frozen=True)
class StageStart:
    """Where a stage's initial states come from: its noise source and the stage name that prefixes the
    draw names, the sigma they are noised to, and the states' device and dtype."""

    noise: NoiseSource
    stage: str
    noise_scale: float
    device: torch.device
    dtype: torch.dtype

    def _initial(self, latent: torch.Tensor | None) -> torch.Tensor | None:
        return None if latent is None else latent.to(device=self.device, dtype=self.dtype)

    def _noised(self, state: LatentState, modality: str) -> LatentState:
        draw = self.noise(f"{self.stage}.{modality}", state.latent.shape, device=self.device, dtype=self.dtype)
        return add_noise(state, draw, self.noise_scale)

    def video(
        self, tools: VideoLatentTools, conditionings: Sequence[ConditioningItem], initial: torch.Tensor | None
    ) -> tuple[LatentState, int]:
        """The noised video state and the token index where a keyframe slots item appended its tokens
        (0 without one)."""
        state = tools.create_initial_state(device=self.device, dtype=self.dtype, initial_latent=self._initial(initial))
        slot_start = 0
        for item in conditionings:
            if isinstance(item, VideoGeneratedKeyframeSlots):
                slot_start = state.latent.shape[1]  # its tokens are appended here
            state = item.apply_to(state, tools)
        return self._noised(state, "video"), slot_start

    def audio(
        self, tools: AudioLatentTools, conditionings: Sequence[ConditioningItem], initial: torch.Tensor | None
    ) -> LatentState:
        state = tools.create_initial_state(device=self.device, dtype=self.dtype, initial_latent=self._initial(initial))
        state = apply_conditionings(state, list(conditionings), tools)
        return self._noised(state, "audio")
