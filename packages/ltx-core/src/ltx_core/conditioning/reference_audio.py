"""Reference audio: append a reference audio latent's tokens after the target audio."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ltx_core.conditioning.attention import AttentionStrength
from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.conditioning.keyframe import append_tokens
from ltx_core.latent_tools import AudioLatentTools
from ltx_core.types import AudioLatentShape, LatentState

# Gap left between a reference placed before the target and the target's start (Dub-It training layout).
REFERENCE_AUDIO_GAP_S = 0.04


@dataclass(frozen=True, eq=False)
class AudioConditionByReferenceLatent:
    """Append the reference audio latent (B, C, T, M) as clean tokens (mask 1 - strength).

    Positions default to the reference's own timing from 0 s, shifted by `time_shift_s`; `positions`
    (B, 1, T, 2) overrides them. `preceding(...)` places the reference before the target's start.
    """

    latent: torch.Tensor
    strength: float = 1.0
    time_shift_s: float = 0.0
    positions: torch.Tensor | None = None
    attention_strength: AttentionStrength | None = None

    @classmethod
    def preceding(
        cls, latent: torch.Tensor, strength: float = 1.0, gap_s: float = REFERENCE_AUDIO_GAP_S
    ) -> AudioConditionByReferenceLatent:
        """Reference timed at negative seconds: it ends `gap_s` before the target's 0 s."""
        duration = float(AudioLatentTools(AudioLatentShape(*latent.shape)).positions()[:, :, -1, 1].max())
        return cls(latent, strength, time_shift_s=-duration - gap_s)

    def apply_to(self, state: LatentState, tools: AudioLatentTools) -> LatentState:
        check_strength(self.strength)
        if self.latent.dim() != 4:
            raise ConditioningError(f"reference audio latent must be (B, C, T, M), got {tuple(self.latent.shape)}")
        if self.positions is not None:
            positions = self.positions.to(torch.float32)
        else:
            positions = tools.positions_for(AudioLatentShape(*self.latent.shape), state.positions.device)
            if self.time_shift_s:
                positions = positions + self.time_shift_s
        return append_tokens(
            state, tools.patchify(self.latent), positions, self.strength, tools.token_count, self.attention_strength
        )
