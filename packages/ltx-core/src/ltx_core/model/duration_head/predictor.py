"""From predicted seconds to a frame count the video VAE accepts (8k + 1 frames)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from ltx_core.model.duration_head.model import DurationHead

logger = logging.getLogger(__name__)

DEFAULT_MIN_SECONDS = 1.0
DEFAULT_MAX_SECONDS = 20.0


@dataclass(frozen=True)
class DurationRange:
    """The seconds a predicted duration is clamped to (defaults: the reference's 1 s and 20 s)."""

    min_seconds: float = DEFAULT_MIN_SECONDS
    max_seconds: float = DEFAULT_MAX_SECONDS

    def __post_init__(self) -> None:
        if not (0 < self.min_seconds <= self.max_seconds):
            raise ValueError(
                f"duration range must satisfy 0 < min <= max seconds, got [{self.min_seconds}, {self.max_seconds}]"
            )


def frames_for_seconds(
    seconds: float, *, frame_rate: float, min_frames: int, max_frames: int, time_factor: int = 8
) -> int:
    """round(seconds * fps) clamped to [min_frames, max_frames], floored to the k * time_factor + 1 grid;
    when the floor falls below `min_frames`, the next grid point up (still at most `max_frames`)."""
    raw = max(min_frames, min(round(seconds * frame_rate), max_frames))
    if raw < 1:
        raise ValueError(f"a frame count must be >= 1, got {raw} for {seconds} s at {frame_rate} fps")
    frames = (raw - 1) // time_factor * time_factor + 1
    if frames < min_frames:
        frames = min(-(-(min_frames - 1) // time_factor) * time_factor + 1, max_frames)
    return frames


def predict_num_frames(
    head: DurationHead,
    video: torch.Tensor | None,
    audio: torch.Tensor | None,
    *,
    frame_rate: float,
    duration_range: DurationRange = DurationRange(),
    time_factor: int = 8,
) -> int:
    """The frame count for ONE prompt's contexts (batch 1): the head's seconds, clamped to
    `duration_range`, snapped to the VAE's temporal grid (`time_factor` from the VAE's config)."""
    with torch.inference_mode():
        seconds = head(video, audio)
    if seconds.shape != (1,):
        raise ValueError(f"frame-count prediction takes one prompt's contexts, got a batch of {tuple(seconds.shape)}")
    value = float(seconds.item())
    frames = frames_for_seconds(
        value,
        frame_rate=frame_rate,
        min_frames=round(duration_range.min_seconds * frame_rate),
        max_frames=round(duration_range.max_seconds * frame_rate),
        time_factor=time_factor,
    )
    if not duration_range.min_seconds <= value <= duration_range.max_seconds:
        logger.warning(
            "predicted duration %.2f s is outside [%.2f, %.2f] s; using %d frames (%.2f s at %.2f fps)",
            value, duration_range.min_seconds, duration_range.max_seconds, frames, frames / frame_rate, frame_rate,
        )  # fmt: skip
    else:
        logger.info("predicted duration %.2f s: %d frames at %.2f fps", value, frames, frame_rate)
    return frames
