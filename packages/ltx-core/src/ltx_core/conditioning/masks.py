"""Conditioning items that only rewrite the denoise mask / clean tokens of the target grid."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.latent_tools import AudioLatentTools, LatentTools, VideoLatentTools
from ltx_core.types import LatentState


@dataclass(frozen=True, eq=False)
class VideoConditionByMask:
    """Inpainting-style conditioning on the target grid.

    `mask` (B, F, H, W) over latent cells: 1 = keep `latent` (B, C, F, H, W) there (clean value, denoise
    mask 1 - strength), 0 = leave the token as it was. In between blends both.
    """

    latent: torch.Tensor
    mask: torch.Tensor
    strength: float = 1.0

    def apply_to(self, state: LatentState, tools: VideoLatentTools) -> LatentState:
        check_strength(self.strength)
        if tuple(self.latent.shape) != tools.target_shape.dims:
            raise ConditioningError(
                f"mask conditioning latent {tuple(self.latent.shape)} must equal the target {tools.target_shape.dims}"
            )
        t = tools.target_shape
        cells = (t.batch, t.frames, t.height, t.width)
        if tuple(self.mask.shape) != cells:
            raise ConditioningError(f"conditioning mask {tuple(self.mask.shape)} must be (B, F, H, W) = {cells}")
        n = tools.token_count
        tokens = tools.patchify(self.latent).to(state.clean_latent)
        keep = tools.patchify(self.mask.unsqueeze(1)).to(device=state.latent.device, dtype=torch.float32)
        clean = state.clean_latent.clone()
        clean[:, :n] = (clean[:, :n] * (1 - keep) + tokens * keep).to(clean.dtype)
        denoise = state.denoise_mask.clone()
        denoise[:, :n] = denoise[:, :n] * (1 - keep) + (1.0 - self.strength) * keep
        return replace(state, clean_latent=clean, denoise_mask=denoise)


@dataclass(frozen=True)
class TemporalRegionMask:
    """Regenerate only the time range [start_s, end_s) (retake): target tokens whose time extent overlaps
    it get denoise mask 1, all others 0 (kept at their clean value, i.e. the source latent given as the
    initial latent). Works for video (latent-frame extents in seconds, with the causal first frame) and
    audio tokens alike; appended conditioning tokens are left as they are.
    """

    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        if not self.end_s > self.start_s:
            raise ConditioningError(f"region end {self.end_s} s must be after its start {self.start_s} s")

    def apply_to(self, state: LatentState, tools: LatentTools) -> LatentState:
        if not isinstance(tools, (VideoLatentTools, AudioLatentTools)):
            raise ConditioningError(f"TemporalRegionMask needs video or audio latent tools, got {type(tools).__name__}")
        n = tools.token_count
        time = tools.positions(state.denoise_mask.device)[:, 0]  # (B, N, 2) seconds
        inside = (time[..., 1] > self.start_s) & (time[..., 0] < self.end_s)
        denoise = state.denoise_mask.clone()
        denoise[:, :n] = inside.unsqueeze(-1).to(denoise.dtype)
        return replace(state, denoise_mask=denoise)


@dataclass(frozen=True, eq=False)
class FrozenModality:
    """Hold a whole modality fixed (e.g. the audio of audio-to-video): every token's denoise mask is 0 and
    the state is marked frozen, so the model also sees sigma 0 for it. With `latent` given (the encoded
    source, target-grid shape) it becomes both the clean and the current tokens of the target grid.
    Apply it after items that append tokens, since it zeros the mask of everything present.
    """

    latent: torch.Tensor | None = None

    def apply_to(self, state: LatentState, tools: LatentTools) -> LatentState:
        latent, clean = state.latent, state.clean_latent
        if self.latent is not None:
            expected = tools.target_shape.dims  # type: ignore[attr-defined]
            if tuple(self.latent.shape) != tuple(expected):
                raise ConditioningError(f"frozen latent {tuple(self.latent.shape)} must equal the target {expected}")
            n = tools.token_count
            tokens = tools.patchify(self.latent).to(state.latent)
            latent, clean = latent.clone(), clean.clone()
            latent[:, :n] = tokens
            clean[:, :n] = tokens
        return replace(
            state, latent=latent, clean_latent=clean, denoise_mask=torch.zeros_like(state.denoise_mask), frozen=True
        )
