"""Replace target tokens at a latent frame by given latents (image-to-video at frame 0)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.types import LatentState


@dataclass(frozen=True, eq=False)
class VideoConditionByLatentIndex:
    """The target grid's latent frames [latent_idx, latent_idx + F) take `latent` (B, C, F, H, W) as their
    clean tokens with denoise mask 1 - strength (1 = kept exactly, e.g. the first frame of an
    image-to-video run). The noisy tokens are untouched here; the noiser blends them toward the clean
    ones by the mask. The latent must match the target's batch, channels, height and width.
    """

    latent: torch.Tensor
    strength: float = 1.0
    latent_idx: int = 0

    def apply_to(self, state: LatentState, tools: VideoLatentTools) -> LatentState:
        check_strength(self.strength)
        target = tools.target_shape
        if self.latent.dim() != 5:
            raise ConditioningError(f"conditioning latent must be (B, C, F, H, W), got {tuple(self.latent.shape)}")
        b, c, f, h, w = self.latent.shape
        if (b, c, h, w) != (target.batch, target.channels, target.height, target.width):
            raise ConditioningError(
                f"conditioning latent {tuple(self.latent.shape)} must match the target's batch, channels, height "
                f"and width {(target.batch, target.channels, target.height, target.width)}; resize the image first"
            )
        if self.latent_idx < 0 or self.latent_idx + f > target.frames:
            raise ConditioningError(
                f"latent frames [{self.latent_idx}, {self.latent_idx + f}) fall outside the target's "
                f"{target.frames} latent frames"
            )
        tokens = tools.patchify(self.latent).to(device=state.clean_latent.device, dtype=state.clean_latent.dtype)
        start = self.latent_idx * tools.tokens_per_latent_frame
        stop = start + tokens.shape[1]
        clean = state.clean_latent.clone()
        clean[:, start:stop] = tokens
        mask = state.denoise_mask.clone()
        mask[:, start:stop] = 1.0 - self.strength
        return replace(state, clean_latent=clean, denoise_mask=mask)
