"""Append keyframe tokens placed at a pixel-frame index (image guidance anywhere in the clip)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ltx_core.conditioning.attention import AttentionStrength, extend_attention_mask
from ltx_core.conditioning.item import ConditioningError, check_strength
from ltx_core.latent_tools import VideoLatentTools
from ltx_core.types import LatentState, VideoLatentShape


def append_tokens(
    state: LatentState,
    tokens: torch.Tensor,
    positions: torch.Tensor,
    strength: float,
    target_tokens: int,
    attention_strength: AttentionStrength | None,
) -> LatentState:
    """Append clean conditioning tokens (zeros as their noisy value; the noiser blends by the mask)."""
    if tokens.shape[0] != state.batch_size or tokens.shape[2] != state.latent.shape[2]:
        raise ConditioningError(
            f"conditioning tokens {tuple(tokens.shape)} must have the state's batch {state.batch_size} "
            f"and feature width {state.latent.shape[2]}"
        )
    if positions.shape[1] != state.positions.shape[1] or positions.shape[2] != tokens.shape[1]:
        raise ConditioningError(
            f"conditioning positions {tuple(positions.shape)} do not match {tokens.shape[1]} tokens with "
            f"{state.positions.shape[1]} position axes"
        )
    tokens = tokens.to(device=state.latent.device, dtype=state.latent.dtype)
    mask = torch.full((*tokens.shape[:2], 1), 1.0 - strength, dtype=state.denoise_mask.dtype, device=tokens.device)
    return LatentState(
        latent=torch.cat([state.latent, torch.zeros_like(tokens)], dim=1),
        denoise_mask=torch.cat([state.denoise_mask, mask], dim=1),
        positions=torch.cat([state.positions, positions.to(state.positions)], dim=2),
        clean_latent=torch.cat([state.clean_latent, tokens.to(state.clean_latent.dtype)], dim=1),
        attention_mask=extend_attention_mask(state, target_tokens, tokens.shape[1], attention_strength),
        frozen=state.frozen,
        keyframes_mask=extend_keyframes_mask(state, tokens.shape[1], marked=False),
    )


def extend_keyframes_mask(state: LatentState, count: int, *, marked: bool) -> torch.Tensor | None:
    """The state's keyframes mask grown by `count` appended tokens, marked or not (None while no
    token is marked)."""
    if state.keyframes_mask is None and not marked:
        return None
    existing = state.keyframes_mask
    if existing is None:
        existing = torch.zeros(*state.latent.shape[:2], 1, dtype=torch.float32, device=state.latent.device)
    new = torch.full((state.batch_size, count, 1), float(marked), dtype=existing.dtype, device=existing.device)
    return torch.cat([existing, new], dim=1)


@dataclass(frozen=True, eq=False)
class VideoConditionByKeyframeIndex:
    """Append `keyframes` (B, C, F, H, W) as clean tokens timed at pixel frame `frame_idx`.

    Positions: the keyframe grid's own pixel extents, time shifted by `frame_idx` frames (the causal
    first-frame fix applies only at frame 0); a single-pixel-frame keyframe (num_pixel_frames = 1) spans
    [t, t + 1) frames; time is then divided by the fps. Denoise mask 1 - strength. Optional
    `attention_strength` (scalar or per token) limits attention between these tokens and the target grid.
    """

    keyframes: torch.Tensor
    frame_idx: int
    strength: float = 1.0
    num_pixel_frames: int = 1
    attention_strength: AttentionStrength | None = None

    def apply_to(self, state: LatentState, tools: VideoLatentTools) -> LatentState:
        check_strength(self.strength)
        if self.keyframes.dim() != 5:
            raise ConditioningError(f"keyframe latent must be (B, C, F, H, W), got {tuple(self.keyframes.shape)}")
        pixel_frames = tools.target_shape.to_pixel_shape(tools.fps, tools.scale).frames
        if not 0 <= self.frame_idx < pixel_frames:
            raise ConditioningError(f"keyframe frame_idx must be in [0, {pixel_frames}), got {self.frame_idx}")
        if self.num_pixel_frames < 1:
            raise ConditioningError(f"num_pixel_frames must be >= 1, got {self.num_pixel_frames}")
        shape = VideoLatentShape(*self.keyframes.shape)
        patchifier = tools.patchifier
        bounds = patchifier.pixel_bounds(
            patchifier.latent_bounds(shape, state.positions.device),
            tools.scale,
            causal_fix=tools.causal_fix and self.frame_idx == 0,
        )
        time = bounds[:, 0] + self.frame_idx
        if self.num_pixel_frames == 1:
            time = torch.stack([time[..., 0], time[..., 0] + 1], dim=-1)
        positions = torch.cat([time.unsqueeze(1), bounds[:, 1:]], dim=1).to(torch.float32)
        positions = torch.cat([(positions[:, 0] / tools.fps).unsqueeze(1), positions[:, 1:]], dim=1)
        return append_tokens(
            state, tools.patchify(self.keyframes), positions, self.strength, tools.token_count, self.attention_strength
        )
