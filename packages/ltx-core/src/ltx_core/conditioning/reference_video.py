"""IC-LoRA reference video: append a (possibly smaller, possibly slower) reference latent's tokens."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ltx_core.conditioning.attention import AttentionStrength
from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.conditioning.keyframe import append_tokens
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.types import LatentState, VideoLatentShape


@dataclass(frozen=True, eq=False)
class VideoConditionByReferenceLatent:
    """Append the reference latent (B, C, F, H, W) as clean tokens (mask 1 - strength).

    IC-LoRAs learn with reference and target tokens side by side; a reference trained at lower
    resolution or frame rate keeps the target's coordinate frame through its positions:
      - height/width (pixels) are multiplied by `downscale_factor` (target / reference resolution);
      - time: the reference's seconds are computed at fps / `temporal_scale_factor` S; for S != 1 they are
        shifted back by (S - 1) target frame lengths (the end time of the target's first token) and
        clamped at 0, so the reference's last patch ends with the target's last patch.
    Both factors come from the IC-LoRA's metadata. Optional `attention_strength` limits attention
    between the reference and the target grid.
    """

    latent: torch.Tensor
    downscale_factor: int = 1
    temporal_scale_factor: int = 1
    strength: float = 1.0
    attention_strength: AttentionStrength | None = None

    def apply_to(self, state: LatentState, tools: VideoLatentTools) -> LatentState:
        check_strength(self.strength)
        if self.latent.dim() != 5:
            raise ConditioningError(f"reference latent must be (B, C, F, H, W), got {tuple(self.latent.shape)}")
        if self.downscale_factor < 1 or self.temporal_scale_factor < 1:
            raise ConditioningError(
                f"downscale_factor and temporal_scale_factor must be >= 1, got "
                f"{self.downscale_factor} and {self.temporal_scale_factor}"
            )
        scale_t = self.temporal_scale_factor
        patchifier = tools.patchifier
        bounds = patchifier.pixel_bounds(
            patchifier.latent_bounds(VideoLatentShape(*self.latent.shape), state.positions.device),
            tools.scale,
            tools.causal_fix,
        ).to(torch.float32)
        time = bounds[:, 0] / (tools.fps / scale_t)
        if scale_t != 1:
            first_token_end = state.positions[:, 0, 0:1, 1:2].to(torch.float32)  # (B, 1, 1): one target frame
            time = torch.clamp(time - (scale_t - 1) * first_token_end, min=0)
        positions = torch.cat([time.unsqueeze(1), bounds[:, 1:] * self.downscale_factor], dim=1)
        return append_tokens(
            state, tools.patchify(self.latent), positions, self.strength, tools.token_count, self.attention_strength
        )
