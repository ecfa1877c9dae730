"""The range of seconds a predicted duration is clamped to, and seconds -> a frame count on the VAE's
8k + 1 grid (no torch: command lines check these before any model is imported)."""

from __future__ import annotations

from dataclasses import dataclass

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
