"""From predicted seconds to a frame count the video VAE accepts (8k + 1 frames)."""

from __future__ import annotations

import logging

import torch

from ltx_core.model.duration_head.duration_range import DurationRange, frames_for_seconds
from ltx_core.model.duration_head.model import DurationHead

logger = logging.getLogger(__name__)

DEFAULT_RANGE = DurationRange()

def predict_num_frames(
    head: DurationHead,
    video: torch.Tensor | None,
    audio: torch.Tensor | None,
    *,
    frame_rate: float,
    duration_range: DurationRange = DEFAULT_RANGE,
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
