"""Latent tools: build a modality's token `LatentState` for a target latent grid, and turn it back.

A tools object knows the target grid (shape, frame rate, VAE scale factors) of one modality. It creates
the initial state (tokens, clean tokens, denoise mask 1, positions), converts latents <-> tokens, and
after sampling removes the tokens that conditioning items appended beyond the target grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

import torch

from ltx_core.components.patchifiers import AudioPatchifier, VideoPatchifier
from ltx_core.types import (
    AUDIO_LATENT_CHANNELS,
    AUDIO_LATENT_MEL_BINS,
    DEFAULT_SCALE_FACTORS,
    VIDEO_LATENT_CHANNELS,
    AudioLatentShape,
    LatentState,
    SpatioTemporalScaleFactors,
    VideoLatentShape,
    VideoPixelShape,
)


class LatentTools(Protocol):
    """What conditioning items and pipelines need from a modality's tools."""

    @property
    def token_count(self) -> int: ...

    def patchify(self, latent: torch.Tensor) -> torch.Tensor: ...

    def unpatchify(self, tokens: torch.Tensor) -> torch.Tensor: ...

    def positions(self, device: torch.device | str | None = None) -> torch.Tensor: ...

    def create_initial_state(
        self,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        initial_latent: torch.Tensor | None = None,
    ) -> LatentState: ...

    def clear_conditioning(self, state: LatentState) -> LatentState: ...


def _initial_state(
    tokens: torch.Tensor,
    positions: torch.Tensor,
) -> LatentState:
    return LatentState(
        latent=tokens,
        denoise_mask=torch.ones(*tokens.shape[:2], 1, device=tokens.device, dtype=torch.float32),
        positions=positions,
        clean_latent=tokens.clone(),
    )


def _clear_conditioning(state: LatentState, token_count: int) -> LatentState:
    """Keep the first `token_count` tokens; the target grid is always generated again (mask 1)."""
    if state.token_count < token_count:
        raise ValueError(f"state has {state.token_count} tokens, fewer than the target grid's {token_count}")
    return LatentState(
        latent=state.latent[:, :token_count],
        denoise_mask=torch.ones_like(state.denoise_mask[:, :token_count]),
        positions=state.positions[:, :, :token_count],
        clean_latent=state.clean_latent[:, :token_count],
        attention_mask=None,
        frozen=state.frozen,
        keyframes_mask=None if state.keyframes_mask is None else state.keyframes_mask[:, :token_count],
    )


class _GridStateMixin:
    """State handling shared by the video and audio tools (each supplies its grid, patchifier, positions)."""

    _modality: str

    def create_initial_state(
        self,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        initial_latent: torch.Tensor | None = None,
    ) -> LatentState:
        """State over the target grid: zeros (or `initial_latent`) as latent and clean latent, mask 1."""
        dims = self.target_shape.dims  # type: ignore[attr-defined]
        if initial_latent is None:
            initial_latent = torch.zeros(dims, device=device, dtype=dtype)
        elif tuple(initial_latent.shape) != dims:
            raise ValueError(
                f"initial {self._modality} latent has shape {tuple(initial_latent.shape)}, expected {dims}"
            )
        tokens = self.patchify(initial_latent.to(device=device, dtype=dtype))  # type: ignore[attr-defined]
        return _initial_state(tokens, self.positions(tokens.device))  # type: ignore[attr-defined]

    def clear_conditioning(self, state: LatentState) -> LatentState:
        return _clear_conditioning(state, self.token_count)  # type: ignore[attr-defined]

    def state_to_latent(self, state: LatentState) -> torch.Tensor:
        """Drop appended conditioning tokens and return the target latent in its grid layout."""
        return self.unpatchify(self.clear_conditioning(state).latent)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class VideoLatentTools(_GridStateMixin):
    """Tools for a video target grid `target_shape` played at `fps`."""

    target_shape: VideoLatentShape
    fps: float
    scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS
    causal_fix: bool = True
    patchifier: VideoPatchifier = field(default_factory=VideoPatchifier, repr=False)
    _modality = "video"

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise ValueError(f"fps must be positive, got {self.fps}")

    @classmethod
    def from_pixel_shape(
        cls,
        pixel_shape: VideoPixelShape,
        channels: int = VIDEO_LATENT_CHANNELS,
        scale: SpatioTemporalScaleFactors = DEFAULT_SCALE_FACTORS,
    ) -> VideoLatentTools:
        """Tools for the latent of a (frames = 8k+1, height/width multiple of 32) pixel video."""
        pixel_shape.check(spatial_multiple=scale.height, scale=scale)
        return cls(VideoLatentShape.from_pixel_shape(pixel_shape, channels, scale), pixel_shape.fps, scale)

    @property
    def token_count(self) -> int:
        return self.target_shape.token_count

    @property
    def tokens_per_latent_frame(self) -> int:
        return self.target_shape.height * self.target_shape.width

    def create_initial_state(
        self,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        initial_latent: torch.Tensor | None = None,
    ) -> LatentState:
        """The grid's state with its first latent frame marked in `keyframes_mask`: the video encoder is
        causal, so that frame encodes one pixel frame, like a keyframe, and LTX-2.5 models add their
        keyframe embedding to it (as the reference does, whether or not keyframes are appended; models
        without the embedding ignore the mask)."""
        state = super().create_initial_state(device, dtype, initial_latent)
        mask = torch.zeros_like(state.denoise_mask)
        mask[:, : self.tokens_per_latent_frame] = 1.0
        return replace(state, keyframes_mask=mask)

    def patchify(self, latent: torch.Tensor) -> torch.Tensor:
        return self.patchifier.patchify(latent)

    def unpatchify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Target-grid tokens (B, T, C) -> latent (B, C, F, H, W)."""
        return self.patchifier.unpatchify(tokens, self.target_shape)

    def positions_for(self, shape: VideoLatentShape, device: torch.device | str | None = None) -> torch.Tensor:
        """Positions of any latent grid at this frame rate and scale (e.g. a reference video)."""
        return self.patchifier.positions(shape, self.fps, self.scale, self.causal_fix, device)

    def positions(self, device: torch.device | str | None = None) -> torch.Tensor:
        return self.positions_for(self.target_shape, device)


@dataclass(frozen=True)
class AudioLatentTools(_GridStateMixin):
    """Tools for an audio target grid `target_shape` (25 latent steps per second by default)."""

    target_shape: AudioLatentShape
    patchifier: AudioPatchifier = field(default_factory=AudioPatchifier, repr=False)
    _modality = "audio"

    @classmethod
    def from_duration(
        cls,
        batch: int,
        duration_s: float,
        channels: int = AUDIO_LATENT_CHANNELS,
        mel_bins: int = AUDIO_LATENT_MEL_BINS,
    ) -> AudioLatentTools:
        if not duration_s > 0:
            raise ValueError(f"audio duration must be positive seconds, got {duration_s}")
        return cls(AudioLatentShape.from_duration(batch, duration_s, channels, mel_bins))

    @classmethod
    def from_video(cls, pixel_shape: VideoPixelShape) -> AudioLatentTools:
        """Audio that spans the video: round(frames / fps * 25) latent steps."""
        return cls(AudioLatentShape.from_video(pixel_shape))

    @property
    def token_count(self) -> int:
        return self.target_shape.frames

    def patchify(self, latent: torch.Tensor) -> torch.Tensor:
        return self.patchifier.patchify(latent)

    def unpatchify(self, tokens: torch.Tensor) -> torch.Tensor:
        """Target-grid tokens (B, T, C*M) -> latent (B, C, T, M)."""
        return self.patchifier.unpatchify(tokens, self.target_shape)

    def positions_for(self, shape: AudioLatentShape, device: torch.device | str | None = None) -> torch.Tensor:
        return self.patchifier.positions(shape, device)

    def positions(self, device: torch.device | str | None = None) -> torch.Tensor:
        return self.positions_for(self.target_shape, device)


def replace_latent(state: LatentState, latent: torch.Tensor) -> LatentState:
    """The same state with new current tokens (shape must not change)."""
    if latent.shape != state.latent.shape:
        raise ValueError(f"new latent has shape {tuple(latent.shape)}, state holds {tuple(state.latent.shape)}")
    return replace(state, latent=latent)
