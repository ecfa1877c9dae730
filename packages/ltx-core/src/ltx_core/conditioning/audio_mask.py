"""Audio inpainting / extension: keep chosen latent steps of the target audio at given clean values."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.latent_tools import AudioLatentTools
from ltx_core.types import LatentState


@dataclass(frozen=True, eq=False)
class AudioConditionByMask:
    """`mask` (B, T) over the target's audio latent steps: 1 = the step takes `latent` (B, C, T, M) as
    its clean value with denoise mask 1 - strength, 0 = the step is left as it was; values in between
    blend both. An audio prefix is a mask of ones over the first steps, a suffix over the last ones.
    """

    latent: torch.Tensor
    mask: torch.Tensor
    strength: float = 1.0

    @classmethod
    def span(cls, latent: torch.Tensor, target_steps: int, start: int, strength: float = 1.0) -> AudioConditionByMask:
        """`latent` (B, C, T', M) placed at steps [start, start + T') of a `target_steps`-step grid."""
        b, c, steps, m = latent.shape
        if start < 0 or start + steps > target_steps:
            raise ConditioningError(
                f"audio latent steps [{start}, {start + steps}) fall outside the target's {target_steps} steps"
            )
        full = latent.new_zeros((b, c, target_steps, m))
        full[:, :, start : start + steps] = latent
        mask = torch.zeros((b, target_steps), dtype=torch.float32, device=latent.device)
        mask[:, start : start + steps] = 1.0
        return cls(full, mask, strength)

    def apply_to(self, state: LatentState, tools: AudioLatentTools) -> LatentState:
        check_strength(self.strength)
        if tuple(self.latent.shape) != tools.target_shape.dims:
            raise ConditioningError(
                f"audio mask conditioning latent {tuple(self.latent.shape)} must equal the target "
                f"{tools.target_shape.dims}"
            )
        steps = (tools.target_shape.batch, tools.target_shape.frames)
        if tuple(self.mask.shape) != steps:
            raise ConditioningError(f"audio conditioning mask {tuple(self.mask.shape)} must be (B, T) = {steps}")
        n = tools.token_count
        tokens = tools.patchify(self.latent).to(state.clean_latent)
        keep = self.mask.to(device=state.latent.device, dtype=torch.float32).unsqueeze(-1)
        clean = state.clean_latent.clone()
        clean[:, :n] = (clean[:, :n] * (1 - keep) + tokens * keep).to(clean.dtype)
        denoise = state.denoise_mask.clone()
        denoise[:, :n] = denoise[:, :n] * (1 - keep) + (1.0 - self.strength) * keep
        return replace(state, clean_latent=clean, denoise_mask=denoise)
